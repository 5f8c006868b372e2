"""Meteor paraphrase tables as a memory-mapped binary index, built once per table in the user's cache.

The text table (gzip'd triples of lines: probability, phrase, paraphrase; 5 million pairs for
English) takes seconds to parse. The index holds every entry whose two phrases are non-empty
(words split on ASCII whitespace, as Meteor's table is read), grouped by phrase, file order kept:

  words         the distinct words, UTF-8, joined by newlines (word id = position)
  phrase_hash   uint64, ascending: a hash of each distinct phrase's word ids (phrase id = position)
  phrase_off    offsets of each phrase's word ids in phrase_words
  phrase_words  word ids
  entry_off     offsets of each phrase's paraphrases in entry_par
  entry_par     paraphrase phrase ids, in file order within a phrase

`ParaphraseIndex.select(sentences)` looks up only the phrases that occur in the sentences (a
binary search by hash, then an exact comparison) and keeps the entries whose paraphrase occurs
too: a match needs both phrases in the texts, so alignments equal those of the whole table.

Cache: `meteor/` under the caches' root (rerank.caches: $RERANK_CACHE_DIR, else
$XDG_CACHE_HOME/mlmme-rerank, i.e. ~/.cache/mlmme-rerank), one file per table path. It
is used while its header matches the table's size, mtime and SHA-256 of its first and last MiB and
the payload's SHA-256 matches; otherwise it is rebuilt and written atomically (temporary file,
then rename). Where no cache can be written the index is built in memory. `make install` builds it
ahead (`python -m rerank.metrics.meteor`, rerank/metrics/meteor/__main__.py).

The build works on the decompressed table as one byte buffer, in numpy: lines are found by their
newlines, equal lines (then words, then phrases) are numbered by first appearance by
rerank.dedup (a 64-bit hash of their bytes, and every item compared byte for byte with the first
one of its hash, so a hash collision costs time, never an entry). It gives the arrays of the dict-based builder
it replaces (about 2.5 times slower on English; the tests keep it as their reference).
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import tempfile
import zlib

import numpy as np

from rerank.caches import cache_path
from rerank.dedup import distinct_bytes, equal_to_previous, padded

logger = logging.getLogger(__name__)

VERSION = 1
MAGIC = b"MLMMEPPX"
ALIGN = 64
MASK = (1 << 64) - 1
HASH_BASE = 0x9E3779B97F4A7C15  # odd: position k of a phrase weighs word id + 1 by HASH_BASE ** (k + 1)
ARRAYS = ("words", "phrase_hash", "phrase_off", "phrase_words", "entry_off", "entry_par")


def cache_dir() -> str:
    """`meteor/` under the caches' root (rerank.caches: $RERANK_CACHE_DIR, else $XDG_CACHE_HOME/mlmme-rerank)."""
    return cache_path("meteor")


def hash_weights(max_len: int) -> list[int]:
    return [pow(HASH_BASE, k + 1, 1 << 64) for k in range(max_len)]


def fingerprint(path: str) -> dict:
    """What identifies a table's contents cheaply: size, mtime and SHA-256 of its first and last MiB."""
    st = os.stat(path)
    with open(path, "rb") as fh:
        head = hashlib.sha256(fh.read(1 << 20)).hexdigest()
        fh.seek(max(0, st.st_size - (1 << 20)))
        tail = hashlib.sha256(fh.read()).hexdigest()
    return {"path": os.path.abspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "head": head, "tail": tail}


WHITESPACE = b" \t\n\r\x0b\x0c"  # the bytes bytes.split() splits words on
_SPACE = np.zeros(256, dtype=bool)
_SPACE[list(WHITESPACE)] = True
NEWLINE = 10


def _read_gzip(path: str) -> bytes:
    """The decompressed contents of a gzip file, members concatenated (as gzip.open reads it)."""
    with open(path, "rb") as fh:
        raw = fh.read()
    parts = []
    while raw:
        unzip = zlib.decompressobj(31)
        parts.append(unzip.decompress(raw))
        if not unzip.eof:
            raise EOFError(f"{path}: compressed file ended before the end-of-stream marker was reached")
        raw = unzip.unused_data.lstrip(b"\x00")  # gzip allows zero padding between and after members
    return b"".join(parts)


def _find_byte(buf: np.ndarray, end: int, byte: int, chunk: int = 1 << 20) -> np.ndarray:
    """Positions of `byte` in buf[:end], ascending (in cache-sized chunks: faster than one pass)."""
    parts = [np.flatnonzero(buf[k:min(k + chunk, end)] == byte) + k for k in range(0, end, chunk)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _gather(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, sep: int | None) -> np.ndarray:
    """The items buf[start:start + length] one after another, each followed by byte `sep` if given."""
    width = lengths + (sep is not None)
    total = int(width.sum())
    offsets = np.cumsum(width) - width
    out = buf[np.repeat(starts - offsets, width) + np.arange(total)]
    if sep is not None:
        out[offsets + lengths] = sep
    return out


def _entries(data: bytes):
    """The distinct raw phrase lines (a buffer, their starts and lengths; order of first appearance
    among the phrase lines, then the paraphrase lines) and the raw ids of each entry's two lines."""
    buf = padded(data)
    ends = np.append(_find_byte(buf, len(data), NEWLINE), len(data))  # the lines of data.split(b"\\n")
    starts = np.append(0, ends[:-1] + 1)
    lengths = ends - starts
    count = min(len(starts[1::3]), len(starts[2::3]))
    ref_s, ref_n = starts[1::3][:count], lengths[1::3][:count]
    par_s, par_n = starts[2::3][:count], lengths[2::3][:count]
    del starts, ends, lengths
    # a table lists a phrase's paraphrases together: a phrase line equal to the one before needs no look-up
    same = np.zeros(count, dtype=bool)
    if count > 1:
        same[1:] = equal_to_previous(buf, ref_s, ref_n)
    runs = np.flatnonzero(~same)
    line_s, line_n = np.concatenate([ref_s[runs], par_s]), np.concatenate([ref_n[runs], par_n])
    ids, leads = distinct_bytes(buf, line_s, line_n)
    ref_raw = ids[:len(runs)][np.cumsum(~same) - 1]
    return buf, line_s[leads], line_n[leads], ref_raw, ids[len(runs):]


def _phrases(buf: np.ndarray, line_s: np.ndarray, line_n: np.ndarray):
    """The words (joined by newlines), the word ids and lengths of the distinct phrases (by their
    words), and the phrase id of each raw line (-1: no words). Ids in order of first appearance."""
    text = _gather(buf, line_s, line_n, NEWLINE)  # each line ended by a newline
    space = _SPACE[text]
    begin = ~space
    begin[1:] &= space[:-1]
    end = ~space
    end[:-1] &= space[1:]
    word_s = np.flatnonzero(begin)
    word_n = np.flatnonzero(end) + 1 - word_s
    del begin, end
    per_line = np.diff(np.searchsorted(word_s, np.cumsum(line_n + 1) - 1), prepend=0)
    spoken = np.flatnonzero(per_line)
    # lines whose words are separated by single spaces: distinct lines are distinct phrases
    gaps = int(space.sum()) - len(line_s)
    canonical = gaps == len(word_s) - len(spoken) and int(np.count_nonzero(text == 32)) == gaps
    del space
    text = padded(text)
    word, word_first = distinct_bytes(text, word_s, word_n, width=16)  # words are short: 16 bytes read at once
    words = _gather(text, word_s[word_first], word_n[word_first], NEWLINE)[:-1]
    of_raw = np.full(len(line_s), -1, dtype=np.int64)
    if canonical:
        of_raw[spoken] = np.arange(len(spoken))
        return words, word, per_line[spoken], of_raw
    line_start = np.cumsum(per_line) - per_line
    ids = padded(word.astype("<u4").view(np.uint8))
    phrase, phrase_first = distinct_bytes(ids, line_start[spoken] * 4, per_line[spoken] * 4, width=16)
    of_raw[spoken] = phrase
    lengths = per_line[spoken][phrase_first]
    return words, _gather(word, line_start[spoken][phrase_first], lengths, None), lengths, of_raw


def _argsort_stable(values: np.ndarray) -> np.ndarray:
    """np.argsort(values, kind="stable") of non-negative integers, by np.sort of (value, position)
    packed in one uint64 (several times faster): exact where the values fit beside the position,
    else by their high bits, and the runs that share those are ordered in Python."""
    n = len(values)
    bits = max(1, (n - 1).bit_length())
    low = np.uint64((1 << bits) - 1)
    values = values.astype(np.uint64)
    exact = n == 0 or int(values.max()) < (1 << (64 - bits))
    key = (values << np.uint64(bits) if exact else values & ~low) | np.arange(n, dtype=np.uint64)
    key.sort()
    order = (key & low).astype(np.int64)
    if not exact:
        key >>= np.uint64(bits)
        tied = np.flatnonzero(key[1:] == key[:-1])  # positions p, p + 1 that share their high bits
        if len(tied):
            cut = np.flatnonzero(np.diff(tied) != 1)
            for a, b in zip(np.append(tied[0], tied[cut + 1]).tolist(), (np.append(tied[cut], tied[-1]) + 2).tolist()):
                order[a:b] = sorted(order[a:b].tolist(), key=lambda i: (int(values[i]), i))
    return order


def _smallest(values: np.ndarray, *dtypes) -> np.ndarray:
    top = int(values.max()) if len(values) else 0
    for dtype in dtypes:
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values


def build_arrays(path: str) -> tuple[dict[str, np.ndarray], int]:
    """The index arrays of a text table, and its longest phrase (in words)."""
    buf, line_s, line_n, ref_raw, par_raw = _entries(_read_gzip(path))
    words, flat, lengths, of_raw = _phrases(buf, line_s, line_n)
    del buf
    ref, par = of_raw[ref_raw], of_raw[par_raw]
    keep = (ref >= 0) & (par >= 0)
    ref, par = ref[keep], par[keep]
    max_len = int(lengths.max()) if len(lengths) else 0
    starts = np.cumsum(lengths) - lengths
    pos = np.arange(len(flat)) - np.repeat(starts, lengths)
    weights = np.array(hash_weights(max_len), dtype=np.uint64)
    hashes = np.add.reduceat((flat + 1).astype(np.uint64) * weights[pos], starts) if len(starts) else \
        np.zeros(0, dtype=np.uint64)  # uint64 arithmetic wraps: the sum mod 2**64, as _grams computes it
    order = _argsort_stable(hashes)  # new phrase id -> old
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    new_lengths = lengths[order]
    new_off = np.concatenate([[0], np.cumsum(new_lengths)]).astype(np.int64)
    gather = np.repeat(starts[order] - new_off[:-1], new_lengths) + np.arange(len(flat))
    ref, par = rank[ref], rank[par]
    grouped = _argsort_stable(ref)
    entry_off = np.concatenate([[0], np.cumsum(np.bincount(ref, minlength=len(order)))]).astype(np.int64)
    arrays = {"words": words, "phrase_hash": hashes[order],
              "phrase_off": _smallest(new_off, np.uint32), "phrase_words": _smallest(flat[gather], np.uint16, np.uint32),
              "entry_off": _smallest(entry_off, np.uint32), "entry_par": _smallest(par[grouped], np.uint32)}
    return arrays, max_len


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def _layout(arrays: dict[str, np.ndarray]) -> tuple[dict, int]:
    layout, offset = {}, 0
    for name in ARRAYS:
        a = arrays[name]
        layout[name] = [offset, a.dtype.str, len(a)]
        offset = _aligned(offset + a.nbytes)
    return layout, offset


def _payload(arrays: dict[str, np.ndarray], layout: dict, size: int):
    """The payload's byte blocks: each array, then zero padding to the next array's offset."""
    for k, name in enumerate(ARRAYS):
        block = np.ascontiguousarray(arrays[name]).data.cast("B")
        yield block
        end = layout[ARRAYS[k + 1]][0] if k + 1 < len(ARRAYS) else size
        yield bytes(end - layout[name][0] - len(block))


def write_index(file: str, arrays: dict[str, np.ndarray], max_len: int, source: dict) -> None:
    """Write the index atomically: a temporary file in the same folder, then a rename."""
    layout, size = _layout(arrays)
    digest = hashlib.sha256()
    for block in _payload(arrays, layout, size):
        digest.update(block)
    header = json.dumps({"version": VERSION, "source": source, "max_len": max_len, "arrays": layout,
                         "payload_size": size, "payload_sha256": digest.hexdigest()}).encode()
    head = MAGIC + len(header).to_bytes(8, "little") + header
    folder = os.path.dirname(file)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".paraphrase-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(head + bytes(_aligned(len(head)) - len(head)))
            for block in _payload(arrays, layout, size):
                fh.write(block)
        os.replace(tmp, file)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_index(file: str, source: dict) -> "ParaphraseIndex | None":
    """The index in `file` if it is complete, intact and made from `source` (else None: rebuild it)."""
    try:
        with open(file, "rb") as fh:
            buffer = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        if buffer[:len(MAGIC)] != MAGIC:
            return None
        length = int.from_bytes(buffer[8:16], "little")
        header = json.loads(buffer[16:16 + length])
        start = _aligned(16 + length)
        if header["version"] != VERSION or header["source"] != source or len(buffer) - start != header["payload_size"]:
            return None
        with memoryview(buffer) as view:
            if hashlib.sha256(view[start:]).hexdigest() != header["payload_sha256"]:
                return None
        arrays = {name: np.frombuffer(buffer, dtype=np.dtype(dt), count=n, offset=start + off)
                  for name, (off, dt, n) in ((name, header["arrays"][name]) for name in ARRAYS)}
        return ParaphraseIndex(arrays, int(header["max_len"]), buffer)
    except (OSError, ValueError, KeyError, TypeError):  # ValueError: also bad JSON, an empty file
        return None


_OPEN: dict[str, tuple[dict, "ParaphraseIndex"]] = {}  # table path -> (source fingerprint, index)


def index_file(path: str) -> str:
    """Where the index of the table at `path` is cached."""
    name = hashlib.sha256(os.path.abspath(path).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return os.path.join(cache_dir(), f"paraphrase-{name}.idx")


def open_index(path: str) -> "ParaphraseIndex":
    """The index of the text table at `path`: from the cache, else built (and cached if possible)."""
    source = fingerprint(path)
    known = _OPEN.get(source["path"])
    if known is not None and known[0] == source:
        return known[1]
    file = index_file(path)
    index = load_index(file, source)
    if index is None:
        logger.warning("METEOR: indexing the paraphrase table %s once, into %s (about the table's size; "
                       "$RERANK_CACHE_DIR moves the cache)", path, file)
        arrays, max_len = build_arrays(path)
        try:
            write_index(file, arrays, max_len, source)
            index = load_index(file, source)
        except OSError:  # no writable cache: keep the index in memory
            index = None
        index = index or ParaphraseIndex(arrays, max_len)
    _OPEN[source["path"]] = (source, index)
    return index


class ParaphraseIndex:
    """The index arrays (memory-mapped from the cache, or in memory) and phrase look-ups."""

    def __init__(self, arrays: dict[str, np.ndarray], max_len: int, buffer=None):
        self.arrays, self.max_len = arrays, max_len
        self._buffer = buffer  # the mmap the arrays view
        blob = arrays["words"].tobytes()
        self.words = [w.decode("utf-8", "surrogateescape") for w in blob.split(b"\n")] if blob else []
        self.word_ids = {w: i for i, w in enumerate(self.words)}

    @property
    def n_entries(self) -> int:
        return len(self.arrays["entry_par"])

    def phrase(self, pid: int) -> tuple[str, ...]:
        off, words = self.arrays["phrase_off"], self.arrays["phrase_words"]
        return tuple(self.words[i] for i in words[int(off[pid]):int(off[pid + 1])].tolist())

    def _grams(self, sentences) -> dict[tuple[int, ...], int]:
        """Word-id n-grams (up to the longest phrase) of the sentences, with their hashes."""
        ids, weights = self.word_ids, hash_weights(self.max_len)
        grams: dict[tuple, int] = {}  # keys stop before a word without id: no None in them
        for words in sentences:
            wid = [ids.get(w) for w in words]
            for start in range(len(wid)):
                h = 0
                for k, i in enumerate(wid[start:start + self.max_len]):
                    if i is None:
                        break
                    h = (h + (i + 1) * weights[k]) & MASK
                    grams[tuple(wid[start:start + k + 1])] = h
        return grams

    def find(self, sentences) -> dict[int, tuple[str, ...]]:
        """{phrase id: words} of the table phrases that occur in the sentences (lists of words)."""
        grams = self._grams(sentences)
        keys = list(grams)
        hashes = np.fromiter(grams.values(), dtype=np.uint64, count=len(keys))
        table = self.arrays["phrase_hash"]
        lo, hi = np.searchsorted(table, hashes, "left"), np.searchsorted(table, hashes, "right")
        off, words = self.arrays["phrase_off"], self.arrays["phrase_words"]
        found = {}
        for k in np.nonzero(hi > lo)[0].tolist():
            for pid in range(int(lo[k]), int(hi[k])):  # equal hashes: compare the words
                if words[int(off[pid]):int(off[pid + 1])].tolist() == list(keys[k]):
                    found[pid] = tuple(self.words[i] for i in keys[k])
        return found

    def select(self, sentences) -> "Paraphrases":
        """The entries whose phrase and paraphrase both occur in the sentences (lists of words)."""
        found = self.find(sentences)
        pids = np.fromiter(found, dtype=np.int64, count=len(found))
        off = self.arrays["entry_off"]
        starts, counts = off[pids].astype(np.int64), (off[pids + 1] - off[pids]).astype(np.int64)
        index = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        pars = self.arrays["entry_par"][index].astype(np.int64)
        keep = np.isin(pars, pids)
        table: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        for ref, par in zip(np.repeat(pids, counts)[keep].tolist(), pars[keep].tolist()):
            table.setdefault(found[ref], []).append(found[par])
        return Paraphrases(table)


class Paraphrases:
    """Selected entries: phrase (tuple of words) -> its paraphrases, in file order."""

    def __init__(self, table: dict[tuple[str, ...], list[tuple[str, ...]]]):
        self.table = table
        self.max_len = max((len(k) for k in table), default=0)

    def paths(self, words: list[str], start: int) -> list[tuple[int, tuple[str, ...]]]:
        """(length, paraphrase words) of every table phrase that starts at words[start], shortest first."""
        out: list[tuple[int, tuple[str, ...]]] = []
        get = self.table.get
        for end in range(start + 1, min(len(words), start + self.max_len) + 1):
            pars = get(tuple(words[start:end]))
            if pars:
                out.extend((end - start, par) for par in pars)
        return out
