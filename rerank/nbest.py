"""The n-best data model: one columnar structure for a whole n-best list.

Hypotheses are stored CSR-style: sentence i owns rows ``offsets[i]:offsets[i+1]`` of the
feature matrix and of the hypothesis strings. Strings live in one UTF-8 byte buffer with
their own offsets, so a list of millions of hypotheses is a handful of arrays, not millions
of Python objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from rerank.errors import InputError
from rerank.names import check_feature_name, feature_name_problem, group_columns  # noqa: F401 (API)


class StringColumn(Sequence):
    """An immutable sequence of str kept as one UTF-8 buffer plus int64 offsets."""

    __slots__ = ("_buffer", "_offsets")

    def __init__(self, buffer: bytes, offsets: np.ndarray):
        self._buffer = buffer
        self._offsets = np.asarray(offsets, dtype=np.int64)

    @classmethod
    def from_strings(cls, strings: Iterable[str]) -> StringColumn:
        builder = StringColumnBuilder()
        for s in strings:
            builder.append(s)
        return builder.build()

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def raw(self) -> tuple[bytes, np.ndarray]:
        """The UTF-8 buffer and the int64 offsets (len + 1) of the strings in it (not to be modified)."""
        return self._buffer, self._offsets

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return self._strings(start, max(start, stop))
            return [self[i] for i in range(start, stop, step)]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        start, end = self._offsets[index], self._offsets[index + 1]
        return self._buffer[start:end].decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        n = len(self)
        for start in range(0, n, 4096):  # a block at a time: memory does not grow with the list
            yield from self._strings(start, min(start + 4096, n))

    def _strings(self, start: int, stop: int) -> list[str]:
        """Strings start..stop-1, decoded at once (split at inserted line breaks when none is in them)."""
        offsets = self._offsets[start:stop + 1]
        chunk = self._buffer[offsets[0]:offsets[-1]] if stop > start else b""
        if stop - start < 8 or b"\n" in chunk:
            bounds = offsets.tolist()
            return [self._buffer[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:])]
        data = np.frombuffer(chunk, dtype=np.uint8)
        return np.insert(data, offsets[1:-1] - offsets[0], 10).tobytes().decode("utf-8").split("\n")

    def first_containing(self, part: str) -> int | None:
        """Index of the first string containing `part` (searched in the buffer at C speed), or None."""
        needle = part.encode("utf-8")
        pos = self._buffer.find(needle)
        while pos >= 0:
            index = int(np.searchsorted(self._offsets, pos, side="right")) - 1
            if pos + len(needle) <= self._offsets[index + 1]:  # not a match across two strings
                return index
            pos = self._buffer.find(needle, pos + 1)
        return None

    def first_ending_with_cr(self) -> int | None:
        """Index of the first string ending in a carriage return, or None."""
        starts, ends = self._offsets[:-1], self._offsets[1:]
        rows = np.flatnonzero(ends > starts)
        last = np.frombuffer(self._buffer, dtype=np.uint8)[ends[rows] - 1] if len(rows) else np.zeros(0, np.uint8)
        hits = rows[last == ord("\r")]
        return int(hits[0]) if len(hits) else None

    def take(self, indices: Iterable[int]) -> StringColumn:
        return StringColumn.from_strings(self[int(i)] for i in indices)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StringColumn):
            return self._buffer == other._buffer and np.array_equal(self._offsets, other._offsets)
        return isinstance(other, Iterable) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"StringColumn({len(self)} strings)"


class StringColumnBuilder:
    """Append strings one at a time; `build()` returns the StringColumn."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._ends: list[int] = [0]
        self._size = 0

    def append(self, s: str) -> None:
        data = s.encode("utf-8")
        self._chunks.append(data)
        self._size += len(data)
        self._ends.append(self._size)
        if len(self._chunks) >= 65536:  # keep the Python object count bounded
            self._chunks = [b"".join(self._chunks)]

    def __len__(self) -> int:
        return len(self._ends) - 1

    def build(self) -> StringColumn:
        return StringColumn(b"".join(self._chunks), np.array(self._ends, dtype=np.int64))


@dataclass
class NBestList:
    """A whole n-best list as arrays.

    offsets:       int64 (n_sentences + 1,), CSR row pointers into the hypotheses
    hyps:          StringColumn (n_hyps,) hypothesis strings
    features:      float64 (n_hyps, n_features)
    feature_names: flat column names; a Moses group ``tm= a b`` gives ``tm_0``, ``tm_1``
    groups:        (group name, width) pairs covering the columns in order, for writing back
    scores:        float64 (n_hyps,) total score from the file, or None
    missing:       per feature, how many hypotheses lacked it (filled with 0)
    """

    offsets: np.ndarray
    hyps: StringColumn
    features: np.ndarray
    feature_names: list[str]
    groups: list[tuple[str, int]] = field(default_factory=list)
    scores: np.ndarray | None = None
    missing: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        self.features = np.asarray(self.features, dtype=np.float64)
        self.features = self.features.reshape(len(self.hyps), -1 if self.features.size else len(self.feature_names))
        if not isinstance(self.hyps, StringColumn):
            self.hyps = StringColumn.from_strings(self.hyps)
        if not self.groups:
            self.groups = [(name, 1) for name in self.feature_names]
        if self.scores is not None:
            self.scores = np.asarray(self.scores, dtype=np.float64)
        self._check()

    def _check(self) -> None:
        if self.offsets.ndim != 1 or len(self.offsets) < 1 or self.offsets[0] != 0:
            raise ValueError("offsets must be a 1-D array starting at 0")
        if np.any(np.diff(self.offsets) < 0):
            raise ValueError("offsets must be non-decreasing")
        if self.offsets[-1] != len(self.hyps):
            raise ValueError(f"offsets end at {self.offsets[-1]} but there are {len(self.hyps)} hypotheses")
        if self.features.shape != (len(self.hyps), len(self.feature_names)):
            raise ValueError(f"features have shape {self.features.shape}, expected ({len(self.hyps)}, {len(self.feature_names)})")
        if len(set(self.feature_names)) != len(self.feature_names):
            raise ValueError(f"duplicate feature names: {self.feature_names}")
        if sum(width for _, width in self.groups) != len(self.feature_names):
            raise ValueError("feature groups do not cover the feature columns")
        if self.scores is not None and self.scores.shape != (len(self.hyps),):
            raise ValueError("scores must have one value per hypothesis")
        self._check_content()
        # what the writers write of the groups (`tm= a b` -> tm_0, tm_1) must be what the readers make of it
        if [c for g, width in self.groups for c in group_columns(g, width)] != self.feature_names:
            raise ValueError(f"feature groups {self.groups} do not name the columns {self.feature_names}")
        if len({g for g, _ in self.groups}) != len(self.groups):
            raise ValueError(f"a feature group name repeats: {self.groups} (no reader accepts `tm= a b tm= c`)")

    def _check_content(self) -> None:
        """Names, values and strings that every format can write and read back (InputError)."""
        for name in dict.fromkeys(self.feature_names + [g for g, _ in self.groups]):
            check_feature_name(name)
        bad = np.argwhere(~np.isfinite(self.features))
        if len(bad):
            row, col = (int(x) for x in bad[0])
            raise InputError(f"feature {self.feature_names[col]!r} is {self.features[row, col]} on hypothesis {row} "
                             f"(sentence {self._sentence_of(row)}): values must be finite")
        if self.scores is not None and not np.isfinite(self.scores).all():
            row = int(np.flatnonzero(~np.isfinite(self.scores))[0])
            raise InputError(f"total score is {self.scores[row]} on hypothesis {row} (sentence {self._sentence_of(row)}): "
                             "values must be finite")
        broken = self.hyps.first_containing("\n")
        if broken is not None:
            raise InputError(f"hypothesis {broken} (sentence {self._sentence_of(broken)}) contains a line break")

    def _sentence_of(self, row: int) -> int:
        return int(np.searchsorted(self.offsets, row, side="right")) - 1

    @classmethod
    def from_lists(
        cls,
        hyps_per_sentence: Sequence[Sequence[str]],
        features_per_sentence: Sequence[np.ndarray],
        feature_names: Sequence[str],
        scores_per_sentence: Sequence[np.ndarray] | None = None,
    ) -> NBestList:
        """Build from per-sentence lists (the natural shape of a decoder's output)."""
        sizes = [len(h) for h in hyps_per_sentence]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        n_feats = len(feature_names)
        blocks = [np.asarray(f, dtype=np.float64).reshape(len(h), n_feats) for h, f in zip(hyps_per_sentence, features_per_sentence)]
        features = np.concatenate(blocks) if blocks else np.zeros((0, n_feats))
        scores = None
        if scores_per_sentence is not None:
            scores = np.concatenate([np.asarray(s, dtype=np.float64).reshape(-1) for s in scores_per_sentence]) if sizes else np.zeros(0)
        hyps = StringColumn.from_strings(h for block in hyps_per_sentence for h in block)
        return cls(offsets, hyps, features, list(feature_names), scores=scores)

    # --- shape -------------------------------------------------------------------------
    @property
    def n_sentences(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_hyps(self) -> int:
        return len(self.hyps)

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def sentence_of_hyp(self) -> np.ndarray:
        """Sentence index of every hypothesis, int64 (n_hyps,)."""
        return np.repeat(np.arange(self.n_sentences, dtype=np.int64), self.sizes)

    @property
    def rank_of_hyp(self) -> np.ndarray:
        """Position of every hypothesis in its own list (0 = first)."""
        return np.arange(self.n_hyps, dtype=np.int64) - np.repeat(self.offsets[:-1], self.sizes)

    def sentence(self, i: int) -> slice:
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    def column(self, name: str) -> np.ndarray:
        return self.features[:, self.feature_names.index(name)]

    # --- derived lists ------------------------------------------------------------------
    def feature_clash(self, name: str, replace: bool = False) -> str | None:
        """Why a column `name` cannot be added to this list (None if it can): `name` is already a
        column (unless `replace`), or it names a group of several columns (`tm` of tm_0, tm_1),
        which the writers would write as a second group `tm= c` after `tm= a b`: no reader takes that."""
        width = dict(self.groups).get(name, 1)
        if width > 1:
            columns = ", ".join(group_columns(name, width))
            return (f"{name!r} names the feature group `{name}=` of {width} columns ({columns}): a column {name!r} would "
                    f"be written as a second group `{name}=`, which no reader accepts; choose another name"
                    + (" or replace one of its columns" if replace else ""))
        if name in self.feature_names and not replace:
            return f"the n-best already has a feature {name!r}"
        return None

    def with_feature(self, name: str, values: np.ndarray, replace: bool = False) -> NBestList:
        """A copy with the column `name` added at the end; with `replace`, an existing column of
        that name is overwritten in place instead (a new name is still added). InputError for a
        name the list has without `replace`, and for the name of a group of columns (`feature_clash`)."""
        check_feature_name(name)
        problem = self.feature_clash(name, replace)
        if problem:
            raise InputError(problem)
        values = np.asarray(values, dtype=np.float64).reshape(self.n_hyps, 1)
        if name in self.feature_names:
            features = self.features.copy()
            features[:, self.feature_names.index(name)] = values[:, 0]
            missing = {k: v for k, v in self.missing.items() if k != name}  # the new values lack nothing
            return NBestList(self.offsets, self.hyps, features, list(self.feature_names), list(self.groups), self.scores, missing)
        return NBestList(
            self.offsets, self.hyps, np.hstack([self.features, values]), self.feature_names + [name],
            self.groups + [(name, 1)], self.scores, dict(self.missing),
        )

    def select_features(self, names: Sequence[str]) -> NBestList:
        """A copy with only the columns `names`, in that order, each its own group (a Moses group
        ``tm= a b`` is no longer one); InputError for a name that is not a column."""
        unknown = [name for name in names if name not in self.feature_names]
        if unknown:
            raise InputError(f"no feature column {', '.join(map(repr, unknown))}; the columns are "
                             f"{', '.join(self.feature_names) or '(none)'}")
        columns = [self.feature_names.index(name) for name in names]
        missing = {name: self.missing[name] for name in names if name in self.missing}
        return NBestList(self.offsets, self.hyps, self.features[:, columns], list(names), [], self.scores, missing)

    def select_sentences(self, indices: Sequence[int] | np.ndarray) -> NBestList:
        """The sub-list of the given sentences, in the given order, renumbered from 0."""
        ids = np.asarray(indices, dtype=np.int64)
        starts, ends = self.offsets[ids], self.offsets[ids + 1]
        rows = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)]) if len(ids) else np.zeros(0, np.int64)
        offsets = np.concatenate([[0], np.cumsum(ends - starts)])
        scores = None if self.scores is None else self.scores[rows]
        return NBestList(offsets, self.hyps.take(rows), self.features[rows], list(self.feature_names), list(self.groups), scores)

    def head(self, k: int) -> NBestList:
        """The first k hypotheses of every list."""
        keep = np.flatnonzero(self.rank_of_hyp < k)
        sizes = np.minimum(self.sizes, k)
        scores = None if self.scores is None else self.scores[keep]
        return NBestList(np.concatenate([[0], np.cumsum(sizes)]), self.hyps.take(keep), self.features[keep],
                         list(self.feature_names), list(self.groups), scores)

    def reorder(self, rows: np.ndarray) -> NBestList:
        """The same sentences with each list's hypotheses permuted by the global row order `rows`.

        `rows` must be a permutation that keeps every hypothesis inside its own sentence.
        """
        rows = np.asarray(rows, dtype=np.int64)
        if not np.array_equal(self.sentence_of_hyp[rows], self.sentence_of_hyp):
            raise ValueError("reorder must keep hypotheses within their own sentence")
        scores = None if self.scores is None else self.scores[rows]
        return NBestList(self.offsets, self.hyps.take(rows), self.features[rows], list(self.feature_names), list(self.groups), scores)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NBestList):
            return NotImplemented
        same_scores = (self.scores is None and other.scores is None) or (
            self.scores is not None and other.scores is not None and np.array_equal(self.scores, other.scores)
        )
        return (
            np.array_equal(self.offsets, other.offsets)
            and self.hyps == other.hyps
            and self.feature_names == other.feature_names
            and np.array_equal(self.features, other.features)
            and same_scores
        )


def concatenate(parts: Sequence[NBestList]) -> NBestList:
    """Join n-best lists of consecutive sentence ranges (e.g. shards) back into one."""
    if not parts:
        raise ValueError("nothing to concatenate")
    names = parts[0].feature_names
    for p in parts[1:]:
        if p.feature_names != names:
            raise ValueError(f"feature names differ: {names} vs {p.feature_names}")
    offsets = [np.zeros(1, np.int64)]
    base = 0
    for p in parts:
        offsets.append(p.offsets[1:] + base)
        base += p.n_hyps
    have_scores = all(p.scores is not None for p in parts)
    return NBestList(
        np.concatenate(offsets),
        StringColumn.from_strings(h for p in parts for h in p.hyps),
        np.concatenate([p.features for p in parts]),
        list(names),
        list(parts[0].groups),
        np.concatenate([p.scores for p in parts]) if have_scores else None,
    )


def segment_argmax(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Global row index of the maximum of `values` within each segment; ties go to the first.

    Works on a leading batch axis too: values (..., n_hyps) gives (..., n_segments).
    Every segment must be non-empty.
    """
    values = np.asarray(values)
    starts = offsets[:-1]
    if np.any(np.diff(offsets) == 0):
        raise ValueError("segment_argmax needs non-empty segments")
    maxima = np.maximum.reduceat(values, starts, axis=-1)
    sizes = np.diff(offsets)
    is_max = values == np.repeat(maxima, sizes, axis=-1)
    idx = np.arange(values.shape[-1])
    first = np.where(is_max, idx, values.shape[-1])
    return np.minimum.reduceat(first, starts, axis=-1)
