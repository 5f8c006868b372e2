"""The NMT models' own scores: 1-best BLEU and TER and the sentence-BLEU+1 oracle of every n-best
list of a `recipe multi30k` run, with each model's training record (epochs, best epoch, greedy
validation BLEU, minutes). Written to nmt_results.json by `rerank recipe reproduce`.

    python -m rerank.recipes.nmt_scores RUN_DIR --raw DATA/multi30k/task1/raw [--nmt-dir DIR] [-o FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import sacrebleu

from rerank.formats import read_nbest, read_references
from rerank.io import atomic_write
from rerank.metrics import make_metric

SPLIT_FILES = {"val": "val", "test_2016": "test_2016_flickr"}


def training_record(run: str) -> dict:
    """Epochs, best epoch, best greedy val BLEU, training minutes and configuration of one NMT run."""
    with open(os.path.join(run, "history.json"), encoding="utf-8") as f:
        hist = json.load(f)
    with open(os.path.join(run, "config.json"), encoding="utf-8") as f:
        train = json.load(f)["train"]
    return {"epochs": hist["epoch"], "best_epoch": hist.get("best_epoch"), "stopped": hist.get("stopped"),
            "val_bleu_greedy": round(hist["best_bleu"], 2),
            "train_minutes": round(sum(h["seconds"] for h in hist["history"]) / 60, 1),
            "config": {k: train[k] for k in ("size", "flavour", "dropout", "weight_decay", "subword", "subword_size",
                                             "batch_size", "max_epochs", "patience", "seed")}}


def list_record(path: str, refs_path: str) -> dict:
    """1-best BLEU/TER (13a, as sacrebleu) and the oracle BLEU of one n-best list."""
    from rerank.oracles import oracle

    nbest = read_nbest(path)
    refs = read_references([refs_path], nbest.n_sentences)
    firsts = [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]
    return {"bleu": round(sacrebleu.corpus_bleu(firsts, refs).score, 2),
            "ter": round(make_metric("ter").corpus_score(firsts, refs), 2),
            "oracle": round(oracle(nbest, refs, tokenize="13a").score, 2),
            "file": os.path.basename(path)}


def list_scores(recipe_dir: str, raw: str, flavours, nmt_dir: str | None = None, log=print) -> dict:
    """{flavour: {training..., "lists": {"<split>.<n>best": {...}}}} for every list of the run."""
    out = {}
    nbest_dir = os.path.join(recipe_dir, "nbest")
    for flavour in flavours:
        run = os.path.join(nmt_dir or os.path.join(recipe_dir, "nmt"), flavour)
        row = training_record(run) if os.path.exists(os.path.join(run, "history.json")) else {}
        lists = {}
        for name in sorted(os.listdir(nbest_dir)):
            match = re.fullmatch(rf"{flavour}\.(val|test_2016)\.(\d+)best\.gz", name)
            if match:
                log(f"scoring {name}")
                refs = os.path.join(raw, f"{SPLIT_FILES[match.group(1)]}.de.gz")
                lists[f"{match.group(1)}.{match.group(2)}best"] = list_record(os.path.join(nbest_dir, name), refs)
        out[flavour] = {**row, "lists": lists}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rerank.recipes.nmt_scores", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="`rerank recipe multi30k` run directory (with nbest/)")
    ap.add_argument("--raw", required=True, help="Multi30k task1/raw directory (the references)")
    ap.add_argument("--nmt-dir", help="NMT run directories DIR/<flavour> (default: RUN/nmt)")
    ap.add_argument("--flavours", default="weak,regular,optimised", help="(default: %(default)s)")
    ap.add_argument("-o", "--output", help="JSON file (default: stdout)")
    args = ap.parse_args(argv)
    scores = list_scores(args.run, args.raw, args.flavours.split(","), args.nmt_dir,
                         log=lambda msg: print(msg, file=sys.stderr))
    text = json.dumps(scores, indent=1) + "\n"
    if args.output:
        with atomic_write(args.output) as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
