"""Plain n-best lists: one hypothesis per line, plus a sentence-id (or list-size) file and a
features file (TSV with a header of names, or .npy)."""

from __future__ import annotations

import os
import re

import numpy as np

from rerank.errors import InputError
from rerank.formats.common import ReadReport, format_value, json_object, parse_count, parse_number
from rerank.formats.record import NBestFormat, ReadOption, Sample
from rerank.io import atomic_write, iter_lines, output_group, read_lines
from rerank.nbest import NBestList, StringColumn, check_feature_name


def read_plain(path: str, ids: str | None = None, sizes: str | None = None, features: str | None = None,
               feature_names: list[str] | None = None) -> NBestList:
    """One hypothesis per line; `ids` (a sentence id per line) or `sizes` (list size per sentence)."""
    hyps = read_lines(path)
    if ids and sizes:
        raise InputError("give either an ids file or a sizes file, not both", path)
    if ids:
        counts = _counts_from_ids(ids, len(hyps), path)
    elif sizes:
        counts = np.array([parse_count(t, "list size", sizes, i + 1, least=1) for i, t in enumerate(read_lines(sizes))], dtype=np.int64)
        if counts.sum() != len(hyps):
            raise InputError(f"list sizes add up to {counts.sum()} but {path} has {len(hyps)} hypotheses", sizes)
    else:
        counts = np.ones(len(hyps), dtype=np.int64)
    matrix = np.zeros((len(hyps), 0))
    names: list[str] = []
    if features:
        matrix, names = _read_feature_matrix(features, feature_names)
        if len(matrix) != len(hyps):
            raise InputError(f"{len(matrix)} feature rows for {len(hyps)} hypotheses in {path}", features)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return NBestList(offsets, StringColumn.from_strings(hyps), matrix, names)


def _counts_from_ids(ids: str, n_hyps: int, path: str) -> np.ndarray:
    """List size of each sentence from a file of sentence ids running 0, 0, 1, ... without gaps."""
    id_lines = read_lines(ids)
    if len(id_lines) != n_hyps:
        raise InputError(f"{len(id_lines)} ids for {n_hyps} hypotheses in {path}", ids)
    values = np.array([parse_count(t, "sentence id", ids, i + 1) for i, t in enumerate(id_lines)], dtype=np.int64)
    if len(values) and values[0] != 0:
        raise InputError(f"sentence ids must start at 0, the first is {values[0]}", ids, 1)
    steps = np.diff(values)
    bad = np.flatnonzero((steps < 0) | (steps > 1))
    if len(bad):
        raise InputError(f"sentence id {values[bad[0] + 1]} after {values[bad[0]]}: ids must run 0, 0, 1, ... without gaps",
                         ids, int(bad[0]) + 2)
    return np.bincount(values) if len(values) else np.zeros(0, np.int64)


def _read_feature_matrix(path: str, names: list[str] | None) -> tuple[np.ndarray, list[str]]:
    """Features from .npy (names given or f0, f1, ...) or a TSV with a header; all finite."""
    if path.endswith(".npy"):
        try:
            matrix = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read .npy: {exc}", path) from None
        if matrix.ndim not in (1, 2) or matrix.dtype.kind not in "biuf":
            raise InputError(f"expected a 1-D or 2-D array of numbers, got {matrix.dtype} of shape {matrix.shape}", path)
        matrix = (matrix[:, None] if matrix.ndim == 1 else matrix).astype(np.float64)
        if names:
            _check_names(names, "feature names", None)
        names = names or [f"f{k}" for k in range(matrix.shape[1])]
    else:
        matrix, names = _read_feature_tsv(path)
    if len(names) != matrix.shape[1]:
        raise InputError(f"{len(names)} feature names for {matrix.shape[1]} columns", path)
    bad = np.argwhere(~np.isfinite(matrix))
    if len(bad):
        raise InputError(f"feature {names[bad[0][1]]!r} is {matrix[tuple(bad[0])]} (features must be finite)", path, int(bad[0][0]) + 1)
    return matrix, names


def _read_feature_tsv(path: str) -> tuple[np.ndarray, list[str]]:
    lines = iter_lines(path)
    try:
        _, header = next(lines)
    except StopIteration:
        raise InputError("empty features file", path) from None
    names = header.split("\t") if header else []  # no features: an empty header and empty rows
    _check_names(names, path, 1)
    rows = []
    for number, text in lines:
        cells = text.split("\t") if text else []
        if len(cells) != len(names):
            raise InputError(f"{len(cells)} columns, the header has {len(names)}", path, number)
        rows.append([parse_number(c, f"feature {n!r}", path, number) for n, c in zip(names, cells)])
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(names)), names


def _check_names(names: list[str], path: str, line: int | None) -> None:
    """Feature names that are valid and distinct (the header of a TSV, or given)."""
    seen = set()
    for name in names:
        check_feature_name(name, path, line)
        if name in seen:
            raise InputError(f"feature name {name!r} appears twice", path, line)
        seen.add(name)


def write_plain(nbest: NBestList, path: str, first_id: int = 0) -> list[str]:
    """Three files: hypotheses (`path`), sentence ids (`path.ids`), features (`path.features.tsv`)."""
    if path == "-":
        raise InputError("plain output is three files (OUT, OUT.ids, OUT.features.tsv): give a file name, not -")
    row = nbest.hyps.first_ending_with_cr()
    if row is not None:
        raise InputError(f"hypothesis {row} ends in a carriage return, which a line cannot keep", path)
    with output_group():  # the three files or none
        with atomic_write(path) as out:
            if nbest.n_hyps and nbest.hyps[0].startswith("\ufeff"):
                out.write("\ufeff")  # the reader drops one byte-order mark: keep the hypothesis' own
            for hyp in nbest.hyps:
                out.write(hyp + "\n")
        with atomic_write(path + ".ids") as out:
            out.writelines(f"{i}\n" for i in nbest.sentence_of_hyp + first_id)
        with atomic_write(path + ".features.tsv") as out:
            if nbest.feature_names and nbest.feature_names[0].startswith("\ufeff"):
                out.write("\ufeff")  # as for the hypotheses: the reader drops one byte-order mark
            out.write("\t".join(nbest.feature_names) + "\n")
            for row in nbest.features:
                out.write("\t".join(format_value(v) for v in row) + "\n")
    return [path, path + ".ids", path + ".features.tsv"]


def _found_beside(path: str, options: dict) -> dict[str, str]:
    """The side files beside a plain list (PATH.ids, PATH.features.tsv, as `write_plain` writes them)
    that stand in for options not given, by option."""
    if path == "-":
        return {}
    wanted = {"ids": path + ".ids"} if not options.get("ids") and not options.get("sizes") else {}
    wanted.update({"features": path + ".features.tsv"} if not options.get("features") else {})
    return {key: file for key, file in wanted.items() if os.path.isfile(file)}


def _read(path: str, *, strict: bool = False, report: ReadReport | None = None, **options) -> NBestList:
    found = _found_beside(path, options)
    if found and report is not None:
        what = {"ids": "sentence ids", "features": "features"}
        report.notes.append(f"plain list: read {' and '.join(f'{what[k]} from {f}' for k, f in found.items())} "
                            "(found beside it)")
    options = {**options, **found}
    names = options.get("feature_names")
    return read_plain(path, ids=options.get("ids"), sizes=options.get("sizes"), features=options.get("features"),
                      feature_names=names.split(",") if isinstance(names, str) else names)


_JSON_START = re.compile(r'\s*(\{\s*"[^"]*"\s*:|[{\[]\s*$)')


def _json_like(text: str) -> bool:
    """A JSON object or the start of one (`{"key": ...`, or a lone `{` or `[` of pretty-printed JSON)."""
    return _JSON_START.match(text) is not None or json_object(text) is not None


def detect_plain(sample: Sample) -> bool:
    """Plain when its side files say so (given, or PATH.ids / PATH.features.tsv beside it, as
    `write_plain` writes them) and the first line is no Moses or JSON line; otherwise only when the
    first lines have no other structure (no tab, no `|||`, nothing like JSON) and no list size or
    source file was given (bare lines with those are OpenNMT's)."""
    first = sample.first
    if _side_inputs(sample.path, sample.options) and "|||" not in first and not _json_like(first):
        return True
    if sample.options.get("nbest_size") is not None or sample.options.get("src"):
        return False
    return not any("\t" in text or "|||" in text or _json_like(text) for _, text in sample.lines)


def _side_inputs(path: str, options: dict) -> list[str]:
    """The side files a read opens: those given and those found beside the list."""
    given = [options[k] for k in ("ids", "sizes", "features") if options.get(k)]
    return given + list(_found_beside(path, options).values())


PLAIN = NBestFormat(
    name="plain", layout="one hypothesis per line, with a sentence-id or list-size file and a features file (TSV with a "
    "header of names, or .npy)", producers="any decoder's text output, with side files (--plain-ids/--plain-sizes)",
    read=_read, write=write_plain, detect=detect_plain, detect_order=90,
    losses=lambda nbest: ["plain lists have no total score: the totals are not written"] if nbest.scores is not None else [],
    outputs=lambda path: [path, path + ".ids", path + ".features.tsv"], side_inputs=_side_inputs,
    options=(
        ReadOption("ids", "--plain-ids", "plain format: file with the sentence id of each hypothesis (default: NBEST.ids "
                   "if present)", metavar="FILE", file=True),
        ReadOption("sizes", "--plain-sizes", "plain format: file with the list size of each sentence (default: none)",
                   metavar="FILE", file=True),
        ReadOption("features", "--plain-features", "plain format: features as TSV with a header of names, or .npy "
                   "(default: NBEST.features.tsv if present)", metavar="FILE", file=True),
        ReadOption("feature_names", "--feature-names", "plain format with .npy features: comma-separated column names "
                   "(default: f0, f1, ...)", metavar="A,B"),
    ))
