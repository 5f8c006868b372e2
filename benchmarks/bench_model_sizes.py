"""Segments per second of the model metrics at their real sizes, with random weights, against each
library's own forward or predict in the same process on the same segments (issue 47, item 6).

    python benchmarks/bench_model_sizes.py --models metricx,bleurt [--segments 32] [--threads 2] [--repeats 2]
        [--json docs/benchmarks/model_sizes.json]
    .venv-compat/bin/python benchmarks/bench_model_sizes.py --models comet ...   (unbabel-comet needs transformers 4)

No weights exist on this machine, so each model is built from its real architecture's config with
random weights (the timings are those of the real model; the scores mean nothing):

- comet: COMET-22 (Unbabel/wmt22-comet-da): unbabel-comet's regression_metric on an XLM-R large
  encoder (24 layers, 1024 wide, 16 heads, ffn 4096, vocabulary 250,002), layer mix with sparsemax,
  average pooling, estimator 3072-1024 with tanh, built by unbabel-comet itself
  (load_pretrained_weights False) and saved as COMET lays a checkpoint out. Ours:
  rerank.metrics.comet.cached_scores (distinct triples, sorted into batches, COMET's predict per
  block); theirs: `model.predict(samples, batch_size=16)` (COMET's own length batching).
- metricx: MetricX-24 on mT5-large (MT5ForRegression's weights: 24+24 layers, d_model 1024, d_ff
  2816, 16 heads, vocabulary 250,112, untied lm_head; score token 250089). Ours:
  rerank.metrics.metricx.cached_scores (batches of at most 4,096 padded tokens, longest first, the
  decoder's one step, one output row); theirs: the public MT5ForRegression forward as
  tests/test_metricx.py restates it (transformers' MT5ForConditionalGeneration stacks, the full
  lm_head logits, the score token's column, clamp), one input per forward as predict.py's default
  batch size 1, and in padded batches of `--reference-batch` inputs in input order.
- bleurt: BLEURT-20's RemBERT (32 layers, 1152 wide, 18 heads, ffn 4608, input embeddings 256,
  vocabulary 250,300, 512 positions) with the linear head, in this toolkit's checkpoint format.
  Ours: rerank.metrics.pair_models.cached_pair_scores of a BLEURTModel (length-sorted batches of
  at most 64 pairs and 8,192 padded tokens, with its padding bound); theirs: the PyTorch port's forward as
  tests/test_bertscore_bleurt.py restates it (BleurtForSequenceClassification: RemBERT's pooled
  output, the head) called as its README calls it, `tokenizer(references, candidates,
  padding="longest")`, in batches of `--reference-batch` pairs in input order.

The segments: `--segments` sentences drawn with a fixed seed from the shipped Multi30k test_2016
(English source, the optimised system's 1-best German hypothesis, the German reference). The
tokenizers are BPE/WordPiece vocabularies of 8,000 trained on the shipped Multi30k text (the real
models' sentencepiece vocabularies cannot be downloaded); the token lengths are reported.

What a figure includes: the seconds of one call that scores every segment, the model already
loaded (building, saving and loading are timed apart and excluded); tokenisation, batching and
the forward passes included, on the CPU in float32 with `--threads` torch threads. Each side runs
`--repeats` times, alternating, after an untimed warm-up on two segments; the best run counts. The
load average (/proc/loadavg) is recorded around every timed run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import sys
import tempfile
import time
from typing import Any
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np

SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rerank", "data", "multi30k")
VOCAB = 8000

XLMR_LARGE: dict[str, Any] = dict(vocab_size=250002, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                  intermediate_size=4096, max_position_embeddings=514, type_vocab_size=1, layer_norm_eps=1e-5,
                  pad_token_id=1, bos_token_id=0, eos_token_id=2)
COMET22: dict[str, Any] = dict(encoder_model="XLM-RoBERTa", pool="avg", layer="mix", layer_transformation="sparsemax",
               layer_norm=False, hidden_sizes=[3072, 1024], activations="Tanh", final_activation=None, dropout=0.1,
               batch_size=16, load_pretrained_weights=False, local_files_only=True)
MT5_LARGE: dict[str, Any] = dict(vocab_size=250112, d_model=1024, d_kv=64, d_ff=2816, num_layers=24, num_decoder_layers=24,
                 num_heads=16, relative_attention_num_buckets=32, relative_attention_max_distance=128,
                 feed_forward_proj="gated-gelu", tie_word_embeddings=False, pad_token_id=0, eos_token_id=1,
                 decoder_start_token_id=0, dropout_rate=0.1, layer_norm_epsilon=1e-6)
METRICX24: dict[str, Any] = dict(version=24, score_token_id=250089, max_input_length=1536)
REMBERT_BLEURT20: dict[str, Any] = dict(vocab_size=250300, hidden_size=1152, num_hidden_layers=32, num_attention_heads=18,
                        input_embedding_size=256, output_embedding_size=1664, intermediate_size=4608,
                        max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu")
# --size smoke: the same code on 2-layer models of the real vocabularies (a check of the script, not a figure)
def smoke() -> None:
    XLMR_LARGE.update(num_hidden_layers=2)
    COMET22.update(hidden_sizes=[64, 32])
    MT5_LARGE.update(num_layers=2, num_decoder_layers=2)
    REMBERT_BLEURT20.update(num_hidden_layers=2)


def n_parameters(*modules) -> int:
    """Parameters of the modules, each storage counted once (tied embeddings share one)."""
    seen: dict[int, int] = {}
    for module in modules:
        for p in module.parameters():
            seen[p.data_ptr()] = p.numel()
    return sum(seen.values())


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_name() -> str:
    return next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo", encoding="utf-8")
                 if line.startswith("model name")), platform.processor())


def write_json(path: str, record: dict) -> None:
    """`record` as indented JSON at `path`, atomically."""
    from rerank.io import atomic_write

    with atomic_write(path) as f:
        f.write(json.dumps(record, indent=1) + "\n")


def shipped_text() -> list[str]:
    from rerank.io import read_lines

    return [line for name in ("val.en.gz", "val.de.gz", "test_2016_flickr.en.gz", "test_2016_flickr.de.gz")
            for line in read_lines(os.path.join(SHIPPED, name))]


def segments(n: int, seed: int) -> list[tuple[str, str, str]]:
    """(source, 1-best hypothesis, reference) of n test_2016 sentences drawn with `seed`."""
    import rerank
    from rerank.io import read_lines

    src = read_lines(os.path.join(SHIPPED, "test_2016_flickr.en.gz"))
    ref = read_lines(os.path.join(SHIPPED, "test_2016_flickr.de.gz"))
    nbest = rerank.read_nbest(os.path.join(SHIPPED, "optimised.test_2016.50best.gz"))
    picked = sorted(random.Random(seed).sample(range(nbest.n_sentences), n))
    return [(src[k], nbest.hyps[nbest.offsets[k]], ref[k]) for k in picked]


def bpe(lines: list[str], specials: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False))
    return tok


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def race(sides: dict, repeats: int) -> dict:
    """Each side's fn() `repeats` times, alternating: seconds of every run, the best, loads, last values."""
    out: dict[str, dict[str, Any]] = {name: {"seconds": [], "load": []} for name in sides}
    for r in range(repeats):
        for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            before = loadavg()
            values, seconds = timed(sides[name])
            out[name]["seconds"].append(round(seconds, 3))
            out[name]["load"].append({"start": before, "end": loadavg()})
            out[name]["values"] = np.asarray(values, dtype=np.float64)
            print(f"  {name}: {seconds:.2f} s (load {before[0]} -> {loadavg()[0]})", flush=True)
    for side in out.values():
        side["best_s"] = min(side["seconds"])
    return out


def summary(result: dict, n: int, reference: str) -> tuple[dict, np.ndarray]:
    """(the table of the sides: seconds, best, segments/s, max |diff| of the scores to ours, the
    speed-up of ours over `reference`; our scores)."""
    ours = result["ours"]["values"]
    table: dict[str, Any] = {}
    for name, side in result.items():
        values = side.pop("values")
        table[name] = {**side, "segments_per_s": round(n / side["best_s"], 3)}
        if name != "ours":
            table[name]["max_abs_diff_to_ours"] = float(np.max(np.abs(values - ours)))
    for name in result:
        if name != "ours":
            table["speedup_vs_" + name] = round(table[name]["best_s"] / table["ours"]["best_s"], 3)
    table["reference"] = reference
    return table, ours


def lengths(counts) -> dict:
    counts = np.asarray(counts)
    return {"mean": round(float(counts.mean()), 1), "max": int(counts.max()), "min": int(counts.min())}


# ---- COMET-22 -------------------------------------------------------------------------------------

def build_comet22(out: str, lines: list[str], seed: int) -> str:
    """unbabel-comet's regression_metric (COMET-22's hyper-parameters) on a random XLM-R large, saved
    as COMET lays a checkpoint out (hparams.yaml, checkpoints/model.ckpt), the encoder's config and
    a BPE tokenizer in out/encoder."""
    import pytorch_lightning
    import torch
    import yaml
    from comet.models import str2model
    from tokenizers import processors
    from transformers import XLMRobertaConfig, XLMRobertaTokenizerFast  # type: ignore[attr-defined]

    tok = bpe(lines, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    encoder = os.path.abspath(os.path.join(out, "encoder"))
    XLMRobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
                            unk_token="<unk>", pad_token="<pad>", mask_token="<mask>").save_pretrained(encoder)
    XLMRobertaConfig(**XLMR_LARGE).save_pretrained(encoder)
    torch.manual_seed(seed)
    model = str2model["regression_metric"](pretrained_model=encoder, **COMET22)
    os.makedirs(os.path.join(out, "checkpoints"), exist_ok=True)
    with open(os.path.join(out, "hparams.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump({**dict(model.hparams), "class_identifier": "regression_metric"}, f)
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams),
                "pytorch-lightning_version": pytorch_lightning.__version__},
               os.path.join(out, "checkpoints", "model.ckpt"))
    return out


def bench_comet(tmp: str, rows, args) -> dict:
    from rerank.metrics import comet

    path, build_s = timed(lambda: build_comet22(os.path.join(tmp, "comet22"), shipped_text(), args.seed))
    gc.collect()
    model, load_s = timed(lambda: comet.load_comet(path, True, "bench"))
    model.eval()
    params = n_parameters(model)
    samples = [{"src": s, "mt": h, "ref": r} for s, h, r in rows]
    tok = model.encoder.tokenizer
    counts = {k: lengths([len(tok(x[k])["input_ids"]) for x in samples]) for k in ("src", "mt", "ref")}
    with mock.patch.object(comet, "load_comet", lambda *a, **k: model):   # the model loaded once, above
        def ours(some=rows):
            return comet.cached_scores(path, some, reference=True, what="bench", batch_size=16, device="cpu")

        def theirs(some=samples):
            return model.predict(some, batch_size=16, gpus=0, accelerator="cpu", progress_bar=False).scores

        ours(rows[:2]), theirs(samples[:2])   # untimed warm-up
        result = race({"ours": ours, "theirs": theirs}, args.repeats)
    import comet as comet_package

    return {"model": "COMET-22 architecture: regression_metric on XLM-R large (random weights)",
            "parameters": params, "build_s": round(build_s, 1), "load_s": round(load_s, 1),
            "tokens": counts, "batch": "16 segments (COMET's default); ours sorted by source length, theirs COMET's "
            "length batching", "library": f"unbabel-comet {getattr(comet_package, '__version__', '?')}",
            "theirs": "model.predict(samples, batch_size=16, gpus=0)", **summary(result, len(rows), "theirs")[0]}


# ---- MetricX-24 -----------------------------------------------------------------------------------

def build_metricx24(out: str, lines: list[str], seed: int) -> str:
    """A MetricX-24 checkpoint directory (rerank.metrics.metricx's layout) on a random mT5-large."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import processors
    from transformers import MT5Config, MT5ForConditionalGeneration, PreTrainedTokenizerFast

    tok = bpe(lines, ["<pad>", "</s>", "<unk>"])
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    os.makedirs(out, exist_ok=True)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>",
                            pad_token="<pad>").save_pretrained(out)
    config = MT5Config(**MT5_LARGE)
    config.architectures = ["MT5ForRegression"]
    torch.manual_seed(seed)
    model = MT5ForConditionalGeneration(config).eval()
    spread_scores(model, PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>"), lines)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()   # the stacks' embeddings are
             if k != "lm_head.weight" and not k.endswith("embed_tokens.weight")}    # `shared` (tied on load)
    state["lm_head.weight"] = model.lm_head.weight.detach().clone().contiguous()   # untied, as mT5's
    del model
    save_file(state, os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump({**config.to_dict(), "tie_word_embeddings": False}, f, indent=1)
    with open(os.path.join(out, "metricx.json"), "w", encoding="utf-8") as f:
        json.dump(METRICX24, f)
    return out


def spread_scores(model, tokenizer, lines: list[str]) -> None:
    """Set the score token's row of lm_head so that the random model's scores of MetricX-24 inputs
    of the shipped text spread over about [0, 25] (as tiny_models.build_metricx does): a random row
    gives logits that the clamp sends all to one bound, which would make the agreement vacuous."""
    import torch

    token = METRICX24["score_token_id"]
    texts = [f"source: {a} candidate: {b} reference: {b}" for a, b in zip(lines[:8], lines[-8:])]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        encoded = model.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])[0]
        hidden = model.decoder(input_ids=torch.zeros((len(texts), 1), dtype=torch.long), encoder_hidden_states=encoded,
                               encoder_attention_mask=batch["attention_mask"])[0][:, 0]
        row = model.lm_head.weight[token]
        raw = hidden @ row
        unit = hidden.mean(0) / hidden.mean(0).square().sum()   # hidden . unit is about 1 for every input
        scale = 6.0 / raw.std()
        model.lm_head.weight[token] = scale * row + (12.5 - scale * raw.mean()) * unit


def public_metricx(model, scorer, head, texts: list[str], batch: int) -> np.ndarray:
    """MT5ForRegression's forward as tests/test_metricx.py restates it, on the loaded weights:
    tokenised with truncation, the final EOS removed, encoder, the decoder on token 0, the full
    lm_head logits, the score token's column, clamped to [0, 25]; `batch` inputs per forward, padded
    (attention mask 0) in input order."""
    import torch

    tokenizer, ckpt = scorer.tokenizer, scorer.ckpt
    out = []
    with torch.no_grad():
        for a in range(0, len(texts), batch):
            rows = [tokenizer(t, max_length=ckpt.max_input_length, truncation=True)["input_ids"][:-1]
                    for t in texts[a:a + batch]]
            width = max(map(len, rows))
            ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
            mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
            hidden = model.encoder(input_ids=ids, attention_mask=mask)[0]
            start = torch.zeros((len(rows), 1), dtype=torch.long)
            seq = model.decoder(input_ids=start, encoder_hidden_states=hidden, encoder_attention_mask=mask)[0]
            logits = torch.nn.functional.linear(seq, head)   # tie_word_embeddings False: no rescaling
            out += torch.clamp(logits[:, 0, ckpt.score_token_id], 0, 25).tolist()
    return np.array(out)


def bench_metricx(tmp: str, rows, args) -> dict:
    import torch
    from safetensors import safe_open
    from transformers import MT5Config, MT5ForConditionalGeneration

    from rerank.metrics import metricx

    path, build_s = timed(lambda: build_metricx24(os.path.join(tmp, "metricx24"), shipped_text(), args.seed))
    gc.collect()
    ckpt = metricx.read_checkpoint(path)
    scorer, load_s = timed(lambda: metricx.Scorer(ckpt, torch.device("cpu")))
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
        head = f.get_tensor("lm_head.weight")
    with torch.device("meta"):
        public = MT5ForConditionalGeneration(MT5Config.from_pretrained(path))
    shared = scorer.model.state_dict()   # the same tensors as ours: no second copy of the weights
    public.load_state_dict({**shared, "lm_head.weight": head}, assign=True, strict=False)
    left = [name for name, t in [*public.named_parameters(), *public.named_buffers()] if t.is_meta]
    assert not left, left
    public.eval()
    params = n_parameters(scorer.model) + head.numel()
    texts = [ckpt.text(s, h, r) for s, h, r in rows]
    counts = lengths([len(ids) for ids in scorer.encode(texts)])
    with mock.patch.object(metricx, "Scorer", lambda *a, **k: scorer):   # loaded once, above
        def ours(some=rows):
            return metricx.cached_scores(path, some, reference=True, what="bench", device="cpu")

        sides = {"ours": ours}
        for b in args.reference_batch:
            sides[f"theirs_batch{b}"] = lambda b=b: public_metricx(public, scorer, head, texts, b)
        ours(rows[:2]), public_metricx(public, scorer, head, texts[:2], 1)   # untimed warm-up
        result = race(sides, args.repeats)
    table, values = summary(result, len(rows), f"theirs_batch{args.reference_batch[0]}")
    return {"model": "MetricX-24 architecture: mT5-large as MT5ForRegression (random weights)", "parameters": params,
            "build_s": round(build_s, 1), "load_s": round(load_s, 1), "tokens": {"input": counts},
            "batch": f"ours: at most {metricx.BATCH_TOKENS} padded tokens, longest first; theirs: "
                     f"{', '.join(map(str, args.reference_batch))} inputs per forward, input order",
            "theirs": "the public MT5ForRegression forward (tests/test_metricx.py's restatement)",
            "scores_inside_0_25": float(np.mean((values > 0) & (values < 25))), **table}


# ---- BLEURT-20 ------------------------------------------------------------------------------------

def build_bleurt20(out: str, lines: list[str], seed: int) -> str:
    """A BLEURT-20-sized model in rerank.metrics.bleurt's checkpoint format, random weights."""
    import torch
    from safetensors.torch import save_file

    from rerank.metrics.bleurt import CONFIG, FORMAT, build_model
    from rerank.recipes.tiny_models import wordpiece_tokenizer

    tokenizer = wordpiece_tokenizer(lines, vocab_size=VOCAB)
    encoder = {**REMBERT_BLEURT20, "pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.cls_token_id,
               "eos_token_id": tokenizer.sep_token_id}
    config = {"format": FORMAT, "max_length": 512, "encoder": encoder}
    torch.manual_seed(seed)
    model, head = build_model(config)
    with torch.no_grad():   # as tiny_models.build_bleurt: spread the pooled output and the score
        model.pooler.dense.weight.normal_(0.0, 2.0 / encoder["hidden_size"] ** 0.5)
        head.weight.normal_(0.0, 1.0 / encoder["hidden_size"] ** 0.5)
    os.makedirs(out, exist_ok=True)
    state = {f"encoder.{k}": v.contiguous() for k, v in model.state_dict().items()}
    state.update({f"head.{k}": v.contiguous() for k, v in head.state_dict().items()})
    del model
    save_file(state, os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, CONFIG), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    tokenizer.save_pretrained(out)
    return out


def port_bleurt(tokenizer, encoder, head, pairs, batch: int, max_length: int) -> np.ndarray:
    """BleurtForSequenceClassification's forward as the port's README calls it: the tokenizer's
    (references, candidates) padded to the longest of each batch, RemBERT's pooled output, the head."""
    import torch

    out = []
    with torch.no_grad():
        for a in range(0, len(pairs), batch):
            some = pairs[a:a + batch]
            inputs = tokenizer([r for _, r in some], [h for h, _ in some], padding="longest", truncation=True,
                               max_length=max_length, return_tensors="pt")
            out += head(encoder(**inputs).pooler_output)[:, 0].tolist()
    return np.array(out)


def bench_bleurt(tmp: str, rows, args) -> dict:
    from rerank.metrics import bleurt, pair_models

    path, build_s = timed(lambda: build_bleurt20(os.path.join(tmp, "bleurt20"), shipped_text(), args.seed))
    gc.collect()
    model = bleurt.BLEURTModel(path, "cpu")
    (tokenizer, encoder, head), load_s = timed(model.load)
    params = n_parameters(encoder, head)
    pairs = [(h, r) for _, h, r in rows]
    counts = lengths([len(x["input_ids"]) for x in model.inputs(pairs)])

    def ours(some=pairs):
        return pair_models.cached_pair_scores(model, some, None, "bench")

    sides = {"ours": ours}
    for b in args.reference_batch:
        sides[f"theirs_batch{b}"] = lambda b=b: port_bleurt(tokenizer, encoder, head, pairs, b, model.max_length)
    ours(pairs[:2]), port_bleurt(tokenizer, encoder, head, pairs[:2], 2, model.max_length)   # untimed warm-up
    result = race(sides, args.repeats)
    table, values = summary(result, len(rows), f"theirs_batch{args.reference_batch[-1]}")
    return {"model": "BLEURT-20 architecture: RemBERT (32 layers) with the linear head (random weights)",
            "parameters": params, "build_s": round(build_s, 1), "load_s": round(load_s, 1),
            "tokens": {"pair": counts}, "batch": f"ours: length-sorted, at most {pair_models.MAX_ROWS} pairs and "
            f"{pair_models.MAX_TOKENS} padded tokens, cut where padding passes {pair_models.PAD_SLACK} of a batch of "
            f"{pair_models.PAD_FLOOR} padded tokens or more; theirs: {', '.join(map(str, args.reference_batch))} pairs per "
            "forward, padded to the longest, input order",
            "theirs": "the PyTorch port's forward (tests/test_bertscore_bleurt.py's restatement)",
            "score_std": float(np.std(values)), **table}


BENCHES = {"comet": bench_comet, "metricx": bench_metricx, "bleurt": bench_bleurt}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="metricx,bleurt", help="comma-separated: " + ", ".join(BENCHES))
    ap.add_argument("--segments", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--reference-batch", default="1,16", help="batch sizes of the reference forwards (metricx, "
                    "bleurt; comet uses its predict's 16)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=("real", "smoke"), default="real", help="smoke: 2-layer models, to check "
                    "the script (no figure)")
    ap.add_argument("--json", help="write (merge into) this JSON file")
    args = ap.parse_args(argv)
    args.reference_batch = [int(b) for b in args.reference_batch.split(",")]
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    if args.size == "smoke":
        smoke()
    rows = segments(args.segments, args.seed)
    record = {}
    if args.json and os.path.isfile(args.json):
        with open(args.json, encoding="utf-8") as f:
            record = json.load(f)
    record.setdefault("models", {})
    for name in args.models.split(","):
        print(f"{name} ...", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"bench-sizes-{name}-") as tmp:
            start = loadavg()
            entry = BENCHES[name](tmp, rows, args)
        entry.update(command=" ".join([os.path.relpath(sys.executable), "benchmarks/bench_model_sizes.py",
                                       *(argv if argv is not None else sys.argv[1:])]),
                     size=args.size, segments=len(rows), threads=torch.get_num_threads(), dtype="float32", device="cpu",
                     load_average={"start": start, "end": loadavg()}, torch=torch.__version__,
                     transformers=transformers.__version__, python=platform.python_version(),
                     cpu=cpu_name(), when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        record["models"][name] = entry
        print(json.dumps(entry, indent=1), flush=True)
        gc.collect()
        if args.json:
            write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
