"""Scores from separate files joined as named n-best columns (`rerank add-feature`): one number
per hypothesis, or one per sentence broadcast to its hypotheses."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from rerank.errors import InputError
from rerank.io import iter_lines, output_lock
from rerank.nbest import NBestList, check_feature_name
from rerank.nbestfile import NBestFile, write_nbest_noted
from rerank.options import NotFinite, finite_float
from rerank.outputs import check_outputs, nbest_outputs
from rerank.progress import Progress

PathLike = str | os.PathLike


def join_score_files(source: NBestFile | PathLike, columns: Sequence[tuple[str, PathLike]], output: PathLike, *,
                     to: str = "moses", replace: bool = False, progress: Progress = False,
                     wait: bool = False) -> list[str]:
    """Read an n-best file, join each (column name, score file) of `columns` as a column, in order
    (`read_scores`, `join_scores`), and write the list to `output` in the format `to`; returns the
    paths written. A name the list has already is an error unless `replace` (which overwrites it in
    place); no name may be given twice; the output may be no input. One writer per output: its
    lock is held from before any input is read (rerank.io.output_lock; another process writing it
    is refused unless `wait`, which waits until it ends)."""
    source = NBestFile.of(source)
    names = [name for name, _ in columns]
    for name in names:
        check_feature_name(name)
    twice = [name for k, name in enumerate(names) if name in names[:k]]
    if twice:
        raise InputError(f"name {twice[0]} is given twice", option="name")
    score_files = [os.fspath(path) for _, path in columns]
    outputs = nbest_outputs(os.fspath(output), to)
    check_outputs(outputs, [*source.inputs(), *score_files])
    with output_lock(outputs, wait):
        nbest = source.read(progress)
        for name, path in zip(names, score_files):
            nbest = join_scores(nbest, name, read_scores(path), path, replace, source.path)
        return write_nbest_noted(nbest, os.fspath(output), to)


def read_scores(path: str) -> np.ndarray:
    """One finite number per line of a text file (gzip'd or not), or a 1-D .npy array."""
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
            values.append(finite_float(text))
        except NotFinite:
            raise InputError(f"{text.strip()} is not a finite number", path, number) from None
        except ValueError:
            raise InputError(f"{text!r} is not a number", path, number) from None
    if not values:
        raise InputError("empty scores file", path)
    return np.array(values)


def join_scores(nbest: NBestList, name: str, values: np.ndarray, source: str, replace: bool = False,
                nbest_path: str | None = None) -> NBestList:
    """Per-hypothesis values are used as they are; per-sentence values are broadcast. Errors name
    `source` (and the n-best's `nbest_path` when given)."""
    problem = nbest.feature_clash(name, replace)
    if problem:
        overwrite = name in nbest.feature_names
        raise InputError(problem + (" (replace overwrites it)" if overwrite else ""), nbest_path,
                         option="replace" if overwrite else None)
    if len(values) == nbest.n_hyps:
        column = values
    elif len(values) == nbest.n_sentences:
        column = np.repeat(values, nbest.sizes)
    else:
        raise InputError(f"{len(values)} scores, but the n-best has {nbest.n_hyps} hypotheses and {nbest.n_sentences} "
                         "sentences" + (f" ({nbest_path})" if nbest_path else ""), source)
    return nbest.with_feature(name, column, replace=replace)
