"""Progress of long library calls, without a progress-bar library in the library.

Library functions that take `progress` accept:

- False or None: silent;
- a callable `progress(desc, done, total)`: called as the work advances (`done` and `total` in
  the task's unit, `total` None when unknown; `done` grows to `total`) -- a GUI, a notebook
  widget or a log of your own. A callable that also has `open_bar(desc, total=, unit=, initial=,
  leave=, **options)` returning a bar (update(n), set_postfix_str(text), close()) gets bars
  opened through it instead, with their units and postfix: the command line passes such an
  object (rerank.cliargs.TerminalBars, tqdm bars on stderr);
- True: records of the `rerank.progress` logger at INFO level, at most one every 10 seconds per
  task, and one at its end.

There is no process-wide reporter: the command line passes its bars to each call like any other
callback (a torchrun rank is a process of its own that parses its command line and passes them
too, or False off rank 0). Reading n-best files is the one path whose functions take no
`progress` (the format readers): `rerank.io.reading_progress(progress)` gives iter_lines and the
bulk Moses reader (`rerank.io.reading_bar`: the lines of each block as it is read) one for the
duration of a block, in a context variable.

`progress_bar(progress, desc, total)` gives an object with `update(n)`, `set_postfix_str(text)`
and `close()` (a context manager too); `track(iterable, progress, desc)` iterates with it.
"""

from __future__ import annotations

import contextlib

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sized

log = logging.getLogger(__name__)

Progress = bool | None | Callable[[str, int, "int | None"], None]


class _Bar:
    """The common part: counts, a postfix, the context-manager protocol."""

    def __init__(self, desc: str, total: int | None, initial: int = 0):
        self.desc, self.total, self.n, self.postfix = desc, total, initial, ""

    def update(self, n: int = 1) -> None:
        self.n += n
        self.report(final=False)

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        self.postfix = text

    def close(self) -> None:
        self.report(final=True)

    def report(self, final: bool) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class _Silent(_Bar):
    pass


class _Callback(_Bar):
    def __init__(self, callback: Callable, desc: str, total: int | None, initial: int = 0):
        super().__init__(desc, total, initial)
        self.callback = callback

    def report(self, final: bool) -> None:
        if not final:
            self.callback(self.desc, self.n, self.total)


class _LogBar(_Bar):
    EVERY = 10.0  # seconds between records

    def __init__(self, desc: str, total: int | None, initial: int = 0, unit: str = "it"):
        super().__init__(desc, total, initial)
        self.unit, self.start, self.last, self.closed = unit, time.monotonic(), time.monotonic(), False

    def report(self, final: bool) -> None:
        now = time.monotonic()
        if self.closed or (not final and now - self.last < self.EVERY):
            return
        self.last, self.closed = now, final
        of = f"/{self.total}" if self.total is not None else ""
        extra = f", {self.postfix}" if self.postfix else ""
        log.info("%s: %d%s %s, %.0f s%s%s", self.desc, self.n, of, self.unit.strip(), now - self.start, extra,
                 " (done)" if final else "")


def progress_bar(progress: Progress, desc: str, total: int | None = None, *, unit: str = "it", initial: int = 0,
                 leave: bool = False, **bar_options):
    """A bar for `progress` (see the module doc): update(n), set_postfix_str(text), close().
    `bar_options` (e.g. unit_scale, mininterval) go to a callback's `open_bar` only."""
    if not progress:
        return _Silent(desc, total, initial)
    open_bar = getattr(progress, "open_bar", None)
    if open_bar is not None:
        return open_bar(desc, total=total, unit=unit, initial=initial, leave=leave, **bar_options)
    if callable(progress):
        return _Callback(progress, desc, total, initial)
    return _LogBar(desc, total, initial, unit)


def track(iterable: Iterable, progress: Progress, desc: str, total: int | None = None, *, unit: str = "it",
          leave: bool = False, **bar_options) -> Iterator:
    """Iterate over `iterable`, advancing a progress bar by one per item (closed at the end, on
    an error or when the loop stops early)."""
    if not progress:
        yield from iterable
        return
    if total is None and isinstance(iterable, Sized):
        total = len(iterable)
    bar = progress_bar(progress, desc, total, unit=unit, leave=leave, **bar_options)
    try:
        for item in iterable:
            yield item
            bar.update(1)
    finally:
        bar.close()


@contextlib.contextmanager
def transformers_bars_off():
    """transformers' own progress bars (its "Loading weights" bar) off inside the block, so that
    loading a users' model prints nothing: the library reports through logging and callbacks."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()
