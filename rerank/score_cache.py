"""A cache of model scores, keyed by the model's digest and the scored pair, so that re-running a
model feature on the same lists (or on lists that share hypotheses: val/test of the same system,
sharded runs, a second tuning experiment) costs only the lookups.

One SQLite file (stdlib; several processes may share it, as the shards of one list do; the ranks
of one torchrun run leave it to rank 0). A key is
the first 16 bytes of sha256(namespace, input, output): the namespace names the model digest and
everything else that changes a score (feature, language codes, prefixes), so a changed model or
setting never reads an old value. Values are stored as IEEE doubles, so a cached column equals the
computed one bit for bit.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
from collections.abc import Iterable, Sequence

from rerank.caches import cache_path
from rerank.errors import InputError

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
    from rerank import distributed

    if distributed.active() and not distributed.is_main():
        return None
    return ScoreCache(path) if path else None
