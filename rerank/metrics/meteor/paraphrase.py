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

Cache: $XDG_CACHE_HOME/mlmme-rerank (default ~/.cache/mlmme-rerank), one file per table path. It
is used while its header matches the table's size, mtime and SHA-256 of its first and last MiB and
the payload's SHA-256 matches; otherwise it is rebuilt and written atomically (temporary file,
then rename). Where no cache can be written the index is built in memory.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import mmap
import os
import tempfile

import numpy as np

logger = logging.getLogger(__name__)

VERSION = 1
MAGIC = b"MLMMEPPX"
ALIGN = 64
MASK = (1 << 64) - 1
HASH_BASE = 0x9E3779B97F4A7C15  # odd: position k of a phrase weighs word id + 1 by HASH_BASE ** (k + 1)
ARRAYS = ("words", "phrase_hash", "phrase_off", "phrase_words", "entry_off", "entry_par")


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mlmme-rerank")


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


def _entries(path: str) -> tuple[list[bytes], np.ndarray, np.ndarray]:
    """(distinct raw phrase lines, raw ids of each entry's phrase and of its paraphrase), file order."""
    with gzip.open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    refs, pars = lines[1::3], lines[2::3]
    count = min(len(refs), len(pars))
    del lines
    raw: dict[bytes, int] = {}
    ref_raw = np.fromiter((raw.setdefault(r, len(raw)) for r in refs[:count]), dtype=np.int64, count=count)
    par_raw = np.fromiter((raw.setdefault(q, len(raw)) for q in pars[:count]), dtype=np.int64, count=count)
    return list(raw), ref_raw, par_raw


def _phrases(raw_lines: list[bytes]):
    """Word ids of the distinct phrases (by their words), and the phrase id of each raw line (-1: empty)."""
    word_id: dict[bytes, int] = {}
    key_id: dict[tuple, int] = {}
    flat: list[int] = []
    lengths: list[int] = []
    of_raw = np.empty(len(raw_lines), dtype=np.int64)
    for k, line in enumerate(raw_lines):
        words = line.split()
        if not words:
            of_raw[k] = -1
            continue
        key = tuple([word_id.setdefault(w, len(word_id)) for w in words])
        pid = key_id.get(key)
        if pid is None:
            pid = key_id[key] = len(key_id)
            flat.extend(key)
            lengths.append(len(key))
        of_raw[k] = pid
    return list(word_id), np.array(flat, dtype=np.int64), np.array(lengths, dtype=np.int64), of_raw


def _smallest(values: np.ndarray, *dtypes) -> np.ndarray:
    top = int(values.max()) if len(values) else 0
    for dtype in dtypes:
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values


def build_arrays(path: str) -> tuple[dict[str, np.ndarray], int]:
    """The index arrays of a text table, and its longest phrase (in words)."""
    raw_lines, ref_raw, par_raw = _entries(path)
    words, flat, lengths, of_raw = _phrases(raw_lines)
    del raw_lines
    ref, par = of_raw[ref_raw], of_raw[par_raw]
    keep = (ref >= 0) & (par >= 0)
    ref, par = ref[keep], par[keep]
    max_len = int(lengths.max()) if len(lengths) else 0
    starts = np.cumsum(lengths) - lengths
    pos = np.arange(len(flat)) - np.repeat(starts, lengths)
    weights = np.array(hash_weights(max_len), dtype=np.uint64)
    hashes = np.add.reduceat((flat + 1).astype(np.uint64) * weights[pos], starts) if len(starts) else \
        np.zeros(0, dtype=np.uint64)  # uint64 arithmetic wraps: the sum mod 2**64, as _grams computes it
    order = np.argsort(hashes, kind="stable")  # new phrase id -> old
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    new_lengths = lengths[order]
    new_off = np.concatenate([[0], np.cumsum(new_lengths)]).astype(np.int64)
    gather = np.repeat(starts[order] - new_off[:-1], new_lengths) + np.arange(len(flat))
    ref, par = rank[ref], rank[par]
    grouped = np.argsort(ref, kind="stable")
    entry_off = np.concatenate([[0], np.cumsum(np.bincount(ref, minlength=len(order)))]).astype(np.int64)
    arrays = {"words": np.frombuffer(b"\n".join(words), dtype=np.uint8), "phrase_hash": hashes[order],
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
        block = memoryview(np.ascontiguousarray(arrays[name])).cast("B")
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


def open_index(path: str) -> "ParaphraseIndex":
    """The index of the text table at `path`: from the cache, else built (and cached if possible)."""
    source = fingerprint(path)
    known = _OPEN.get(source["path"])
    if known is not None and known[0] == source:
        return known[1]
    name = hashlib.sha256(source["path"].encode("utf-8", "surrogateescape")).hexdigest()[:24]
    file = os.path.join(cache_dir(), f"paraphrase-{name}.idx")
    index = load_index(file, source)
    if index is None:
        logger.warning("METEOR: indexing the paraphrase table %s once, into %s (about the table's size; "
                       "$XDG_CACHE_HOME moves the cache)", path, file)
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
        ids, weights, grams = self.word_ids, hash_weights(self.max_len), {}
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
        out, get = [], self.table.get
        for end in range(start + 1, min(len(words), start + self.max_len) + 1):
            pars = get(tuple(words[start:end]))
            if pars:
                out.extend((end - start, par) for par in pars)
        return out
