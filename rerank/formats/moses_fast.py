"""A bulk reader for well-formed Moses/Joshua n-best files, or None.

Blocks of whole lines are split with a few C-level string operations and numpy: fields on
`` ||| ``, then every feature field at once, checked to repeat one layout (the same names and
group widths on every line; else the lines are grouped by layout, as Joshua leaves features
out), its values floated column by column. Anything unusual (other
separators, `\\r`, a NUL, bytes that are not UTF-8, a group whose width changes, a bad id, number or
name, an unreadable file, standard input) returns None: `read_moses` then reads the file line
by line, which gives the exact errors and notes. What this path returns is identical to what
that reader returns.
"""

from __future__ import annotations

import io
import re
from typing import Any

import numpy as np

from rerank.errors import InputError
from rerank.io import UTF8_BOM, _open_binary
from rerank.nbest import NBestList, StringColumn

BLOCK = 1 << 18  # bytes per block of lines: a block and its temporaries stay in the CPU caches
SEP = " ||| "


class _Unusual(Exception):
    """The input needs the line-by-line reader."""


def _name(token: str) -> str:
    """The name of a `name=` token, or _Unusual."""
    if not token.endswith("=") or token.count("=") != 1 or len(token) == 1:
        raise _Unusual
    return token[:-1]


def _layout(period: list[str]):
    """(names, widths) of one line's Moses feature tokens (`name= v1 v2 ...`), or _Unusual: the one
    parser of the feature field (`rerank.formats.moses.parse_features_fast`) reads the first line;
    this path takes Moses dense groups only (Joshua's `name=value` pairs go by their own keys)."""
    from rerank.formats.moses import parse_features_fast

    if not all(token.endswith("=") or "=" not in token for token in period):
        raise _Unusual
    parsed = parse_features_fast(" ".join(period))
    if parsed is None or not parsed[0]:
        raise _Unusual
    names, widths, _ = parsed
    return tuple(names), tuple(widths)


def _floats(tokens: list[str]) -> np.ndarray:
    try:
        values = np.fromiter(map(float, tokens), np.float64, len(tokens))
    except ValueError:
        raise _Unusual from None
    if not np.isfinite(values).all():
        raise _Unusual
    return values


def _moses(fields: list[str], joined: str) -> tuple[tuple, np.ndarray]:
    """(layout, values (lines, values)) of Moses feature fields (`joined` with ` \\x00 `), all of one layout."""
    tokens = joined.split()
    n = len(fields)
    width = tokens.index("\x00") if n > 1 else len(tokens)
    period = width + 1
    if len(tokens) != n * period - 1 or tokens[width::period].count("\x00") != n - 1:
        raise _Unusual
    layout = _layout(tokens[:width])
    positions = [p for p in range(width) if "=" not in tokens[p]]
    for p in range(width):
        if p not in positions and tokens[p::period].count(tokens[p]) != n:
            raise _Unusual
    values = np.empty((n, len(positions)))
    for j, p in enumerate(positions):
        values[:, j] = _floats(tokens[p::period])
    return layout, values


_VALUE = re.compile(r"=\S*")  # a Joshua pair's value
_PAIR_VALUE = re.compile(r"=(\S*)")


def _joshua(fields: list[str], joined: str) -> list[tuple[np.ndarray, tuple, np.ndarray]]:
    """(rows, layout, values) of every layout of Joshua fields (`name=value`; features left out on
    some lines), in order of first line: lines are grouped by their fields without the values."""
    keys = _VALUE.sub("=", joined).split("\x00")
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(key, len(index)) for key in keys), np.int64, len(keys))
    if len(keys) != len(fields) or len(index) > 64 + len(keys) // 16:  # layouts as many as lines: read line by line
        raise _Unusual
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(index) + 1))
    groups = []
    for code, key in enumerate(index):
        rows = order[bounds[code]:bounds[code + 1]]
        names = tuple(_name(token) for token in key.split())
        values = _floats(_PAIR_VALUE.findall(" ".join([fields[r] for r in rows.tolist()])))
        if not names or len(set(names)) != len(names) or len(values) != len(rows) * len(names):
            raise _Unusual
        groups.append((rows, (names, (1,) * len(names)), values.reshape(len(rows), len(names))))
    return groups


def _columns(layout: tuple, state: dict) -> np.ndarray:
    """The columns of a layout's values; new groups add columns as the line reader does."""
    names, widths = layout
    cols: list[int] = []
    for group, width in zip(names, widths):
        columns = [group] if width == 1 else [f"{group}_{k}" for k in range(width)]
        known = state["widths"].get(group)
        if known is None:
            if any(c in state["index"] for c in columns):  # a clash: the line reader names it
                raise _Unusual
            state["widths"][group] = width
            state["groups"].append((group, width))
            for column in columns:
                state["index"][column] = len(state["index"])
        elif known != width:
            raise _Unusual
        cols.extend(state["index"][c] for c in columns)
    return np.array(cols, dtype=np.int64)


def _feature_block(fields: list[str], state: dict) -> None:
    """Append the block's dense features and which are present (None: all of the columns so far)."""
    n = len(fields)
    joined = " \x00 ".join(fields)
    if "= " not in joined and not joined.endswith("="):
        groups = _joshua(fields, joined)
    else:
        groups = [(np.arange(n), *_moses(fields, joined))]
    placed = [(rows, _columns(layout, state), values) for rows, layout, values in groups]
    width = len(state["index"])
    if len(placed) == 1 and np.array_equal(placed[0][1], np.arange(width)):
        state["values"].append(placed[0][2])
        state["present"].append(None)
        return
    dense, present = np.zeros((n, width)), np.zeros((n, width), dtype=bool)
    for rows, cols, values in placed:
        dense[np.ix_(rows, cols)] = values
        present[np.ix_(rows, cols)] = True
    state["values"].append(dense)
    state["present"].append(present)


def _separators(codes: np.ndarray, ends: np.ndarray, n_fields: int | None) -> np.ndarray:
    """Byte positions (lines, fields - 1) of the `|||` of every line (as many on each), or _Unusual.

    Every run of pipes must be a separator: exactly three, with a space on either side.
    """
    pipes = np.flatnonzero(codes == 124)
    starts = pipes[:-2][pipes[2:] - pipes[:-2] == 2]
    if 3 * len(starts) != len(pipes) or not len(starts) or starts[0] == 0 or starts[-1] + 3 >= len(codes):
        raise _Unusual
    if (codes[starts - 1] != 32).any() or (codes[starts + 3] != 32).any():
        raise _Unusual
    per_line = np.bincount(np.searchsorted(ends, starts), minlength=len(ends))
    k = int(per_line[0]) + 1
    if k < 3 or (n_fields is not None and k != n_fields) or (per_line != k - 1).any() or len(per_line) != len(ends):
        raise _Unusual
    return starts.reshape(len(ends), k - 1)


def _sentence_runs(ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(id, number of lines) of every run of equal ids; _Unusual unless all are plain decimals."""
    joined = "".join(ids)
    if not (joined.isdigit() and joined.isascii()) or "" in ids:
        raise _Unusual
    text = np.array(ids)
    starts = np.concatenate([[0], np.flatnonzero(text[1:] != text[:-1]) + 1])
    try:
        heads = np.array(list(map(int, text[starts].tolist())), dtype=np.int64)
    except OverflowError:
        raise _Unusual from None
    return heads, np.diff(np.append(starts, len(ids)))


def _block(data: bytes, state: dict) -> None:
    """Parse one block of whole lines into `state` (lists of per-block arrays)."""
    if b"\r" in data or b"\x00" in data:
        raise _Unusual
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Unusual from None
    codes = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(codes == 10)
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(codes))
    n = len(ends)
    seps = _separators(codes, ends, state["fields"])
    k = state["fields"] = seps.shape[1] + 1
    parts = (text[:-1] if text.endswith("\n") else text).split(SEP)
    edges = "\n".join(parts[0::k - 1]).split("\n")  # id0, last0, id1, last1, ...: the line breaks
    if len(parts) != n * (k - 1) + 1 or len(edges) != 2 * n:
        raise _Unusual
    state["ids"].append(_sentence_runs(edges[0::2]))
    state["hyps"].write("".join(parts[1::k - 1]).encode("utf-8"))
    state["lengths"].append(seps[:, 1] - seps[:, 0] - 5)
    _feature_block(parts[2::k - 1] if k > 3 else edges[1::2], state)
    if k >= 4:
        state["totals"].append(_floats(parts[3::k - 1] if k > 4 else edges[1::2]))


def _blocks(path: str):
    """Byte blocks of whole lines of `path` (BOM dropped), or _Unusual if it cannot be read."""
    try:
        raw, stream = _open_binary(path)
    except InputError:
        raise _Unusual from None
    try:
        rest, first = b"", True
        while True:
            chunk = stream.read(BLOCK)
            if first and chunk.startswith(UTF8_BOM):
                chunk = chunk[len(UTF8_BOM):]
            first = False
            if not chunk:
                break
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            if cut:
                yield data[:cut]
            rest = data[cut:]
        if rest:
            yield rest
    except Exception:  # noqa: BLE001 - broken gzip, I/O errors: the line reader names the line
        raise _Unusual from None
    finally:
        stream.close()
        raw.close()


def _dense(state: dict) -> tuple[np.ndarray, dict[str, int]]:
    """(features, per column the rows that lacked it) of the blocks, padded to every column."""
    names = list(state["index"])
    width, total = len(names), sum(len(v) for v in state["values"])
    if all(p is None and v.shape[1] == width for v, p in zip(state["values"], state["present"])):
        return np.concatenate(state["values"]), {}
    features, present = np.zeros((total, width)), np.zeros(width, dtype=np.int64)
    row = 0
    for values, seen in zip(state["values"], state["present"]):
        features[row:row + len(values), :values.shape[1]] = values
        present[:values.shape[1]] += len(values) if seen is None else seen.sum(axis=0)
        row += len(values)
    return features, {name: int(total - count) for name, count in zip(names, present) if count < total}


def _assemble(state: dict) -> NBestList:
    """The NBestList of the parsed blocks, or _Unusual if the sentence ids are not 0, 1, 2, ..."""
    heads = np.concatenate([h for h, _ in state["ids"]])
    step = np.diff(heads)
    if heads[0] != 0 or ((step != 0) & (step != 1)).any():
        raise _Unusual
    sizes = np.bincount(heads, weights=np.concatenate([r for _, r in state["ids"]])).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    hyps = StringColumn(state.pop("hyps").getvalue(), np.concatenate([[0], np.cumsum(np.concatenate(state.pop("lengths")))]))
    features, missing = _dense(state)
    del state["values"], state["present"]  # each block's arrays go once joined: the peak holds one copy more, not two
    scores = np.concatenate(state.pop("totals")) if state["fields"] >= 4 else None
    try:
        return NBestList(offsets, hyps, features, list(state["index"]), list(state["groups"]), scores, missing)
    except InputError:
        raise _Unusual from None


def read_moses_fast(path: str, strict: bool = False) -> tuple[NBestList, int] | None:
    """(n-best, lines with fields after the total) of a well-formed file, or None (read it line
    by line: standard input, anything unusual, and a missing feature with `strict`)."""
    if path == "-":
        return None
    state: dict[str, Any] = {"fields": None, "index": {}, "widths": {}, "groups": [], "ids": [], "hyps": io.BytesIO(),
                             "lengths": [], "values": [], "present": [], "totals": []}
    try:
        for data in _blocks(path):
            _block(data, state)
        if not state["ids"]:
            return None
        nbest = _assemble(state)
    except _Unusual:
        return None
    if strict and nbest.missing:
        return None
    return nbest, (nbest.n_hyps if state["fields"] > 4 else 0)
