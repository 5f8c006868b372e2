"""Which mbr feature works on which NMT model: a sweep over the posterior temperature and the utility.

For every list of a finished `recipes.stronger` run (its featured val and test_2016 lists), the mbr
feature is recomputed with each VARIANT and tuned next to the NMT features by k-best MIRA
(R runs, as the stronger reranker). Reported per list and variant: the mean tuned val BLEU, the
mean test BLEU and its gain over MIRA on the NMT features alone, the test length ratio, and the
untuned MBR decision (the argmax of the feature) with its length ratio, which shows how far
sentence-level utilities pull MBR towards short hypotheses.

    python -m rerank.recipes.mbr_study --stronger-dir runs/repro/stronger --text-dir DATA/task1/raw \
        --out runs/mbr-study [--publish]

`--publish` copies the JSON to docs/results/stronger/mbr_study.json and re-renders the pages.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

import numpy as np
import sacrebleu

from rerank.recipes.demo import BASE_FEATURES
from rerank.recipes.experiment import leading_references, mira, rerank, tune_system
from rerank.recipes.stronger import SPLIT_FILES
from rerank.io import atomic_copy, atomic_write

logger = logging.getLogger(__name__)

VARIANTS = {  # name -> MBROptions fields of mbr_scores; "T=1" is the stronger reranker's own mbr column
    "T=1": {}, "T=0.25": {"temperature": 0.25}, "T=0.5": {"temperature": 0.5}, "T=2": {"temperature": 2.0},
    "chrF": {"utility": "chrf"},
}
DOCS_JSON = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "docs", "results",
                         "stronger", "mbr_study.json")


def variant_columns(nbest, variants: dict) -> dict[str, np.ndarray]:
    """The mbr column of every variant under the NMT posterior (`nmt` scores)."""
    from rerank.consensus import MBROptions, mbr_scores

    return {name: mbr_scores(nbest, nbest.column("nmt"), MBROptions(**options)) for name, options in variants.items()}


def bleu_and_ratio(hyps: list[str], refs) -> tuple[float, float]:
    score = sacrebleu.corpus_bleu(hyps, refs)
    return score.score, score.sys_len / score.ref_len


def study_list(dev, dev_refs, test, test_refs, variants: dict, runs: int, seed: int, epochs: int) -> dict:
    """The sweep on one pair of lists; see the module doc."""
    def tuned(dev_list, test_list, features):
        weights, dev_scores = tune_system(dev_list, dev_refs, features, mira(runs, seed, epochs, "13a"))
        scored = [bleu_and_ratio(rerank(test_list, w), test_refs) for w in weights]
        return {"val_bleu": float(np.mean(dev_scores)), "test_bleu": float(np.mean([s for s, _ in scored])),
                "test_ratio": float(np.mean([r for _, r in scored]))}

    control = tuned(dev, test, BASE_FEATURES)
    result = {"control": control, "variants": {}}
    dev_cols, test_cols = variant_columns(dev, variants), variant_columns(test, variants)
    for name in variants:
        d, t = dev.with_feature("mbr_v", dev_cols[name]), test.with_feature("mbr_v", test_cols[name])
        row = tuned(d, t, BASE_FEATURES + ["mbr_v"])
        row["gain"] = row["test_bleu"] - control["test_bleu"]
        row["decision_bleu"], row["decision_ratio"] = bleu_and_ratio(rerank(t, {"mbr_v": 1.0}), test_refs)
        result["variants"][name] = row
    return result


def report(study: dict) -> str:
    """Markdown table: one row per list and variant."""
    lines = ["| list | mbr variant | val BLEU | test BLEU | Δ over MIRA: NMT features | test length ratio | "
             "MBR decision BLEU (ratio) |", "|---|---|---|---|---|---|---|"]
    for key, res in study["lists"].items():
        c = res["control"]
        lines.append(f"| {key} | none (MIRA: NMT features) | {c['val_bleu']:.2f} | {c['test_bleu']:.2f} |  | "
                     f"{c['test_ratio']:.3f} |  |")
        for name, v in res["variants"].items():
            lines.append(f"| {key} | {name} | {v['val_bleu']:.2f} | {v['test_bleu']:.2f} | {v['gain']:+.2f} | "
                         f"{v['test_ratio']:.3f} | {v['decision_bleu']:.2f} ({v['decision_ratio']:.3f}) |")
    return "\n".join(lines)


def run(args, command: str) -> dict:
    """The sweep over every list the arguments name; the study dict (see the module doc)."""
    from rerank.formats import read_nbest

    study = {"command": command, "runs": args.runs, "epochs": args.epochs, "seed": args.seed, "lists": {}}
    for flavour in args.flavours.split(","):
        for n in args.nbest.split(","):
            features = os.path.join(args.stronger_dir, "features")
            lists = {split: read_nbest(os.path.join(features, f"{flavour}.{split}.{n}best.feat.gz"))
                     for split in SPLIT_FILES}
            refs = {split: leading_references(os.path.join(args.text_dir, f"{stem}.de.gz"), lists[split].n_sentences)
                    for split, stem in SPLIT_FILES.items()}
            key = f"{flavour} {n}-best"
            study["lists"][key] = study_list(lists["val"], refs["val"], lists["test_2016"], refs["test_2016"],
                                             VARIANTS, args.runs, args.seed, args.epochs)
            logger.info(f"{key}: done")
    return study


def main(argv=None) -> int:
    """The command line of this module, with the pipeline's log lines (INFO records) on stderr."""
    from rerank.cliargs import stderr_log

    with stderr_log(logging.INFO):
        return _main(argv)


def _main(argv=None) -> int:
    from rerank.cliargs import positive_int
    from rerank.errors import InputError

    ap = argparse.ArgumentParser(prog="python -m rerank.recipes.mbr_study", description=__doc__.split("\n\n")[0])
    ap.add_argument("--stronger-dir", required=True, help="a finished `recipes.stronger` run (its features/ lists)")
    ap.add_argument("--text-dir", required=True, help="Multi30k task1/raw (val.de.gz, test_2016_flickr.de.gz)")
    ap.add_argument("--out", required=True, help="output directory (mbr_study.json, mbr_study.md)")
    ap.add_argument("--flavours", default="optimised,regular,weak", help="default: %(default)s")
    ap.add_argument("--nbest", default="20,50", help="list sizes (default: %(default)s)")
    ap.add_argument("--runs", type=positive_int, default=3, help="MIRA runs per system (default: %(default)s)")
    ap.add_argument("--epochs", type=positive_int, default=60, help="MIRA epochs (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the first run (default: %(default)s)")
    ap.add_argument("--publish", action="store_true", help="copy the JSON into docs/results/stronger and re-render")
    args = ap.parse_args(argv)
    command = "python -m rerank.recipes.mbr_study " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        study = run(args, command)
    except InputError as exc:
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    with atomic_write(os.path.join(args.out, "mbr_study.json")) as f:
        json.dump(study, f, indent=1)
    with atomic_write(os.path.join(args.out, "mbr_study.md")) as f:
        f.write(report(study) + "\n")
    print(report(study))
    if args.publish:
        from rerank.recipes.results_docs import write_docs

        atomic_copy(os.path.join(args.out, "mbr_study.json"), DOCS_JSON)
        write_docs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
