"""Encoding speed (sentences/second) and training time per epoch of the embedding models.

Encoding: 50,000 Multi30k English captions with `Encoder.encode` (tokenisation included), per
preset, against a reference in the same process: a plain batched nn.GRU over the same
pre-tokenised ids (sorted by length, padded per batch). Training: seconds for a few steps of
batch 128 on the real data, extrapolated to one epoch of the text-only en+de setting
(task1 + one comparable pair per image = 58,000 tuples) and of all 174,000 tuples.
Models are randomly initialised (speed does not depend on the weights).

    python benchmarks/bench_embeddings.py --data-dir /work/shared/data/multi30k [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rerank.embeddings.data import epoch_tuples, load_comparable
from rerank.embeddings.encoder import Encoder
from rerank.embeddings.model import MLMME, PRESETS, ModelConfig
from rerank.embeddings.tokenize import tokenize
from rerank.embeddings.train import Trainer, resolve_config
from rerank.embeddings.vocab import Vocab
from rerank.io import atomic_write


def reference_gru(model: MLMME, ids: list[list[int]], batch_size: int) -> float:
    """Seconds for a plain batched nn.GRU (+ projection) over pre-tokenised, length-sorted ids."""
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    t = time.perf_counter()
    with torch.inference_mode():
        for s in range(0, len(order), batch_size):
            batch = [ids[i] for i in order[s:s + batch_size]]
            pad = torch.zeros(len(batch), len(batch[0]), dtype=torch.long)
            for i, x in enumerate(batch):
                pad[i, : len(x)] = torch.as_tensor(x)
            _, h = model.gru["en"](model.embed["en"](pad))
            if "en" in model.text_proj:
                model.text_proj["en"](h[-1])
    return time.perf_counter() - t


def train_step_seconds(preset: str, data_dir: str, steps: int) -> float:
    """Seconds per batch-128 training step (text-only, contrastive sum) on the real data."""
    tmp = tempfile.mkdtemp(prefix="bench-emb-")
    try:
        tcfg = resolve_config({"preset": preset, "train_limit": 2000, "comparable_per_image": 1,
                               "contrastive": "sum", "checkpoint_minutes": 1e9})
        tr = Trainer(tcfg, data_dir, tmp, quiet=True)
        imgs, tsents = epoch_tuples(tr.pools, tcfg["seed"], 0)
        tr.model.train()
        tr.step(imgs, tsents, np.arange(128), None)          # warm-up
        t = time.perf_counter()
        for k in range(1, steps + 1):
            tr.step(imgs, tsents, np.arange(128 * k, 128 * (k + 1)), None)
        return (time.perf_counter() - t) / steps
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench_preset(preset: str, sents: list[str], vocab: Vocab, args) -> dict:
    """Encoding speed (ours and plain nn.GRU), tokenisation speed and training time of a preset."""
    cfg = ModelConfig(languages=["en", "de"], vocab_sizes={"en": len(vocab), "de": 2}, **PRESETS[preset])
    torch.manual_seed(0)
    enc = Encoder(MLMME(cfg), {"en": vocab, "de": Vocab(["<pad>", "<unk>"])})
    enc.encode(sents[:512], "en", args.batch_size)   # warm-up (and lookup table)
    t = time.perf_counter()
    enc.encode(sents, "en", args.batch_size)
    t_enc = time.perf_counter() - t
    t = time.perf_counter()
    ids = enc.tokenize_ids(sents, "en")
    t_tok = time.perf_counter() - t
    t_ref = reference_gru(enc.model, ids, args.batch_size)
    step = train_step_seconds(preset, args.data_dir, args.train_steps)
    return {"preset": preset, "sentences": len(sents), "encode_sent_per_s": len(sents) / t_enc,
            "tokenise_sent_per_s": len(sents) / t_tok, "reference_gru_sent_per_s": len(sents) / t_ref,
            "ratio_vs_reference": t_ref / t_enc, "train_s_per_step_b128": step,
            "train_s_per_epoch_58k": step * 58000 / 128, "train_s_per_epoch_174k": step * 174000 / 128}


def write_results(rows: list[dict], threads: int, out: str) -> None:
    """OUT.json (rows + load average) and OUT.md (a Markdown table, also printed)."""
    load = os.getloadavg()[0]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with atomic_write(out + ".json") as f:
        json.dump({"threads": threads, "load_average_1min": load, "rows": rows}, f, indent=1)
    lines = [f"Embedding speed, {threads} threads (1-min load average at the end: {load:.1f})", "",
             "| preset | encode sent/s | plain nn.GRU sent/s | ratio | tokenise sent/s | train s/step (b128) "
             "| s/epoch 58k | s/epoch 174k |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['preset']} | {r['encode_sent_per_s']:.0f} | {r['reference_gru_sent_per_s']:.0f} | "
                     f"{r['ratio_vs_reference']:.2f} | {r['tokenise_sent_per_s']:.0f} | {r['train_s_per_step_b128']:.2f} | "
                     f"{r['train_s_per_epoch_58k']:.0f} | {r['train_s_per_epoch_174k']:.0f} |")
    with atomic_write(out + ".md") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--presets", default="cpu,paper")
    ap.add_argument("--sentences", type=int, default=50000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--train-steps", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "embeddings"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cols = load_comparable(args.data_dir, "train", ["en"])["en"]
    sents = [s for col in cols for s in col][: args.sentences]
    vocab = Vocab.build((tokenize(s, "en") for s in sents), min_freq=2)
    rows = []
    for preset in args.presets.split(","):
        rows.append(bench_preset(preset, sents, vocab, args))
        print(json.dumps(rows[-1]), flush=True)
    write_results(rows, args.threads, args.out)


if __name__ == "__main__":
    main()
