"""Segment-level scores computed elsewhere (COMET, BLEURT, human judgements) as a metric.

A TSV file holds one column per system output and one row per segment, under a header row of
system names as `rerank eval` names them: the baseline and every system; a system with R > 1
runs has the columns NAME.run1 .. NAME.runR, a system with one run (a deterministic system or a
single file) the column NAME (NAME.run1 is accepted too). Columns no system needs are ignored.

Statistics per segment: [score, 1]. A corpus score is their mean (sum of scores / number of
segments), so randomisation, bootstrap and the stratified multi-run test treat the metric like
any other: pseudo-systems sum statistics, the score divides. The metric never reads text.
"""

from __future__ import annotations

import os
import re

import numpy as np

from rerank.errors import InputError
from rerank.io import file_digest
from rerank.metrics.base import MeanOfSegments
from rerank.options import NotFinite, finite_float

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]*$")


class SegmentScoresMetric(MeanOfSegments):
    """The mean of per-segment scores read from a table; `system_stats(name, runs)` gives a
    system's statistics (runs, n, 2). Higher is better unless `higher_is_better=False`."""

    def __init__(self, name: str, columns: dict[str, np.ndarray], source: str = "(in memory)",
                 higher_is_better: bool = True, digest: str | None = None):
        if not NAME_PATTERN.match(name):
            raise ValueError(f"segment-score metric name {name!r}: use letters, digits, _ . + - (starting with a letter)")
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"segment scores {name!r}: columns of different lengths {sorted(lengths)}")
        self.name, self.source = name, source
        self.columns = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}
        self.n = lengths.pop() if lengths else 0
        self.digest = digest
        largest = max((float(np.abs(v).max()) for v in self.columns.values() if len(v)), default=0.0)
        # its direction and decimals travel with the instance (Metric.info reads them); COMET-like
        # scores near 1 need more than 2 decimals
        self.higher_is_better, self.decimals = higher_is_better, 4 if largest < 10 else 2
        self.scale = "mean of the segment scores"

    def column_names(self, system: str, runs: int) -> list[str]:
        """The columns of a system with `runs` runs; InputError naming the file's header when one is missing."""
        if runs == 1:
            wanted = [system] if system in self.columns or f"{system}.run1" not in self.columns else [f"{system}.run1"]
        else:
            wanted = [f"{system}.run{r}" for r in range(1, runs + 1)]
        missing = [c for c in wanted if c not in self.columns]
        if missing:
            raise InputError(f"segment scores {self.name!r}: no column {', '.join(repr(c) for c in missing)} for system "
                             f"{system!r} ({runs} run{'s' if runs > 1 else ''}; header has "
                             f"{', '.join(repr(c) for c in self.columns) or 'no columns'})", self.source, 1)
        return wanted

    def system_stats(self, system: str, runs: int, n: int | None = None) -> np.ndarray:
        """Statistics (runs, n, 2) of a system's outputs: [score, 1] per segment."""
        if n is not None and n != self.n:
            raise InputError(f"segment scores {self.name!r}: {self.n} rows of scores but the references have "
                             f"{n} lines", self.source)
        values = np.stack([self.columns[c] for c in self.column_names(system, runs)])
        return np.stack([values, np.ones_like(values)], axis=-1)

    def sentence_stats(self, hyps, refs):
        raise ValueError(f"{self.name} scores come from {self.source}, not from text: use system_stats")

    def signature(self):
        digest = f"|sha256:{self.digest[:16]}" if self.digest else ""
        return f"{self.name}|segment-scores:{os.path.basename(self.source)}{digest}|mean|{self.info.direction}-is-better"


def parse_spec(spec: str) -> tuple[str, str]:
    """(NAME, FILE) of a `NAME=FILE` segment-scores spec (the command line's --segment-scores argument)."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise InputError(f"segment scores {spec!r}: expected NAME=FILE.tsv")
    if not NAME_PATTERN.match(name):
        raise InputError(f"segment scores {spec!r}: NAME must start with a letter and use letters, digits, _ . + -")
    return name, path


def read_segment_scores(name: str, path: str, n: int | None = None, higher_is_better: bool = True) -> SegmentScoresMetric:
    """Read a TSV of segment scores: a header of column (system) names, then one row per segment.

    Every problem is an InputError naming the file and line: an empty file, an empty or repeated
    column name, a row with another number of fields, a value that is not a finite number, and
    (with `n`) a number of rows other than n.
    """
    from rerank.io import iter_lines

    header, rows, last = None, [], 0
    for number, line in iter_lines(path):
        last = number
        fields = line.split("\t")
        if header is None:
            header = _header(fields, path)
            continue
        if len(fields) != len(header):
            raise InputError(f"{len(fields)} fields but the header has {len(header)} (columns are tab-separated)",
                             path, number)
        rows.append([_number(value, column, path, number) for value, column in zip(fields, header)])
    if header is None:
        raise InputError("empty file: expected a header row of system names and one row of scores per segment", path)
    if not rows:
        raise InputError("no rows of scores below the header", path, 1)
    if n is not None and len(rows) != n:
        at = n + 2 if len(rows) > n else last
        raise InputError(f"{len(rows)} rows of scores but the references have {n} lines", path, at)
    values = np.array(rows, dtype=np.float64)
    return SegmentScoresMetric(name, {c: values[:, j] for j, c in enumerate(header)}, source=path,
                               higher_is_better=higher_is_better, digest=file_digest(path))


def _header(fields: list[str], path: str) -> list[str]:
    names = [f.strip() for f in fields]
    if any(not f for f in names):
        raise InputError("the header has an empty column name (expected system names, tab-separated)", path, 1)
    seen = set()
    for f in names:
        if f in seen:
            raise InputError(f"column {f!r} appears twice in the header", path, 1)
        seen.add(f)
    return names


def _number(text: str, column: str, path: str, line: int) -> float:
    try:
        return finite_float(text)
    except NotFinite:
        raise InputError(f"column {column!r}: {text.strip()!r} is not a finite number", path, line) from None
    except ValueError:
        raise InputError(f"column {column!r}: {text.strip()[:40]!r} is not a number", path, line) from None
