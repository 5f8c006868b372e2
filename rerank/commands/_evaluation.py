"""What `rerank eval` and `rerank report` share: their input options (references, baseline,
systems or run prefixes, n-best lists with weights, metrics, segment scores, METEOR,
significance), reading and checking those inputs, and the scoring (`evaluate`)."""

from __future__ import annotations

import glob
import os
import pathlib
import re
import sys
from collections.abc import Sequence

from rerank.cliargs import nonnegative_int, positive_int, probability, bars
from rerank.commands._common import add_reading_options, add_text_options, read_options, with_flags
from rerank.device import add_device_option
from rerank.errors import InputError, NeedsOption
from rerank.formats import format_names
from rerank.io import read_references
from rerank.metrics.registry import EVAL_METRIC_NAMES, METRIC_NAMES, metric_names
from rerank.outputs import check_outputs


def add_evaluation_arguments(p) -> None:
    """The inputs, metric, METEOR and significance options of `eval` and `report`."""
    p.add_argument("-r", "--ref", action="append", required=True, metavar="REF", help="reference file (repeat for several)")
    p.add_argument("-b", "--baseline", required=True, metavar="[NAME=]PATH", help="baseline hypotheses (file, glob or run prefix)")
    p.add_argument("systems", nargs="*", metavar="SYSTEM", help="[NAME=]PATH of each system to compare")
    p.add_argument("--nbest", action="append", default=[], metavar="[NAME=]F",
                   help="a system from an n-best list: 1-best under --weights (repeatable, pairs with --weights; default: none)")
    p.add_argument("--weights", action="append", default=[], metavar="W", help="weights file for the matching --nbest (default: none)")
    p.add_argument("--nbest-format", choices=format_names(), help="format of the --nbest lists; an opennmt list "
                   "without --nbest-size or --nbest-src has one source per reference line (default: detected)")
    p.add_argument("--nbest-strict", action="store_true", help="a feature missing on some line of an --nbest list is "
                   "an error (default: read as 0 and said)")
    add_reading_options(p, prefix="nbest-", help_prefix="--nbest lists: ")
    add_text_options(p, "the --nbest lists' hypotheses")
    p.add_argument("--metrics", default="bleu,meteor,ter", help=f"comma-separated: {', '.join(metric_names(models=True, builtin=True))} "
                   "(comet: with --comet-model) or a --segment-scores NAME (default: %(default)s)")
    p.add_argument("--segment-scores", action="append", default=[], metavar="NAME=FILE.tsv",
                   help="segment-level scores computed elsewhere (COMET, BLEURT, human): a TSV with a header of system "
                   "names (runs: NAME.run1 ...) and one row per segment; NAME is then a metric, the mean of its "
                   "scores (repeatable; default: none)")
    p.add_argument("--lower-better", metavar="NAME[,NAME]", help="segment-score metrics for which lower is better, "
                   "e.g. error counts (default: none: higher is better)")
    p.add_argument("--lang", default="en", help="target language (METEOR: en, de, fr, es, cs; default: %(default)s)")
    p.add_argument("--tokenize", default="13a", help="BLEU tokeniser as sacrebleu -tok, as `rerank tune` and `rerank "
                   "oracle` (default: %(default)s; 'none' for pre-tokenised text)")
    p.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU and chrF (as sacrebleu -lc)")
    p.add_argument("--ter-case-sensitive", action="store_true", help="case-sensitive TER (sacrebleu's default is insensitive)")
    c = p.add_argument_group("COMET (reference-based, from a local checkpoint; needs the [comet] extra)")
    c.add_argument("--comet-model", metavar="PATH", help="a reference-based COMET checkpoint (COMET-22, XCOMET): its "
                   "directory (hparams.yaml, checkpoints/model.ckpt) or the .ckpt; adds the metric comet, the mean of "
                   "its segment scores, each distinct (source, hypothesis, reference) scored once (default: none)")
    c.add_argument("--src", metavar="FILE", help="source sentences, one per reference line, for --comet-model "
                   "(default: none)")
    c.add_argument("--comet-batch-size", type=positive_int, metavar="N", help="COMET inputs per batch (default: 16)")
    add_device_option(c, note=", for COMET", default=None)   # None: not given (refused without --comet-model)
    c.add_argument("--score-cache", metavar="FILE", help="score cache of users' models, shared with `rerank features` "
                   "(default: $RERANK_CACHE_DIR/scores.sqlite or ~/.cache/mlmme-rerank/scores.sqlite)")
    c.add_argument("--no-score-cache", action="store_true", help="neither read nor write the score cache")
    g = p.add_argument_group("METEOR")
    g.add_argument("--meteor-backend", choices=["native", "jar"], default="native",
                   help="native scorer or the Meteor 1.5 jar (Java; default: %(default)s)")
    g.add_argument("--meteor-modules", help="e.g. exact,stem (default: the language's modules)")
    g.add_argument("--meteor-resources", help="Meteor 1.5 jar or directory with function/, synonym/, paraphrase-XX.gz "
                   "(default: the jar shipped with pycocoevalcap)")
    g.add_argument("--meteor-jar", help="meteor-1.5.jar for --meteor-backend jar (default: pycocoevalcap's)")
    g.add_argument("--meteor-no-norm", action="store_true", help="do not apply Meteor's -norm tokenisation/lowercasing")
    s = p.add_argument_group("significance")
    s.add_argument("--ar", type=positive_int, default=10000, metavar="N", help="approximate randomisation trials (default: %(default)s)")
    s.add_argument("--bootstrap", type=nonnegative_int, default=1000, metavar="N",
                   help="bootstrap resamples for s_sel and CIs; 0: none (default: %(default)s)")
    s.add_argument("--seed", type=nonnegative_int, default=12345, help="random seed (default: %(default)s)")
    s.add_argument("--alpha", type=probability, default=0.05, help="significance level for the marks (default: %(default)s)")
    s.add_argument("--second-baseline", metavar="NAME",
                   help="a system name: also test every other system against it (\u2021; default: none)")
    s.add_argument("--holm", action="store_true", help="Holm-Bonferroni correction across systems x metrics")
    s.add_argument("--stratified", action="store_true",
                   help="Clark et al.'s stratified randomisation: split each sentence's pooled run outputs (exact for "
                   "independent runs, too many rejections when a system's runs agree on most sentences; default: "
                   "the paired test of each system's runs averaged per sentence)")
    s.add_argument("--multeval-compat", action="store_true",
                   help="MultEval's randomisation rules: count only strictly greater differences, MultEval's run "
                   "shuffle for R > 1, a one-run system as R copies (not calibrated: docs/evaluation.md)")
    s.add_argument("--sacrebleu-compat", action="store_true",
                   help="the bootstrap p-value by sacrebleu --paired-bs's rule (not calibrated: docs/evaluation.md; "
                   "default: the p-value that inverts the bootstrap interval)")


def evaluate(args, outputs: list, extra_inputs: Sequence = ()):
    """Check the command line's own syntax, refuse outputs that are inputs (also `extra_inputs`),
    and score the systems with `rerank.api.evaluate` (which reads the files and checks the rest)."""
    from rerank.api import EvalOptions, Reranked, evaluate as evaluate_outputs
    from rerank.metrics.external import read_segment_scores

    names, specs, lower = check_options(args)
    baseline = resolve_runs(args.baseline)
    systems = [resolve_runs(spec) for spec in args.systems]
    nbest_pairs = [(*_split_name(spec), wpath) for spec, wpath in zip(args.nbest, args.weights)]
    check_outputs(outputs, [*args.ref, args.src, args.comet_model, *(f for _, files in [baseline, *systems] for f in files),
                            *(path for _, path, _ in nbest_pairs), *args.weights, *(f for _, f in specs),
                            *extra_inputs, args.meteor_jar, args.meteor_resources])
    files = dict(specs)
    options = EvalOptions(metrics=tuple(m for m in names if m not in files) or ("length",), lang=args.lang,
                          tokenize=args.tokenize, lowercase=args.lowercase, ter_case_sensitive=args.ter_case_sensitive,
                          meteor=_meteor_options(args) if "meteor" in names else None, ar=args.ar,
                          bootstrap=args.bootstrap, seed=args.seed, alpha=args.alpha,
                          second_baseline=args.second_baseline, holm=args.holm, stratified=args.stratified,
                          multeval_compat=args.multeval_compat, sacrebleu_compat=args.sacrebleu_compat,
                          **_comet_options(args))
    # checked before any file is read; the segment-score metrics join once their files are read
    n = len(read_references(args.ref)[0])
    metrics = [read_segment_scores(m, files[m], n, higher_is_better=m not in lower) if m in files else m for m in names]
    options = EvalOptions.make(options, metrics=tuple(metrics))
    named: list[tuple[str, object]] = [(name, _as_runs(runs)) for name, runs in systems]
    named += [(label or os.path.basename(path), Reranked(_read_nbest(path, args, n), wpath, source=path))
              for label, path, wpath in nbest_pairs]
    record = {"segment_scores": dict(specs)} if specs else {}
    if args.nbest:
        record["nbest_text"] = {"post_process": args.post_process, "unescape": args.unescape}
    return evaluate_outputs(args.ref, (baseline[0], _as_runs(baseline[1])), named, options,
                            progress=bars(args), record=record)


def _as_runs(files: list[str]):
    """One file is one run; several are a list of runs (paths as Path objects: a list of strings
    would be one run of hypotheses)."""
    return files[0] if len(files) == 1 else [pathlib.Path(f) for f in files]


def check_options(args) -> tuple[list[str], list[tuple[str, str]], set[str]]:
    """(metric names in table order, [(segment-score NAME, FILE)], the lower-is-better NAMEs): the
    command line's own syntax, checked before any file is read. Segment-score metrics not named in
    --metrics come after the others; the library checks the rest (rerank.api.EvalOptions)."""
    from rerank.metrics.external import parse_spec

    specs = [parse_spec(spec) for spec in args.segment_scores]
    external = [name for name, _ in specs]
    taken = METRIC_NAMES + (("comet",) if args.comet_model else ())  # comet names segment scores unless COMET runs here
    clash = [n for n in external if n.lower() in taken] or [n for n in external if external.count(n) > 1]
    if clash:
        raise InputError(f"--segment-scores {clash[0]}: the name is taken (built-in metrics: {', '.join(taken)}; "
                         "each NAME once)")
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    metrics = [m if m in external else m.lower() for m in metrics]
    unknown = [m for m in metrics if m not in EVAL_METRIC_NAMES and m not in external]
    if unknown:
        raise InputError(f"unknown metric(s) {', '.join(unknown)} (known: {', '.join(EVAL_METRIC_NAMES)}"
                         + (f"; segment scores: {', '.join(external)}" if external else "") + ")")
    if args.comet_model and "comet" not in metrics:
        metrics.append("comet")  # --comet-model asks for the metric, as --segment-scores does for its NAME
    if "comet" in metrics and "comet" not in external and not (args.comet_model and args.src):
        raise InputError("the metric comet needs --comet-model PATH (a reference-based COMET checkpoint) and --src "
                         "FILE (the source sentences)")
    stray = [flag for flag, value in (("--src", args.src), ("--comet-batch-size", args.comet_batch_size),
                                      ("--device", args.device), ("--score-cache", args.score_cache),
                                      ("--no-score-cache", args.no_score_cache)) if value]
    if stray and not args.comet_model:
        raise InputError(f"{stray[0]} is read by the comet metric only: give --comet-model too")
    if args.score_cache and args.no_score_cache:
        raise InputError("--score-cache and --no-score-cache: choose one")
    lower = {n.strip() for n in (args.lower_better or "").split(",") if n.strip()}
    if lower - set(external):
        raise InputError(f"--lower-better {','.join(sorted(lower - set(external)))}: not a --segment-scores NAME")
    if getattr(args, "plot", None) and args.bootstrap == 0:
        raise InputError("--plot shows bootstrap intervals: it needs --bootstrap >= 2")
    if len(args.nbest) != len(args.weights):
        raise InputError("give one --weights file per --nbest file")
    return metrics + [n for n in external if n not in metrics], specs, lower


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


def _comet_options(args) -> dict:
    """EvalOptions' COMET fields from the command line (none without --comet-model)."""
    from rerank.score_cache import default_cache_path

    if not args.comet_model:
        return {}
    given = {"comet_batch_size": args.comet_batch_size, "device": args.device}   # else EvalOptions' defaults
    return {"comet_model": args.comet_model, "sources": args.src, **{k: v for k, v in given.items() if v is not None},
            "score_cache": None if args.no_score_cache else (args.score_cache or default_cache_path())}


def _meteor_options(args) -> dict:
    opts = {"backend": args.meteor_backend, "normalize": not args.meteor_no_norm}
    if args.meteor_modules:
        opts["modules"] = [m.strip() for m in args.meteor_modules.split(",") if m.strip()]
    if args.meteor_resources:
        opts["resources"] = args.meteor_resources
    if args.meteor_jar:
        opts["jar"] = args.meteor_jar
    return opts


def _read_nbest(path: str, args, n: int):
    """The --nbest list at `path`, read with the --nbest-* options; the reader's notes on stderr. An
    OpenNMT list's size comes from --nbest-size or the references' line count `n` (one source per
    reference line)."""
    from rerank.formats import ReadReport, read_nbest

    report = ReadReport()
    options = read_options(args)
    if options.get("nbest_size") is None and not options.get("src"):
        options["src"] = args.ref[0]  # one source per reference line: an OpenNMT list's size
    try:
        return read_nbest(path, fmt=args.nbest_format, strict=args.nbest_strict, report=report,
                          post_process=args.post_process, unescape=args.unescape, **options)
    except NeedsOption as exc:
        raise with_flags(exc, prefix="nbest-") from None
    finally:
        for note in report.notes:
            print(f"note: {path}: {note}", file=sys.stderr)
