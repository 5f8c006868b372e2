"""Moses and Joshua n-best lines: ``id ||| hypothesis ||| features [||| total [||| ...]]``.

Moses writes dense feature groups (``name= v1 v2``), Joshua ``name=value`` pairs, and Joshua
may leave a feature out on some lines (filled with 0 and counted, or an error with `strict`).
Extra trailing fields are tolerated and ignored. Lines are parsed one at a time into growing
numpy arrays: no per-hypothesis Python objects survive the line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import partial

import numpy as np

from rerank.errors import InputError
from rerank.formats.common import ReadReport, parse_number
from rerank.formats.moses_fast import read_moses_fast
from rerank.formats.record import NBestFormat, Sample
from rerank.io import atomic_write, iter_lines
from rerank.nbest import NBestList, StringColumnBuilder, check_feature_name


class _FeatureTable:
    """Feature rows collected line by line; columns may appear at any line (Joshua)."""

    CHUNK = 65536

    def __init__(self, path: str):
        self.path = path
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.groups: list[tuple[str, int]] = []
        self.group_width: dict[str, tuple[int, int]] = {}  # group -> (width, first line)
        self.owner: dict[str, tuple[str, int]] = {}  # column -> (its group, the group's first line)
        self._chunks: list[tuple[np.ndarray, np.ndarray]] = []
        self._layouts: dict[tuple, int] = {}  # (names, widths) of a line -> layout id
        self._layout_cols: list[np.ndarray] = []  # layout id -> column of each value
        self._rows: list[tuple[int, list[float]]] = []
        self.lines: list[int] = []

    def _column(self, name: str) -> int:
        col = self.index.get(name)
        if col is None:
            col = self.index[name] = len(self.names)
            self.names.append(name)
        return col

    def add_row(self, names: tuple[str, ...], widths: tuple[int, ...], values: list[float], line: int) -> None:
        """One hypothesis' features: groups `names` of `widths` values, flattened in `values`."""
        key = (names, widths)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts[key] = len(self._layout_cols)
            self._layout_cols.append(self._columns_of(names, widths, line))
        self._rows.append((layout, values))
        self.lines.append(line)
        if len(self._rows) >= self.CHUNK:
            self._flush()

    def _columns_of(self, names, widths, line: int) -> np.ndarray:
        cols: list[int] = []
        for group, width in zip(names, widths):
            known = self.group_width.get(group)
            if known is None:
                self._new_group(group, width, line)
            elif known[0] != width:
                raise InputError(f"feature {group!r} has {width} values here but {known[0]} on line {known[1]}", self.path, line)
            columns = [group] if width == 1 else [f"{group}_{k}" for k in range(width)]
            cols.extend(self.index[c] for c in columns)
        return np.array(cols, dtype=np.int64)

    def _new_group(self, group: str, width: int, line: int) -> None:
        """Columns of a group seen first on `line`; a column another group already made is an error."""
        check_feature_name(group, self.path, line)
        columns = [group] if width == 1 else [f"{group}_{k}" for k in range(width)]
        for column in columns:
            if column in self.index:
                owner, first = self.owner[column]
                raise InputError(f"feature {group!r} clashes with {owner!r} of line {first}: both make a column {column!r} "
                                 "(a group `name= v1 v2` has the columns name_0, name_1)", self.path, line)
        self.group_width[group] = (width, line)
        self.groups.append((group, width))
        for column in columns:
            self._column(column)
            self.owner[column] = (group, line)

    def _flush(self) -> None:
        """Move the pending rows into a dense chunk, one numpy assignment per line layout."""
        if not self._rows:
            return
        n = len(self._rows)
        dense = np.zeros((n, len(self.names)))
        present = np.zeros((n, len(self.names)), dtype=bool)
        by_layout: dict[int, list[int]] = {}
        for r, (layout, _) in enumerate(self._rows):
            by_layout.setdefault(layout, []).append(r)
        for layout, rows in by_layout.items():
            cols = self._layout_cols[layout]
            if len(cols):
                block = np.array([self._rows[r][1] for r in rows], dtype=np.float64)
                cells = np.ix_(np.asarray(rows), cols)
                dense[cells] = block
                present[cells] = True
        self._chunks.append((dense, present))
        self._rows = []

    def finish(self, strict: bool) -> tuple[np.ndarray, list[str], list[tuple[str, int]], dict[str, int]]:
        """(features, names, groups, missing counts); a missing feature is 0, or an error if `strict`."""
        self._flush()
        width = len(self.names)
        dense = np.zeros((0, width))
        present = np.zeros((0, width), dtype=bool)
        if self._chunks:
            pad = lambda a, fill: np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=fill)  # noqa: E731
            dense = np.concatenate([pad(d, 0.0) for d, _ in self._chunks])
            present = np.concatenate([pad(p, False) for _, p in self._chunks])
        missing = {}
        for col, name in enumerate(self.names):
            absent = np.flatnonzero(~present[:, col])
            if len(absent):
                if strict:
                    raise InputError(f"feature {name!r} is missing (strict reading)", self.path, self.lines[absent[0]])
                missing[name] = int(len(absent))
        # groups in column order (a group's columns are contiguous: they are created together)
        return dense, list(self.names), list(self.groups), missing


def parse_feature_field(text: str, path: str, line: int) -> list[tuple[str, list[float]]]:
    """``a= 1 2 b=3`` -> [("a", [1.0, 2.0]), ("b", [3.0])]; duplicate names are errors."""
    items: list[tuple[str, list[float]]] = []
    seen: set[str] = set()
    current: list[float] | None = None
    for token in text.split():
        if token.endswith("="):
            name, value_text = token[:-1], None
        elif "=" in token:
            name, _, value_text = token.partition("=")
        else:
            if current is None:
                raise InputError(f"feature value {token!r} comes before any feature name", path, line)
            current.append(parse_number(token, f"feature {items[-1][0]!r}", path, line))
            continue
        if not name:
            raise InputError(f"feature token {token!r} has no name", path, line)
        if name in seen:
            raise InputError(f"feature {name!r} appears twice", path, line)
        seen.add(name)
        current = [] if value_text is None else [parse_number(value_text, f"feature {name!r}", path, line)]
        items.append((name, current))
        if value_text is not None:
            current = None  # a name=value pair takes no further values
    for name, values in items:
        if not values:
            raise InputError(f"feature {name!r} has no value", path, line)
    return items


_PAIR = re.compile(r"([^\s=]+)=([^\s=]+)")
_GROUP_NAME = re.compile(r"(?:^|\s+)([^\s=]+)=(?=\s|$)")


def parse_features_fast(text: str) -> tuple[tuple[str, ...], tuple[int, ...], list[float]] | None:
    """(names, widths, values) of a well-formed feature field, or None.

    None sends the line to `parse_feature_field`, which accepts the same input and names
    the problem of a bad one; this path only makes the common case quick (regular
    expressions and C-level splits instead of a Python loop over tokens).
    """
    text = text.strip()
    raw: Sequence[str]
    if "= " not in text and not text.endswith("="):  # Joshua: name=value pairs only
        pairs = _PAIR.findall(text)
        if len(pairs) != len(text.split()):
            return None
        names, raw = zip(*pairs) if pairs else ((), ())
        widths = (1,) * len(names)
    else:  # Moses: dense groups `name= v1 v2`
        parts = _GROUP_NAME.split(text)
        if parts[0]:
            return None
        names = tuple(parts[1::2])
        groups = [chunk.split() for chunk in parts[2::2]]
        widths = tuple(len(g) for g in groups)
        raw = [v for g in groups for v in g]
        if any("=" in v for v in raw):
            return None
    try:
        values = list(map(float, raw))
    except ValueError:
        return None
    # sum, not fsum: huge values may overflow the sum (inf), which sends them to the checking parser
    if not math.isfinite(sum(values)) or 0 in widths or len(set(names)) != len(names):
        return None
    return names, widths, values


def _feature_row(text: str, path: str, line: int) -> tuple[tuple[str, ...], tuple[int, ...], list[float]]:
    """(names, widths, values) of a feature field: the fast path, else the checking parser."""
    parsed = parse_features_fast(text)
    if parsed is None:
        items = parse_feature_field(text, path, line)
        parsed = (tuple(n for n, _ in items), tuple(len(v) for _, v in items), [x for _, v in items for x in v])
    return parsed


def _split_fields(text: str, path: str, line: int, first: tuple[int, int] | None) -> list[str]:
    """The '|||' fields of a line; every line has a total score iff the first one (`first`) has."""
    if not text.strip():
        raise InputError("empty line (expected `id ||| hypothesis ||| features ||| total`)", path, line)
    fields = text.split("|||")
    if len(fields) < 3:
        raise InputError(f"{len(fields)} '|||'-separated fields, expected at least 3 "
                         "(id ||| hypothesis ||| features [||| total])", path, line)
    if first is not None and int(len(fields) >= 4) != first[0]:
        expect = "4 (with a total score)" if first[0] else "3 (no total score)"
        raise InputError(f"{len(fields)} '|||'-separated fields, but line {first[1]} had {expect}", path, line)
    return fields


def _bad_id(text: str, path: str, line: int) -> int:
    """The InputError for a sentence id that is not a plain non-negative decimal integer."""
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"sentence id {text!r} is not an integer", path, line) from None
    raise InputError(f"sentence id {text!r} is {'negative' if value < 0 else 'not a plain decimal integer'}", path, line)


def _check_next_id(sent_id: int, previous: int, path: str, line: int) -> None:
    """A new sentence id must continue 0, 1, 2, ... (ids are non-decreasing, without gaps)."""
    if previous == -1 and sent_id != 0:
        raise InputError(f"sentence ids must start at 0, the first is {sent_id}", path, line)
    if sent_id < previous:
        raise InputError(f"sentence id {sent_id} after {previous}: ids must be non-decreasing", path, line)
    if sent_id > previous + 1:
        raise InputError(f"sentence id {sent_id} after {previous}: sentence {previous + 1} has no hypotheses", path, line)


def read_moses(path: str, strict: bool = False, report: ReadReport | None = None) -> NBestList:
    """Moses or Joshua n-best: in bulk when the file is well-formed, else line by line."""
    report = report if report is not None else ReadReport()
    fast = read_moses_fast(path, strict)
    if fast is None:
        return read_moses_lines(path, strict, report)
    nbest, extra = fast
    report.extra_fields_lines += extra
    _notes(report, nbest.missing, nbest.n_hyps)
    return nbest


def _notes(report: ReadReport, missing: dict[str, int], n_hyps: int) -> None:
    """The notes of a read: lines with extra fields, features missing on some lines."""
    if report.extra_fields_lines:
        report.notes.append(f"{report.extra_fields_lines} lines have fields after the total score (ignored)")
    report.notes.extend(f"feature {name} missing on {count} of {n_hyps} lines, read as 0 (strict reading makes this an error)"
                        for name, count in missing.items())


def read_moses_lines(path: str, strict: bool = False, report: ReadReport | None = None, lines=None) -> NBestList:
    """Moses or Joshua n-best, line by line (the errors name the first bad line and its problem);
    `lines`: (number, text) pairs to read instead of the file's (a reader that rewrites lines)."""
    report = report if report is not None else ReadReport()
    table = _FeatureTable(path)
    hyps = StringColumnBuilder()
    sizes: list[int] = []
    totals: list[float] = []
    first: tuple[int, int] | None = None  # (has a total score, line) of the first line
    previous_id = -1
    for number, text in iter_lines(path) if lines is None else lines:
        fields = _split_fields(text, path, number, first)
        has_total = len(fields) >= 4
        if first is None:
            first = (int(has_total), number)
        if len(fields) > 4:
            report.extra_fields_lines += 1
        id_text = fields[0].strip()
        sent_id = int(id_text) if id_text.isdigit() and id_text.isascii() else _bad_id(id_text, path, number)
        if sent_id != previous_id:
            _check_next_id(sent_id, previous_id, path, number)
            sizes.append(0)
            previous_id = sent_id
        sizes[-1] += 1
        hyp = fields[1]
        hyps.append(hyp[1:-1] if hyp.startswith(" ") and hyp.endswith(" ") and len(hyp) >= 2 else hyp.strip())
        table.add_row(*_feature_row(fields[2], path, number), number)
        if has_total:
            totals.append(parse_number(fields[3].strip(), "total score", path, number))
    features, names, groups, missing = table.finish(strict)
    _notes(report, missing, len(hyps))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    scores = np.array(totals) if first and first[0] else None
    return NBestList(offsets, hyps.build(), features, names, groups, scores, missing)


def iter_moses_lines(nbest: NBestList, style: str = "moses", scores: np.ndarray | None = None, first_id: int = 0):
    """Text lines of the n-best in Moses (`name= v`) or Joshua (`name=v`) style.

    A block of rows at a time: every value's text is made column by column (`repr` of the
    float, as `format_value`) and the lines by one format template."""
    scores = nbest.scores if scores is None else scores
    parts = []
    for name, width in nbest.groups:
        name = name.replace("{", "{{").replace("}", "}}")
        parts.append(f"{name}={{}}" if style == "joshua" and width == 1 else f"{name}= " + " ".join(["{}"] * width))
    template = "{} ||| {} ||| " + " ".join(parts) + (" ||| {}" if scores is not None else "")
    sentence = nbest.sentence_of_hyp + first_id
    for start in range(0, nbest.n_hyps, 4096):
        stop = min(start + 4096, nbest.n_hyps)
        columns = [map(str, sentence[start:stop].tolist()), nbest.hyps[start:stop]]
        columns += [map(repr, nbest.features[start:stop, k].tolist()) for k in range(nbest.features.shape[1])]
        if scores is not None:
            columns.append(map(repr, np.asarray(scores[start:stop], dtype=np.float64).tolist()))
        yield from map(template.format, *columns)


def write_moses(nbest: NBestList, path: str, style: str = "moses", first_id: int = 0) -> list[str]:
    """Write `nbest` atomically in Moses or Joshua `style`; returns [path]."""
    row = nbest.hyps.first_containing("|||")
    if row is not None:
        raise InputError(f"hypothesis {row} ({nbest.hyps[row]!r}) contains '|||', which {style} lines cannot hold "
                         "(the plain and fairseq formats can)", path)
    with atomic_write(path) as out:
        for line in iter_moses_lines(nbest, style=style, first_id=first_id):
            out.write(line + "\n")
    return [path]


def moses_fields(sample: Sample) -> list[str] | None:
    """The `|||` fields of the first line, when it is a line of the Moses layout."""
    return sample.first.split("|||") if "|||" in sample.first else None


def _is_joshua(fields: list[str]) -> bool:
    tokens = fields[2].split() if len(fields) > 2 else []
    return bool(tokens) and not any(t.endswith("=") for t in tokens)


def _read(path: str, *, strict: bool = False, report: ReadReport | None = None) -> NBestList:
    return read_moses(path, strict=strict, report=report)


MOSES = NBestFormat(
    name="moses", layout="id ||| hypothesis ||| name= v1 v2 name2= v3 ||| total (total optional; trailing fields ignored)",
    producers="Moses (-n-best-list), kbmira/MERT tools, rerank convert",
    read=_read, write=partial(write_moses, style="moses"),
    detect=lambda sample: (fields := moses_fields(sample)) is not None and not _is_joshua(fields),
    detect_order=42, streamed=True, cached=True)

JOSHUA = NBestFormat(
    name="joshua", layout="id ||| hypothesis ||| name=v name2=v ||| total (a feature may be absent on some lines)",
    producers="Joshua, cdec", read=_read, write=partial(write_moses, style="joshua"),
    detect=lambda sample: (fields := moses_fields(sample)) is not None and _is_joshua(fields),
    detect_order=41, streamed=True, cached=True)
