"""What a neural MBR utility adds over chrF MBR: k-best MIRA on val with the NMT features plus one mbr
column, the utility chrF or the cosine of the shipped MLMME model's German sentence embeddings,
scored on test_2016.

Every mbr column is `rerank features --which mbr` of the list itself (the API's `rerank.add_features`,
the same code), with the posterior from `nmt` at T = 1 (the default), computed the same way on the val
and the test list:

- chrF: `--mbr-utility chrf` (exact: every pair of each list);
- mlmme: `--mbr-utility mlmme --mbr-model rerank/data/models/mlmme-small.pt --tgt-lang de` (the cosine
  of the model's unit vectors; exact = aggregate);
- mlmme, two-stage: the same with `--mbr-candidates nmt:5` (the decoder's 5 best by `nmt` are scored,
  the others get their list's lowest candidate value; every hypothesis stays a pseudo-reference) and
  the 0/1 column `mbr_candidate` tuned too, so MIRA may also learn to keep the output among the
  decoder's 5 best.

    python -m rerank.recipes.mbr_neural_study columns VAL.nbest --system mlmme -o VAL.mbr.gz   # one list
    python -m rerank.recipes.mbr_neural_study study --nbest-dir rerank/data/multi30k --out runs/mbr_neural_study \\
        [--flavours optimised,regular,weak] [--nbest 20,50] [--runs 3] [--epochs 60] [--seed 1] [--publish]

`study` does it for every list (flavour x size): the featured val and test lists of each system
(written to OUT/{flavour}.{n}best/{system}.{split}.gz), R MIRA runs per system toward BLEU (seeds
seed..seed+R-1, `rerank.tune`, whose run files are reused when the command is run again), the 1-best
of every run on the test list, the untuned MBR decision (the argmax of each mbr column), and the
significance tests of `rerank.evaluate` on test BLEU and chrF: † better than the NMT 1-best,
‡ better than MIRA on the NMT features, § better than "+ mbr chrF" (two `evaluate` calls with the same
seed, one per second baseline). It writes mbr_neural_study.json (the resolved config, every run's
weights and val and test scores, the timings and the load average) and mbr_neural_study.md
(`report`); `--publish` copies the JSON to docs/results/stronger/mbr_neural_study.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any


from rerank.io import atomic_copy, atomic_write
from rerank.recipes.objective_study import best_rows, corpus_scores, loadavg, mean_sd

logger = logging.getLogger("rerank.recipes.mbr_neural_study")  # also when run as __main__

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
MODEL = os.path.join("rerank", "data", "models", "mlmme-small.pt")  # relative to the repository root
NMT_FEATURES = ["nmt", "nmt_norm", "len"]
# key -> (label, the mbr options of `rerank.add_features` (None: no mbr column), the columns added)
SYSTEMS: dict[str, tuple[str, dict | None, list[str]]] = {
    "nmt": ("MIRA: NMT features", None, []),
    "chrf": ("+ mbr chrF", {"utility": "chrf"}, ["mbr"]),
    "mlmme": ("+ mbr mlmme", {"utility": "mlmme", "model": MODEL}, ["mbr"]),
    "mlmme_nmt5": ("+ mbr mlmme, 5 candidates by nmt", {"utility": "mlmme", "model": MODEL, "candidates": "nmt:5"},
                   ["mbr", "mbr_candidate"]),
}
SPLITS = {"val": "val", "test_2016": "test_2016_flickr"}  # n-best split -> reference file stem
BASELINE = "NMT 1-best"
SECOND_BASELINES = ("nmt", "chrf")  # every system is also tested against these; their marks:
MARKS = {"nmt": "‡", "chrf": "§"}
SECOND_MARK = "‡"  # what rerank.evaluate marks a second baseline with
METRICS = ("bleu", "chrf")
DOCS_JSON = os.path.join(ROOT, "docs", "results", "stronger", "mbr_neural_study.json")


def model_path(path: str) -> str:
    """A relative model path as given, if it exists from here; else relative to the repository root."""
    return path if os.path.isabs(path) or os.path.exists(path) else os.path.join(ROOT, path)


def mbr_columns(nbest, system: str, model: str = MODEL, threads: int | None = 1):
    """The list with the system's mbr columns added (`rerank features --which mbr[,mbr_candidate]` with
    the system's options, posterior from `nmt` at T = 1, target language de); the list itself for a
    system without mbr."""
    import rerank

    _, options, columns = SYSTEMS[system]
    if options is None:
        return nbest
    options = dict(options)
    if "model" in options:
        options["model"] = model_path(model)
    return rerank.add_features(nbest, columns, tgt_lang="de", threads=threads, score_feature="nmt", **options)








def study_list(nbest_dir: str, ref_dir: str, flavour: str, n: int, out: str, args) -> dict:
    """Every system of `SYSTEMS` on one pair of lists (val, test_2016)."""
    import rerank
    from rerank.formats import read_nbest, read_references, write_nbest

    paths = {split: os.path.join(nbest_dir, f"{flavour}.{split}.{n}best.gz") for split in SPLITS}
    ref_paths = {split: os.path.join(ref_dir, f"{stem}.de.gz") for split, stem in SPLITS.items()}
    lists = {split: read_nbest(path) for split, path in paths.items()}
    refs = {split: read_references([ref_paths[split]], lists[split].n_sentences, paths[split]) for split in SPLITS}
    work = os.path.join(out, f"{flavour}.{n}best")
    os.makedirs(work, exist_ok=True)
    timings: dict[str, float] = {}
    baseline = rerank.first_best(lists["test_2016"])
    result: dict = {"val": os.path.relpath(paths["val"]), "test": os.path.relpath(paths["test_2016"]),
                    "refs": {k: os.path.relpath(v) for k, v in ref_paths.items()},
                    "baseline": {split: corpus_scores(rerank.first_best(lists[split]), refs[split]) for split in SPLITS},
                    "systems": {}, "timings": timings}
    outputs: dict[str, list[list[str]]] = {}
    for key, (label, options, columns) in SYSTEMS.items():
        featured = {}
        if options is None:
            featured, tuning_list = lists, paths["val"]
        else:
            start = time.monotonic()
            for split in SPLITS:
                featured[split] = mbr_columns(lists[split], key, args.model)
                write_nbest(featured[split], os.path.join(work, f"{key}.{split}.gz"))
            timings[f"columns {key}"] = time.monotonic() - start
            tuning_list = os.path.join(work, f"{key}.val.gz")
        features = NMT_FEATURES + columns
        start = time.monotonic()
        tuned = rerank.tune(featured["val"], [ref_paths["val"]], tuner="mira", metric="bleu", runs=args.runs,
                            seed=args.seed, epochs=args.epochs, tune_features=tuple(features),
                            output=os.path.join(work, f"{key}.json"), source=tuning_list, events=rerank.TuneEvents(verbose=logger.debug))
        timings[f"tune {key}"] = time.monotonic() - start
        runs = []
        outputs[label] = []
        for run in tuned.runs:
            weights = {f: run.weights.get(f, 0.0) for f in features}
            val_hyps = [featured["val"].hyps[int(r)] for r in best_rows(featured["val"], weights)]
            test_hyps = [featured["test_2016"].hyps[int(r)] for r in best_rows(featured["test_2016"], weights)]
            outputs[label].append(test_hyps)
            with atomic_write(os.path.join(work, f"{key}.test.run{run.run}")) as f:
                f.writelines(h + "\n" for h in test_hyps)
            runs.append({"run": run.run, "seed": run.seed, "objective": run.score, "reused": run.reused,
                         "weights": weights, "val": corpus_scores(val_hyps, refs["val"]),
                         "test": corpus_scores(test_hyps, refs["test_2016"])})
        row: dict[str, Any] = {"label": label, "features": features, "mbr_options": options, "runs": runs}
        if options is not None:  # the untuned MBR decision: each list's hypothesis with the highest mbr value
            test = featured["test_2016"]
            row["decision"] = corpus_scores([test.hyps[int(r)] for r in best_rows(test, {"mbr": 1.0})],
                                            refs["test_2016"])
            candidates = options.get("candidates")
            if candidates:
                row["decision_note"] = f"the argmax of mbr among the candidates ({candidates})"
        result["systems"][key] = row
        logger.info(f"{flavour} {n}-best, {label}: val BLEU " + ", ".join(f"{r['val']['bleu']:.2f}" for r in runs))
    start = time.monotonic()
    tables = {second: rerank.evaluate([ref_paths["test_2016"]], (BASELINE, [baseline]), outputs,
                                      metrics=list(METRICS), ar=args.ar, bootstrap=args.bootstrap, seed=args.eval_seed,
                                      lang="de", second_baseline=SYSTEMS[second][0])
              for second in SECOND_BASELINES}
    timings["eval"] = time.monotonic() - start
    for second, table in tables.items():
        with atomic_write(os.path.join(work, f"eval.vs_{second}.md")) as f:
            f.write(table.to_markdown())
    for row in result["systems"].values():
        row["test_eval"] = {}
        for m in METRICS:
            cells = {second: table.cell(row["label"], m) for second, table in tables.items()}
            first = cells[SECOND_BASELINES[0]]
            marks = first.marks.replace(SECOND_MARK, "") + "".join(
                MARKS[second] for second, c in cells.items() if SECOND_MARK in c.marks)
            row["test_eval"][m] = {"score": first.score, "s_opt": first.s_opt, "marks": marks, "p": first.p,
                                   "bs_p": first.bs_p, **{f"p_vs_{second}": c.p2 for second, c in cells.items()},
                                   **{f"bs_p_vs_{second}": c.bs_p2 for second, c in cells.items()}}
    result["signatures"] = dict(tables[SECOND_BASELINES[0]].table.signatures)
    return result


def report(study: dict) -> str:
    """One markdown table: per list and system, val BLEU, test BLEU and chrF with their marks, the test
    length ratio (mean ± sd over runs), and the untuned MBR decision's test BLEU and chrF; a line saying
    what the marks mean and one with the timings and the load."""
    def cell(values: Sequence[float], digits: int = 2) -> str:
        m = mean_sd(values)
        return f"{m['mean']:.{digits}f} ± {m['sd']:.{digits}f}"

    lines = ["| list | system | val BLEU | test BLEU | test chrF | test length ratio | MBR decision: test BLEU / chrF |",
             "|---|---|---|---|---|---|---|"]
    for key, res in study["lists"].items():
        b = res["baseline"]
        lines.append(f"| {key} | {BASELINE} | {b['val']['bleu']:.2f} | {b['test_2016']['bleu']:.2f} | "
                     f"{b['test_2016']['chrf']:.2f} | {b['test_2016']['ratio']:.3f} |  |")
        for row in res["systems"].values():
            runs = row["runs"]
            test = []
            for m in METRICS:
                marks = row["test_eval"][m]["marks"]
                test.append(cell([r["test"][m] for r in runs]) + (f" {marks}" if marks else ""))
            decision = row.get("decision")
            lines.append(f"| {key} | {row['label']} | {cell([r['val']['bleu'] for r in runs])} | " + " | ".join(test)
                         + f" | {cell([r['test']['ratio'] for r in runs], 3)} | "
                         + (f"{decision['bleu']:.2f} / {decision['chrf']:.2f}" if decision else "") + " |")
    config = study["config"]
    ev = config["eval"]
    lines += ["", f"Means ± standard deviations over {config['runs']} MIRA runs toward BLEU (seeds "
              f"{', '.join(map(str, config['seeds']))}, {config['epochs']} epochs). Significantly better (p < "
              f"{ev['alpha']}, approximate randomisation with {ev['ar']} trials and the paired bootstrap with "
              f"{ev['bootstrap']} resamples both, each system's runs averaged per sentence) than: † the {BASELINE}, "
              + ", ".join(f"{mark} {name}" for mark, name in ev["second_baselines"].items()) + "."]
    machine = study.get("machine")
    if machine:
        load = [" ".join((machine[k] or "?").split()[:3]) for k in ("loadavg_before", "loadavg_after")]
        lines.append(f"The whole study took {machine['seconds'] / 60:.1f} minutes (wall clock, one thread, "
                     f"OMP_NUM_THREADS={config.get('threads')}) on {machine['cpus']} CPU cores; load average "
                     f"(1, 5, 15 minutes) {load[0]} before, {load[1]} after.")
    return "\n".join(lines) + "\n"


def run_study(args, command: str) -> dict:
    """The study over every list the arguments name (see the module doc); the study dict."""
    load_before = loadavg()
    start = time.monotonic()
    config = {"nbest_dir": args.nbest_dir, "ref_dir": args.ref_dir or args.nbest_dir, "flavours": args.flavours,
              "nbest": args.nbest, "runs": args.runs, "epochs": args.epochs, "seed": args.seed,
              "seeds": list(range(args.seed, args.seed + args.runs)), "tuner": "mira", "metric": "bleu",
              "C": 0.01, "decay": 0.999, "tokenize": "13a", "model": args.model,
              "mbr": {"score_feature": "nmt", "temperature": 1.0, "method": "exact", "tgt_lang": "de"},
              "systems": {key: {"label": label, "features": NMT_FEATURES + columns, "mbr_options": options}
                          for key, (label, options, columns) in SYSTEMS.items()},
              "eval": {"metrics": list(METRICS), "ar": args.ar, "bootstrap": args.bootstrap, "seed": args.eval_seed,
                       "alpha": 0.05, "baseline": BASELINE,
                       "second_baselines": {MARKS[k]: SYSTEMS[k][0] for k in SECOND_BASELINES}},
              "threads": os.environ.get("OMP_NUM_THREADS")}
    study: dict[str, Any] = {"command": command, "config": config, "lists": {}}
    for n in (int(x) for x in args.nbest.split(",")):
        for flavour in args.flavours.split(","):
            study["lists"][f"{flavour} {n}-best"] = study_list(args.nbest_dir, args.ref_dir or args.nbest_dir,
                                                               flavour, n, args.out, args)
            logger.info(f"{flavour} {n}-best: done")
    study["machine"] = {"seconds": time.monotonic() - start, "loadavg_before": load_before, "loadavg_after": loadavg(),
                        "cpus": os.cpu_count()}
    return study


def main(argv=None) -> int:
    """The command line of this module, with the pipeline's log lines (INFO records) on stderr."""
    from rerank.cliargs import stderr_log

    with stderr_log(logging.INFO):
        return _main(argv)


def _main(argv=None) -> int:
    from rerank.cliargs import positive_int
    from rerank.errors import InputError

    ap = argparse.ArgumentParser(prog="python -m rerank.recipes.mbr_neural_study", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    co = sub.add_parser("columns", help="add one system's mbr columns to one n-best list")
    co.add_argument("nbest", help="the n-best list (with an nmt column)")
    co.add_argument("--system", required=True, choices=[k for k, v in SYSTEMS.items() if v[1] is not None])
    co.add_argument("-o", "--output", required=True, help="the list with the columns (.gz: gzip'd)")
    co.add_argument("--model", default=MODEL, help="the MLMME model of the mlmme systems (default: %(default)s)")
    st = sub.add_parser("study", help="tune every system on every list and score the runs on test")
    st.add_argument("--nbest-dir", default=os.path.join("rerank", "data", "multi30k"),
                    help="{flavour}.{val,test_2016}.{n}best.gz (default: %(default)s)")
    st.add_argument("--ref-dir", default=None, help="val.de.gz, test_2016_flickr.de.gz (default: --nbest-dir)")
    st.add_argument("--out", required=True, help="output folder (mbr_neural_study.json, .md, the lists and runs)")
    st.add_argument("--flavours", default="optimised,regular,weak", help="default: %(default)s")
    st.add_argument("--nbest", default="20", help="list sizes (default: %(default)s)")
    st.add_argument("--model", default=MODEL, help="the MLMME model of the mlmme systems (default: %(default)s)")
    st.add_argument("--runs", type=positive_int, default=3, help="MIRA runs per system (default: %(default)s)")
    st.add_argument("--epochs", type=positive_int, default=60, help="MIRA epochs (default: %(default)s)")
    st.add_argument("--seed", type=int, default=1, help="seed of the first run (default: %(default)s)")
    st.add_argument("--ar", type=positive_int, default=10000, help="randomisation trials (default: %(default)s)")
    st.add_argument("--bootstrap", type=positive_int, default=1000, help="bootstrap resamples (default: %(default)s)")
    st.add_argument("--eval-seed", type=int, default=12345, help="seed of the tests, rerank eval's (default: %(default)s)")
    st.add_argument("--publish", action="store_true", help="copy the JSON to docs/results/stronger/mbr_neural_study.json")
    args = ap.parse_args(argv)
    try:
        if args.command == "columns":
            from rerank.formats import read_nbest, write_nbest

            write_nbest(mbr_columns(read_nbest(args.nbest), args.system, args.model), args.output)
            return 0
        command = "python -m rerank.recipes.mbr_neural_study " + " ".join(sys.argv[1:] if argv is None else argv)
        study = run_study(args, command)
    except InputError as exc:
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    with atomic_write(os.path.join(args.out, "mbr_neural_study.json")) as f:
        json.dump(study, f, indent=1)
    with atomic_write(os.path.join(args.out, "mbr_neural_study.md")) as f:
        f.write(report(study))
    print(report(study))
    if args.publish:
        atomic_copy(os.path.join(args.out, "mbr_neural_study.json"), DOCS_JSON)
    return 0


if __name__ == "__main__":
    sys.exit(main())
