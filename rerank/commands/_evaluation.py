"""What `rerank eval` and `rerank report` share: their inputs (references, the baseline, systems as
files, globs or run prefixes, n-best lists with weights) and the flags of `rerank.EvalOptions`,
generated from its fields (rerank.options), turned into the arguments of `rerank.evaluate` and
`rerank.report`, which read the files and check everything else."""

from __future__ import annotations

import glob
import os
import pathlib
import re

from rerank.commands._common import add_list_flags, add_text_options, nbest_file
from rerank.cliargs import add_device_option
from rerank.errors import InputError
from rerank.options import add_option_flags, options_from_args


def add_evaluation_arguments(p) -> None:
    """The inputs of `eval` and `report` and the flags of EvalOptions (metrics, segment scores,
    COMET, METEOR, significance)."""
    from rerank import EvalOptions

    p.add_argument("-r", "--ref", action="append", required=True, metavar="REF", help="reference file (repeat for several)")
    p.add_argument("-b", "--baseline", required=True, metavar="[NAME=]PATH", help="baseline hypotheses (file, glob or run prefix)")
    p.add_argument("systems", nargs="*", metavar="SYSTEM", help="[NAME=]PATH of each system to compare")
    p.add_argument("--nbest", action="append", default=[], metavar="[NAME=]F",
                   help="a system from an n-best list: 1-best under --weights (repeatable, pairs with --weights; default: none)")
    p.add_argument("--weights", action="append", default=[], metavar="W", help="weights file for the matching --nbest (default: none)")
    add_list_flags(p, "nbest-", "format of the --nbest lists; an opennmt list without --nbest-size or --nbest-src has one "
                   "source per reference line (default: detected)", "a feature missing on some line of an --nbest list "
                   "is an error (default: read as 0 and said)")
    add_text_options(p, "the --nbest lists' hypotheses")
    add_option_flags(p, EvalOptions)
    comet = next(g for g in p._action_groups if g.title and g.title.startswith("COMET"))
    add_device_option(comet, note=", for COMET, BERTScore, BLEURT and MetricX", default=None)   # None: not given (refused
    # without a model metric)
    comet.add_argument("--no-score-cache", action="store_true", help="neither read nor write the score cache")


def eval_options(args):
    """The EvalOptions of the parsed flags (made and checked once). The score cache is the default
    file when a model metric runs (COMET, BERTScore, BLEURT, MetricX), unless --no-score-cache (which says
    so without one of their models)."""
    from rerank import EvalOptions

    if args.no_score_cache and args.score_cache:
        raise InputError("--score-cache and --no-score-cache: choose one")
    models = args.comet_model or args.bertscore_model or args.bleurt_model or args.metricx_model
    if args.no_score_cache and not models:
        raise InputError("--no-score-cache is read by comet, bertscore, bleurt and metricx only: give --comet-model, "
                         "--bertscore-model, --bleurt-model or --metricx-model too")
    if models and not args.no_score_cache and args.score_cache is None:
        args.score_cache = True   # the default file
    return options_from_args(EvalOptions, args)


def inputs(args) -> tuple[tuple[str, object], list[tuple[str, object]]]:
    """(the baseline, the systems) as `rerank.evaluate` takes them: (name, run file or files), and
    each --nbest list with its --weights as a `rerank.Reranked` read with the --nbest-* flags."""
    from rerank import Reranked

    if len(args.nbest) != len(args.weights):
        raise InputError("give one --weights file per --nbest file")
    baseline = resolve_runs(args.baseline)
    systems = [resolve_runs(spec) for spec in args.systems]
    named: list[tuple[str, object]] = [(name, _as_runs(files)) for name, files in systems]
    for spec, weights in zip(args.nbest, args.weights):
        label, path = _split_name(spec)
        named.append((label or os.path.basename(path), Reranked(nbest_file(args, path), weights)))
    return (baseline[0], _as_runs(baseline[1])), named


def _as_runs(files: list[str]):
    """One file is one run; several are a list of runs (paths as Path objects: a list of strings
    would be one run of hypotheses)."""
    return files[0] if len(files) == 1 else [pathlib.Path(f) for f in files]


def _split_name(spec: str) -> tuple[str | None, str]:
    if "=" in spec and not os.path.exists(spec):
        name, path = spec.split("=", 1)
        if name and "/" not in name:
            return name, path
    return None, spec


def _natural(path: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def resolve_runs(spec: str) -> tuple[str, list[str]]:
    """(name, run files) of a [NAME=]PATH system argument: a file, a glob, or a prefix of PATH.run* files."""
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
    if not files and os.path.isdir(path):
        raise InputError(f"is a directory, not a system's output: give a file, a glob such as "
                         f"'{os.path.join(path, '*')}' or the prefix of PATH.run* files", path)
    if not files:
        raise InputError("no such file, glob match or PATH.run* files", path)
    if name is None:
        base = os.path.basename(path.replace("*", ""))
        name = re.sub(r"\.run\d*$", "", base).rstrip(".") or base
    return name, files
