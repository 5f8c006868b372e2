"""The bulk parser of well-formed Moses/Joshua n-best files.

Blocks of whole lines are split with a few C-level string operations and numpy: fields on
`` ||| ``, then every feature field at once, checked to repeat one layout (the same names and
group widths on every line; else the lines are grouped by layout, as Joshua leaves features
out), its values floated column by column, into the read's ParserState. What this parser returns
is identical to what the line parser (rerank.formats.moses.parse) returns.

It raises NeedsLineReader, and `read_moses` reads the file line by line, exactly when the input
is one it does not handle, each a case the line parser either accepts or refuses naming file and
line: standard input; a file it cannot open or read to the end (I/O errors, broken gzip data);
`\r`, NUL or bytes that are not UTF-8; a run of pipes that is not ` ||| `, or lines with
different numbers of fields; an id that is not a plain decimal or ids that do not run 0, 1, 2,
...; a feature field that is not `name= v ...` groups of one layout or Joshua `name=value` pairs
(with as many layouts as lines: read line by line); a value that is not a finite float; a group
whose width changes or whose column another group makes; an invalid feature name; with `strict`,
a feature missing on a line. Any other exception is a bug, and propagates.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator

import numpy as np

from rerank.dedup import distinct_index
from rerank.errors import InputError
from rerank.formats.moses.parse import parse_features_fast
from rerank.formats.moses.state import NeedsLineReader, ParserState
from rerank.io import UTF8_BOM, open_binary, reading_bar
from rerank.nbest import NBestList, feature_name_problem

BLOCK = 1 << 18  # bytes per block of lines: a block and its temporaries stay in the CPU caches
SEP = " ||| "


def _name(token: str) -> str:
    """The name of a `name=` token, or NeedsLineReader."""
    if not token.endswith("=") or token.count("=") != 1 or len(token) == 1:
        raise NeedsLineReader
    return token[:-1]


def _layout(period: list[str]):
    """(names, widths) of one line's Moses feature tokens (`name= v1 v2 ...`), or NeedsLineReader: the
    one parser of the feature field (`parse_features_fast`) reads the first line; this path takes
    Moses dense groups only (Joshua's `name=value` pairs go by their own keys)."""
    if not all(token.endswith("=") or "=" not in token for token in period):
        raise NeedsLineReader
    parsed = parse_features_fast(" ".join(period))
    if parsed is None or not parsed[0]:
        raise NeedsLineReader
    names, widths, _ = parsed
    return tuple(names), tuple(widths)


def _floats(tokens: list[str]) -> np.ndarray:
    try:
        values = np.fromiter(map(float, tokens), np.float64, len(tokens))
    except ValueError:
        raise NeedsLineReader from None
    if not np.isfinite(values).all():
        raise NeedsLineReader
    return values


def _moses(fields: list[str], joined: str) -> tuple[tuple, np.ndarray]:
    """(layout, values (lines, values)) of Moses feature fields (`joined` with ` \\x00 `), all of one layout."""
    tokens = joined.split()
    n = len(fields)
    width = tokens.index("\x00") if n > 1 else len(tokens)
    period = width + 1
    if len(tokens) != n * period - 1 or tokens[width::period].count("\x00") != n - 1:
        raise NeedsLineReader
    layout = _layout(tokens[:width])
    positions = [p for p in range(width) if "=" not in tokens[p]]
    for p in range(width):
        if p not in positions and tokens[p::period].count(tokens[p]) != n:
            raise NeedsLineReader
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
    codes, index = distinct_index(keys)
    if len(keys) != len(fields) or len(index) > 64 + len(keys) // 16:  # layouts as many as lines: read line by line
        raise NeedsLineReader
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(index) + 1))
    groups = []
    for code, key in enumerate(index):
        rows = order[bounds[code]:bounds[code + 1]]
        names = tuple(_name(token) for token in key.split())
        values = _floats(_PAIR_VALUE.findall(" ".join([fields[r] for r in rows.tolist()])))
        if not names or len(set(names)) != len(names) or len(values) != len(rows) * len(names):
            raise NeedsLineReader
        groups.append((rows, (names, (1,) * len(names)), values.reshape(len(rows), len(names))))
    return groups


def _feature_block(fields: list[str], state: ParserState) -> None:
    """Append the block's dense features and which are present (None: all of the columns so far)."""
    n = len(fields)
    joined = " \x00 ".join(fields)
    if "= " not in joined and not joined.endswith("="):
        groups = _joshua(fields, joined)
    else:
        groups = [(np.arange(n), *_moses(fields, joined))]
    placed = [(rows, state.columns(*layout), values) for rows, layout, values in groups]
    width = len(state.index)
    if len(placed) == 1 and np.array_equal(placed[0][1], np.arange(width)):
        state.values.append(placed[0][2])
        state.present.append(None)
        return
    dense, present = np.zeros((n, width)), np.zeros((n, width), dtype=bool)
    for rows, cols, values in placed:
        dense[np.ix_(rows, cols)] = values
        present[np.ix_(rows, cols)] = True
    state.values.append(dense)
    state.present.append(present)


def _separators(codes: np.ndarray, ends: np.ndarray, n_fields: int | None) -> np.ndarray:
    """Byte positions (lines, fields - 1) of the `|||` of every line (as many on each), or NeedsLineReader.

    Every run of pipes must be a separator: exactly three, with a space on either side.
    """
    pipes = np.flatnonzero(codes == 124)
    starts = pipes[:-2][pipes[2:] - pipes[:-2] == 2]
    if 3 * len(starts) != len(pipes) or not len(starts) or starts[0] == 0 or starts[-1] + 3 >= len(codes):
        raise NeedsLineReader
    if (codes[starts - 1] != 32).any() or (codes[starts + 3] != 32).any():
        raise NeedsLineReader
    per_line = np.bincount(np.searchsorted(ends, starts), minlength=len(ends))
    k = int(per_line[0]) + 1
    if k < 3 or (n_fields is not None and k != n_fields) or (per_line != k - 1).any() or len(per_line) != len(ends):
        raise NeedsLineReader
    return starts.reshape(len(ends), k - 1)


MAX_ID_DIGITS = 18   # every id of 18 digits fits an int64


def _sentence_runs(ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(id, number of lines) of every run of equal ids; NeedsLineReader unless all are plain decimals."""
    joined = "".join(ids)
    if not (joined.isdigit() and joined.isascii()) or "" in ids:
        raise NeedsLineReader
    text = np.array(ids)
    starts = np.concatenate([[0], np.flatnonzero(text[1:] != text[:-1]) + 1])
    if text.dtype.itemsize > 4 * MAX_ID_DIGITS:   # an id too long for int64 (or for int()): the line reader says so
        raise NeedsLineReader
    heads = np.array(list(map(int, text[starts].tolist())), dtype=np.int64)
    return heads, np.diff(np.append(starts, len(ids)))


def parse_block(data: bytes, state: ParserState) -> None:
    """Parse one block of whole lines into `state` (one chunk of rows), or NeedsLineReader."""
    if b"\r" in data or b"\x00" in data:
        raise NeedsLineReader
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NeedsLineReader from None
    codes = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(codes == 10)
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(codes))
    n = len(ends)
    seps = _separators(codes, ends, state.fields)
    k = state.fields = seps.shape[1] + 1
    parts = (text[:-1] if text.endswith("\n") else text).split(SEP)
    edges = "\n".join(parts[0::k - 1]).split("\n")  # id0, last0, id1, last1, ...: the line breaks
    if len(parts) != n * (k - 1) + 1 or len(edges) != 2 * n:
        raise NeedsLineReader
    state.runs.append(_sentence_runs(edges[0::2]))
    state.hyps.write("".join(parts[1::k - 1]).encode("utf-8"))
    state.lengths.append(seps[:, 1] - seps[:, 0] - 5)
    _feature_block(parts[2::k - 1] if k > 3 else edges[1::2], state)
    if k >= 4:
        state.totals.append(_floats(parts[3::k - 1] if k > 4 else edges[1::2]))


def read_blocks(path: str) -> Iterator[bytes]:
    """Byte blocks of whole lines of `path` (BOM dropped), or NeedsLineReader if it cannot be
    opened or read to its end (the line reader names the problem and the line where it broke).
    Inside rerank.io.reading_progress, the reading bar counts each block's lines as it is read."""
    try:
        raw, stream = open_binary(path)
    except InputError:
        raise NeedsLineReader from None
    try:
        with reading_bar(path) as bar:
            yield from _blocks(stream, bar)
    finally:
        stream.close()
        raw.close()


def _blocks(stream, bar) -> Iterator[bytes]:
    """The blocks of whole lines of `stream` (read_blocks), each counted on `bar` once read."""
    rest, first = b"", True
    while True:
        try:
            chunk = stream.read(BLOCK)
        except (OSError, EOFError, zlib.error):  # I/O errors, broken or truncated gzip data (as rerank.io's)
            raise NeedsLineReader from None
        if first and chunk.startswith(UTF8_BOM):
            chunk = chunk[len(UTF8_BOM):]
        first = False
        if not chunk:
            break
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            bar.update(data.count(b"\n", 0, cut))
            yield data[:cut]
        rest = data[cut:]
    if rest:
        bar.update(1)
        yield rest


def check_heads(heads: np.ndarray, last: int = -1) -> int:
    """The last of the sentence ids `heads`, or NeedsLineReader unless they run 0, 1, 2, ... on from
    `last` (-1: from the start; the line reader names the gap, the decrease or the first id)."""
    step = np.diff(np.concatenate([[last], heads]))
    if ((step != 0) & (step != 1)).any() or (last < 0 and heads[0] != 0):
        raise NeedsLineReader
    return int(heads[-1])


def check_runs(state: ParserState) -> None:
    """`check_heads` of the sentence ids of every parsed row."""
    check_heads(np.concatenate([h for h, _ in state.runs]))


def check_names(state: ParserState) -> None:
    """NeedsLineReader if a column or group name is one the line reader refuses (it names the line)."""
    if any(feature_name_problem(name) for name in dict.fromkeys(state.names + list(state.widths))):
        raise NeedsLineReader


def parse_file(path: str, strict: bool = False) -> tuple[NBestList, int]:
    """(n-best, lines with fields after the total) of a well-formed file, or NeedsLineReader."""
    if path == "-":
        raise NeedsLineReader
    state = ParserState(path)
    for data in read_blocks(path):
        parse_block(data, state)
    if not state.runs:
        raise NeedsLineReader
    check_runs(state)
    check_names(state)
    fields = state.fields or 0
    nbest = state.nbest()
    if strict and nbest.missing:
        raise NeedsLineReader
    return nbest, (nbest.n_hyps if fields > 4 else 0)


def read_moses_fast(path: str, strict: bool = False) -> tuple[NBestList, int] | None:
    """(n-best, lines with fields after the total) of a well-formed file, or None when the bulk
    parser does not handle it (NeedsLineReader: the cases the module's docstring lists): read it
    line by line then. Every other exception propagates."""
    try:
        return parse_file(path, strict)
    except NeedsLineReader:
        return None
