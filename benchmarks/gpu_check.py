"""GPU check: the model parts of rerank on a test device (default cuda) against the CPU.

    python benchmarks/gpu_check.py --out DIR [--device cuda|cpu] [--size quick|full] [--threads N]

Run it through benchmarks/gpu_check.sh (offline install, thread and Hugging Face settings, a time
limit; docs/benchmarks/gpu.md). Four parts, each run on the CPU (the reference) and on the test
device with the same seeds and inputs; `--device cpu` runs the CPU path twice (CPU against CPU):

1. features: `s_s` and `s_i` (rerank.add_features, the mlmme plug-in) on the first sentences of a
   shipped Multi30k list with the shipped rerank/data/models/mlmme-small.pt. The shipped model is
   text-only, so `s_i` uses it with a random image projection W_I and random image features
   (N(0, 1), seeded): no image features ship, and the values mean nothing beyond the comparison.
2. embedding_training: steps of rerank.embeddings' Trainer (text and image losses, random image
   features, dropout 0 so both devices see the same network) on the shipped val/test captions;
   the losses after every step and the weights after the last are compared.
3. nmt_nbest: a small attention NMT trained briefly on the CPU (none ships), then batched beam
   search n-best (rerank.nmt.beam, the batching of rerank.nmt.translate) on both devices.
4. channel: the users'-model feature log p(source | hypothesis) through a random-weight Hugging
   Face Marian built from a config (no download). On CUDA the library runs it in bf16; a second
   CUDA run in float32 (the dtype function patched) separates precision from the device.

5. comet_score: COMET-22's architecture (unbabel-comet's regression_metric on XLM-R large, random
   weights built from the config: benchmarks/bench_model_sizes.py) scoring (src, mt, ref) segments
   through rerank.metrics.comet.cached_scores (COMET's predict); the quick size a tiny COMET.
6. comet_mbr: the same model as the MBR utility (rerank.consensus.mbr_scores), exact and aggregate,
   on shipped 50-best lists: each hypothesis encoded once, the estimator on pairs or on each list's
   aggregate embedding.
7. metricx: MetricX-24's architecture (mT5-large as MT5ForRegression, random weights) scoring
   segments through rerank.metrics.metricx.cached_scores.
   Parts 5-7 run on the test device in float32 and again under bf16 autocast (the CPU smoke path
   too), reporting bf16's agreement with float32 on the CPU and on the device; the models are
   loaded once per device, outside the timing. COMET's parts need unbabel-comet (with transformers
   4): without it they are skipped, said in the JSON (docs/benchmarks/gpu.md: its wheels).

Writes DIR/gpu_check.json and DIR/gpu_check.md after every part (a run cut short keeps the parts
done). Exit status 0 when every part ran (or was skipped for lack of its module, said in the JSON), 1 when
one failed or ran out of time, 2 for a test device that is missing.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import platform
import random
import sys
import tempfile
import time
import traceback
from functools import cache
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEEDED = ("torch", "numpy", "sacrebleu", "sacremoses", "transformers", "tokenizers")
PARTS = ("features", "embedding_training", "nmt_nbest", "channel", "comet_score", "comet_mbr", "metricx")
UNITS = {"features": "hypotheses", "embedding_training": "training tuples", "nmt_nbest": "sentences",
         "channel": "hypotheses", "comet_score": "segments", "comet_mbr": "hypotheses", "metricx": "segments"}
NEEDS = {"comet_score": "comet", "comet_mbr": "comet"}   # a part's module beyond NEEDED: skipped without it
SIZES = {
    "quick": dict(feat_list="optimised.val.20best.gz", feat_src="val.en.gz", feat_sentences=10,
                  emb_preset="tiny", emb_pairs=64, emb_batch=16, emb_steps=3,
                  nmt_preset="tiny", nmt_train=100, nmt_val=10, nmt_epochs=1, nmt_sentences=6, nmt_beam=4,
                  nmt_batch=8, ch_sentences=5, ch_d_model=32, ch_layers=1, ch_heads=2, ch_ffn=64, ch_vocab=600,
                  models="tiny", comet_segments=12, mbr_lists=2, mbr_hyps=6, mx_segments=12),
    "full": dict(feat_list="optimised.test_2016.50best.gz", feat_src="test_2016_flickr.en.gz", feat_sentences=1000,
                 emb_preset="cpu", emb_pairs=2014, emb_batch=128, emb_steps=20,
                 nmt_preset="small", nmt_train=1014, nmt_val=100, nmt_epochs=5, nmt_sentences=500, nmt_beam=20,
                 nmt_batch=32, ch_sentences=200, ch_d_model=256, ch_layers=3, ch_heads=4, ch_ffn=1024, ch_vocab=8000,
                 models="real", comet_segments=64, mbr_lists=8, mbr_hyps=16, mx_segments=32),
}
IMAGE_DIM = 2048
IMAGE_NOTE = ("s_i: no image features ship and the shipped model is text-only: s_i uses the shipped text weights "
              f"with a random image projection W_I and random image features (N(0, 1), {IMAGE_DIM}-d, seeded)")


def shipped(*parts: str) -> str:
    return os.path.join(ROOT, "rerank", "data", *parts)


@cache
def multi30k(name: str) -> list[str]:
    """The lines of a shipped Multi30k text file, read once for all the parts (callers only slice)."""
    from rerank.io import read_lines

    return read_lines(shipped("multi30k", name))


def seed_all(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # every CUDA device too


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.startswith("cuda") else f"CPU: {cpu_name()}"


def timed(fn, device: str):
    """(result, seconds) of fn(), CUDA synchronised before the clock stops."""
    import torch

    start = time.perf_counter()
    result = fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return result, time.perf_counter() - start


def list_agreement(offsets: np.ndarray, ref: np.ndarray, test: np.ndarray) -> dict:
    """max |diff|, relative diff, and per n-best list: the same argmax, the same order (stable)."""
    diff = np.abs(ref - test)
    same_max, same_order = [], []
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        a, b = ref[lo:hi], test[lo:hi]
        same_max.append(int(np.argmax(a)) == int(np.argmax(b)))
        same_order.append(bool(np.array_equal(np.argsort(-a, kind="stable"), np.argsort(-b, kind="stable"))))
    return {"max_abs_diff": float(diff.max()), "max_rel_diff": float((diff / np.maximum(np.abs(ref), 1e-12)).max()),
            "argmax_agreement": float(np.mean(same_max)), "identical_order": float(np.mean(same_order)),
            "lists": len(same_max)}


def run_pair(ctx, fn, items: int, roles=None) -> tuple[dict, dict]:
    """fn(device) on the reference device (the CPU), then on the test device, each after seeding:
    ({role: result}, {role: device, name, seconds, items/s, ...}). A result's "_info" overrides the
    timing (seconds, items: a part that times only its steady state)."""
    import torch

    results, devices = {}, {}
    for role, device in roles or (("reference", "cpu"), ("test", ctx.device)):
        seed_all(ctx.seed)
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        result, seconds = timed(lambda: fn(device), device)
        info = result.pop("_info", {})
        seconds = info.pop("seconds", seconds)
        devices[role] = {"device": device, "name": device_name(device), "seconds": round(seconds, 4),
                         "items_per_s": round(info.pop("items", items) / seconds, 2), **info}
        if device.startswith("cuda"):
            devices[role]["peak_memory_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        results[role] = result
    return results, devices


# ---- 1. s_s / s_i -----------------------------------------------------------------------------------

def image_model(path: str, seed: int) -> str:
    """The shipped text model with a random image projection (IMAGE_DIM -> joint), saved as NAME.pt/.json."""
    import torch

    from rerank.embeddings.encoder import Encoder, save_model
    from rerank.embeddings.model import MLMME, ModelConfig

    text = Encoder.load(shipped("models", "mlmme-small.pt"))
    torch.manual_seed(seed)
    model = MLMME(ModelConfig.from_dict({**text.model.cfg.to_dict(), "image_dim": IMAGE_DIM}))
    missing, unexpected = model.load_state_dict(text.model.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("image_proj.") for k in missing), (missing, unexpected)
    save_model(path, model, text.vocabs, {"note": "gpu_check: mlmme-small text weights, random image projection"})
    return path


def part_features(ctx) -> dict:
    import rerank

    s = ctx.size
    nbest = rerank.read_nbest(shipped("multi30k", s["feat_list"])).select_sentences(range(s["feat_sentences"]))
    nbest = nbest.select_features(["nmt"])
    sources = multi30k(s["feat_src"])[:nbest.n_sentences]
    model = image_model(os.path.join(ctx.tmp, "mlmme-image.pt"), ctx.seed)
    images = os.path.join(ctx.tmp, "images.npy")
    np.save(images, np.random.default_rng(ctx.seed).normal(size=(nbest.n_sentences, IMAGE_DIM)).astype(np.float32))

    def run(device):
        out = rerank.add_features(nbest, ["s_s", "s_i"], sources=sources, device=device, threads=ctx.threads,
                                  models=(model,), images=images)
        return {name: out.column(name) for name in ("s_s", "s_i")}

    for device in ("cpu", ctx.device):  # untimed warm-up: imports, CUDA context and kernels
        rerank.add_features(nbest.select_sentences(range(2)), ["s_s"], sources=sources[:2], device=device,
                            threads=ctx.threads, models=(model,))
    results, devices = run_pair(ctx, run, nbest.n_hyps)
    ref, test = results["reference"], results["test"]
    agreement = {name: list_agreement(nbest.offsets, ref[name], test[name]) for name in ref}
    agreement["max_abs_diff"] = max(a["max_abs_diff"] for a in agreement.values())
    return {"items": nbest.n_hyps, "devices": devices, "agreement": agreement, "notes": [IMAGE_NOTE],
            "what": f"s_s and s_i of {nbest.n_hyps} hypotheses ({nbest.n_sentences} sentences of {s['feat_list']}), "
                    "rerank.add_features with mlmme-small.pt (+ random W_I), timed end to end (model load and "
                    "tokenisation included)"}


# ---- 2. embedding training ---------------------------------------------------------------------

def embedding_data(folder: str, pairs: int) -> int:
    """A Multi30k-layout folder (task1 train) from the shipped val and test_2016 captions; the pairs written."""
    en = multi30k("val.en.gz") + multi30k("test_2016_flickr.en.gz")
    de = multi30k("val.de.gz") + multi30k("test_2016_flickr.de.gz")
    n = min(pairs, len(en))
    os.makedirs(os.path.join(folder, "task1", "raw"), exist_ok=True)
    os.makedirs(os.path.join(folder, "task1", "image_splits"), exist_ok=True)
    for name, lines in (("raw/train.en", en[:n]), ("raw/train.de", de[:n]),
                        ("image_splits/train.txt", [f"{i}.jpg" for i in range(n)])):
        with open(os.path.join(folder, "task1", name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return n


def part_embedding_training(ctx) -> dict:
    from rerank.embeddings.data import epoch_tuples
    from rerank.embeddings.train import Trainer, resolve_config

    s = ctx.size
    data = os.path.join(ctx.tmp, "emb-data")
    n = embedding_data(data, s["emb_pairs"])
    feats = os.path.join(ctx.tmp, "emb-images.npy")
    np.save(feats, np.random.default_rng(ctx.seed).normal(size=(n, IMAGE_DIM)).astype(np.float32))
    cfg = resolve_config({"preset": s["emb_preset"], "sources": ["task1"], "image_features": {"train": feats},
                          "beta": 0.5, "dropout": 0.0, "init_std": 0.1, "lr": 1e-3, "contrastive": "sum",
                          "batch_size": s["emb_batch"], "min_freq": 1, "validate": False, "checkpoint_minutes": 1e9,
                          "seed": ctx.seed})
    batch, steps = s["emb_batch"], s["emb_steps"]

    def run(device):
        import torch

        torch.set_num_threads(ctx.threads)
        trainer = Trainer(copy.deepcopy(cfg), data, os.path.join(ctx.tmp, f"emb-run-{device}-{time.time_ns()}"),
                          device=device, quiet=True)
        imgs, sents = epoch_tuples(trainer.pools, cfg["seed"], 0)
        trainer.model.train()
        losses, seconds = [], []
        for k in range(steps):
            pos = (np.arange(batch) + k * batch) % len(imgs)
            loss, sec = timed(lambda: float(trainer.step(imgs, sents, pos, None)), device)
            losses.append(loss)
            seconds.append(sec)
        steady = seconds[1:] or seconds
        weights = {k: v.detach().to("cpu").double().numpy() for k, v in trainer.model.state_dict().items()}
        return {"losses": losses, "weights": weights,
                "_info": {"seconds": sum(steady), "items": batch * len(steady), "first_step_s": round(seconds[0], 4)}}

    results, devices = run_pair(ctx, run, batch * steps)
    ref, test = results["reference"], results["test"]
    loss_diff = np.abs(np.array(ref["losses"]) - np.array(test["losses"]))
    weight_diff = max(float(np.abs(ref["weights"][k] - test["weights"][k]).max()) for k in ref["weights"])
    scale = max(float(np.abs(w).max()) for w in ref["weights"].values())
    agreement = {"max_abs_diff": float(loss_diff.max()), "loss_diff_per_step": [float(x) for x in loss_diff],
                 "final_loss_rel_diff": float(loss_diff[-1] / max(abs(ref["losses"][-1]), 1e-12)),
                 "weights_max_abs_diff": weight_diff, "weights_max_abs": scale,
                 "losses_reference": ref["losses"], "losses_test": test["losses"]}
    return {"items": batch * steps, "devices": devices, "agreement": agreement,
            "notes": ["throughput: steps after the first (the first step's seconds are given apart)",
                      "random image features (no image features ship); dropout 0: the devices' dropout RNGs differ"],
            "what": f"{steps} Trainer steps of batch {batch}, preset {s['emb_preset']}, beta 0.5, contrastive sum, "
                    f"on {n} shipped val/test_2016 caption pairs"}


# ---- 3. NMT n-best ------------------------------------------------------------------------------

def train_nmt(ctx, out_dir: str) -> dict:
    """A small NMT trained briefly on the CPU (seconds of the run go to the part's notes)."""
    import torch

    from rerank.nmt.train import make_config, train

    s = ctx.size
    torch.set_num_threads(ctx.threads)
    cfg = make_config(size=s["nmt_preset"], flavour="weak", max_epochs=s["nmt_epochs"], patience=s["nmt_epochs"],
                      min_freq=1, seed=ctx.seed)
    start = time.perf_counter()
    state = train(cfg, (multi30k("val.en.gz")[:s["nmt_train"]], multi30k("val.de.gz")[:s["nmt_train"]]),
                  (multi30k("test_2016_flickr.en.gz")[-s["nmt_val"]:], multi30k("test_2016_flickr.de.gz")[-s["nmt_val"]:]),
                  out_dir, device="cpu", resume=False, progress=False)
    return {"seconds": round(time.perf_counter() - start, 2), "epochs": state["epoch"],
            "val_bleu": round(state["best_bleu"], 2)}


def nbest_lists(model, src_vocab, lines: list[str], beam: int, batch_size: int, device: str) -> list:
    """Per line: [(token tuple, logprob), ...] best first, as translate() decodes (rerank.nmt.translate.decode)."""
    from rerank.nmt.translate import Search, decode

    found = decode(model, src_vocab, lines, "en", Search(beam=beam, batch_size=batch_size), device=device)
    return [[(tuple(h.tokens), h.logprob) for h in hyps] for hyps in found]


def part_nmt_nbest(ctx) -> dict:
    import torch

    from rerank.nmt.train import load_model

    s = ctx.size
    run_dir = os.path.join(ctx.tmp, "nmt")
    trained = train_nmt(ctx, run_dir)
    model, src_vocab, _, _ = load_model(run_dir, "best", "cpu")
    lines = multi30k("test_2016_flickr.en.gz")[:s["nmt_sentences"]]

    def run(device):
        torch.set_num_threads(ctx.threads)
        on_device = copy.deepcopy(model).to(device)
        nbest_lists(on_device, src_vocab, lines[:2], s["nmt_beam"], s["nmt_batch"], device)  # warm-up
        result, seconds = timed(lambda: nbest_lists(on_device, src_vocab, lines, s["nmt_beam"], s["nmt_batch"],
                                                    device), device)
        return {"lists": result, "_info": {"seconds": seconds}}

    results, devices = run_pair(ctx, run, len(lines))
    ref, test = results["reference"], results["test"]
    diffs, overlap = [0.0], []
    for a, b in zip(ref["lists"], test["lists"]):
        scores = dict(b)
        common = [(lp, scores[tok]) for tok, lp in a if tok in scores]
        diffs += [abs(x - y) for x, y in common]
        overlap.append(len(common) / max(len(a), 1))
    pairs = list(zip(ref["lists"], test["lists"]))
    agreement = {"max_abs_diff": float(max(diffs)), "identical_nbest_lists": float(np.mean([a == b for a, b in pairs])),
                 "identical_nbest_tokens": float(np.mean([[t for t, _ in a] == [t for t, _ in b] for a, b in pairs])),
                 "identical_1best": float(np.mean([a[0][0] == b[0][0] for a, b in pairs])),
                 "mean_overlap": float(np.mean(overlap)), "hypotheses_compared": len(diffs) - 1}
    return {"items": len(lines), "devices": devices, "agreement": agreement, "training_on_cpu": trained,
            "notes": ["max_abs_diff: log-probabilities of the hypotheses (token sequences) found on both devices",
                      "identical_nbest_lists: tokens and scores equal; identical_nbest_tokens: tokens in the same order"],
            "what": f"beam {s['nmt_beam']} n-best ({s['nmt_beam']} per sentence) of {len(lines)} test_2016 sentences, "
                    f"batch {s['nmt_batch']}, a {s['nmt_preset']} NMT trained {trained['epochs']} epoch(s) on "
                    f"{s['nmt_train']} val pairs on the CPU"}


# ---- 4. channel through a Hugging Face Marian ----------------------------------------------------

def build_marian(out: str, ctx) -> str:
    """A random-weight Marian (sizes of the run's size) with a BPE tokenizer trained on the shipped val text."""
    from transformers.utils import logging as hf_logging

    from rerank.recipes import tiny_models

    s = ctx.size
    hf_logging.disable_progress_bar()
    tokenizer = tiny_models.train_tokenizer(tiny_models.read_text(tiny_models.DEFAULT_TEXT), vocab_size=s["ch_vocab"])
    return tiny_models.build_marian(out, tokenizer, ctx.seed, d_model=s["ch_d_model"], layers=s["ch_layers"],
                                    heads=s["ch_heads"], ffn=s["ch_ffn"])


def part_channel(ctx) -> dict:
    import rerank

    s = ctx.size
    model = build_marian(os.path.join(ctx.tmp, "marian-de-en"), ctx)
    nbest = rerank.read_nbest(shipped("multi30k", "optimised.val.20best.gz")).select_sentences(range(s["ch_sentences"]))
    nbest = nbest.select_features(["nmt"])
    sources = multi30k("val.en.gz")[:nbest.n_sentences]

    def run(device):
        import torch

        from rerank.nmt import backends

        out = rerank.add_features(nbest, ["channel", "channel_norm"], sources=sources, device=device,
                                  threads=ctx.threads, channel_model=model)
        return {"channel": out.column("channel"), "_info": {"dtype": str(backends._hf_device_dtype(torch.device(device)))}}

    # untimed warm-up: one sentence on the CPU; on the test device the whole list, since every new
    # batch shape there can load or pick kernels (the first full bf16 pass of the first H100 run took
    # 6.8x the float32 pass that followed it), and the timed run should be the steady state
    rerank.add_features(nbest.select_sentences(range(1)), "channel", sources=sources[:1], device="cpu",
                        threads=ctx.threads, channel_model=model)
    run(ctx.device)
    results, devices = run_pair(ctx, run, nbest.n_hyps)
    ref, test = results["reference"], results["test"]
    agreement = list_agreement(nbest.offsets, ref["channel"], test["channel"])
    notes = ["the library's dtype: float32 on the CPU, bf16 on CUDA where the GPU has it (else fp16)"]
    if ctx.device.startswith("cuda"):
        import torch

        from rerank.nmt import backends

        dtype = backends._hf_device_dtype
        backends._hf_device_dtype = lambda device: torch.float32
        try:
            run(ctx.device)  # the float32 kernels' warm-up, as above
            fp32, more = run_pair(ctx, run, nbest.n_hyps, roles=(("test_float32", ctx.device),))
        finally:
            backends._hf_device_dtype = dtype
        devices.update(more)
        agreement["float32_on_test_device"] = list_agreement(nbest.offsets, ref["channel"],
                                                             fp32["test_float32"]["channel"])
        notes.append("test_float32: the CUDA run again with rerank.nmt.backends._hf_device_dtype patched to "
                     "float32, so precision and device can be told apart")
    return {"items": nbest.n_hyps, "devices": devices, "agreement": agreement, "notes": notes,
            "what": f"channel (log p(source | hypothesis)) of {nbest.n_hyps} hypotheses ({nbest.n_sentences} sentences "
                    f"of optimised.val.20best) through a random-weight Marian (d_model {s['ch_d_model']}, "
                    f"{s['ch_layers']}+{s['ch_layers']} layers, BPE {s['ch_vocab']}), rerank.add_features"}


# ---- 5-7. COMET and MetricX at their real sizes -----------------------------------------------------

@cache
def bench_sizes():
    """benchmarks/bench_model_sizes.py (the real architectures' configs and builders), imported from this folder."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_model_sizes

    return bench_model_sizes


def segments(n: int) -> list[tuple[str, str, str]]:
    """(source, 1-best hypothesis, reference) of the first n shipped test_2016 sentences."""
    import rerank

    nbest = rerank.read_nbest(shipped("multi30k", "optimised.test_2016.50best.gz")).select_sentences(range(n))
    src, ref = multi30k("test_2016_flickr.en.gz"), multi30k("test_2016_flickr.de.gz")
    return [(src[k], nbest.hyps[nbest.offsets[k]], ref[k]) for k in range(n)]


def order_agreement(ref: np.ndarray, test: np.ndarray) -> float:
    """The fraction of pairs of items that the two score vectors order alike (ties counted as one order)."""
    a, b = np.sign(ref[:, None] - ref[None, :]), np.sign(test[:, None] - test[None, :])
    upper = np.triu_indices(len(ref), 1)
    return float(np.mean(a[upper] == b[upper])) if len(ref) > 1 else 1.0


def score_agreement(ref: np.ndarray, test: np.ndarray) -> dict:
    diff = np.abs(ref - test)
    return {"max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean()),
            "max_rel_diff": float((diff / np.maximum(np.abs(ref), 1e-12)).max()),
            "pair_order_agreement": order_agreement(ref, test), "items": len(ref)}


def bf16(device: str):
    """torch's bf16 autocast on `device` (cuda or cpu): matrix products in bf16, weights kept in float32."""
    import torch

    return torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16)


def precision_runs(ctx, run, items: int, agree) -> tuple[dict, dict, dict]:
    """run(device) float32 on the CPU and the test device (run_pair), then under bf16 autocast on the
    test device; each warmed up untimed first. (results, devices, agreement): the float32 devices'
    agreement, and under "bf16" that of bf16 with float32 on the CPU and on the test device."""
    for device in ("cpu", ctx.device):
        run(device, warm=True)
    results, devices = run_pair(ctx, run, items)
    with bf16(ctx.device):
        run(ctx.device, warm=True)
        more, extra = run_pair(ctx, run, items, roles=(("test_bf16", ctx.device),))
    results.update(more)
    devices.update(extra)
    devices["test_bf16"]["dtype"] = "bf16 autocast"
    agreement = agree(results["reference"], results["test"])
    agreement["bf16"] = {"vs_float32_cpu": agree(results["reference"], results["test_bf16"]),
                         "vs_float32_test_device": agree(results["test"], results["test_bf16"])}
    return results, devices, agreement


def comet_model(ctx) -> tuple[str, str]:
    """(checkpoint, what) of the COMET of the run's size, built once per run."""
    path = os.path.join(ctx.tmp, "comet")
    if not os.path.isdir(path):
        from rerank.recipes import tiny_models

        lines = bench_sizes().shipped_text()
        if ctx.size["models"] == "real":
            bench_sizes().build_comet22(path, lines, ctx.seed)
        else:
            tiny_models.build_comet(path, lines, ctx.seed, kind="regression")
    what = ("COMET-22's architecture (regression_metric, XLM-R large, random weights)" if ctx.size["models"] == "real"
            else "a tiny COMET regression_metric (2 layers, width 32, random weights)")
    return path, what


@cache
def loaded_comet(path: str, device: str):
    from rerank.metrics import comet

    return comet.load_comet(path, True, "gpu_check").eval().to(device)


def part_comet_score(ctx) -> dict:
    from unittest import mock

    from rerank.metrics import comet

    path, what = comet_model(ctx)
    rows = segments(ctx.size["comet_segments"])

    def run(device, warm=False):
        model = loaded_comet(path, device)   # before the patch, which would answer the loader itself
        with mock.patch.object(comet, "load_comet", lambda *a, **k: model):
            scores = comet.cached_scores(path, rows[:2] if warm else rows, reference=True, what="gpu_check",
                                         batch_size=16, device=device)
        return {"scores": scores}

    results, devices, agreement = precision_runs(ctx, run, len(rows),
                                                 lambda a, b: score_agreement(a["scores"], b["scores"]))
    return {"items": len(rows), "devices": devices, "agreement": agreement,
            "notes": ["models loaded once per device, outside the timing (an untimed warm-up call first)",
                      "bf16: torch.autocast over COMET's predict; the library itself runs COMET in float32"],
            "what": f"{what}: rerank.metrics.comet.cached_scores of {len(rows)} test_2016 (src, 1-best, ref) "
                    "segments, batch 16 (COMET's predict)"}


def part_comet_mbr(ctx) -> dict:
    from unittest import mock

    import rerank
    from rerank import consensus
    from rerank.metrics import comet

    path, what = comet_model(ctx)
    s = ctx.size
    nbest = rerank.read_nbest(shipped("multi30k", "optimised.test_2016.50best.gz")).select_sentences(
        range(s["mbr_lists"]))
    nbest = nbest.head(s["mbr_hyps"])
    sources = multi30k("test_2016_flickr.en.gz")[:nbest.n_sentences]
    scores = nbest.column("nmt")

    def run(device, warm=False):
        out: dict[str, Any] = {}
        model = loaded_comet(path, device)   # before the patch, which would answer the loader itself
        with mock.patch.object(comet, "load_comet", lambda *a, **k: model):
            for method in ("exact", "aggregate"):
                utility = comet.MBRUtility(path, 16, device)
                lists = nbest.select_sentences(range(1)) if warm else nbest
                start = time.perf_counter()
                out[method] = consensus.mbr_scores(lists, scores[:lists.n_hyps], consensus.MBROptions(
                    "comet", method=method, model=path), model=utility, sources=sources[:lists.n_sentences])
                out[method + "_s"] = time.perf_counter() - start
        return out

    def agree(a, b):
        out = {m: list_agreement(nbest.offsets, a[m], b[m]) for m in ("exact", "aggregate")}
        out["max_abs_diff"] = max(x["max_abs_diff"] for x in out.values())
        return out

    results, devices, agreement = precision_runs(ctx, run, 2 * nbest.n_hyps, agree)
    for role, result in results.items():
        devices[role].update(exact_s=round(result["exact_s"], 4), aggregate_s=round(result["aggregate_s"], 4),
                             exact_hyps_per_s=round(nbest.n_hyps / result["exact_s"], 2),
                             aggregate_hyps_per_s=round(nbest.n_hyps / result["aggregate_s"], 2))
    return {"items": 2 * nbest.n_hyps, "devices": devices, "agreement": agreement,
            "notes": ["items: the hypotheses once per method (exact, then aggregate); each method's own seconds are "
                      "under exact_s and aggregate_s",
                      "the expected utilities (in percent) compared per list: the same argmax, the same order"],
            "what": f"{what} as the MBR utility: rerank.consensus.mbr_scores, exact ({s['mbr_hyps']}x{s['mbr_hyps']} "
                    f"pairs a list) and aggregate, {nbest.n_sentences} lists of the first {s['mbr_hyps']} hypotheses "
                    "of optimised.test_2016.50best"}


@cache
def loaded_metricx(path: str, device: str):
    import torch

    from rerank.metrics import metricx

    return metricx.Scorer(metricx.read_checkpoint(path), torch.device(device))


def part_metricx(ctx) -> dict:
    from unittest import mock

    from rerank.metrics import metricx
    from rerank.recipes import tiny_models

    path = os.path.join(ctx.tmp, "metricx")
    lines = bench_sizes().shipped_text()
    if ctx.size["models"] == "real":
        bench_sizes().build_metricx24(path, lines, ctx.seed)
        what = "MetricX-24's architecture (mT5-large as MT5ForRegression, random weights)"
    else:
        tiny_models.build_metricx(path, lines, seed=ctx.seed, version=24)
        what = "a tiny MetricX-24 (mT5 2+1 layers, width 32, random weights)"
    rows = segments(ctx.size["mx_segments"])

    def run(device, warm=False):
        scorer = loaded_metricx(path, device)   # before the patch, which would answer the class itself
        with mock.patch.object(metricx, "Scorer", lambda *a, **k: scorer):
            return {"scores": metricx.cached_scores(path, rows[:2] if warm else rows, reference=True,
                                                    what="gpu_check", device=device)}

    results, devices, agreement = precision_runs(ctx, run, len(rows),
                                                 lambda a, b: score_agreement(a["scores"], b["scores"]))
    inside = float(np.mean((results["reference"]["scores"] > 0) & (results["reference"]["scores"] < 25)))
    return {"items": len(rows), "devices": devices, "agreement": agreement, "scores_inside_0_25": inside,
            "notes": ["models loaded once per device, outside the timing (an untimed warm-up call first)",
                      "bf16: torch.autocast over the mT5 forward; the library itself runs MetricX in float32",
                      "scores_inside_0_25: the CPU scores not at a clamp bound (agreement at the bounds is trivial)"],
            "what": f"{what}: rerank.metrics.metricx.cached_scores of {len(rows)} test_2016 (src, 1-best, ref) "
                    f"segments, at most {metricx.BATCH_TOKENS} padded tokens a batch"}


# ---- the run ------------------------------------------------------------------------------------

def machine(ctx) -> dict:
    import torch

    info = {"platform": platform.platform(), "cpu": cpu_name(), "cpu_count": os.cpu_count(),
            "python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}
    for module in ("transformers", "tokenizers", "sacremoses", "sacrebleu", "numpy"):
        info[module] = getattr(__import__(module), "__version__", "?")
    if ctx.device.startswith("cuda"):
        props = torch.cuda.get_device_properties(ctx.device)
        info.update(gpu=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 1),
                    gpu_multiprocessors=props.multi_processor_count)
    return info


def settings(ctx) -> dict:
    import torch

    return {"threads": ctx.threads, "seed": ctx.seed, "size": ctx.size_name, "sizes": ctx.size,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "tf32_cudnn": torch.backends.cudnn.allow_tf32,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "hf_hub_offline": os.environ.get("HF_HUB_OFFLINE")}


def run_part(name: str, ctx, record: dict) -> None:
    fn = globals()[f"part_{name}"]
    left = ctx.deadline - time.monotonic()
    if left < ctx.min_part_seconds:
        record["parts"][name] = {"status": "skipped", "error": f"time limit: {left:.0f} s left"}
        return
    need = NEEDS.get(name)
    if need and importlib.util.find_spec(need) is None:
        record["parts"][name] = {"status": "skipped", "unit": UNITS[name], "missing": need,
                                 "error": f"needs {need} (unbabel-comet, with transformers 4), which this Python lacks: "
                                          "carry its wheels (docs/benchmarks/gpu.md)"}
        print(f"[gpu_check] {name}: skipped (no {need})", flush=True)
        return
    start, load = time.perf_counter(), os.getloadavg()
    print(f"[gpu_check] {name} ...", flush=True)
    try:
        part = {"status": "ok", **fn(ctx)}
    except Exception as exc:  # noqa: BLE001 (any failure of a part: the others still run, the traceback goes to the JSON)
        traceback.print_exc()
        part = {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]}
    part.update(unit=UNITS[name], wall_seconds=round(time.perf_counter() - start, 2),
                load_average={"start": [round(x, 2) for x in load], "end": [round(x, 2) for x in os.getloadavg()]})
    record["parts"][name] = part
    print(f"[gpu_check] {name}: {part['status']} in {part['wall_seconds']} s", flush=True)


def summary_cells(name: str, part: dict) -> tuple[str, str]:
    """(max |diff| cell, agreement cell) of a part's row in the Markdown table."""
    a = part.get("agreement", {})
    if name == "features":
        return (f"{a['s_s']['max_abs_diff']:.1e} / {a['s_i']['max_abs_diff']:.1e}",
                f"argmax {a['s_s']['argmax_agreement']:.3f} / {a['s_i']['argmax_agreement']:.3f}, "
                f"order {a['s_s']['identical_order']:.3f} / {a['s_i']['identical_order']:.3f}")
    if name == "embedding_training":
        return (f"{a['max_abs_diff']:.1e} (loss)", f"final loss rel. {a['final_loss_rel_diff']:.1e}, "
                f"weights {a['weights_max_abs_diff']:.1e}")
    if name == "nmt_nbest":
        return (f"{a['max_abs_diff']:.1e}", f"identical tokens {a['identical_nbest_tokens']:.3f}, "
                f"1-best {a['identical_1best']:.3f}")
    if name in ("comet_score", "metricx"):
        b = a["bf16"]
        return (f"{a['max_abs_diff']:.1e}", f"order {a['pair_order_agreement']:.3f}; bf16 vs float32 CPU / device: "
                f"{b['vs_float32_cpu']['max_abs_diff']:.1e} / {b['vs_float32_test_device']['max_abs_diff']:.1e}, "
                f"order {b['vs_float32_test_device']['pair_order_agreement']:.3f}")
    if name == "comet_mbr":
        b = a["bf16"]["vs_float32_test_device"]
        return (f"{a['max_abs_diff']:.1e}", f"argmax exact {a['exact']['argmax_agreement']:.3f}, aggregate "
                f"{a['aggregate']['argmax_agreement']:.3f}; bf16 vs float32 (device): {b['max_abs_diff']:.1e}, argmax "
                f"{b['exact']['argmax_agreement']:.3f} / {b['aggregate']['argmax_agreement']:.3f}")
    fp32 = a.get("float32_on_test_device")
    extra = f"; float32: {fp32['max_abs_diff']:.1e}, argmax {fp32['argmax_agreement']:.3f}" if fp32 else ""
    return (f"{a['max_abs_diff']:.1e}", f"argmax {a['argmax_agreement']:.3f}, order {a['identical_order']:.3f}{extra}")


def markdown(record: dict) -> str:
    s = record["settings"]
    lines = [f"GPU check ({record['size']} size, test device {record['device']}), {record['started']}, "
             f"{record['wall_seconds']:.1f} s; `{record['command']}`", "",
             f"- reference: {record['device_names']['reference']}, {s['threads']} torch threads; test "
             f"({record['device']}): {record['device_names']['test']}",
             f"- torch {record['machine']['torch']} (CUDA {record['machine']['cuda']}), transformers "
             f"{record['machine']['transformers']}; TF32 matmul {s['tf32_matmul']}, cuDNN {s['tf32_cudnn']}",
             f"- load average {record['load_average']['start']} at the start, {record['load_average']['end']} at the end",
             f"- install: {record['install']}", "",
             "| part | items | reference items/s | test items/s | test / reference | max abs diff | agreement | wall s | load 1-min |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in PARTS:
        part = record["parts"].get(name)
        if part is None:
            continue
        if part["status"] != "ok":
            lines.append(f"| {name} | {part['status']}: {part.get('error', '')[:120]} | | | | | | "
                         f"{part.get('wall_seconds', '')} | |")
            continue
        ref, test = part["devices"]["reference"], part["devices"]["test"]
        diff, agree = summary_cells(name, part)
        load = part["load_average"]
        lines.append(f"| {name} | {part['items']} {part['unit']} | {ref['items_per_s']:,.1f} | {test['items_per_s']:,.1f} "
                     f"| {test['items_per_s'] / ref['items_per_s']:.2f} | {diff} | {agree} | {part['wall_seconds']} "
                     f"| {load['start'][0]} → {load['end'][0]} |")
    notes = [f"{name}: {note}" for name, part in record["parts"].items() for note in part.get("notes", [])]
    return "\n".join(lines + [""] + [f"- {n}" for n in notes + record["notes"]]) + "\n"


def write(record: dict, out: str, start: float) -> None:
    """gpu_check.json and gpu_check.md as the run stands now (after every part)."""
    from rerank.io import atomic_write

    record.update(wall_seconds=round(time.perf_counter() - start, 2),
                  finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    record["load_average"]["end"] = [round(x, 2) for x in os.getloadavg()]
    with atomic_write(os.path.join(out, "gpu_check.json")) as f:
        f.write(json.dumps(record, indent=1) + "\n")
    with atomic_write(os.path.join(out, "gpu_check.md")) as f:
        f.write(markdown(record))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for gpu_check.json and gpu_check.md")
    ap.add_argument("--device", default="cuda", help="the test device: cuda, cuda:N or cpu (default: %(default)s); "
                    "the reference is always the CPU")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--quick", dest="size", action="store_const", const="quick", help="--size quick (seconds)")
    ap.add_argument("--threads", type=int, default=min(16, os.cpu_count() or 1), help="torch CPU threads "
                    "(default: the cores, at most 16)")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset of " + ", ".join(PARTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=420, help="seconds; parts that would start later are skipped")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args, start = parse_args(argv), time.perf_counter()
    os.makedirs(args.out, exist_ok=True)
    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    record = {"script": "benchmarks/gpu_check.py", "command": " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]]),
              "device": args.device, "reference_device": "cpu", "size": args.size, "parts": {}, "notes": [],
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "install": os.environ.get("GPU_CHECK_INSTALL", "not through benchmarks/gpu_check.sh"),
              "load_average": {"start": [round(x, 2) for x in os.getloadavg()]}, "machine": {}, "settings": {}}
    error = (f"missing Python modules: {', '.join(missing)} (carry their wheels: docs/benchmarks/gpu.md)" if missing
             else f"unknown parts: {sorted(set(parts) - set(PARTS))}" if set(parts) - set(PARTS) else None)
    if error is None:
        import torch

        if args.device.startswith("cuda") and not torch.cuda.is_available():
            error = f"--device {args.device}: torch {torch.__version__} sees no CUDA device"
    if error:
        record["error"] = error
        with open(os.path.join(args.out, "gpu_check.json"), "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
        print(f"gpu_check: error: {error}", file=sys.stderr)
        return 2
    import logging

    import rerank

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ctx = argparse.Namespace(device=args.device, threads=args.threads, seed=args.seed, size=SIZES[args.size],
                             size_name=args.size, deadline=time.monotonic() + args.time_limit,
                             min_part_seconds=10 if args.size == "quick" else 45)
    torch.set_num_threads(args.threads)
    record.update(machine=machine(ctx), settings=settings(ctx), rerank_path=os.path.dirname(rerank.__file__),
                  device_names={"reference": device_name("cpu"), "test": device_name(args.device)})
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        ctx.tmp = tmp
        for name in parts:
            run_part(name, ctx, record)
            write(record, args.out, start)
    print(markdown(record), flush=True)
    return 0 if all(p["status"] == "ok" or "missing" in p for p in record["parts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
