"""A cache of model scores, keyed by the model's digest and the scored pair, so that re-running a
model feature on the same lists (or on lists that share hypotheses: val/test of the same system,
sharded runs, a second tuning experiment) costs only the lookups.

One SQLite file (stdlib; several processes may share it, as the shards of one list do; the ranks
of one torchrun run leave it to rank 0). A key is
the first 16 bytes of sha256(namespace, input, output): the namespace names the model digest and
everything else that changes a score (feature, language codes, prefixes), so a changed model or
setting never reads an old value. Values are stored as IEEE doubles, so a cached column equals the
computed one bit for bit.

The scores are written as they come, a block of about BLOCK_ITEMS at a time, each block one
transaction (`score_in_blocks`): a run killed part-way (kill -9, Ctrl-C, SIGTERM, a lost node)
keeps every block it finished, and the rerun scores only the rest, saying how many it read
(`lookup`). A block is a run of whole batches, so the batches and their scores are those of an
uninterrupted run. The batches of a model that pads them are cut by `token_batches`: longest first,
each within a budget of padded tokens.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from rerank import distributed
from rerank.caches import cache_path
from rerank.errors import InputError
from rerank.progress import Progress, progress_bar

log = logging.getLogger(__name__)


_DIGESTS: dict[tuple, str] = {}


def model_digest(path: str) -> str:
    """sha256 of a model directory's files, subfolders included (relative names and contents:
    weights, configs, tokenizer, pooling), or of one model file, memoised per process on their
    sizes and modification times."""
    if os.path.isfile(path):  # a single-file model (a COMET .ckpt)
        path, only = os.path.split(os.path.abspath(path))
        files = [only]
    else:
        files = []
    for root, dirs, names in os.walk(path) if not files else ():
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files += [os.path.relpath(os.path.join(root, n), path) for n in names if not n.startswith(".")]
    files.sort()
    stamps = [os.stat(os.path.join(path, name)) for name in files]
    key = (os.path.realpath(path), tuple((n, s.st_size, s.st_mtime_ns) for n, s in zip(files, stamps)))
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        for name in files:
            digest.update(name.encode("utf-8", "surrogatepass") + b"\0")
            with open(os.path.join(path, name), "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    digest.update(block)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def default_cache_path() -> str:
    """scores.sqlite under the caches' root: $RERANK_CACHE_DIR, else $XDG_CACHE_HOME (or ~/.cache)/mlmme-rerank."""
    return cache_path("scores.sqlite")


class ScoreCache:
    """get/put (score, token count) of (input, output) pairs under a namespace."""

    unwritable = False   # set when a put failed: the rest of the run goes without writing

    def __init__(self, path: str):
        self.path = path
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self.db = sqlite3.connect(path, timeout=120)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("CREATE TABLE IF NOT EXISTS scores (key BLOB PRIMARY KEY, value REAL NOT NULL, "
                            "count REAL NOT NULL)")
            self.db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise InputError(f"cannot open the score cache: {exc}", path) from None

    @staticmethod
    def key(namespace: str, pair: tuple[str, str]) -> bytes:
        text = namespace + "\0" + pair[0] + "\0" + pair[1]
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]

    def get(self, namespace: str, pairs: Sequence[tuple[str, str]]) -> dict[int, tuple[float, float]]:
        """Position in `pairs` -> (value, count) of the pairs the cache holds."""
        keys = [self.key(namespace, p) for p in pairs]
        where: dict[bytes, list[int]] = {}
        for i, k in enumerate(keys):
            where.setdefault(k, []).append(i)
        found: dict[int, tuple[float, float]] = {}
        unique = list(where)
        for start in range(0, len(unique), 500):
            chunk = unique[start:start + 500]
            rows = self.db.execute(f"SELECT key, value, count FROM scores WHERE key IN ({','.join('?' * len(chunk))})",
                                   chunk).fetchall()
            for k, value, count in rows:
                for i in where[k]:
                    found[i] = (value, count)
        return found

    def put(self, namespace: str, pairs: Sequence[tuple[str, str]], values: Iterable[float], counts: Iterable[float]) -> None:
        """Store the scores. A cache that cannot be written (a full disk, a quota, a read-only
        file) is a note, once, and no reason to lose the scores: the caller goes on with them, and
        later puts of this cache are skipped."""
        if self.unwritable:
            return
        rows = [(self.key(namespace, p), float(v), float(c)) for p, v, c in zip(pairs, values, counts)]
        try:
            self.db.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?)", rows)
            self.db.commit()
        except (sqlite3.Error, OSError) as exc:
            with contextlib.suppress(sqlite3.Error):
                self.db.rollback()
            self.unwritable = True
            log.warning("note: %s: cannot write the score cache (%s): %d scores not cached", self.path,
                        str(exc).lower(), len(rows))

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]

    def close(self) -> None:
        self.db.close()


def open_cache(path: str | None) -> ScoreCache | None:
    """A ScoreCache at `path`, or None for no caching (path None or empty). Under torchrun
    (rerank.distributed) rank 0 alone opens it, and reads and writes it for every rank."""
    if distributed.active() and not distributed.is_main():
        return None
    return ScoreCache(path) if path else None


BLOCK_ITEMS = 1024   # scores computed between two writes of the cache (each write one transaction)


def lookup(cache: ScoreCache | None, namespace: str, keys: Sequence[tuple[str, str]],
           what: str) -> dict[int, tuple[float, float]]:
    """Position in `keys` -> (value, count) of the keys `cache` holds (none without a cache), on
    every rank (under torchrun rank 0 alone has the cache and reads it for all, so every rank
    leaves the same keys to score). When the cache holds some, a note says how many of `what`'s
    scores it gave and how many are left to compute."""
    found = distributed.on_main(lambda: cache.get(namespace, keys) if cache is not None else {})
    if found and cache is not None:
        left = len(keys) - len(found)
        log.warning("note: %s: %s of %s scores of %s from the score cache%s", cache.path, f"{len(found):,}",
                    f"{len(keys):,}", what, f", {left:,} left to score" if left else "")
    return found


def block_ranges(sizes: Sequence[int], block: int | None = None) -> list[tuple[int, int]]:
    """(start, stop) of consecutive runs of the batches whose `sizes` (items per batch) are given,
    each run the fewest batches that hold at least `block` items (BLOCK_ITEMS; the last run may
    hold fewer): the blocks `score_in_blocks` writes one at a time."""
    block = BLOCK_ITEMS if block is None else block
    ranges, start, held = [], 0, 0
    for k, size in enumerate(sizes):
        held += size
        if held >= block:
            ranges.append((start, k + 1))
            start, held = k + 1, 0
    if start < len(sizes):
        ranges.append((start, len(sizes)))
    return ranges


def score_in_blocks(batches: Sequence[Sequence[int]], score: Callable[[Sequence[Sequence[int]]], np.ndarray],
                    store: Callable[[list[int], np.ndarray], None] | None, *, progress: Progress = False,
                    desc: str = "scoring", weights: Sequence[float] | None = None, per_batch: bool = True,
                    block: int | None = None) -> np.ndarray:
    """The scores of the items in `batches` (item k's at position k of the result; the batches
    hold 0..n-1 once each), computed a block of batches at a time (block_ranges: `block` items,
    BLOCK_ITEMS by default) and handed to
    `store(items, values)` (a cache's put: one transaction) as each block finishes, so that a run
    stopped part-way has stored every block it finished.

    `score(batches)` gives the scores of the items of those batches, in batch order; with
    `per_batch` it is given one batch at a time (the bar moves by batch), else a rank's whole part
    of a block at once (a model whose own predict loop batches them, COMET). Under torchrun
    (rerank.distributed) the ranks split each block by whole batches (`weights`: a batch's cost),
    so a score depends on its batch alone and equals the one-process score; `store` is called on
    every rank (a rank without the cache is given None for it by its caller)."""
    n = sum(len(batch) for batch in batches)
    values = np.zeros(n)
    with progress_bar(progress, desc, len(batches), unit="batch") as bar:
        for start, stop in block_ranges([len(batch) for batch in batches], block):
            done = 0

            def part(a: int, b: int, start: int = start) -> np.ndarray:
                nonlocal done
                mine = batches[start + a:start + b]
                if not per_batch:
                    out = np.asarray(score(mine), dtype=np.float64)
                    bar.update(len(mine))
                    done += len(mine)
                    return out
                scores = []
                for batch in mine:
                    scores.append(np.asarray(score([batch]), dtype=np.float64))
                    bar.update(1)
                    done += 1
                return np.concatenate(scores)

            got = distributed.concat(distributed.map_parts(part, stop - start,
                                                           None if weights is None else weights[start:stop]))
            bar.update(stop - start - done)   # the other ranks' batches of the block
            items = [k for batch in batches[start:stop] for k in batch]
            values[items] = got
            if store is not None:
                store(items, got)
    return values


def token_batches(lengths: Sequence[int], budget: int, max_rows: int | None = None,
                  slack: float | None = None, floor: int = 0) -> list[list[int]]:
    """Indices sorted by length (longest first), cut into batches whose padded size
    (count x longest) stays within `budget` tokens, and of at most `max_rows` items (None: no
    cap); a single longer item is a batch of its own. With `slack`, a batch is also cut before its
    padded size exceeds (1 + slack) x its real tokens, once it holds `floor` padded tokens: on a
    CPU a token costs about the same in a batch of a few hundred tokens as in one of thousands, so
    past such a floor padding is the cost to bound (a few pairs of spread lengths would otherwise
    all be padded to the longest), while below it each forward's own overhead counts; a long
    sorted run of near-equal lengths still fills whole batches."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    batch: list[int] = []
    longest = real = 0
    for i in order:
        longest_if = max(longest, lengths[i])
        padded = longest_if * (len(batch) + 1)
        if batch and (padded > budget or (max_rows is not None and len(batch) >= max_rows)
                      or (slack is not None and longest * len(batch) >= floor
                          and padded > (1 + slack) * (real + lengths[i]))):
            batches.append(batch)
            batch, longest_if, real = [], lengths[i], 0
        batch.append(i)
        longest, real = longest_if, real + lengths[i]
    if batch:
        batches.append(batch)
    return batches
