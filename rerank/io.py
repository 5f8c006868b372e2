"""File helpers: gzip detected by content (files and streams alike), strict UTF-8 with
line-numbered errors, a leading byte-order mark dropped, a look at the first lines of
standard input that does not consume them, atomic writes.

An output is written to `.rerank-tmp.PID.HOST.NAME.XXXXXXXX.tmp` beside it and renamed when
complete: a killed writer leaves only such a file, never something a later run could take for
output, and every later write in that folder removes the ones whose process (on this host) no
longer runs. Inside `output_group()` the renames wait for the group's end, so a command writes
all its outputs or none.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import errno
import gzip
import io
import itertools
import os
import re
import socket
import sys
import tempfile
import zlib
from collections.abc import Generator, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

from rerank.errors import InputError
from rerank.progress import Progress, progress_bar, track

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"


class _Prefixed(io.RawIOBase):
    """A readable stream: the bytes `head` (read off `stream` to look at them), then the rest of `stream`."""

    def __init__(self, head: bytes, stream: IO[bytes]) -> None:
        self._head, self._stream = head, stream
        self._read = getattr(stream, "read1", stream.read)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)
        data = self._head[:len(view)] if self._head else self._read(len(view))
        self._head = self._head[len(data):]
        view[:len(data)] = data
        return len(data)


def _gunzipped(raw: IO[bytes]) -> IO[bytes] | gzip.GzipFile:
    """`raw`, or its decompressed content if it starts with the gzip magic bytes."""
    peek = getattr(raw, "peek", None)
    head = peek(2)[:2] if peek is not None else b""
    if len(head) < 2:  # no peek, or a pipe that had less at hand: read the bytes and put them back
        head = raw.read(2)
        raw = io.BufferedReader(_Prefixed(head, raw))
    return gzip.GzipFile(fileobj=raw) if head == GZIP_MAGIC else raw


class _Stdin:
    """Standard input, opened once: lines looked at by `head_lines` wait in `pending`."""

    source: Any = None  # sys.stdin.buffer when opened
    stream: Any = None  # source, or the gzip file reading it
    pending: collections.deque = collections.deque()

    @classmethod
    def get(cls) -> type[_Stdin]:
        source = getattr(sys.stdin, "buffer", None)
        if source is None:
            raise InputError("there is no standard input to read", "-")
        if cls.source is not source:  # a new stdin (tests swap it): start over
            cls.source, cls.stream, cls.pending = source, None, collections.deque()
        if cls.stream is None:
            cls.stream = _gunzipped(cls.source)
        return cls

    @classmethod
    def lines(cls) -> Iterator[bytes]:
        while cls.pending:
            yield cls.pending.popleft()
        yield from cls.stream

    @classmethod
    def peek(cls, n: int) -> Iterator[bytes]:
        yield from itertools.islice(cls.pending, n)
        while len(cls.pending) < n:
            raw = cls.stream.readline()
            if not raw:
                return
            cls.pending.append(raw)
            yield raw


def open_binary(path: str) -> tuple[IO[bytes], IO[bytes] | gzip.GzipFile]:
    """(raw file, its bytes gunzipped when the gzip magic starts it) of `path`; InputError if it cannot be opened."""
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path) from None
    try:
        return raw, _gunzipped(raw)
    except OSError as exc:
        raw.close()
        raise InputError(f"cannot read: {exc}", path) from None


def _decoded(raw_lines: Iterable[bytes], path: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of raw lines: UTF-8 (else an error naming the line), no BOM, no newline."""
    number = 0
    raw_lines = iter(raw_lines)
    try:
        first = next(raw_lines, None)
        if first is None:
            return
        if first.startswith(UTF8_BOM):
            first = first[len(UTF8_BOM):]
        for number, raw in enumerate(itertools.chain((first,), raw_lines), start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"not UTF-8 (byte {exc.start + 1}: {raw[exc.start:exc.start + 1]!r})", path, number) from None
            yield number, text.rstrip("\r\n")
    except (OSError, EOFError, zlib.error) as exc:
        broken = isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile))
        raise InputError(f"cannot read: {'corrupt or truncated gzip data: ' if broken else ''}{exc}", path, number + 1) from None


_PROGRESS: contextvars.ContextVar[Progress] = contextvars.ContextVar("rerank_reading_progress", default=False)


@contextlib.contextmanager
def reading_progress(progress: Progress) -> Iterator[None]:
    """Inside, iter_lines and the bulk readers (reading_bar) report the lines read to `progress`
    (rerank.progress; the commands pass their bars when stderr is a terminal and --quiet is not
    given: reading a large n-best list takes seconds). A context variable, because the format
    readers take no `progress`."""
    token = _PROGRESS.set(progress)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def iter_lines(path: str) -> Generator[tuple[int, str], None, None]:
    """Yield (1-based line number, line without its newline) of a text or gzip'd file, "-" for stdin.

    Bytes that are not UTF-8 and broken gzip data raise InputError naming the file and line;
    a UTF-8 byte-order mark at the start is dropped.
    """
    if path == "-":
        yield from _with_progress(_decoded(_Stdin.get().lines(), path), path)
        return
    raw, stream = open_binary(path)
    try:
        yield from _with_progress(_decoded(stream, path), path)
    finally:
        stream.close()
        raw.close()


_READING_BAR: dict[str, Any] = {"unit": " lines", "unit_scale": True, "mininterval": 0.5}


def _with_progress(lines: Iterator[tuple[int, str]], path: str) -> Iterator[tuple[int, str]]:
    progress = _PROGRESS.get()
    if not progress:
        return lines
    return track(lines, progress, _reading(path), **_READING_BAR)


def _reading(path: str) -> str:
    return f"reading {os.path.basename(path) or path}"


def reading_bar(path: str) -> Any:
    """The bar of reading `path` inside `reading_progress` (a silent one outside), for a reader
    that reads blocks of lines rather than iter_lines (rerank.formats.moses.fast): update(lines)
    after each block, so that the bar moves as the lines are read, gzip'd files too."""
    return progress_bar(_PROGRESS.get(), _reading(path), **_READING_BAR)


def head_lines(path: str, n: int) -> list[tuple[int, str]]:
    """The first `n` lines as `iter_lines` gives them, without consuming standard input."""
    if path == "-":
        return list(_decoded(_Stdin.get().peek(n), path))
    lines = iter_lines(path)
    try:
        return list(itertools.islice(lines, n))
    finally:
        lines.close()


def read_lines(path: str) -> list[str]:
    """All lines of a (possibly gzip'd) UTF-8 text file."""
    return [line for _, line in iter_lines(path)]


def read_references(refs: str | os.PathLike | Iterable[str | os.PathLike | Iterable[str]], n_sentences: int | None = None,
                    nbest_path: str | None = None) -> list[list[str]]:
    """The reference streams refs[k][i] (reference k of sentence i), the one reader of the CLI and
    the Python API. `refs`: one reference file path, or a sequence with one item per reference,
    each a file path or a list of strings (one per sentence). Every stream must be non-empty and
    as long as the first (and as `n_sentences`, the sentences of the n-best `nbest_path`, named in
    the message, when given)."""
    items = [refs] if isinstance(refs, (str, os.PathLike)) else list(refs)
    if not items:
        raise InputError("no references given")
    streams, names = [], []
    for k, item in enumerate(items, start=1):
        if isinstance(item, (str, os.PathLike)):
            streams.append(read_lines(os.fspath(item)))
            names.append(os.fspath(item))
        elif isinstance(item, Iterable) and not isinstance(item, bytes):
            lines = list(item)
            if not all(isinstance(line, str) for line in lines):
                raise InputError(f"reference {k}: expected a file path or a list of strings, one per sentence")
            streams.append(lines)
            names.append(f"reference {k}")
        else:
            raise InputError(f"reference {k}: expected a file path or a list of strings, not {type(item).__name__}")
    for name, lines in zip(names, streams):
        if not lines:
            raise InputError("empty file: no reference lines", name)
        if len(lines) != len(streams[0]):
            raise InputError(f"{len(lines)} lines but {names[0]} has {len(streams[0])}", name)
        if n_sentences is not None and len(lines) != n_sentences:
            raise InputError(f"{len(lines)} reference lines for {n_sentences} n-best sentences"
                             + (f" in {nbest_path}" if nbest_path else ""), name)
    return streams


def file_digest(path: str) -> str | None:
    """sha256 of a file's bytes (hex); None for standard input."""
    import hashlib

    if path == "-":
        return None
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path) from None
    return digest.hexdigest()


def read_json_object(path: str, what: str = "settings") -> dict:
    """The JSON object in a (possibly gzip'd) UTF-8 file; InputError naming the file (and the line)
    when it cannot be read, is not JSON or is not an object."""
    import json

    try:
        value = json.loads("\n".join(read_lines(path)))
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", path, exc.lineno) from None
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object of {what}", path)
    return value


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


TMP_PREFIX = ".rerank-tmp."
_TMP_NAME = re.compile(r"\.rerank-tmp\.(\d+)\.([A-Za-z0-9-]+)\.")
_HOST = re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname())[:40] or "host"


def _running(pid: int) -> bool:
    """Whether a process `pid` runs on this host (another user's counts)."""
    if pid <= 0:
        return True  # not a pid a writer has: leave the file alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it runs, as another user
        return True
    return True


def clean_stale_temps(directory: str) -> list[str]:
    """Remove the temporary files of writers (this host's) that no longer run from `directory`;
    return their paths. Files of running processes and of other hosts are kept."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        match = _TMP_NAME.match(name)
        if match is None or match.group(2) != _HOST or _running(int(match.group(1))):
            continue
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):  # removed meanwhile by another run, or not ours to remove
            if os.path.isfile(path) and not os.path.islink(path):
                os.unlink(path)
                removed.append(path)
    return removed


_GROUP: contextvars.ContextVar[list | None] = contextvars.ContextVar("rerank_output_group", default=None)


@contextlib.contextmanager
def output_group() -> Iterator[None]:
    """Within it, `atomic_write` renames its files into place only when the outermost group ends
    without an exception (else they are removed): all outputs or none. Nested groups join it."""
    if _GROUP.get() is not None:
        yield
        return
    pending: list[tuple[str, str]] = []
    token = _GROUP.set(pending)
    try:
        yield
        for _, path in pending:  # refuse before renaming any, so that none is renamed
            if os.path.isdir(path):
                raise InputError("cannot write: is a directory", path)
        while pending:
            tmp, path = pending[0]
            _replace(tmp, path)
            pending.pop(0)
    finally:
        _GROUP.reset(token)
        for tmp, _ in pending:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


# What the system says when it has no room or no right to write (a full disk, a quota, a read-only
# file system, a file past its size limit): not a bug but the user's to fix, said in the system's words.
RESOURCE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG})


def resource_error(exc: BaseException, path: str) -> InputError | None:
    """`exc` as one line naming `path` in the system's words (`PATH: no space left on device`) when
    it is an OSError of RESOURCE_ERRNOS, else None (any other error stays what it is: a bug keeps
    its traceback)."""
    if isinstance(exc, OSError) and exc.errno in RESOURCE_ERRNOS:
        return InputError(os.strerror(exc.errno).lower(), path)
    return None


class _Output(io.FileIO):
    """The temporary file of an `atomic_write`: its writes go through os.write, and the OSError one
    raises is kept (`failure`), so that the writer tells a failed write of its own file (a full disk)
    from an error of the code writing it."""

    failure: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return os.write(self.fileno(), data)
        except OSError as exc:
            self.failure = exc
            raise

    def close(self) -> None:
        try:
            super().close()
        except OSError as exc:  # a network file system says a full disk or quota when the file is closed
            self.failure = exc
            raise


def _cannot_write(exc: OSError, path: str) -> InputError:
    return resource_error(exc, path) or InputError(f"cannot write: {exc.strerror}", path)


def _replace(tmp: str, path: str) -> None:
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; outputs get the usual mode
        os.replace(tmp, path)
    except OSError as exc:
        raise _cannot_write(exc, path) from exc


def _temp_beside(path: str) -> tuple[int, str]:
    """A new temporary file in `path`'s folder (created if missing), after removing stale ones."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        clean_stale_temps(directory)
        prefix = f"{TMP_PREFIX}{os.getpid()}.{_HOST}.{os.path.basename(path)[:80]}."
        return tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    except OSError as exc:
        raise _cannot_write(exc, path) from exc


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", encoding: str | None = "utf-8", grouped: bool = True) -> Iterator[Any]:
    """Write to a temporary file beside `path` and rename it into place only on success (at the
    end of the `output_group` when in one and `grouped`: a cache entry is not an output and is
    renamed at once); on any exception, Ctrl-C included, it is removed.

    `path` of "-" writes to standard output. A path ending in .gz is gzip-compressed. An error
    creating or renaming the file (a directory in the way, no permission) is an InputError, and so
    is a write of the file that the system refuses (RESOURCE_ERRNOS: a full disk, a quota),
    `PATH: no space left on device`, its OSError the cause.
    """
    if path == "-":
        yield sys.stdout if "b" not in mode else sys.stdout.buffer
        sys.stdout.flush()
        return
    tmp = file = None
    try:
        fd, tmp = _temp_beside(path)
        file = _Output(fd, "wb")
        with io.BufferedWriter(file) as raw:
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
        group = _GROUP.get() if grouped else None
        if group is None:
            _replace(tmp, path)
        else:
            group.append((tmp, path))
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        failure = file.failure if file is not None else None
        # the file's own write failed (the error itself, or what the writing code made of it)
        if failure is not None and isinstance(exc, Exception) and failure in (exc, exc.__cause__, exc.__context__):
            error = resource_error(failure, path)
            if error is not None:
                raise error from failure
        raise


def atomic_copy(src: str, dst: str) -> str:
    """Copy the file `src` to `dst` through `atomic_write` (its folder made if missing); returns dst."""
    import shutil

    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    with open(src, "rb") as f, atomic_write(dst, "wb") as out:
        shutil.copyfileobj(f, out)
    return dst


_HELD: dict[str, list[int]] = {}   # lock file -> [its descriptor, how many output_lock blocks of this process hold it]


def lock_path(path: str | os.PathLike) -> str:
    """The lock file of the output `path`: `.NAME.lock` beside it (output_lock)."""
    directory, name = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(directory, f".{name}.lock")


def run_dir_lock(directory: str | os.PathLike | None, wait: bool = False) -> contextlib.AbstractContextManager:
    """`output_lock` of a run directory (a trainer's checkpoints, config and log: `rerank nmt
    train --out`, `lm train`, `embed train`): its folder is made first, so that the lock beside the
    directory can be taken before anything is written; None locks nothing."""
    if directory is not None:
        with contextlib.suppress(OSError):   # a folder that cannot be made: the trainer says its own error
            os.makedirs(os.path.dirname(os.path.abspath(os.fspath(directory))), exist_ok=True)
    return output_lock([directory], wait)


@contextlib.contextmanager
def output_lock(paths: Iterable[str | os.PathLike | None], wait: bool = False) -> Iterator[None]:
    """Hold the lock of each output in `paths` for the `with` block: one writer per output. A
    family of files written together (tune's OUTPUT and its OUTPUT.runK.json) is locked by its
    first; None and "-" have none. The lock is an flock on `.NAME.lock` beside the output, which
    records the holder's pid and command line and is removed on release; a process that died
    holding it (kill -9) holds nothing, so its lock file is taken over. Another process holding
    one: InputError naming it (option `wait`), or, with `wait`, the block waits until it is free.
    The same process may nest blocks on one output. Where nothing can be locked (no fcntl, a
    folder that cannot be written, a file system without flock) the write goes on unlocked and
    says its own errors."""
    if not isinstance(wait, bool):   # a script's keyword (a config object's field is checked by its Check)
        raise InputError(f"wait must be True or False, got {wait!r}", option="wait")
    held: list[str] = []
    try:
        for path in sorted({os.path.abspath(os.fspath(p)) for p in paths if p is not None and os.fspath(p) != "-"}):
            lock = lock_path(path)   # in sorted order, so that two writers of the same outputs never deadlock
            entry = _HELD.get(lock)
            if entry is None:
                fd = _take_lock(path, lock, wait)
                if fd is None:
                    continue
                entry = _HELD[lock] = [fd, 0]
            entry[1] += 1
            held.append(lock)
        yield
    finally:
        for lock in reversed(held):
            entry = _HELD[lock]
            entry[1] -= 1
            if entry[1] == 0:
                del _HELD[lock]
                with contextlib.suppress(OSError):
                    os.unlink(lock)   # before the release: a waiter that then gets the old file takes a new one
                os.close(entry[0])


def _take_lock(path: str, lock: str, wait: bool) -> int | None:
    """The descriptor of `lock`, flock'ed by this process, with this process recorded in it; None
    where it cannot be locked. Raises InputError when another process holds it and not `wait`."""
    try:
        import fcntl
    except ImportError:   # not POSIX: no locks
        return None
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip().split("\n", 1)
            os.close(fd)
            who = f"pid {holder[0]}: {holder[1]}" if len(holder) == 2 else "pid unknown"
            raise InputError(f"being written by another rerank process ({who}) (wait waits until it ends)",
                             path, option="wait") from None
        except OSError:   # no flock here (some network file systems)
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:   # its last holder may have removed it between our open and flock: lock the file in place
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except OSError:
            same = False
        if same:
            break
        os.close(fd)
    command = " ".join([os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python", *sys.argv[1:]])
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{' '.join(command.split())[:2000]}\n".encode(), 0)
    return fd
