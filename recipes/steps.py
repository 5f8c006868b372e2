"""Resumable recipe steps: a DONE marker written only when a step finished, and reuse only of
steps whose marker records the same inputs (SHA-256) and the same resolved configuration.

A step's output is a file or a directory; its marker is `OUT.DONE.json` beside a file and
`OUT/DONE.json` inside a directory. The marker holds the step's name, its resolved config, the
digests of its input files, when it finished, how long it took, and what the step adds (e.g.
an NMT run stopped by its time budget says so). A step without a marker is redone; one that
keeps a checkpoint (embedding and NMT training) resumes from it when it was last started with the
same config and inputs (`Steps.begin`), and trains afresh otherwise.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Sequence

from rerank.io import atomic_write, file_digest


@functools.lru_cache(maxsize=None)
def _sha256(path: str, size: int, mtime_ns: int) -> str | None:
    """SHA-256 of a file; cached on (path, size, mtime), so the embedding model and the sources,
    inputs of many steps, are read once per run."""
    return file_digest(path)


def _start_record(out: str, directory: bool) -> str:
    return os.path.join(out, "step.config.json") if directory else out + ".config.json"


def file_digests(paths: list[str]) -> list[list[str | None]]:
    """[file name, SHA-256] of each input, to tell a reusable output from a stale one."""
    out = []
    for path in paths:
        st = os.stat(path)
        out.append([os.path.basename(path), _sha256(os.path.abspath(path), st.st_size, st.st_mtime_ns)])
    return out


def marker_path(out: str, directory: bool = False) -> str:
    """Where the DONE marker of output `out` lives: inside a directory, beside a file."""
    return os.path.join(out, "DONE.json") if directory else out + ".DONE.json"


def read_marker(marker: str) -> dict | None:
    if not os.path.exists(marker):
        return None
    try:
        with open(marker, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None  # an unreadable marker is no marker: the step is redone


class Steps:
    """Checks and writes DONE markers; remembers which steps were reused and which were run."""

    def __init__(self, log):
        self.log = log
        self.reused: list[str] = []
        self.ran: list[str] = []

    def is_done(self, name: str, out: str, inputs: list[str], config: dict | None = None,
                directory: bool = False) -> bool:
        marker = read_marker(marker_path(out, directory))
        if marker is None:
            if os.path.exists(out):
                self.log(f"{name}: {out} has no DONE marker (unfinished or from an older run): "
                         "redoing it" + (" from its checkpoint" if directory else ""))
            return False
        if marker.get("inputs") != file_digests(inputs) or marker.get("config") != _plain(config):
            self.log(f"{name}: inputs of {out} changed: redoing it")
            return False
        self.log(f"{name}: reusing {out} (finished {marker.get('finished', '?')})")
        self.reused.append(name)
        return True

    def start(self, name: str, out: str, config: dict | None = None, directory: bool = False,
              inputs: Sequence[str] = ()) -> float:
        """Write the resolved config and the inputs' digests beside (or into) the output before the
        step runs; returns the start time."""
        if config is not None:
            target = _start_record(out, directory)
            os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
            with atomic_write(target) as f:
                json.dump({"step": name, "config": _plain(config), "inputs": file_digests(list(inputs))}, f, indent=1)
        return time.time()

    def begin(self, name: str, out: str, config: dict, directory: bool = False,
              inputs: Sequence[str] = ()) -> tuple[float, bool]:
        """`start` for a training step: (start time, whether its checkpoint may be resumed), the
        latter judged against the previous start's record before `start` replaces it."""
        resume = self.resumable(name, out, list(inputs), config, directory)
        return self.start(name, out, config, directory, inputs), resume

    def resumable(self, name: str, out: str, inputs: list[str], config: dict, directory: bool = False) -> bool:
        """Whether a checkpoint left in `out` may be resumed: only when the last start of the step
        recorded this config and these inputs (a run stopped midway). What a run with other
        settings or inputs left, finished or not, is trained afresh instead (and the log says so)."""
        try:
            with open(_start_record(out, directory), encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError):
            record = None
        same = (isinstance(record, dict) and record.get("config") == _plain(config)
                and record.get("inputs", []) == file_digests(inputs))   # records without inputs: steps without any
        if not same and os.path.exists(out):
            self.log(f"{name}: {out} was left by other settings or inputs: training afresh, not resuming")
        return same

    def finish(self, name: str, out: str, inputs: list[str], config: dict | None = None, started: float | None = None,
               directory: bool = False, **extra) -> None:
        marker = {"step": name, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "config": _plain(config),
                  "inputs": file_digests(inputs), **extra}
        if started is not None:
            marker["seconds"] = round(time.time() - started, 1)
        with atomic_write(marker_path(out, directory)) as f:
            json.dump(marker, f, indent=1)
        self.ran.append(name)

    def summary(self) -> str:
        return (f"steps run: {len(self.ran)} ({', '.join(self.ran) or 'none'}); "
                f"steps reused: {len(self.reused)} ({', '.join(self.reused) or 'none'})")


def _plain(config: dict | None):
    """The config as JSON would read it back (tuples become lists), for comparisons."""
    return None if config is None else json.loads(json.dumps(config))
