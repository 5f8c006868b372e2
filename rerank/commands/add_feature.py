"""`rerank add-feature`: join scores from separate files as named feature columns."""

from __future__ import annotations

import numpy as np


from rerank.commands._common import format_help, nbest_inputs, add_nbest_input, add_output_format, load_nbest, write_output
from rerank.errors import InputError
from rerank.io import iter_lines
from rerank.nbest import NBestList, check_feature_name
from rerank.outputs import check_outputs, nbest_outputs


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "add-feature", help="add a feature column from a file of scores",
        description="Join one float per hypothesis (or one per sentence, broadcast to its "
        "hypotheses) as a new named feature column, in order. Give --name/--scores once per "
        "column. Score files: one number per line (text, gzip'd) or a 1-D .npy. " + format_help(),
    )
    add_nbest_input(parser)
    parser.add_argument("--name", action="append", required=True, help="name of the new feature column")
    parser.add_argument("--scores", action="append", required=True, help="file of scores for the matching --name")
    parser.add_argument("--replace", action="store_true", help="overwrite an existing column of the same name in "
                        "place (default: a name the n-best has is an error, nothing is written)")
    parser.add_argument("-o", "--output", required=True, help="output n-best file")
    add_output_format(parser)
    parser.set_defaults(func=run)


def read_scores(path: str) -> np.ndarray:
    if path.endswith(".npy"):
        try:
            values = np.load(path, allow_pickle=False).astype(np.float64)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read .npy: {exc}", path) from None
        if values.ndim != 1:
            raise InputError(f"expected a 1-D array, got shape {values.shape}", path)
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            raise InputError(f"value {values[bad[0]]} at index {bad[0]} is not finite", path)
        return values
    values = []
    for number, text in iter_lines(path):
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{text!r} is not a number", path, number) from None
        if not np.isfinite(value):
            raise InputError(f"{text.strip()} is not a finite number", path, number)
        values.append(value)
    if not values:
        raise InputError("empty scores file", path)
    return np.array(values)


def join_scores(nbest: NBestList, name: str, values: np.ndarray, source: str, replace: bool = False,
                nbest_path: str | None = None) -> NBestList:
    """Per-hypothesis values are used as they are; per-sentence values are broadcast. Errors name
    `source` (and the n-best's `nbest_path` when given)."""
    problem = nbest.feature_clash(name, replace)
    if problem:
        raise InputError(problem + (" (--replace overwrites it)" if name in nbest.feature_names else ""), nbest_path)
    if len(values) == nbest.n_hyps:
        column = values
    elif len(values) == nbest.n_sentences:
        column = np.repeat(values, nbest.sizes)
    else:
        raise InputError(f"{len(values)} scores, but the n-best has {nbest.n_hyps} hypotheses and {nbest.n_sentences} "
                         "sentences" + (f" ({nbest_path})" if nbest_path else ""), source)
    return nbest.with_feature(name, column, replace=replace)


def run(args) -> int:
    if len(args.name) != len(args.scores):
        raise InputError(f"{len(args.name)} --name but {len(args.scores)} --scores: give them in pairs")
    for name in args.name:
        check_feature_name(name)
    twice = [name for k, name in enumerate(args.name) if name in args.name[:k]]
    if twice:
        raise InputError(f"--name {twice[0]} is given twice")
    check_outputs(nbest_outputs(args.output, args.out_format), [*nbest_inputs(args), *args.scores])
    nbest, _ = load_nbest(args)
    for name, path in zip(args.name, args.scores):
        nbest = join_scores(nbest, name, read_scores(path), path, args.replace, args.nbest)
    write_output(nbest, args.output, args.out_format)
    return 0
