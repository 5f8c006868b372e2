"""Exact deduplication in numpy: equal items numbered by first appearance, a hash collision never merging two.

One mechanism serves every place that groups equal things: the strings of an n-best list (per
sentence, for tuning statistics and for `rerank info`'s repeat count), whole hypothesis rows
(string and feature vector, when tuning data is prepared) and the lines, words and phrases of
METEOR's paraphrase table. Each is an *item*: a byte range of a buffer (`distinct_bytes`) or a
row of a 2-D array (`distinct_rows`), optionally with a *salt* (an integer that must be equal
too, e.g. the sentence number, so that equal strings of different sentences stay apart).

Python objects (strings, tuples of them) are numbered by a dict instead: `distinct_index`, the
one copy of "the index of each item's first equal" that the model features, the Moses bulk
parser and the n-gram arrays use.

The method (`group`): a 64-bit hash of every item's bytes (`hash_items`, splitmix64's mixing over
its length and 8-byte words); one sort of (hash, item number) packed in a uint64, which groups
equal hashes with the earliest item first; then every item is compared byte for byte with its
group's first item. A group that holds different items (a hash collision) is numbered again by
the items' exact bytes, so a collision costs time, never correctness. The result is what a Python
dict keyed by the items' bytes gives: `ids[i]` the number of item i's content in order of first
appearance, `leads[k]` the first item of content k (ascending).

Items are read ROW bytes at a time as uint64 words straight from the buffer, which therefore needs
ROW readable bytes after every item (`padded` adds them; `distinct_bytes` pads a copy where the
buffer lacks them). Bytes past an item's end are masked off, so they never matter.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

import numpy as np

H = TypeVar("H", bound=Hashable)

FIRST = 24  # the bytes of every item read first (3 little-endian uint64 words): most items are shorter
ROW = 48    # the bytes read at once after those, of the items that long (6 words: half the passes of 3)
LONG = 240  # items are compared in numpy up to this length, longer ones in Python (after equal first LONG bytes)
_KEEP = np.array([[(1 << (8 * min(8, max(0, k - j)))) - 1 for j in range(0, ROW, 8)] for k in range(ROW + 1)],
                 dtype=np.uint64)  # row k: the words that keep the first k bytes of ROW
_MIX = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)  # splitmix64's multipliers
_ODD = np.uint64(0x9E3779B97F4A7C15)


def distinct_index(items: Iterable[H]) -> tuple[np.ndarray, list[H]]:
    """(index, distinct) of hashable items: `distinct` the different items in order of first
    appearance, `index[i]` (int64) the position of item i in it, so distinct[index[i]] == item i.
    A dict does it, for Python objects; the functions below number bytes and rows in numpy."""
    first: dict[H, int] = {}
    index = np.array([first.setdefault(item, len(first)) for item in items], dtype=np.int64)
    return index, list(first)


def padded(data: bytes | memoryview | np.ndarray) -> np.ndarray:
    """The bytes of `data` as uint8 followed by ROW zero bytes (item reads may run past the end)."""
    out = np.zeros(len(data) + ROW, dtype=np.uint8)
    out[:len(data)] = np.frombuffer(data, dtype=np.uint8)
    return out


def item_rows(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, skip: int, width: int) -> np.ndarray:
    """Bytes [skip, skip + width) of each item as an (n, width / 8) uint64 matrix, zero past the item's
    end (buf needs `width` readable bytes after the end of every item: ROW bytes of padding)."""
    window = np.lib.stride_tricks.as_strided(buf, shape=(len(buf) - width + 1, width), strides=(1, 1),
                                             writeable=False)
    rows = window[starts + skip].view("<u8")
    short = np.flatnonzero(lengths - skip < width)  # the items that end inside the window
    if len(short):
        rows[short] &= np.take(_KEEP[:, :width // 8], np.maximum(lengths[short] - skip, 0), axis=0)
    return rows


def rows_differ(rows: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Whether each row of `rows` differs from the same row of `other` (uint64 matrices)."""
    out = rows[:, 0] != other[:, 0] if rows.shape[1] else np.zeros(len(rows), dtype=bool)
    for j in range(1, rows.shape[1]):
        out |= rows[:, j] != other[:, j]
    return out


def _tiers(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int) -> list:
    """The items' bytes as (items or None for all, rows) per tier: tier 0 holds bytes [0, width) of
    every item, the next ones ROW bytes each of the items that long (up to LONG bytes)."""
    tiers: list[tuple[np.ndarray | None, np.ndarray]] = [(None, item_rows(buf, starts, lengths, 0, width))]
    sel = np.flatnonzero(lengths > width)
    for skip in range(width, LONG, ROW):
        if skip > width:
            sel = sel[lengths[sel] > skip]
        if not len(sel):
            break
        tiers.append((sel, item_rows(buf, starts[sel], lengths[sel], skip, ROW)))
    return tiers


def hash_items(tiers: list, lengths: np.ndarray, salt: np.ndarray | None = None) -> np.ndarray:
    """A 64-bit hash of each item's length, salt and tiers' rows (its first LONG bytes): equal
    items, equal hashes. `tiers`: (items or None for all, uint64 rows) as `_tiers` gives them."""
    h = lengths.astype(np.uint64) * np.uint64(_MIX[1])
    if salt is not None:
        h ^= salt.astype(np.uint64) * _ODD
    with np.errstate(over="ignore"):
        for sel, rows in tiers:
            part = h if sel is None else h[sel]
            for j in range(rows.shape[1]):
                part ^= rows[:, j]
                part *= np.uint64(_MIX[0])
                part ^= part >> np.uint64(31)
            if sel is not None:
                h[sel] = part
        h ^= h >> np.uint64(30)
        h *= np.uint64(_MIX[1])
        h ^= h >> np.uint64(31)
    return h


def group(hashes: np.ndarray, differ: Callable[[np.ndarray, np.ndarray], np.ndarray],
          content: Callable[[int], Hashable]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, leads) of n items by content, numbered in order of first appearance (see the module doc).

    `hashes`: uint64 per item, equal for equal items (consumed: it may be overwritten);
    `differ(items, firsts)`: vectorised, whether each item differs from the item beside it;
    `content(i)`: item i's exact content as a dict key, used only inside colliding groups."""
    n = len(hashes)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # sort (hash, item) as one uint64: the high bits of the hash, the item number in the low bits
    bits = max(1, (n - 1).bit_length())
    low = np.uint64((1 << bits) - 1)
    key = (hashes & ~low) | np.arange(n, dtype=np.uint64)
    del hashes
    key.sort()
    order = (key & low).astype(np.int64)  # items by hash, in item order within a hash
    new = np.empty(n, dtype=bool)
    new[0] = True
    key >>= np.uint64(bits)
    np.not_equal(key[1:], key[:-1], out=new[1:])
    del key
    heads = order[new]  # each group's first item
    first = np.zeros(n, dtype=bool)
    first[heads] = True
    rank = np.cumsum(first) - 1
    ids = np.empty(n, dtype=np.int64)
    ids[order] = rank[heads][np.cumsum(new) - 1]
    del order, new, rank
    leads = np.flatnonzero(first)  # the first item of each id
    others = np.flatnonzero(~first)
    bad = differ(others, leads[ids[others]])
    if bad.any():  # hash collisions: the items of these ids numbered anew by their content
        lead = leads[ids]
        colliding = np.flatnonzero(np.isin(ids, ids[others[bad]]))  # ascending: the first of equal items first
        seen: dict[Hashable, int] = {}
        lead[colliding] = [seen.setdefault(content(i), i) for i in colliding.tolist()]
        first[:] = False
        first[lead] = True
        ids = (np.cumsum(first) - 1)[lead]
        leads = np.flatnonzero(first)
    return ids, leads


def distinct_bytes(buf: bytes | memoryview | np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                   salt: np.ndarray | None = None, width: int = FIRST) -> tuple[np.ndarray, np.ndarray]:
    """(ids, leads) of the items buf[start:start + length] (and their `salt`, if given) by content.

    `buf`: bytes-like or a uint8 array, best with ROW readable bytes after the last item (else a
    padded copy is made); `width` (a multiple of 8, at most ROW): the bytes of each item read in one
    go, about the usual item's length."""
    n = len(starts)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts, lengths = np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
    if (not isinstance(buf, np.ndarray) or buf.dtype != np.uint8 or not buf.flags.c_contiguous
            or len(buf) < int((starts + lengths).max()) + ROW):   # the rows are strided views of one contiguous buffer
        buf = padded(buf)
    data = buf.data  # a memoryview of the array
    tiers = _tiers(buf, starts, lengths, width)
    hashes = hash_items(tiers, lengths, salt)
    first_rows = tiers[0][1]
    del tiers

    def differ(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
        out = lengths[mine] != lengths[theirs]
        if salt is not None:
            out |= salt[mine] != salt[theirs]
        out |= rows_differ(first_rows[mine], first_rows[theirs])
        for skip in range(width, min(LONG, int(lengths.max())), ROW):
            k = np.flatnonzero(~out & (lengths[mine] > skip))
            a, b = mine[k], theirs[k]
            out[k] = rows_differ(item_rows(buf, starts[a], lengths[a], skip, ROW),
                                 item_rows(buf, starts[b], lengths[b], skip, ROW))
        for j in np.flatnonzero(~out & (lengths[mine] > LONG)).tolist():
            out[j] = content(int(mine[j])) != content(int(theirs[j]))
        return out

    def content(i: int) -> Hashable:
        raw = data[starts[i]:starts[i] + lengths[i]].tobytes()
        return raw if salt is None else (int(salt[i]), raw)

    return group(hashes, differ, content)


def distinct_rows(matrix: np.ndarray, salt: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ids, leads) of the rows of a 2-D array (and their `salt`, if given) by their bytes: -0.0 and
    0.0, or two NaNs of different payloads, are different rows, as their bytes are."""
    n = len(matrix)
    width = int(np.prod(matrix.shape[1:], dtype=np.int64)) * matrix.itemsize
    raw = np.ascontiguousarray(matrix).reshape(-1).view(np.uint8).reshape(n, width)
    if raw.shape[1] % 8:  # whole uint64 words: zero bytes at the end of each row
        raw = np.concatenate([raw, np.zeros((n, 8 - raw.shape[1] % 8), dtype=np.uint8)], axis=1)
    rows = raw.view("<u8")
    hashes = hash_items([(None, rows)], np.full(n, rows.shape[1], dtype=np.int64), salt)

    def differ(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
        out = rows_differ(rows[mine], rows[theirs])
        if salt is not None:
            out |= salt[mine] != salt[theirs]
        return out

    def content(i: int) -> Hashable:
        return rows[i].tobytes() if salt is None else (int(salt[i]), rows[i].tobytes())

    return group(hashes, differ, content)


def equal_to_previous(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Whether each item (after the first) equals the one before it: a run of equal items, such as
    a table's lines of one phrase, needs one look-up (buf padded as for `item_rows`)."""
    rows = item_rows(buf, starts, lengths, 0, FIRST)
    same = (lengths[1:] == lengths[:-1]) & ~rows_differ(rows[1:], rows[:-1])
    del rows
    k, skip = np.flatnonzero(same & (lengths[1:] > FIRST)), FIRST
    while len(k):  # pairs equal so far and longer than skip
        same[k] = ~rows_differ(item_rows(buf, starts[k + 1], lengths[k + 1], skip, ROW),
                               item_rows(buf, starts[k], lengths[k], skip, ROW))
        skip += ROW
        k = k[same[k] & (lengths[k] > skip)]
    return same
