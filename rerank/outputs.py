"""Checks every command runs on its output paths before any work (input digests: rerank.io.file_digest).

An output must not be one of the inputs (symlinks, hard links and relative paths included),
two outputs must not be one file, and each must be writable: not a directory, in a folder that
exists and may be written, not a read-only file. "-" (standard input/output) never clashes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from rerank.errors import InputError


def nbest_outputs(path: str | None, fmt: str) -> list[str | None]:
    """The files `write_nbest(..., path, fmt)` writes (plain adds PATH.ids and PATH.features.tsv)."""
    from rerank.formats import get_format

    if path is None or path == "-":
        return [path]
    return list(get_format(fmt).output_paths(path))


def _same(a: str, b: str) -> bool:
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def _check_writable(path: str) -> None:
    if os.path.isdir(path):
        raise InputError("is a directory, not a file", path)
    folder = os.path.dirname(os.path.abspath(path))
    shown = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise InputError(f"its folder {shown} does not exist", path)
    why = "read-only file system" if _read_only_mount(folder) else "permission denied"   # the OS's words
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"cannot write in its folder {shown} ({why})", path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise InputError(f"is read-only ({why})", path)


def _read_only_mount(folder: str) -> bool:
    """Whether `folder` is on a file system mounted read-only (os.access says only no)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _paths(values: Iterable[str | None]) -> list[str]:
    return [v for v in values if v is not None and v != "-"]


def check_outputs(outputs: Iterable[str | None], inputs: Iterable[str | None]) -> None:
    """Raise InputError unless every output can be written without touching an input.

    None entries (options not given) and "-" are skipped.
    """
    outs, ins = _paths(outputs), _paths(inputs)
    for k, out in enumerate(outs):
        _check_writable(out)
        for inp in ins:
            if _same(out, inp):
                shown = "" if inp == out else f" {inp}"
                raise InputError(f"the output is also the input{shown}; write it elsewhere", out)
        for other in outs[:k]:
            if _same(out, other):
                raise InputError(f"two outputs are the same file ({other} and {out})", out)
