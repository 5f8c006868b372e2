"""A bulk reader for well-formed Moses/Joshua n-best files, or None.

Blocks of whole lines are split with a few C-level string operations and numpy: fields on
`` ||| ``, then every feature field at once, checked to repeat one layout (the same names and
group widths on every line), its values floated column by column. Anything unusual (other
separators, `\\r`, a NUL, bytes that are not UTF-8, a layout that changes, a bad id, number or
name, an unreadable file, standard input) returns None: `read_moses` then reads the file line
by line, which gives the exact errors and notes. What this path returns is identical to what
that reader returns.
"""

from __future__ import annotations

import numpy as np

from rerank.errors import InputError
from rerank.io import UTF8_BOM, _open_binary
from rerank.nbest import NBestList, StringColumn

BLOCK = 1 << 23  # bytes per block of lines
SEP = " ||| "


class _Unusual(Exception):
    """The input needs the line-by-line reader."""


def _layout(period: list[str], joshua: bool):
    """(names, widths, value positions) of one line's feature tokens, or _Unusual."""
    names, widths, values = [], [], []
    for pos, token in enumerate(period):
        if "=" in token:
            if not token.endswith("=") or token.count("=") != 1 or len(token) == 1:
                raise _Unusual
            names.append(token[:-1])
            widths.append(0)
        elif not names:
            raise _Unusual
        else:
            widths[-1] += 1
            values.append(pos)
    if not names or 0 in widths or len(set(names)) != len(names) or (joshua and set(widths) != {1}):
        raise _Unusual
    return tuple(names), tuple(widths), values


def _floats(tokens: list[str]) -> np.ndarray:
    try:
        values = np.fromiter(map(float, tokens), np.float64, len(tokens))
    except ValueError:
        raise _Unusual from None
    if not np.isfinite(values).all():
        raise _Unusual
    return values


def _features(fields: list[str], layout):
    """(layout, values (n, n_values)) of the feature fields of a block, all of one layout."""
    joined = " \x00 ".join(fields)
    joshua = "= " not in joined and not joined.endswith("=")
    tokens = (joined.replace("=", "= ") if joshua else joined).split()
    n = len(fields)
    width = tokens.index("\x00") if n > 1 else len(tokens)
    period = width + 1
    if len(tokens) != n * period - 1 or tokens[width::period].count("\x00") != n - 1:
        raise _Unusual
    found = _layout(tokens[:width], joshua)
    if layout is not None and found != layout:
        raise _Unusual
    names, _, positions = found
    name_positions = [p for p in range(width) if p not in set(positions)]
    for p in name_positions:
        if tokens[p::period].count(tokens[p]) != n:
            raise _Unusual
    values = np.empty((n, len(positions)))
    for j, p in enumerate(positions):
        values[:, j] = _floats(tokens[p::period])
    return found, values


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
    state["hyps"].append("".join(parts[1::k - 1]).encode("utf-8"))
    state["lengths"].append(seps[:, 1] - seps[:, 0] - 5)
    state["layout"], values = _features(parts[2::k - 1] if k > 3 else edges[1::2], state["layout"])
    state["values"].append(values)
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
    except Exception:  # broken gzip, I/O errors: the line reader names the line
        raise _Unusual from None
    finally:
        stream.close()
        raw.close()


def _assemble(state: dict) -> NBestList:
    """The NBestList of the parsed blocks, or _Unusual if the sentence ids are not 0, 1, 2, ..."""
    heads = np.concatenate([h for h, _ in state["ids"]])
    step = np.diff(heads)
    if heads[0] != 0 or ((step != 0) & (step != 1)).any():
        raise _Unusual
    sizes = np.bincount(heads, weights=np.concatenate([r for _, r in state["ids"]])).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    hyps = StringColumn(b"".join(state["hyps"]), np.concatenate([[0], np.cumsum(np.concatenate(state["lengths"]))]))
    names, widths, _ = state["layout"]
    columns = [name if width == 1 else f"{name}_{k}" for name, width in zip(names, widths) for k in range(width)]
    if len(set(columns)) != len(columns):  # a group's columns clash with another's: the line reader says so
        raise _Unusual
    features = np.concatenate(state["values"])
    scores = np.concatenate(state["totals"]) if state["fields"] >= 4 else None
    try:
        return NBestList(offsets, hyps, features, columns, list(zip(names, widths)), scores, {})
    except InputError:
        raise _Unusual from None


def read_moses_fast(path: str) -> tuple[NBestList, int] | None:
    """(n-best, lines with fields after the total) of a well-formed file, or None (read it line by line)."""
    if path == "-":
        return None
    state = {"fields": None, "layout": None, "ids": [], "hyps": [], "lengths": [], "values": [], "totals": []}
    try:
        for data in _blocks(path):
            _block(data, state)
        if not state["ids"]:
            return None
        nbest = _assemble(state)
    except _Unusual:
        return None
    return nbest, (nbest.n_hyps if state["fields"] > 4 else 0)
