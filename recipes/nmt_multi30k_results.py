"""Collect the NMT runs of recipes/nmt_multi30k.sh: a results table (Markdown + JSON) and, with
--ship, copy the n-best lists into rerank/data/multi30k/{flavour}.{split}.{n}best.gz.

Usage: python -m rerank.recipes.nmt_multi30k_results [--runs /work/runs/nmt/cpu] [--ship] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil

from rerank.io import atomic_write

FLAVOURS = ["weak", "regular", "optimised"]
PAPER = {"weak": (25.7, 33.1), "regular": (32.4, 41.9), "optimised": (35.3, 43.2)}  # BLEU, oracle 20-best
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "rerank", "data", "multi30k")


def _load(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def collect(runs: str) -> dict:
    out = {}
    for flav in FLAVOURS:
        d = os.path.join(runs, flav)
        hist = _load(os.path.join(d, "history.json"))
        cfg = _load(os.path.join(d, "config.json"))
        if hist is None:
            continue
        row = {"size": cfg["train"]["size"], "epochs": hist["epoch"], "best_epoch": hist.get("best_epoch"),
               "val_bleu_greedy": round(hist["best_bleu"], 2), "stopped": hist.get("stopped"),
               "train_minutes": round(sum(h["seconds"] for h in hist["history"]) / 60, 1)}
        for split in ("test_2016", "val"):
            for n in (20, 50):
                s = _load(os.path.join(d, f"{split}.{n}best.scores.json"))
                if s:
                    row[f"{split}.beam{n}"] = {"bleu": round(s["bleu"], 2), "ter": round(s["ter"], 2),
                                               f"oracle_{n}best": round(s[f"oracle_bleu_{n}best"], 2),
                                               "sent_per_s": round(s["sentences"] / s["seconds"], 2)}
        out[flav] = row
    return out


def markdown(res: dict) -> str:
    lines = ["| flavour | epochs (best) | val BLEU greedy | test BLEU beam 20 | test TER beam 20 | test BLEU beam 50 "
             "| oracle 20-best | oracle 50-best | paper BLEU / oracle 20 |", "|---" * 9 + "|"]
    for flav, r in res.items():
        t20, t50 = r.get("test_2016.beam20", {}), r.get("test_2016.beam50", {})
        lines.append(f"| {flav} | {r['epochs']} ({r['best_epoch']}) | {r['val_bleu_greedy']} | {t20.get('bleu', '-')} | "
                     f"{t20.get('ter', '-')} | {t50.get('bleu', '-')} | {t20.get('oracle_20best', '-')} | "
                     f"{t50.get('oracle_50best', '-')} | {PAPER[flav][0]} / {PAPER[flav][1]} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default="/work/runs/nmt/cpu")
    ap.add_argument("--ship", action="store_true", help="copy the n-best lists into rerank/data/multi30k")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    res = collect(args.runs)
    print(markdown(res))
    if args.json:
        with atomic_write(args.json) as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    if args.ship:
        for flav in res:
            for split in ("val", "test_2016"):
                for n in (20, 50):
                    src = os.path.join(args.runs, flav, f"{split}.{n}best.gz")
                    if os.path.exists(src):
                        shutil.copyfile(src, os.path.join(DATA, f"{flav}.{split}.{n}best.gz"))
                        print("shipped", f"{flav}.{split}.{n}best.gz", os.path.getsize(src), "bytes")


if __name__ == "__main__":
    main()
