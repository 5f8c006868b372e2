"""Options shared by the commands (the n-best positional with its --nbest alias, --quiet and
when to show progress bars), argparse types for checked numbers (rerank.options' checks), and
the files commands name."""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import logging
import shlex
import sys

from rerank.device import add_device_option, add_threads_option  # noqa: F401 - the commands' --device and --threads
from rerank.errors import InputError
from rerank.options import FRACTION, NONNEGATIVE, NONNEGATIVE_INT, POSITIVE, POSITIVE_INT, PROBABILITY


def add_nbest_positional(parser) -> None:
    """The n-best input as a positional, with --nbest as an alias (resolve with `resolve_nbest`)."""
    parser.add_argument("nbest", nargs="?", help="input n-best file (- for stdin)")
    parser.add_argument("--nbest", dest="nbest_option", metavar="NBEST",
                        help="the input n-best file (alias of the positional)")


def resolve_nbest(args: argparse.Namespace) -> str:
    """Set and return args.nbest from the positional or --nbest (exactly one of them)."""
    if args.nbest and args.nbest_option:
        raise InputError("give the n-best file once (positional or --nbest)")
    args.nbest = args.nbest or args.nbest_option
    if not args.nbest:
        raise InputError("give the input n-best file (positional or --nbest)")
    return args.nbest


_ARGV: contextvars.ContextVar[list | None] = contextvars.ContextVar("rerank_argv", default=None)


def set_command_line(argv: list[str] | None):
    """Remember the arguments of the command being run (rerank.cli.main); returns a reset token."""
    return _ARGV.set(list(sys.argv[1:] if argv is None else argv))


def reset_command_line(token) -> None:
    _ARGV.reset(token)


def command_line() -> str:
    """The running command as a shell line, `rerank ARGS` (for reports that record how they were made)."""
    argv = _ARGV.get()
    return shlex.join(["rerank", *(sys.argv[1:] if argv is None else argv)])


class _StderrHandler(logging.Handler):
    """The message alone on the current sys.stderr (looked up at each record, as tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(self.format(record), file=sys.stderr)
        except Exception:  # noqa: BLE001 (logging's own rule: a handler never raises)
            self.handleError(record)


@contextlib.contextmanager
def stderr_log(level: int = logging.WARNING):
    """While a command calls the library: the notes and warnings it logs (logger `rerank`, at
    `level` and above) printed on stderr as the message alone, once (not passed on to handlers an
    embedding program configured)."""
    logger = logging.getLogger("rerank")
    existing = next((h for h in logger.handlers if isinstance(h, _StderrHandler)), None)
    if existing is not None:  # inside the command line's own (rerank.cli): one handler, its level lowered a while
        saved = existing.level, logger.level
        existing.setLevel(min(level, existing.level))
        logger.setLevel(min(level, logger.level) if logger.level else level)
        try:
            yield
        finally:
            existing.setLevel(saved[0])
            logger.setLevel(saved[1])
        return
    handler = _StderrHandler(level)
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(min(level, old_level) if old_level else level)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate


def add_quiet(parser) -> None:
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar (default: bars on stderr when it is a terminal)")


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars go to stderr, only when it is a terminal and --quiet is not given."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


class TerminalBars:
    """The command line's progress (rerank.progress): tqdm bars on stderr. Called as a plain
    callback `(desc, done, total)` it keeps one bar per `desc`, closed when `done` reaches
    `total`; the library's own bars open through `open_bar` with their units and postfix."""

    def __init__(self):
        self._bars: dict = {}

    def open_bar(self, desc: str, total: int | None = None, unit: str = "it", initial: int = 0,
                 leave: bool = False, **options):
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=unit, initial=initial, leave=leave, file=sys.stderr, **options)

    def __call__(self, desc: str, done: int, total: int | None) -> None:
        bar = self._bars.get(desc)
        if bar is None:
            bar = self._bars[desc] = self.open_bar(desc, total)
        bar.update(done - bar.n)
        if total is not None and done >= total:
            self._bars.pop(desc).close()


def terminal_bars() -> TerminalBars | bool:
    """TerminalBars when stderr is a terminal, else False (for commands without --quiet)."""
    return TerminalBars() if sys.stderr.isatty() else False


def bars(args: argparse.Namespace) -> TerminalBars | bool:
    """The `progress` a command passes to the library: tqdm bars on stderr when it is a terminal
    and --quiet is not given (show_progress), else False."""
    return TerminalBars() if show_progress(args) else False


# argparse types of checked numbers: the checks of rerank.options (shared with the library, which
# checks plug-in options by them), here under the names the commands use.
positive_int = POSITIVE_INT.parse            # an integer >= 1
nonnegative_int = NONNEGATIVE_INT.parse      # an integer >= 0
positive_float = POSITIVE.parse              # a finite number > 0
probability = PROBABILITY.parse              # a number strictly between 0 and 1 (a significance level)
nonnegative_float = NONNEGATIVE.parse        # a finite number >= 0
fraction = FRACTION.parse                    # a number in [0, 1) (a dropout rate)
