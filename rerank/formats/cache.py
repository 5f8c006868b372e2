"""A binary cache of parsed n-best lists, keyed by the SHA-256 of the file's bytes.

Opt-in: `rerank CMD --cache` or the environment variable RERANK_CACHE_DIR (the caches' root:
entries go to its `nbest/`; default $XDG_CACHE_HOME/mlmme-rerank/nbest, i.e.
~/.cache/mlmme-rerank/nbest; rerank.caches).
Every single-file format whose record says `cached` is cached (plain lists come with side files: never).

An entry `KEY.nbc` is a header and raw little-endian arrays at 64-byte aligned offsets (each
one `np.memmap`-able): ``MAGIC, header length (8 bytes), JSON header, arrays``. The header
holds the key, the array layout, the feature names and groups, the missing counts, what the
reader reported, and the CRC-32 of the arrays. The key hashes the file's bytes (as stored,
gzip'd or not), the read options (format, strict, the format's options), the source of the reading
code (rerank/formats and its subpackages, rerank/nbest.py, rerank/io.py) and the Python and numpy versions: a
changed file or reader never meets an old entry.

Entries are written to a temporary file and renamed (rerank.io.atomic_write): readers see a
whole entry or none, and concurrent writers of one key write the same bytes. A file changed
while it was read is not cached. An entry that is unreadable, truncated, of another version or
whose CRC does not match is ignored (the file is parsed again and the entry rewritten). Where
no entry can be written the list is read as without a cache (with a note). Entries not used
for longest are removed while the folder holds more than RERANK_CACHE_MAX_MB (default 4096).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import stat
import sys
import zlib
from typing import Any

import numpy as np

from rerank.caches import CACHE_ENV, cache_path
from rerank.errors import InputError
from rerank.formats.common import ReadReport
from rerank.io import atomic_write
from rerank.nbest import NBestList, StringColumn

VERSION = 1
MAGIC = b"RRNBEST\x00"
ALIGN = 64
SUFFIX = ".nbc"
DEFAULT_MAX_MB = 4096


def default_dir() -> str:
    """`nbest/` under the caches' root (rerank.caches)."""
    return cache_path("nbest")


def cache_dir(cache) -> str | None:
    """The folder of the cache, or None when off. `cache`: None (on when RERANK_CACHE_DIR is
    set), False (off), True (on) or a folder; on, without a folder, it is `nbest/` under the
    caches' root (rerank.caches: $RERANK_CACHE_DIR, else $XDG_CACHE_HOME/mlmme-rerank)."""
    if cache is None:
        return default_dir() if os.environ.get(CACHE_ENV) else None
    if cache is True:
        return default_dir()
    return str(cache) if cache else None


@functools.cache
def _code_digest() -> str:
    """SHA-256 of the reading code's source, and the versions parsing depends on."""
    here = os.path.dirname(os.path.abspath(__file__))
    # every module of rerank.formats, its subpackages (rerank.formats.moses) included
    files = sorted(os.path.join(folder, n) for folder, _, names in os.walk(here) for n in names if n.endswith(".py"))
    files += [os.path.join(os.path.dirname(here), n) for n in ("nbest.py", "io.py")]
    digest = hashlib.sha256(f"{VERSION} {sys.version_info[:2]} {np.__version__}".encode())
    for name in files:
        try:
            with open(name, "rb") as fh:
                digest.update(hashlib.sha256(fh.read()).digest())
        except OSError:  # no sources (a bytecode-only install): the package version stands in
            from rerank import __version__
            digest.update(f"{name} {__version__}".encode())
    return digest.hexdigest()


def entry_key(path: str, options: dict) -> tuple[str, os.stat_result] | None:
    """(key, the file's stat before hashing) of a regular file, or None (not a regular file, unreadable)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # before opening: a FIFO would block, and be consumed
            return None
        with open(path, "rb") as fh:
            before = os.fstat(fh.fileno())
            if not stat.S_ISREG(before.st_mode):
                return None
            content = hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        return None
    text = json.dumps({"code": _code_digest(), "options": options, "content": content}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest(), before


def unchanged(path: str, before: os.stat_result) -> bool:
    """Whether `path` is still the file `before` describes (same inode, size, times)."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    fields = ("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")
    return all(getattr(now, f) == getattr(before, f) for f in fields)


def _arrays(nbest: NBestList) -> dict[str, np.ndarray]:
    buffer, hyp_offsets = nbest.hyps.raw()
    arrays = {"offsets": nbest.offsets, "hyp_offsets": hyp_offsets - hyp_offsets[0],
              "hyp_bytes": np.frombuffer(buffer, dtype=np.uint8)[int(hyp_offsets[0]):int(hyp_offsets[-1])],
              "features": nbest.features}
    if nbest.scores is not None:
        arrays["scores"] = nbest.scores
    return {name: np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")) for name, a in arrays.items()}


def _raw(a) -> memoryview:
    """The bytes of an array (or bytes) without a copy; an empty one too (a list without features
    has an (n, 0) matrix, which memoryview cannot cast)."""
    view = memoryview(a)
    return view.cast("B") if view.nbytes else memoryview(b"")


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def write_entry(file: str, key: str, nbest: NBestList, report: ReadReport) -> None:
    """Write the entry atomically (OSError, InputError when it cannot be written)."""
    arrays = _arrays(nbest)
    layout, offset, crc = {}, 0, 0
    for name, a in arrays.items():
        layout[name] = [offset, a.dtype.str, list(a.shape)]
        offset = _aligned(offset + a.nbytes)
        crc = zlib.crc32(_raw(a), crc)
    header = json.dumps({"version": VERSION, "key": key, "arrays": layout, "payload": offset, "crc32": crc,
                         "feature_names": nbest.feature_names, "groups": nbest.groups, "missing": nbest.missing,
                         "report": dataclasses.asdict(report)}).encode()
    head = MAGIC + len(header).to_bytes(8, "little") + header
    start = _aligned(len(head))
    with atomic_write(file, "wb", grouped=False) as out:
        out.write(head + bytes(start - len(head)))
        for a in arrays.values():
            out.write(_raw(a))
            out.write(bytes(_aligned(a.nbytes) - a.nbytes))


def _read_header(fh, key: str) -> tuple[dict, int] | None:
    if fh.read(len(MAGIC)) != MAGIC:
        return None
    length = int.from_bytes(fh.read(8), "little")
    if not 0 < length < (1 << 31):
        return None
    header = json.loads(fh.read(length))
    if header.get("version") != VERSION or header.get("key") != key:
        return None
    return header, _aligned(len(MAGIC) + 8 + length)


def load_entry(file: str, key: str) -> tuple[NBestList, ReadReport] | None:
    """The n-best and read report stored in `file` if it is a whole, intact entry for `key`, else None."""
    try:
        with open(file, "rb") as fh:
            found = _read_header(fh, key)
            if found is None:
                return None
            header, start = found
            if os.fstat(fh.fileno()).st_size != start + header["payload"]:
                return None
            arrays: dict[str, Any] = {}
            crc = 0
            for name, (offset, dtype, shape) in header["arrays"].items():
                fh.seek(start + offset)
                a: bytes | np.ndarray
                if name == "hyp_bytes":  # read as bytes, the StringColumn's buffer
                    a = fh.read(int(np.prod(shape)))
                    if np.dtype(dtype) != np.uint8 or len(a) != np.prod(shape):
                        return None
                else:
                    a = np.empty(shape, dtype=np.dtype(dtype))
                    if a.nbytes and fh.readinto(_raw(a)) != a.nbytes:
                        return None
                crc = zlib.crc32(_raw(a), crc)
                arrays[name] = a
        if crc != header["crc32"]:
            return None
        hyps = StringColumn(arrays["hyp_bytes"], arrays["hyp_offsets"])
        nbest = NBestList(arrays["offsets"], hyps, arrays["features"], header["feature_names"],
                          [tuple(g) for g in header["groups"]], arrays.get("scores"), header["missing"])
        return nbest, ReadReport(**header["report"])
    except (OSError, ValueError, KeyError, TypeError, InputError):  # ValueError: bad JSON, shapes, dtypes
        return None


def _merge(report: ReadReport, part: ReadReport) -> None:
    report.extra_fields_lines += part.extra_fields_lines
    report.ignored_lines += part.ignored_lines
    if part.fairseq_refs is not None:
        report.fairseq_refs = part.fairseq_refs
    if part.fairseq_sources is not None:
        report.fairseq_sources = part.fairseq_sources
    report.columns.update(part.columns)
    report.notes.extend(part.notes)


def read_cached(path: str, directory: str, options: dict, read, report: ReadReport) -> NBestList:
    """`read(report)`'s n-best of `path`, from the cache in `directory` when it holds it (what the
    reader reported is replayed into `report`), else read and stored."""
    found = entry_key(path, options)
    if found is None:
        return read(report)
    key, before = found
    file = os.path.join(directory, key + SUFFIX)
    loaded = load_entry(file, key)
    if loaded is not None:
        _merge(report, loaded[1])
        _touch(file)
        return loaded[0]
    fresh = ReadReport()
    try:
        nbest = read(fresh)
    finally:
        _merge(report, fresh)
    if unchanged(path, before):
        try:
            write_entry(file, key, nbest, fresh)
            evict(directory, keep=file)
        except (OSError, InputError) as exc:
            report.notes.append(f"not cached: cannot write to {directory} ({getattr(exc, 'strerror', None) or exc})")
    return nbest


def _touch(file: str) -> None:
    try:
        os.utime(file)  # the entry was used now: evicted last
    except OSError:
        pass


def evict(directory: str, keep: str | None = None, limit_mb: float | None = None) -> list[str]:
    """Remove the entries used longest ago while the folder holds more than the limit; their paths."""
    if limit_mb is None:
        try:
            limit_mb = float(os.environ.get("RERANK_CACHE_MAX_MB") or DEFAULT_MAX_MB)
        except ValueError:
            limit_mb = DEFAULT_MAX_MB
    entries = []
    for name in os.listdir(directory):
        if name.endswith(SUFFIX):
            try:
                st = os.stat(os.path.join(directory, name))
            except OSError:  # removed meanwhile
                continue
            entries.append((st.st_mtime_ns, st.st_size, os.path.join(directory, name)))
    total, removed = sum(size for _, size, _ in entries), []
    for _, size, file in sorted(entries):
        if total <= limit_mb * (1 << 20):
            break
        if file == keep:
            continue
        try:
            os.unlink(file)
        except OSError:
            continue
        total -= size
        removed.append(file)
    return removed
