"""Which tuning objective carries over to test: k-best MIRA tuned on val toward corpus chrF, toward the
mean sentence chrF or toward the mean sentence BLEU+1 of the chosen hypotheses, scored on test_2016.

The two sentence-level objectives are n-best columns (`rerank tune --metric column:NAME`): each
hypothesis of the val list gets its sentence chrF (sacrebleu's `sentence_chrf` against the val
reference, in points) and its sentence BLEU+1 (`rerank.metrics.bleu.sentence_bleu_plus1` of
`hypothesis_stats`, in points: the BLEU+1 the tuners use), written as score files (`scores`, one
number per n-best line) and joined with `rerank add-feature`. Each objective's column is joined to
its own copy of the val list: a column that is not the objective would be a feature, and its weight
(0 when it is not tuned) would make the weights unusable on the test list, which lacks the column.

    python -m rerank.recipes.objective_study scores VAL.nbest -r VAL.ref --out DIR      # DIR/chrf_sent.txt, bleu1_sent.txt
    python -m rerank.recipes.objective_study study --nbest-dir rerank/data/multi30k --out runs/objective_study \\
        [--flavours optimised,regular,weak] [--nbest 20,50] [--runs 3] [--epochs 60] [--seed 1] [--publish]

`study` does it all for every list (flavour x size) and feature set (`SYSTEMS`): the score files,
the joins, R MIRA runs per objective (seeds seed..seed+R-1, through `rerank.tune`, whose run files
are reused when the command is run again), the 1-best of every run on the test list
(`rerank.apply`'s ranking), and the significance tests of `rerank.evaluate` on test chrF and BLEU:
† better than the NMT 1-best, ‡ better than MIRA tuned toward corpus chrF, § better than MIRA tuned
toward sentence BLEU+1 (two `evaluate` calls with the same seed, one per second baseline). It writes
objective_study.json (the resolved config, every run's val and test scores, the timings and the
load average) and objective_study.md (`report`); `--publish` copies the JSON to
docs/results/stronger/objective_study.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from rerank.io import atomic_copy, atomic_write

logger = logging.getLogger("rerank.recipes.objective_study")  # also when run as __main__

OBJECTIVES = {  # key (the column's name for the column objectives) -> (--metric, label)
    "chrf": ("chrf", "corpus chrF"),
    "chrf_sent": ("column:chrf_sent", "sentence chrF"),
    "bleu1_sent": ("column:bleu1_sent", "sentence BLEU+1"),
}
COLUMNS = ("chrf_sent", "bleu1_sent")
SYSTEMS = {  # the feature sets of stronger.md's "MIRA: NMT features" and "+ channel + lm"
    "MIRA: NMT features": ["nmt", "nmt_norm", "len"],
    "+ channel + lm": ["nmt", "nmt_norm", "len", "channel", "channel_norm", "lm", "lm_norm"],
}
SPLITS = {"val": "val", "test_2016": "test_2016_flickr"}  # n-best split -> reference file stem
BASELINE = "NMT 1-best"
# the systems every other one is also tested against, and the mark of "significantly better than it"
SECOND_BASELINES = ("chrf", "bleu1_sent")
MARKS = {"chrf": "‡", "bleu1_sent": "§"}
SECOND_MARK = "‡"  # what rerank.evaluate marks a second baseline with
DOCS_JSON = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "docs", "results",
                         "stronger", "objective_study.json")


def sentence_chrf(hyps: Sequence[str], sentence_of_hyp: Sequence[int], refs: Sequence[Sequence[str]]) -> np.ndarray:
    """sacrebleu's sentence chrF (chrF2, 6 character orders, no word orders) of every hypothesis
    against its sentence's references, in points; each distinct (sentence, hypothesis) pair is
    scored once."""
    from sacrebleu.metrics import CHRF

    chrf = CHRF()
    seen: dict[tuple[int, str], float] = {}
    out = np.empty(len(hyps))
    for row, (hyp, sentence) in enumerate(zip(hyps, sentence_of_hyp)):
        key = (int(sentence), hyp)
        if key not in seen:
            seen[key] = chrf.sentence_score(hyp, [stream[int(sentence)] for stream in refs]).score
        out[row] = seen[key]
    return out


def sentence_bleu1(hyps: Sequence[str], offsets: np.ndarray, refs: Sequence[Sequence[str]],
                   tokenize: str = "13a") -> np.ndarray:
    """Sentence BLEU+1 of every hypothesis, in points, as the tuners compute it (MIRA's and PRO's
    sentence-level BLEU, the oracle's): `sentence_bleu_plus1` of the toolkit's BLEU statistics."""
    from rerank.metrics.bleu import hypothesis_stats, sentence_bleu_plus1

    return 100.0 * sentence_bleu_plus1(hypothesis_stats(hyps, offsets, refs, tokenize))


def objective_columns(nbest, refs: Sequence[Sequence[str]], tokenize: str = "13a") -> dict[str, np.ndarray]:
    """{column name: one value per hypothesis} of the two sentence-level objectives (`COLUMNS`)."""
    return {"chrf_sent": sentence_chrf(nbest.hyps, nbest.sentence_of_hyp, refs),
            "bleu1_sent": sentence_bleu1(nbest.hyps, nbest.offsets, refs, tokenize)}


def write_scores(nbest_path: str, ref_paths: Sequence[str], out_dir: str, tokenize: str = "13a") -> dict[str, str]:
    """Write DIR/chrf_sent.txt and DIR/bleu1_sent.txt for the list at `nbest_path` (one value per
    n-best line, in the list's order, as `rerank add-feature --scores` reads them; `repr`, so the
    joined column holds the exact value). Returns {column: path}."""
    from rerank.formats import read_nbest, read_references

    nbest = read_nbest(nbest_path)
    refs = read_references(list(ref_paths), nbest.n_sentences, nbest_path)
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name, values in objective_columns(nbest, refs, tokenize).items():
        paths[name] = os.path.join(out_dir, f"{name}.txt")
        with atomic_write(paths[name]) as f:
            f.writelines(repr(float(v)) + "\n" for v in values)
    return paths


def read_scores(path: str) -> np.ndarray:
    """A score file of `write_scores`, one float per line."""
    with open(path, encoding="utf-8") as f:
        return np.array([float(line) for line in f])


def join_column(nbest_path: str, name: str, scores_path: str, out_path: str) -> str:
    """`rerank add-feature NBEST --name NAME --scores FILE -o OUT` (the command line, as the docs run it)."""
    subprocess.run([sys.executable, "-m", "rerank", "add-feature", nbest_path, "--name", name, "--scores", scores_path,
                    "-o", out_path], check=True)
    return out_path


def corpus_scores(hyps: list[str], refs: Sequence[Sequence[str]]) -> dict[str, float]:
    """sacrebleu's corpus chrF and BLEU (13a) of one output, and its length ratio (BLEU's)."""
    import sacrebleu

    streams = [list(stream) for stream in refs]
    bleu = sacrebleu.corpus_bleu(hyps, streams)
    return {"chrf": sacrebleu.corpus_chrf(hyps, streams).score, "bleu": bleu.score, "ratio": bleu.sys_len / bleu.ref_len}


def mean_sd(values: Sequence[float]) -> dict[str, float]:
    """Mean and the standard deviation over runs (n - 1 in the denominator, as rerank eval's s_opt)."""
    values = [float(v) for v in values]
    return {"mean": float(np.mean(values)), "sd": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0}


def study_list(nbest_dir: str, ref_dir: str, flavour: str, n: int, out: str, args) -> dict:
    """The three objectives x every feature set of `SYSTEMS` on one pair of lists (val, test_2016)."""
    import rerank
    from rerank.formats import read_nbest, read_references

    val_path = os.path.join(nbest_dir, f"{flavour}.val.{n}best.gz")
    test_path = os.path.join(nbest_dir, f"{flavour}.test_2016.{n}best.gz")
    ref_paths = {split: os.path.join(ref_dir, f"{stem}.de.gz") for split, stem in SPLITS.items()}
    val, test = read_nbest(val_path), read_nbest(test_path)
    refs = {"val": read_references([ref_paths["val"]], val.n_sentences, val_path),
            "test_2016": read_references([ref_paths["test_2016"]], test.n_sentences, test_path)}
    work = os.path.join(out, f"{flavour}.{n}best")
    timings: dict[str, float] = {}
    start = time.monotonic()
    scores = write_scores(val_path, [ref_paths["val"]], work)
    timings["scores"] = time.monotonic() - start
    start = time.monotonic()
    tuning_lists = {"chrf": val_path}
    for name in COLUMNS:
        tuning_lists[name] = join_column(val_path, name, scores[name], os.path.join(work, f"val.{name}.gz"))
    timings["add_feature"] = time.monotonic() - start
    columns = {name: read_scores(path) for name, path in scores.items()}
    baseline = rerank.first_best(test)
    result: dict = {"val": os.path.relpath(val_path), "test": os.path.relpath(test_path),
                    "refs": {k: os.path.relpath(v) for k, v in ref_paths.items()},
                    "baseline": {"test": corpus_scores(baseline, refs["test_2016"]),
                                 "val": corpus_scores(rerank.first_best(val), refs["val"])},
                    "systems": {}, "timings": timings}
    for system, features in SYSTEMS.items():
        slug = "nmt" if system == "MIRA: NMT features" else "channel_lm"
        os.makedirs(os.path.join(work, slug), exist_ok=True)   # the run files' folder (rerank.tune writes, never makes, it)
        outputs: dict[str, list[list[str]]] = {}
        rows: dict[str, dict] = {}
        for key, (metric, label) in OBJECTIVES.items():
            start = time.monotonic()
            tuned = rerank.tune(tuning_lists[key], None if key in COLUMNS else [ref_paths["val"]], tuner="mira",
                                metric=metric, runs=args.runs, seed=args.seed, epochs=args.epochs,
                                tune_features=tuple(features), output=os.path.join(work, slug, f"{key}.json"),
                                source=tuning_lists[key], events=rerank.TuneEvents(verbose=logger.debug))
            timings[f"tune {slug} {key}"] = time.monotonic() - start
            run_rows = []
            outputs[label] = []
            for run in tuned.runs:
                weights = {f: run.weights.get(f, 0.0) for f in features}
                val_rows = best_rows(val, weights)
                val_hyps = [val.hyps[int(r)] for r in val_rows]
                test_hyps = [test.hyps[int(r)] for r in best_rows(test, weights)]
                outputs[label].append(test_hyps)
                with atomic_write(os.path.join(work, slug, f"{key}.test.run{run.run}")) as f:
                    f.writelines(h + "\n" for h in test_hyps)
                run_rows.append({"run": run.run, "seed": run.seed, "objective": run.score,
                                 "reused": run.reused, "weights": weights,
                                 "val": {**corpus_scores(val_hyps, refs["val"]),
                                         **{name: float(columns[name][val_rows].mean()) for name in COLUMNS}},
                                 "test": corpus_scores(test_hyps, refs["test_2016"])})
            rows[key] = {"metric": metric, "label": label, "runs": run_rows}
            logger.info(f"{flavour} {n}-best, {system}, {label}: val objective "
                        + ", ".join(f"{r['objective']:.2f}" for r in run_rows))
        start = time.monotonic()
        tables = {second: rerank.evaluate([ref_paths["test_2016"]], (BASELINE, [baseline]), outputs,
                                          metrics=["chrf", "bleu"], ar=args.ar, bootstrap=args.bootstrap,
                                          seed=args.eval_seed, lang="de", second_baseline=OBJECTIVES[second][1])
                  for second in SECOND_BASELINES}
        timings[f"eval {slug}"] = time.monotonic() - start
        for second, table in tables.items():
            with atomic_write(os.path.join(work, slug, f"eval.vs_{second}.md")) as f:
                f.write(table.to_markdown())
        for row in rows.values():
            row["test_eval"] = {}
            for m in ("chrf", "bleu"):
                cells = {second: table.cell(row["label"], m) for second, table in tables.items()}
                first = cells["chrf"]
                marks = first.marks.replace(SECOND_MARK, "") + "".join(
                    MARKS[second] for second, c in cells.items() if SECOND_MARK in c.marks)
                row["test_eval"][m] = {"score": first.score, "s_opt": first.s_opt, "marks": marks,
                                       "p": first.p, "bs_p": first.bs_p,
                                       **{f"p_vs_{second}": c.p2 for second, c in cells.items()},
                                       **{f"bs_p_vs_{second}": c.bs_p2 for second, c in cells.items()}}
        result["signatures"] = dict(tables["chrf"].table.signatures)
        result["systems"][system] = {"features": features, "objectives": rows}
    return result


def best_rows(nbest, weights: dict[str, float]) -> np.ndarray:
    from rerank.weights import best_rows, weight_vector

    return best_rows(nbest, weight_vector(weights, nbest.feature_names, warn=lambda _: None))


def report(study: dict) -> str:
    """Markdown tables, one per feature set: per list and objective, the val objective's own value,
    val chrF and BLEU, test chrF and BLEU with their marks, and the test length ratio (mean ± sd over
    runs); a line saying what the marks mean."""
    def cell(values: Sequence[float], digits: int = 2) -> str:
        m = mean_sd(values)
        return f"{m['mean']:.{digits}f} ± {m['sd']:.{digits}f}"

    lines = []
    for system in SYSTEMS:
        lines += [f"{system} ({', '.join(SYSTEMS[system])}):", "",
                  "| list | tuned toward | val objective | val chrF | val BLEU | test chrF | test BLEU | test length ratio |",
                  "|---|---|---|---|---|---|---|---|"]
        for key, res in study["lists"].items():
            b = res["baseline"]
            lines.append(f"| {key} | ({BASELINE}) |  | {b['val']['chrf']:.2f} | {b['val']['bleu']:.2f} | "
                         f"{b['test']['chrf']:.2f} | {b['test']['bleu']:.2f} | {b['test']['ratio']:.3f} |")
            for row in res["systems"][system]["objectives"].values():
                runs = row["runs"]
                test = []
                for m in ("chrf", "bleu"):
                    marks = row["test_eval"][m]["marks"]
                    test.append(cell([r["test"][m] for r in runs]) + (f" {marks}" if marks else ""))
                lines.append(f"| {key} | {row['label']} | {cell([r['objective'] for r in runs])} | "
                             f"{cell([r['val']['chrf'] for r in runs])} | {cell([r['val']['bleu'] for r in runs])} | "
                             + " | ".join(test) + f" | {cell([r['test']['ratio'] for r in runs], 3)} |")
        lines.append("")
    ev = study["config"]["eval"]
    runs = study["config"]["runs"]
    lines.append(f"Means ± standard deviations over {runs} MIRA runs (seeds {', '.join(map(str, study['config']['seeds']))}). "
                 f"Significantly better (p < {study['config']['eval'].get('alpha', 0.05)}, approximate randomisation "
                 f"with {ev['ar']} trials and the paired bootstrap with {ev['bootstrap']} resamples both, each "
                 f"system's runs averaged per sentence) than: † the {BASELINE}, "
                 + ", ".join(f"{mark} MIRA tuned toward {name}" for mark, name in ev["second_baselines"].items()) + ".")
    machine = study.get("machine")
    if machine:
        load = [" ".join((machine[k] or "?").split()[:3]) for k in ("loadavg_before", "loadavg_after")]
        lines.append(f"The whole study took {machine['seconds'] / 60:.1f} minutes (wall clock, one thread, "
                     f"OMP_NUM_THREADS={study['config'].get('threads')}) on {machine['cpus']} CPU cores; load average "
                     f"(1, 5, 15 minutes) {load[0]} before, {load[1]} after.")
    return "\n".join(lines) + "\n"


def run_study(args, command: str) -> dict:
    """The study over every list the arguments name (see the module doc); the study dict."""
    load_before = loadavg()
    start = time.monotonic()
    config = {"nbest_dir": args.nbest_dir, "ref_dir": args.ref_dir or args.nbest_dir, "flavours": args.flavours,
              "nbest": args.nbest, "runs": args.runs, "epochs": args.epochs, "seed": args.seed,
              "seeds": list(range(args.seed, args.seed + args.runs)), "tuner": "mira", "C": 0.01, "decay": 0.999,
              "tokenize": "13a", "objectives": {k: v[0] for k, v in OBJECTIVES.items()}, "systems": SYSTEMS,
              "eval": {"metrics": ["chrf", "bleu"], "ar": args.ar, "bootstrap": args.bootstrap, "seed": args.eval_seed,
                       "alpha": 0.05, "baseline": BASELINE,
                       "second_baselines": {MARKS[k]: OBJECTIVES[k][1] for k in SECOND_BASELINES}},
              "threads": os.environ.get("OMP_NUM_THREADS")}
    study: dict[str, Any] = {"command": command, "config": config, "lists": {}}
    for flavour in args.flavours.split(","):
        for n in (int(x) for x in args.nbest.split(",")):
            study["lists"][f"{flavour} {n}-best"] = study_list(args.nbest_dir, args.ref_dir or args.nbest_dir, flavour,
                                                               n, args.out, args)
            logger.info(f"{flavour} {n}-best: done")
    study["machine"] = {"seconds": time.monotonic() - start, "loadavg_before": load_before, "loadavg_after": loadavg(),
                        "cpus": os.cpu_count()}
    return study


def loadavg() -> str | None:
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def main(argv=None) -> int:
    """The command line of this module, with the pipeline's log lines (INFO records) on stderr."""
    from rerank.cliargs import stderr_log

    with stderr_log(logging.INFO):
        return _main(argv)


def _main(argv=None) -> int:
    from rerank.cliargs import positive_int
    from rerank.errors import InputError

    ap = argparse.ArgumentParser(prog="python -m rerank.recipes.objective_study", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sc = sub.add_parser("scores", help="write the sentence chrF and BLEU+1 score files of one n-best list")
    sc.add_argument("nbest", help="the n-best list (the val list)")
    sc.add_argument("-r", "--ref", action="append", required=True, help="its reference file (repeat for several)")
    sc.add_argument("--out", required=True, help="output folder (chrf_sent.txt, bleu1_sent.txt)")
    sc.add_argument("--tokenize", default="13a", help="BLEU tokeniser of BLEU+1 (default: %(default)s)")
    st = sub.add_parser("study", help="tune toward each objective on every list and score the runs on test")
    st.add_argument("--nbest-dir", default=os.path.join("rerank", "data", "multi30k"),
                    help="{flavour}.{val,test_2016}.{n}best.gz (default: %(default)s)")
    st.add_argument("--ref-dir", default=None, help="val.de.gz, test_2016_flickr.de.gz (default: --nbest-dir)")
    st.add_argument("--out", required=True, help="output folder (objective_study.json, .md, the runs)")
    st.add_argument("--flavours", default="optimised,regular,weak", help="default: %(default)s")
    st.add_argument("--nbest", default="20,50", help="list sizes (default: %(default)s)")
    st.add_argument("--runs", type=positive_int, default=3, help="MIRA runs per objective (default: %(default)s)")
    st.add_argument("--epochs", type=positive_int, default=60, help="MIRA epochs (default: %(default)s)")
    st.add_argument("--seed", type=int, default=1, help="seed of the first run (default: %(default)s)")
    st.add_argument("--ar", type=positive_int, default=10000, help="randomisation trials (default: %(default)s)")
    st.add_argument("--bootstrap", type=positive_int, default=1000, help="bootstrap resamples (default: %(default)s)")
    st.add_argument("--eval-seed", type=int, default=12345, help="seed of the tests, rerank eval's (default: %(default)s)")
    st.add_argument("--publish", action="store_true", help="copy the JSON to docs/results/stronger/objective_study.json")
    args = ap.parse_args(argv)
    try:
        if args.command == "scores":
            for path in write_scores(args.nbest, args.ref, args.out, args.tokenize).values():
                print(path)
            return 0
        command = "python -m rerank.recipes.objective_study " + " ".join(sys.argv[1:] if argv is None else argv)
        study = run_study(args, command)
    except InputError as exc:
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    with atomic_write(os.path.join(args.out, "objective_study.json")) as f:
        json.dump(study, f, indent=1)
    with atomic_write(os.path.join(args.out, "objective_study.md")) as f:
        f.write(report(study))
    print(report(study))
    if args.publish:
        atomic_copy(os.path.join(args.out, "objective_study.json"), DOCS_JSON)
    return 0


if __name__ == "__main__":
    sys.exit(main())
