"""The state of one Moses/Joshua read, filled by the bulk parser and the line parser alike.

Both parsers keep the same record: the columns (feature groups with their widths, in order of
first appearance), the number of `|||` fields, and the rows parsed so far, a chunk at a time
(runs of sentence ids, hypothesis bytes, feature values with the cells each line had, totals).
So a group's columns, the padding of a feature that appears late and the counts of missing
features are decided in one place, and `nbest()` assembles both paths' lists the same way. The
two-pass reader keeps the columns of pass 1 for pass 2 (`with_columns`) and takes each block's
rows out as it goes (`take_chunk`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rerank.errors import InputError
from rerank.nbest import NBestList, StringColumn, check_feature_name


class NeedsLineReader(Exception):
    """The bulk parser met input it does not handle (rerank.formats.moses.fast lists the cases).

    `read_moses` then reads the file line by line, which accepts the input or names its problem
    with file and line. Nothing else is turned into this exception: a bug propagates.
    """


@dataclass
class Chunk:
    """The rows of one parsed block, taken out of the state (the two-pass reader)."""

    heads: np.ndarray               # sentence id of each run of equal ids
    runs: np.ndarray                # lines in each run
    hyps: bytes                     # the hypotheses' UTF-8, one after the other
    lengths: np.ndarray             # bytes of each hypothesis
    values: np.ndarray              # (lines, columns known when the block was parsed)
    present: np.ndarray | None      # which cells a line had; None: every one
    totals: np.ndarray | None       # total score of each line, None without the field


@dataclass
class ParserState:
    """Columns and parsed rows of one read; `path` names the file in errors."""

    path: str = ""
    fields: int | None = None                                   # '|||' fields of the first line
    first_line: int = 0                                         # its line number (the line parser's errors)
    index: dict[str, int] = field(default_factory=dict)         # column -> position, in order of appearance
    widths: dict[str, int] = field(default_factory=dict)        # group -> values per line; the groups, in order
    group_line: dict[str, int] = field(default_factory=dict)    # group -> line where it appeared (line parser)
    owner: dict[str, str] = field(default_factory=dict)         # column -> the group that made it
    runs: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # per chunk: (sentence id, lines) of each run
    hyps: io.BytesIO = field(default_factory=io.BytesIO)       # every hypothesis' UTF-8 bytes, in order
    lengths: list[np.ndarray] = field(default_factory=list)    # per chunk: bytes of each hypothesis
    values: list[np.ndarray] = field(default_factory=list)     # per chunk: (lines, columns known then)
    present: list[np.ndarray | None] = field(default_factory=list)  # per chunk: cells a line had (None: all)
    totals: list[np.ndarray] = field(default_factory=list)     # per chunk: total scores, when lines have them

    @property
    def groups(self) -> list[tuple[str, int]]:
        """(group, width) in order of first appearance: a group's columns are contiguous."""
        return list(self.widths.items())

    @property
    def names(self) -> list[str]:
        """The column names, in column order."""
        return list(self.index)

    def with_columns(self) -> ParserState:
        """A state without rows that starts from these columns and fields (pass 2 of two)."""
        return ParserState(self.path, self.fields, self.first_line, dict(self.index), dict(self.widths),
                           dict(self.group_line), dict(self.owner))

    def columns(self, names: Sequence[str], widths: Sequence[int], line: int | None = None) -> np.ndarray:
        """Column of each value of a line whose groups are `names` of `widths` values; a new group
        adds its columns. A width that changes or a column that two groups make is an InputError
        naming `line` (the line parser), or NeedsLineReader when no line is given (the bulk
        parser, which does not know it: the line parser then names it)."""
        cols: list[int] = []
        for group, width in zip(names, widths):
            columns = [group] if width == 1 else [f"{group}_{k}" for k in range(width)]
            known = self.widths.get(group)
            if known is None:
                self._new_group(group, width, columns, line)
            elif known != width:
                if line is None:
                    raise NeedsLineReader
                raise InputError(f"feature {group!r} has {width} values here but {known} on line {self.group_line[group]}",
                                 self.path, line)
            cols.extend(self.index[c] for c in columns)
        return np.array(cols, dtype=np.int64)

    def _new_group(self, group: str, width: int, columns: list[str], line: int | None) -> None:
        """Add the columns of a group first seen on `line`; see `columns` for the errors."""
        if line is not None:
            check_feature_name(group, self.path, line)
        for column in columns:
            if column in self.index:
                if line is None:
                    raise NeedsLineReader
                owner = self.owner[column]
                raise InputError(f"feature {group!r} clashes with {owner!r} of line {self.group_line[owner]}: both make a "
                                 f"column {column!r} (a group `name= v1 v2` has the columns name_0, name_1)", self.path, line)
        self.widths[group] = width
        self.group_line[group] = line or 0
        for column in columns:
            self.index[column] = len(self.index)
            self.owner[column] = group

    def n_rows(self) -> int:
        return sum(len(v) for v in self.values)

    def features(self) -> tuple[np.ndarray, dict[str, int]]:
        """(features, per column the rows that lack it, where any do) of the chunks, padded to every
        column: a feature a line lacks is 0."""
        names = self.names
        width, total = len(names), self.n_rows()
        if all(p is None and v.shape[1] == width for v, p in zip(self.values, self.present)):
            return (np.concatenate(self.values) if self.values else np.zeros((0, width))), {}
        features, present = np.zeros((total, width)), np.zeros(width, dtype=np.int64)
        row = 0
        for values, seen in zip(self.values, self.present):
            features[row:row + len(values), :values.shape[1]] = values
            present[:values.shape[1]] += len(values) if seen is None else seen.sum(axis=0)
            row += len(values)
        return features, {name: int(total - count) for name, count in zip(names, present) if count < total}

    def first_lacking(self, column: int) -> int | None:
        """The first row that lacks `column`, or None."""
        row = 0
        for values, seen in zip(self.values, self.present):
            if column >= values.shape[1]:
                return row
            if seen is not None and not seen[:, column].all():
                return row + int(np.flatnonzero(~seen[:, column])[0])
            row += len(values)
        return None

    def take_chunk(self) -> Chunk:
        """The rows of the one block parsed since the last call, which leave the state (its columns stay)."""
        (heads, runs), = self.runs
        chunk = Chunk(heads, runs, self.hyps.getvalue(), self.lengths[0], self.values[0], self.present[0],
                      self.totals[0] if self.totals else None)
        self.runs, self.hyps, self.lengths, self.values, self.present, self.totals = [], io.BytesIO(), [], [], [], []
        return chunk

    def nbest(self) -> NBestList:
        """The list of the parsed rows (their sentence ids already checked to run 0, 1, 2, ...).

        Each part is released once joined, so the peak holds one copy of the list more, not two."""
        heads = np.concatenate([h for h, _ in self.runs]) if self.runs else np.zeros(0, np.int64)
        lines = np.concatenate([r for _, r in self.runs]) if self.runs else np.zeros(0, np.int64)
        offsets = np.concatenate([[0], np.cumsum(np.bincount(heads, weights=lines).astype(np.int64))])
        ends = np.cumsum(np.concatenate([np.zeros(1, np.int64), *self.lengths]))
        hyps = StringColumn(self.hyps.getvalue(), ends)
        self.hyps, self.lengths = io.BytesIO(), []
        features, missing = self.features()
        self.values, self.present = [], []
        scores = np.concatenate(self.totals) if self.fields is not None and self.fields >= 4 else None
        self.totals = []
        return NBestList(offsets, hyps, features, self.names, self.groups, scores, missing)
