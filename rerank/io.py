"""File helpers: transparent gzip, strict UTF-8 with line-numbered errors, atomic writes."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import sys
import tempfile
from collections.abc import Iterator

from rerank.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"


def _open_binary(path: str):
    if path == "-":
        return sys.stdin.buffer
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path) from None
    if raw.peek(2)[:2] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw)
    return raw


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def iter_lines(path: str) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its newline) from a text or gzip'd file.

    Bytes that are not UTF-8 raise InputError naming the file and line.
    """
    stream = _open_binary(path)
    try:
        for number, raw in enumerate(stream, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"not UTF-8 (byte {exc.start + 1}: {raw[exc.start:exc.start + 1]!r})", path, number) from None
            yield number, text.rstrip("\r\n")
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"cannot read: {exc}", path) from None
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def read_lines(path: str) -> list[str]:
    """All lines of a (possibly gzip'd) UTF-8 text file."""
    return [line for _, line in iter_lines(path)]


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", encoding: str | None = "utf-8"):
    """Write to a temporary file beside `path` and rename it into place only on success.

    `path` of "-" writes to standard output. A path ending in .gz is gzip-compressed.
    """
    if path == "-":
        yield sys.stdout if "b" not in mode else sys.stdout.buffer
        sys.stdout.flush()
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as raw:
            target = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.endswith(".gz") else raw
            if "b" in mode:
                yield target
            else:
                text = io.TextIOWrapper(target, encoding=encoding, newline="\n")
                yield text
                text.flush()
                text.detach()
            if target is not raw:
                target.close()
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; outputs get the usual mode
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
