"""The line parser of Moses and Joshua n-best lines: ``id ||| hypothesis ||| features [||| total [||| ...]]``.

Moses writes dense feature groups (``name= v1 v2``), Joshua ``name=value`` pairs, and Joshua
may leave a feature out on some lines (filled with 0 and counted, or an error with `strict`).
Extra trailing fields are tolerated and ignored. Lines are parsed one at a time into the read's
ParserState (rerank.formats.moses.state), a chunk of numpy rows at a time: no per-hypothesis
Python objects survive the line. This parser accepts every valid file and names the first bad
line and its problem; the bulk parser (rerank.formats.moses.fast) only makes the common case
quick, and `parse_features_fast` is the feature-field parser both use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import numpy as np

from rerank.errors import InputError
from rerank.formats.common import ReadReport, parse_number
from rerank.formats.moses.state import ParserState
from rerank.io import iter_lines
from rerank.nbest import NBestList


class FeatureTable:
    """Feature rows collected line by line into a ParserState; columns may appear at any line
    (Joshua). Pending rows become one dense chunk of the state every CHUNK rows, one numpy
    assignment per line layout (the names and widths of a line)."""

    CHUNK = 65536

    def __init__(self, path: str, state: ParserState | None = None):
        self.state = state if state is not None else ParserState(path)
        self._layouts: dict[tuple, int] = {}  # (names, widths) of a line -> layout id
        self._layout_cols: list[np.ndarray] = []  # layout id -> column of each value
        self._rows: list[tuple[int, list[float]]] = []
        self.lines: list[int] = []  # line number of every row (the strict reading's error)

    def add_row(self, names: tuple[str, ...], widths: tuple[int, ...], values: list[float], line: int) -> None:
        """One hypothesis' features: groups `names` of `widths` values, flattened in `values`."""
        key = (names, widths)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts[key] = len(self._layout_cols)
            self._layout_cols.append(self.state.columns(names, widths, line))
        self._rows.append((layout, values))
        self.lines.append(line)
        if len(self._rows) >= self.CHUNK:
            self.flush()

    def flush(self) -> None:
        """Move the pending rows into a dense chunk of the state."""
        if not self._rows:
            return
        n, width = len(self._rows), len(self.state.index)
        dense = np.zeros((n, width))
        present = np.zeros((n, width), dtype=bool)
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
        self.state.values.append(dense)
        self.state.present.append(present)
        self._rows = []

    def check_complete(self, strict: bool) -> None:
        """With `strict`, a feature missing on a line is an error naming the first such line (of the
        first such column)."""
        self.flush()
        if not strict:
            return
        for col, name in enumerate(self.state.names):
            row = self.state.first_lacking(col)
            if row is not None:
                raise InputError(f"feature {name!r} is missing (strict reading)", self.state.path, self.lines[row])

    def finish(self, strict: bool) -> tuple[np.ndarray, list[str], list[tuple[str, int]], dict[str, int]]:
        """(features, names, groups, missing counts); a missing feature is 0, or an error if `strict`."""
        self.check_complete(strict)
        features, missing = self.state.features()
        return features, self.state.names, self.state.groups, missing


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


def _split_fields(text: str, state: ParserState, line: int) -> list[str]:
    """The '|||' fields of a line; every line has a total score iff the first one (`state.fields`) has."""
    if not text.strip():
        raise InputError("empty line (expected `id ||| hypothesis ||| features ||| total`)", state.path, line)
    fields = text.split("|||")
    if len(fields) < 3:
        raise InputError(f"{len(fields)} '|||'-separated fields, expected at least 3 "
                         "(id ||| hypothesis ||| features [||| total])", state.path, line)
    if state.fields is not None and (len(fields) >= 4) != (state.fields >= 4):
        expect = "4 (with a total score)" if state.fields >= 4 else "3 (no total score)"
        raise InputError(f"{len(fields)} '|||'-separated fields, but line {state.first_line} had {expect}", state.path, line)
    return fields


def _bad_id(text: str, path: str, line: int) -> int:
    """The InputError for a sentence id that is not a plain non-negative decimal integer."""
    if text.isdigit() and text.isascii():
        raise InputError(f"sentence id {text[:20]}... is too large ({len(text)} digits)", path, line)
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"sentence id {text!r} is not an integer", path, line) from None
    raise InputError(f"sentence id {text!r} is {'negative' if value < 0 else 'not a plain decimal integer'}", path, line)


def check_next_id(sent_id: int, previous: int, path: str, line: int) -> None:
    """A new sentence id must continue 0, 1, 2, ... (ids are non-decreasing, without gaps)."""
    if previous == -1 and sent_id != 0:
        raise InputError(f"sentence ids must start at 0, the first is {sent_id}", path, line)
    if sent_id < previous:
        raise InputError(f"sentence id {sent_id} after {previous}: ids must be non-decreasing", path, line)
    if sent_id > previous + 1:
        raise InputError(f"sentence id {sent_id} after {previous}: sentence {previous + 1} has no hypotheses", path, line)


def read_notes(report: ReadReport, missing: dict[str, int], n_hyps: int) -> None:
    """The notes of a read: lines with extra fields, features missing on some lines."""
    if report.extra_fields_lines:
        report.notes.append(f"{report.extra_fields_lines} lines have fields after the total score (ignored)")
    report.notes.extend(f"feature {name} missing on {count} of {n_hyps} lines, read as 0 (strict reading makes this an error)"
                        for name, count in missing.items())


def read_moses_lines(path: str, strict: bool = False, report: ReadReport | None = None,
                     lines: Iterable[tuple[int, str]] | None = None) -> NBestList:
    """Moses or Joshua n-best, line by line (the errors name the first bad line and its problem);
    `lines`: (number, text) pairs to read instead of the file's (a reader that rewrites lines)."""
    report = report if report is not None else ReadReport()
    state = ParserState(path)
    table = FeatureTable(path, state)
    lengths: list[int] = []
    sizes: list[int] = []
    totals: list[float] = []
    previous_id = -1
    for number, text in iter_lines(path) if lines is None else lines:
        fields = _split_fields(text, state, number)
        if state.fields is None:
            state.fields, state.first_line = len(fields), number
        if len(fields) > 4:
            report.extra_fields_lines += 1
        id_text = fields[0].strip()
        plain = id_text.isdigit() and id_text.isascii() and len(id_text) <= 18
        sent_id = int(id_text) if plain else _bad_id(id_text, path, number)
        if sent_id != previous_id:
            check_next_id(sent_id, previous_id, path, number)
            sizes.append(0)
            previous_id = sent_id
        sizes[-1] += 1
        hyp = fields[1]
        lengths.append(state.hyps.write((hyp[1:-1] if hyp.startswith(" ") and hyp.endswith(" ") and len(hyp) >= 2
                                         else hyp.strip()).encode("utf-8")))
        table.add_row(*_feature_row(fields[2], path, number), number)
        if len(fields) >= 4:
            totals.append(parse_number(fields[3].strip(), "total score", path, number))
    table.check_complete(strict)
    state.runs.append((np.arange(len(sizes), dtype=np.int64), np.array(sizes, dtype=np.int64)))
    state.lengths.append(np.array(lengths, dtype=np.int64))
    state.totals.append(np.array(totals, dtype=np.float64))
    nbest = state.nbest()
    read_notes(report, nbest.missing, nbest.n_hyps)
    return nbest
