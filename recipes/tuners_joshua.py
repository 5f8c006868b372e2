"""Compare the tuners on the real Joshua bn-en n-best lists: tune on sentences 0-49, test on 50-99.

Usage: python -m rerank.recipes.tuners_joshua [--data-dir /work/shared/data/nbest/joshua-bn-en] [--runs 3]
           [--json out.json]
Prints a Markdown table of corpus BLEU (sacrebleu, tokenize none) on both halves for: zero weights
(ties -> the decoder's own 1-best), uniform weights, the decoder's weights from joshua.config,
each tuner (mean and range over --runs seeds), and the greedy sentence-wise oracle.
The list is small (50 x <= 10 hypotheses, 21 features): expect over-fitting, not a quality claim.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from rerank.tuning import prepare
from rerank.mira.kbmira import kbmira
from rerank.mira.mert import mert
from rerank.mira.pro import pro
from rerank.formats import read_nbest, read_references
from rerank.io import atomic_write, read_lines
from rerank.multirun import run_seeds


def decoder_weights(path: str, names: list[str]) -> np.ndarray:
    table = {}
    for line in read_lines(path):
        parts = line.split()
        if len(parts) == 2 and parts[0] in names:
            table[parts[0]] = float(parts[1])
    table["OOVPenalty"] = -100.0  # see the data README: the total column matches with -100
    return np.array([table.get(n, 0.0) for n in names])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default="/work/shared/data/nbest/joshua-bn-en")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    orig = os.path.join(args.data_dir, "orig")
    nbest = read_nbest(os.path.join(orig, "output.gold"))
    refs = read_references([os.path.join(orig, f"reference.en.{k}") for k in range(4)], nbest.n_sentences)
    halves = {}
    for name, keep in (("tune", range(0, 50)), ("test", range(50, 100))):
        halves[name] = prepare(nbest.select_sentences(list(keep)), [[s[i] for i in keep] for s in refs], tokenize="none")
    tune, test = halves["tune"], halves["test"]
    n = len(tune.feature_names)
    rows = [("zero weights (decoder 1-best)", [np.zeros(n)]), ("uniform weights", [np.ones(n)]),
            ("decoder weights (joshua.config)", [decoder_weights(os.path.join(orig, "joshua.config"), tune.feature_names)])]
    timing = {}
    tuners = {
        "kbmira (C=0.01, 60 epochs)": lambda s: kbmira(tune, seed=s).weights,
        "kbmira --model-bg": lambda s: kbmira(tune, seed=s, model_bg=True).weights,
        "MERT (20 starts, 10 random dirs)": lambda s: mert(tune, seed=s).weights,
        "PRO (5000/50/0.05, C=1)": lambda s: pro(tune, seed=s).weights,
    }
    for label, fn in tuners.items():
        t = time.perf_counter()
        rows.append((label, [fn(seed) for seed in run_seeds(1, args.runs)]))
        timing[label] = (time.perf_counter() - t) / args.runs
    print("| weights | tune BLEU (0-49) | test BLEU (50-99) | s/run |\n|---|---|---|---|")
    record = []
    for label, ws in rows:
        a = np.array([tune.evaluate(w) for w in ws])
        b = np.array([test.evaluate(w) for w in ws])
        fmt = (lambda x: f"{x.mean():.2f} ({x.min():.2f}-{x.max():.2f})") if len(ws) > 1 else (lambda x: f"{x[0]:.2f}")
        print(f"| {label} | {fmt(a)} | {fmt(b)} | {timing.get(label, 0):.2f} |")
        record.append({"weights": label, "tune": a.tolist(), "test": b.tolist(), "seconds_per_run": timing.get(label)})
    print(f"| oracle (sentence-BLEU+1 picks) | {tune.oracle():.2f} | {test.oracle():.2f} | |")
    if args.json:
        with atomic_write(args.json) as out:
            json.dump({"rows": record, "oracle": {"tune": tune.oracle(), "test": test.oracle()}}, out, indent=2)


if __name__ == "__main__":
    main()
