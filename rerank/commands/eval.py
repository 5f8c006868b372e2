"""`rerank eval`: BLEU/METEOR/TER/chrF with MultEval-style significance tables."""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

from rerank.cliargs import add_quiet, nonnegative_int, positive_int, probability, show_progress
from rerank.errors import InputError
from rerank.io import atomic_write, output_group, read_lines
from rerank.metrics import METRIC_NAMES
from rerank.outputs import check_outputs

FORMATS = ("table", "markdown", "latex", "csv", "json")
EXTENSIONS = {".md": "markdown", ".markdown": "markdown", ".tex": "latex", ".csv": "csv", ".json": "json"}
LANGUAGES = ("en", "de", "fr", "es", "cs")

EPILOG = """\
systems: each SYSTEM is [NAME=]PATH. PATH is one hypothesis file (one run), or a glob in quotes
('sys.run*'), or a prefix whose optimizer runs are PATH.run1, PATH.run2, ... (any PATH.run* files).
Every system needs as many runs as the baseline; a system (or baseline) given as a single
file is deterministic and stands for every run (e.g. a decoder 1-best against 3 tuning runs).

columns per metric: mean score over runs, then s_sel/s_opt/p: s_sel = bootstrap std dev of the
test-set score (mean over runs), s_opt = std dev over runs, p = approximate randomisation against
the baseline (stratified over runs when R > 1). \u2020 = significantly better than the baseline,
\u2021 = significantly better than --second-baseline (p < --alpha); "better" is the direction of the
difference the test judges (statistics pooled over runs and sentences), which with several runs can
differ from the order of the mean scores. TER is lower-is-better; its marks and deltas follow that
direction.

examples:
  rerank eval -r test.de -b base.de rerank.de --metrics bleu,meteor,ter --lang de \\
      --meteor-modules exact,stem -o table.md
  rerank eval -r test.en -b 'base.run*' mlmme='mlmme.run*' vse='vse.run*' --second-baseline vse --plot d.png
  rerank eval -r test.de -b base.de --nbest test.nbest --weights tuned.weights --to latex
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "eval", help="score systems with BLEU/METEOR/TER/chrF and significance tests",
        description="Score a baseline and systems against references (BLEU, chrF, TER through sacrebleu; "
        "METEOR 1.5 natively or through the Meteor jar) and report MultEval-style tables with approximate "
        "randomisation p-values, optimizer-instability estimates and paired-bootstrap intervals.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-r", "--ref", action="append", required=True, metavar="REF", help="reference file (repeat for several)")
    p.add_argument("-b", "--baseline", required=True, metavar="[NAME=]PATH", help="baseline hypotheses (file, glob or run prefix)")
    p.add_argument("systems", nargs="*", metavar="SYSTEM", help="[NAME=]PATH of each system to compare")
    p.add_argument("--nbest", action="append", default=[], metavar="[NAME=]F",
                   help="a system from an n-best list: 1-best under --weights (repeatable, pairs with --weights; default: none)")
    p.add_argument("--weights", action="append", default=[], metavar="W", help="weights file for the matching --nbest (default: none)")
    p.add_argument("--nbest-format", help="format of the --nbest lists (default: detected)")
    p.add_argument("--metrics", default="bleu,meteor,ter", help=f"comma-separated: {', '.join(METRIC_NAMES)} (default: %(default)s)")
    p.add_argument("--lang", default="en", help="target language (METEOR: en, de, fr, es, cs; default: %(default)s)")
    p.add_argument("--tokenize", default="13a", help="BLEU tokeniser as sacrebleu -tok, as `rerank tune` and `rerank "
                   "oracle` (default: %(default)s; 'none' for pre-tokenised text)")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU and chrF (as sacrebleu -lc)")
    p.add_argument("--ter-case-sensitive", action="store_true", help="case-sensitive TER (sacrebleu's default is insensitive)")
    g = p.add_argument_group("METEOR")
    g.add_argument("--meteor-backend", choices=["native", "jar"], default="native", help="native scorer or the Meteor 1.5 jar (Java; default: %(default)s)")
    g.add_argument("--meteor-modules", help="e.g. exact,stem (default: the language's modules)")
    g.add_argument("--meteor-resources", help="Meteor 1.5 jar or directory with function/, synonym/, paraphrase-XX.gz "
                   "(default: the jar shipped with pycocoevalcap)")
    g.add_argument("--meteor-jar", help="meteor-1.5.jar for --meteor-backend jar (default: pycocoevalcap's)")
    g.add_argument("--meteor-no-norm", action="store_true", help="do not apply Meteor's -norm tokenisation/lowercasing")
    s = p.add_argument_group("significance")
    s.add_argument("--ar", type=positive_int, default=10000, metavar="N", help="approximate randomisation trials (default: %(default)s)")
    s.add_argument("--bootstrap", type=nonnegative_int, default=1000, metavar="N", help="bootstrap resamples for s_sel and CIs; 0: none (default: %(default)s)")
    s.add_argument("--seed", type=nonnegative_int, default=12345, help="random seed (default: %(default)s)")
    s.add_argument("--alpha", type=probability, default=0.05, help="significance level for the marks (default: %(default)s)")
    s.add_argument("--second-baseline", metavar="NAME", help="a system name: also test every other system against it (\u2021; default: none)")
    s.add_argument("--holm", action="store_true", help="Holm-Bonferroni correction across systems x metrics")
    s.add_argument("--multeval-compat", action="store_true",
                   help="MultEval's rules: count only strictly greater differences, MultEval's run shuffle for R > 1")
    o = p.add_argument_group("output")
    o.add_argument("--to", dest="out_format", choices=FORMATS,
                   help="table format (default: from -o's extension: .md markdown, .tex latex, .csv csv, .json json; "
                   "else the text table)")
    o.add_argument("--format", dest="old_format", choices=FORMATS, help="deprecated alias of --to")
    o.add_argument("-o", "--output", default="-", help="output file (default: - for stdout); a .config.json is "
                   "written beside it")
    o.add_argument("--plot", metavar="PNG", help="plot of each system's delta from the baseline with bootstrap 95%% CI (default: no plot)")
    add_quiet(o)
    p.set_defaults(func=run)


def _split_name(spec: str) -> tuple[str | None, str]:
    if "=" in spec and not os.path.exists(spec):
        name, path = spec.split("=", 1)
        if name and "/" not in name:
            return name, path
    return None, spec


def _natural(path: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def resolve_runs(spec: str) -> tuple[str, list[str]]:
    """(name, run files) of a [NAME=]PATH system argument."""
    name, path = _split_name(spec)
    if os.path.isfile(path) or path == "-":
        runs = sorted(glob.glob(glob.escape(path) + ".run*"), key=_natural) if path != "-" else []
        if runs:
            raise InputError(f"is a file, and {', '.join(runs[:2])}{', ...' if len(runs) > 2 else ''} are runs of it: "
                             f"give '{path}.run*' for the runs, or rename one of them", path)
        files = [path]
    elif any(ch in path for ch in "*?["):
        files = sorted(glob.glob(path), key=_natural)
    else:
        files = sorted(glob.glob(glob.escape(path) + ".run*"), key=_natural)
    if not files:
        raise InputError("no such file, glob match or PATH.run* files", path)
    if name is None:
        base = os.path.basename(path.replace("*", ""))
        name = re.sub(r"\.run\d*$", "", base).rstrip(".") or base
    return name, files


def _read_run(path: str, n: int | None, ref_path: str | None = None) -> list[str]:
    lines = read_lines(path)
    if not lines:
        raise InputError("empty file", path)
    if n is not None and len(lines) != n:
        raise InputError(f"has {len(lines)} lines but the references have {n}" + (f" ({ref_path})" if ref_path else ""),
                         path)
    return lines


def _outputs(args) -> list[str | None]:
    """The table, its .config.json (beside a file output) and the plot."""
    config = os.path.splitext(args.output)[0] + ".config.json" if args.output != "-" else None
    return [args.output, config, args.plot]


def run(args) -> int:
    metrics = _check_options(args)
    refs, bname, baseline, systems, sources = _inputs(args)

    from rerank.report import evaluate_systems, plot_deltas

    try:
        table = evaluate_systems(
            refs, baseline, systems, metrics=metrics, lang=args.lang.lower(),
            second_baseline=args.second_baseline, ar_trials=args.ar, bootstrap=args.bootstrap, seed=args.seed,
            multeval_compat=args.multeval_compat, holm=args.holm, alpha=args.alpha, baseline_name=bname,
            tokenize=args.tokenize, lowercase=args.lowercase, ter_case_sensitive=args.ter_case_sensitive,
            meteor_options=_meteor_options(args) if "meteor" in metrics else None, progress=show_progress(args))
    except (ValueError, OSError) as exc:
        raise InputError(str(exc)) from None
    table.config["sources"] = sources
    table.config["references"] = args.ref
    output, config, _ = _outputs(args)
    with output_group():  # the table, its config and the plot, or none of them
        with atomic_write(output) as fh:
            fh.write(table.render(_table_format(args)))
        if config is not None:
            with atomic_write(config) as fh:
                json.dump({"command": sys.argv, **table.config, "signatures": table.signatures}, fh, indent=2)
        if args.plot:
            plot_deltas(table, args.plot)
    return 0


def _inputs(args) -> tuple:
    """(references, baseline name, baseline runs, systems, sources), after checking the outputs
    against every file named on the command line (before reading any)."""
    baseline_spec = (args.baseline, *resolve_runs(args.baseline))
    resolved = [(spec, *resolve_runs(spec)) for spec in args.systems]
    hypotheses = [f for _, _, files in [baseline_spec, *resolved] for f in files]
    nbest_files = [_split_name(spec)[1] for spec in args.nbest]
    check_outputs(_outputs(args), [*args.ref, *hypotheses, *nbest_files, *args.weights,
                                   args.meteor_jar, args.meteor_resources])
    refs = _read_references(args.ref)
    bname, baseline, systems, sources = _read_systems(args, baseline_spec, resolved, len(refs[0]))
    if args.second_baseline and args.second_baseline not in systems:
        raise InputError(f"--second-baseline {args.second_baseline!r} is not a system name "
                         f"(systems: {', '.join(systems) or 'none'})")
    return refs, bname, baseline, systems, sources


def _table_format(args) -> str:
    """--to, else the deprecated --format, else the output's extension, else the text table."""
    if args.out_format and args.old_format and args.out_format != args.old_format:
        raise InputError(f"--to {args.out_format} and --format {args.old_format} disagree "
                         "(--format is a deprecated alias of --to)")
    if args.old_format:
        print("note: `eval --format` is deprecated, use --to (--format is the input n-best format elsewhere)",
              file=sys.stderr)
    name = args.output[:-3] if args.output.endswith(".gz") else args.output
    return args.out_format or args.old_format or EXTENSIONS.get(os.path.splitext(name)[1].lower(), "table")


def _check_options(args) -> list[str]:
    """The metric names, after checking the options that need no file."""
    metrics = [m.strip().lower() for m in args.metrics.split(",") if m.strip()]
    unknown = [m for m in metrics if m not in METRIC_NAMES]
    if unknown or not metrics:
        raise InputError(f"unknown metric(s) {', '.join(unknown) or '(none)'} (known: {', '.join(METRIC_NAMES)})")
    if args.lang.lower() not in LANGUAGES:
        raise InputError(f"unknown language {args.lang!r} (known: {', '.join(LANGUAGES)})")
    if args.plot and args.bootstrap == 0:
        raise InputError("--plot shows bootstrap intervals: it needs --bootstrap >= 2")
    if len(args.nbest) != len(args.weights):
        raise InputError("give one --weights file per --nbest file")
    if args.bootstrap == 1:
        raise InputError("--bootstrap must be 0 (no s_sel or intervals) or at least 2, got 1")
    return metrics


def _read_references(paths: list[str]) -> list[list[str]]:
    refs = []
    for path in paths:
        lines = read_lines(path)
        if not lines:
            raise InputError("empty file", path)
        if refs and len(lines) != len(refs[0]):
            raise InputError(f"has {len(lines)} lines but {paths[0]} has {len(refs[0])}", path)
        refs.append(lines)
    return refs


def _read_systems(args, baseline_spec: tuple, resolved: list, n: int) -> tuple[str, list[list[str]], dict, dict]:
    """(baseline name, baseline runs, {system: runs}, {system: files read}) of the resolved
    (spec, name, files) of the baseline and the systems, and the --nbest/--weights pairs.

    Every system has 1 or R runs (R: the most runs of any); a single run stands for every run
    (evaluate_systems). An --nbest/--weights pair is one deterministic system.
    """
    _, bname, bfiles = baseline_spec
    baseline = [_read_run(f, n, args.ref[0]) for f in bfiles]
    systems: dict[str, list[list[str]]] = {}
    sources = {bname: bfiles}
    n_runs = max([len(bfiles)] + [len(files) for _, _, files in resolved])
    if len(bfiles) not in (1, n_runs):
        raise InputError(f"the baseline has {len(bfiles)} run(s) but a system has {n_runs} (a run is missing?)", args.baseline)
    for spec, name, files in resolved:
        if name in systems or name == bname:
            raise InputError(f"two systems are named {name!r}; name them NAME=PATH", spec)
        if len(files) not in (1, n_runs):
            raise InputError(f"system {name!r} has {len(files)} run(s) but the baseline has {n_runs} "
                             f"(a run is missing?)", spec)
        systems[name] = [_read_run(f, n, args.ref[0]) for f in files]
        sources[name] = files
    for spec, wpath in zip(args.nbest, args.weights):
        name, path = _split_name(spec)
        name = name or os.path.basename(path)
        hyps = _nbest_hypotheses(path, wpath, args.nbest_format)
        if len(hyps) != n:
            raise InputError(f"n-best list has {len(hyps)} sentences but the references have {n} ({args.ref[0]})", path)
        if name in systems or name == bname:
            raise InputError(f"two systems are named {name!r}; name it NAME=F", path)
        systems[name] = [hyps]
        sources[name] = [path, wpath]
    return bname, baseline, systems, sources


def _meteor_options(args) -> dict:
    opts = {"backend": args.meteor_backend, "normalize": not args.meteor_no_norm}
    if args.meteor_modules:
        opts["modules"] = [m.strip() for m in args.meteor_modules.split(",") if m.strip()]
    if args.meteor_resources:
        opts["resources"] = args.meteor_resources
    if args.meteor_jar:
        opts["jar"] = args.meteor_jar
    return opts


def _nbest_hypotheses(path: str, weights_path: str, fmt: str | None) -> list[str]:
    """The 1-best of an n-best list under weights; the reader's notes (missing features...) on stderr."""
    from rerank.errors import InputError
    from rerank.formats import ReadReport, read_nbest
    from rerank.weights import best_hypotheses, read_weights

    report = ReadReport()
    try:
        nbest = read_nbest(path, fmt=fmt, report=report)
    finally:
        for note in report.notes:
            print(f"note: {path}: {note}", file=sys.stderr)
    if nbest.n_hyps == 0:
        raise InputError("no hypotheses: the n-best list is empty", path)
    return best_hypotheses(nbest, read_weights(weights_path), source=weights_path)
