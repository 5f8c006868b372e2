"""Read and write n-best lists: Moses, Joshua, fairseq-generate/interactive, plain.

Readers parse one line at a time into growing numpy arrays (no per-hypothesis Python
objects survive the line), and report bad input as InputError with file and line.

Moses:   ``id ||| hypothesis ||| name= v1 v2 name2= v3 ||| total`` (total optional; extra
         trailing fields are tolerated and ignored)
Joshua:  the same with ``name=value`` pairs; features may be absent on some lines
fairseq: ``S-i``/``T-i``/``H-i``/``D-i``/``P-i`` tab-separated lines, ids in any order
plain:   one hypothesis per line, plus a sentence-id (or list-size) file and a features
         file (TSV with a header of names, or .npy)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from rerank.errors import InputError
from rerank.io import atomic_write, iter_lines, read_lines
from rerank.nbest import NBestList, StringColumnBuilder

FORMATS = ("moses", "joshua", "fairseq", "plain")
_FAIRSEQ_LINE = re.compile(r"^([A-Z])-(\d+)\t")


@dataclass
class ReadReport:
    """What a reader noticed that is not an error."""

    extra_fields_lines: int = 0
    ignored_lines: int = 0
    fairseq_refs: list[str] | None = None
    fairseq_sources: list[str] | None = None
    notes: list[str] = field(default_factory=list)


class _FeatureTable:
    """Feature rows collected line by line; columns may appear at any line (Joshua)."""

    CHUNK = 65536

    def __init__(self, path: str):
        self.path = path
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.groups: list[tuple[str, int]] = []
        self.group_width: dict[str, tuple[int, int]] = {}  # group -> (width, first line)
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
                self.group_width[group] = (width, line)
                self.groups.append((group, width))
            elif known[0] != width:
                raise InputError(f"feature {group!r} has {width} values here but {known[0]} on line {known[1]}", self.path, line)
            if width == 1:
                cols.append(self._column(group))
            else:
                cols.extend(self._column(f"{group}_{k}") for k in range(width))
        return np.array(cols, dtype=np.int64)

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
                dense[np.ix_(rows, cols)] = block
                present[np.ix_(rows, cols)] = True
        self._chunks.append((dense, present))
        self._rows = []

    def finish(self, strict: bool) -> tuple[np.ndarray, list[str], list[tuple[str, int]], dict[str, int]]:
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
                    raise InputError(f"feature {name!r} is missing (--strict)", self.path, self.lines[absent[0]])
                missing[name] = int(len(absent))
        # groups in column order (a group's columns are contiguous: they are created together)
        return dense, list(self.names), list(self.groups), missing


def _parse_number(token: str, what: str, path: str, line: int) -> float:
    try:
        value = float(token)
    except ValueError:
        raise InputError(f"{what}: {token!r} is not a number", path, line) from None
    if not math.isfinite(value):
        raise InputError(f"{what} is {token} (features must be finite)", path, line)
    return value


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
            current.append(_parse_number(token, f"feature {items[-1][0]!r}", path, line))
            continue
        if not name:
            raise InputError(f"feature token {token!r} has no name", path, line)
        if name in seen:
            raise InputError(f"feature {name!r} appears twice", path, line)
        seen.add(name)
        current = [] if value_text is None else [_parse_number(value_text, f"feature {name!r}", path, line)]
        items.append((name, current))
        if value_text is not None:
            current = None  # a name=value pair takes no further values
    for name, values in items:
        if not values:
            raise InputError(f"feature {name!r} has no value", path, line)
    return items


_PAIR = re.compile(r"([^\s=]+)=([^\s=]+)")
_GROUP_NAME = re.compile(r"(?:^|\s+)([^\s=]+)=(?=\s|$)")


def parse_features_fast(text: str):
    """(names, widths, values) of a well-formed feature field, or None.

    None sends the line to `parse_feature_field`, which accepts the same input and names
    the problem of a bad one; this path only makes the common case quick (regular
    expressions and C-level splits instead of a Python loop over tokens).
    """
    text = text.strip()
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
    if not math.isfinite(math.fsum(values)) or 0 in widths or len(set(names)) != len(names):
        return None
    return names, widths, values


def read_moses(path: str, strict: bool = False, report: ReadReport | None = None) -> NBestList:
    """Moses or Joshua n-best (`id ||| hyp ||| features [||| total [||| ...]]`)."""
    report = report if report is not None else ReadReport()
    table = _FeatureTable(path)
    hyps = StringColumnBuilder()
    sizes: list[int] = []
    totals: list[float] = []
    n_fields_first: tuple[int, int] | None = None
    previous_id = -1
    for number, text in iter_lines(path):
        if not text.strip():
            raise InputError("empty line (expected `id ||| hypothesis ||| features ||| total`)", path, number)
        fields = text.split("|||")
        if len(fields) < 3:
            raise InputError(f"{len(fields)} '|||'-separated fields, expected at least 3 (id ||| hypothesis ||| features [||| total])", path, number)
        has_total = len(fields) >= 4
        if n_fields_first is None:
            n_fields_first = (int(has_total), number)
        elif int(has_total) != n_fields_first[0]:
            expect = "4 (with a total score)" if n_fields_first[0] else "3 (no total score)"
            raise InputError(f"{len(fields)} '|||'-separated fields, but line {n_fields_first[1]} had {expect}", path, number)
        if len(fields) > 4:
            report.extra_fields_lines += 1
        id_text = fields[0].strip()
        try:
            sent_id = int(id_text)
        except ValueError:
            raise InputError(f"sentence id {id_text!r} is not an integer", path, number) from None
        if sent_id != previous_id:
            if previous_id == -1 and sent_id != 0:
                raise InputError(f"sentence ids must start at 0, the first is {sent_id}", path, number)
            if sent_id < previous_id:
                raise InputError(f"sentence id {sent_id} after {previous_id}: ids must be non-decreasing", path, number)
            if sent_id > previous_id + 1:
                raise InputError(f"sentence id {sent_id} after {previous_id}: sentence {previous_id + 1} has no hypotheses", path, number)
            sizes.append(0)
            previous_id = sent_id
        sizes[-1] += 1
        hyp = fields[1]
        hyps.append(hyp[1:-1] if hyp.startswith(" ") and hyp.endswith(" ") and len(hyp) >= 2 else hyp.strip())
        parsed = parse_features_fast(fields[2])
        if parsed is None:
            items = parse_feature_field(fields[2], path, number)
            parsed = (tuple(n for n, _ in items), tuple(len(v) for _, v in items), [x for _, v in items for x in v])
        table.add_row(*parsed, number)
        if has_total:
            totals.append(_parse_number(fields[3].strip(), "total score", path, number))
    if not sizes:
        raise InputError("empty n-best file", path)
    features, names, groups, missing = table.finish(strict)
    if report.extra_fields_lines:
        report.notes.append(f"{report.extra_fields_lines} lines have fields after the total score (ignored)")
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    scores = np.array(totals) if n_fields_first and n_fields_first[0] else None
    return NBestList(offsets, hyps.build(), features, names, groups, scores, missing)


def read_fairseq(path: str, field: str = "auto", report: ReadReport | None = None) -> NBestList:
    """fairseq-generate / fairseq-interactive output; the H/D score becomes feature `nmt`.

    field: "H" (tokenised hypotheses), "D" (detokenised) or "auto" (D when present).
    """
    report = report if report is not None else ReadReport()
    by_kind: dict[str, dict[int, list[tuple[int, list[str]]]]] = {k: {} for k in "STHD"}
    for number, text in iter_lines(path):
        match = _FAIRSEQ_LINE.match(text)
        if not match or match.group(1) not in "STHD":
            report.ignored_lines += 1
            continue
        kind, idx = match.group(1), int(match.group(2))
        parts = text.split("\t")
        entries = by_kind[kind].setdefault(idx, [])
        if kind in "ST" and entries:
            raise InputError(f"{kind}-{idx} appears twice (first on line {entries[0][0]})", path, number)
        if kind in "HD" and len(parts) < 2:
            raise InputError(f"{kind}-{idx} line needs `{kind}-{idx}<TAB>score<TAB>hypothesis`", path, number)
        entries.append((number, parts[1:]))
    if field == "auto":
        field = "D" if by_kind["D"] else "H"
    chosen = by_kind[field]
    if not chosen:
        raise InputError(f"no {field}-lines (fairseq hypotheses) found", path)
    ids = set(chosen) | set(by_kind["S"])
    n = max(ids) + 1
    for idx in range(n):
        if idx not in chosen:
            where = f" (S-{idx} is on line {by_kind['S'][idx][0][0]})" if idx in by_kind["S"] else ""
            raise InputError(f"sentence {idx} has no {field}-line hypotheses{where}; ids run 0..{n - 1}", path)
    hyps = StringColumnBuilder()
    sizes, scores = [], []
    for idx in range(n):
        entries = chosen[idx]
        sizes.append(len(entries))
        for number, parts in entries:
            scores.append(_parse_number(parts[0], f"{field}-{idx} score", path, number))
            hyps.append(parts[1] if len(parts) > 1 else "")
    if by_kind["T"]:
        report.fairseq_refs = [by_kind["T"][i][0][1][0] if i in by_kind["T"] else None for i in range(n)]
    if by_kind["S"]:
        report.fairseq_sources = [by_kind["S"][i][0][1][0] if i in by_kind["S"] else None for i in range(n)]
    if report.ignored_lines:
        report.notes.append(f"{report.ignored_lines} lines are not S/T/H/D lines (ignored: P-, W-, A- and log lines)")
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    values = np.array(scores)
    return NBestList(offsets, hyps.build(), values[:, None], ["nmt"], scores=values.copy())


def read_plain(path: str, ids: str | None = None, sizes: str | None = None, features: str | None = None,
               feature_names: list[str] | None = None) -> NBestList:
    """One hypothesis per line; `ids` (a sentence id per line) or `sizes` (list size per sentence)."""
    hyps = read_lines(path)
    if ids and sizes:
        raise InputError("give either an ids file or a sizes file, not both", path)
    if ids:
        id_lines = read_lines(ids)
        if len(id_lines) != len(hyps):
            raise InputError(f"{len(id_lines)} ids for {len(hyps)} hypotheses in {path}", ids)
        values = np.array([int(_parse_number(t, "sentence id", ids, i + 1)) for i, t in enumerate(id_lines)], dtype=np.int64)
        if len(values) and values[0] != 0:
            raise InputError(f"sentence ids must start at 0, the first is {values[0]}", ids, 1)
        steps = np.diff(values)
        bad = np.flatnonzero((steps < 0) | (steps > 1))
        if len(bad):
            raise InputError(f"sentence id {values[bad[0] + 1]} after {values[bad[0]]}: ids must run 0, 0, 1, ... without gaps", ids, int(bad[0]) + 2)
        counts = np.bincount(values) if len(values) else np.zeros(0, np.int64)
    elif sizes:
        counts = np.array([int(_parse_number(t, "list size", sizes, i + 1)) for i, t in enumerate(read_lines(sizes))], dtype=np.int64)
        if counts.sum() != len(hyps):
            raise InputError(f"list sizes add up to {counts.sum()} but {path} has {len(hyps)} hypotheses", sizes)
    else:
        counts = np.ones(len(hyps), dtype=np.int64)
    matrix, names = np.zeros((len(hyps), 0)), []
    if features:
        matrix, names = _read_feature_matrix(features, feature_names)
        if len(matrix) != len(hyps):
            raise InputError(f"{len(matrix)} feature rows for {len(hyps)} hypotheses in {path}", features)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return NBestList(offsets, hyps, matrix, names)


def _read_feature_matrix(path: str, names: list[str] | None) -> tuple[np.ndarray, list[str]]:
    if path.endswith(".npy"):
        try:
            matrix = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read .npy: {exc}", path) from None
        matrix = matrix.reshape(len(matrix), -1).astype(np.float64)
        names = names or [f"f{k}" for k in range(matrix.shape[1])]
    else:
        lines = iter_lines(path)
        try:
            _, header = next(lines)
        except StopIteration:
            raise InputError("empty features file", path) from None
        names = header.split("\t")
        rows = []
        for number, text in lines:
            cells = text.split("\t")
            if len(cells) != len(names):
                raise InputError(f"{len(cells)} columns, the header has {len(names)}", path, number)
            rows.append([_parse_number(c, f"feature {n!r}", path, number) for n, c in zip(names, cells)])
        matrix = np.array(rows, dtype=np.float64).reshape(len(rows), len(names))
    if len(names) != matrix.shape[1]:
        raise InputError(f"{len(names)} feature names for {matrix.shape[1]} columns", path)
    bad = np.argwhere(~np.isfinite(matrix))
    if len(bad):
        raise InputError(f"feature {names[bad[0][1]]!r} is {matrix[tuple(bad[0])]} (features must be finite)", path, int(bad[0][0]) + 1)
    return matrix, names


def detect_format(path: str) -> str:
    """Guess the format from the first non-empty line."""
    for _, text in iter_lines(path):
        if not text.strip():
            continue
        if "|||" in text:
            fields = text.split("|||")
            tokens = fields[2].split() if len(fields) > 2 else []
            return "joshua" if tokens and not any(t.endswith("=") for t in tokens) else "moses"
        return "fairseq" if _FAIRSEQ_LINE.match(text) else "plain"
    raise InputError("empty file: cannot tell its format", path)


def read_nbest(path: str, fmt: str | None = None, strict: bool = False, report: ReadReport | None = None,
               **plain_options) -> NBestList:
    """Read any supported n-best format (gzip'd or not); `fmt=None` detects it."""
    fmt = fmt or detect_format(path)
    if fmt in ("moses", "joshua"):
        return read_moses(path, strict=strict, report=report)
    if fmt == "fairseq":
        return read_fairseq(path, field=plain_options.get("fairseq_field", "auto"), report=report)
    if fmt == "plain":
        keys = ("ids", "sizes", "features", "feature_names")
        return read_plain(path, **{k: plain_options.get(k) for k in keys})
    raise InputError(f"unknown n-best format {fmt!r} (known: {', '.join(FORMATS)})", path)


def _format_value(value: float) -> str:
    return repr(float(value))


def iter_moses_lines(nbest: NBestList, style: str = "moses", scores: np.ndarray | None = None, first_id: int = 0):
    """Text lines of the n-best in Moses (`name= v`) or Joshua (`name=v`) style."""
    scores = nbest.scores if scores is None else scores
    sent = nbest.sentence_of_hyp + first_id
    bounds = np.cumsum([0] + [w for _, w in nbest.groups])
    for row, hyp in enumerate(nbest.hyps):
        values = nbest.features[row]
        parts = []
        for (name, width), start in zip(nbest.groups, bounds[:-1]):
            group_values = " ".join(_format_value(v) for v in values[start:start + width])
            parts.append(f"{name}={group_values}" if style == "joshua" and width == 1 else f"{name}= {group_values}")
        line = f"{sent[row]} ||| {hyp} ||| {' '.join(parts)}"
        if scores is not None:
            line += f" ||| {_format_value(scores[row])}"
        yield line


def write_nbest(nbest: NBestList, path: str, fmt: str = "moses", first_id: int = 0) -> list[str]:
    """Write `nbest` atomically; returns the paths written (plain writes three files).

    `first_id` numbers the sentences from there (a shard of a larger list keeps its ids, so
    shards concatenate back into the whole file).
    """
    if fmt in ("moses", "joshua"):
        with atomic_write(path) as out:
            for line in iter_moses_lines(nbest, style=fmt, first_id=first_id):
                out.write(line + "\n")
        return [path]
    if fmt == "fairseq":
        with atomic_write(path) as out:
            score_col = nbest.feature_names.index("nmt") if "nmt" in nbest.feature_names else None
            sent = nbest.sentence_of_hyp + first_id
            for row, hyp in enumerate(nbest.hyps):
                score = nbest.features[row, score_col] if score_col is not None else (nbest.scores[row] if nbest.scores is not None else 0.0)
                out.write(f"H-{sent[row]}\t{_format_value(score)}\t{hyp}\n")
        return [path]
    if fmt == "plain":
        with atomic_write(path) as out:
            for hyp in nbest.hyps:
                out.write(hyp + "\n")
        with atomic_write(path + ".ids") as out:
            out.writelines(f"{i}\n" for i in nbest.sentence_of_hyp + first_id)
        with atomic_write(path + ".features.tsv") as out:
            out.write("\t".join(nbest.feature_names) + "\n")
            for row in nbest.features:
                out.write("\t".join(_format_value(v) for v in row) + "\n")
        return [path, path + ".ids", path + ".features.tsv"]
    raise InputError(f"unknown n-best format {fmt!r} (known: {', '.join(FORMATS)})", path)


def read_references(paths: list[str], n_sentences: int | None = None) -> list[list[str]]:
    """Reference files (one line per sentence each) -> refs[k][i]; counts must agree."""
    refs = [read_lines(p) for p in paths]
    for path, lines in zip(paths, refs):
        if not lines:
            raise InputError("empty reference file", path)
        if len(lines) != len(refs[0]):
            raise InputError(f"{len(lines)} lines but {paths[0]} has {len(refs[0])}", path)
        if n_sentences is not None and len(lines) != n_sentences:
            raise InputError(f"{len(lines)} reference lines for {n_sentences} n-best sentences", path)
    return refs
