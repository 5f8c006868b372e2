"""The `rerank` command line: parse, dispatch, print errors; nothing else.

Subcommands are plug-ins of the entry-point group `rerank.commands` (rerank.plugins): each is
an `add_parser(subparsers)` that creates its parser and sets `func`; `func(args)` returns an
exit status. Bad input raises InputError, printed as `rerank <command>: error: FILE:LINE:
problem` with exit status 2; any other exception is a bug, printed with its traceback and one line
that says so, exit status 1.

Start-up: a command of this distribution (rerank.commands.COMMANDS) is run with its own module
imported and its own parser built, and no entry point scanned; `rerank --help`, a missing or an
unknown command list every command, this distribution's from the table (their modules not
imported) and the installed plug-ins' from their entry points.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import NoReturn

from rerank import __version__, distributed, plugins
from rerank.cliargs import reset_command_line, set_command_line, stderr_log
from rerank.commands import COMMANDS
from rerank.device import prefer_passive_openmp
from rerank.errors import InputError, MissingDependency, missing_neural


class OneLineErrors(argparse.ArgumentParser):
    """An argument error is one line, `rerank CMD: error: problem (see rerank CMD --help)`, exit
    status 2, as for every other bad input; argparse would print the whole usage block first.
    Under torchrun every rank parses the same command line: rank 0 alone says it."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n" if distributed.is_main() else None)


def build_parser(command: str | None = None, listing: bool = False) -> argparse.ArgumentParser:
    """The `rerank` parser. With `command`, one of this distribution's commands (COMMANDS): that
    command's parser alone, no other command module imported and no entry point scanned. With
    `listing`: every command, this distribution's as placeholders that carry only their one-line
    help (for `rerank --help` and the errors of a missing or unknown command), the installed
    plug-ins' built by their add_parser. Otherwise every installed command built in full."""
    parser = OneLineErrors(
        prog="rerank",
        description="Rerank MT n-best lists with multilingual multi-modal sentence embeddings: "
        "read and convert n-best formats, add features, tune weights, rerank, and evaluate "
        "with significance tests.",
    )
    parser.add_argument("--version", action="version", version=f"mlmme-rerank {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    if command in COMMANDS:
        builtin_command(command)(subparsers)
        return parser
    if not listing:
        for _, add_parser in sorted(plugins.COMMANDS.items()):
            add_parser(subparsers)
        return parser
    others = plugins.COMMANDS.plugins()   # this distribution's commands are the registry's built-in entries
    for name in sorted({*COMMANDS, *others}):
        if name in others:
            others[name](subparsers)
        else:
            subparsers.add_parser(name, help=COMMANDS[name][1])
    return parser


def builtin_command(name: str) -> Callable:
    """The add_parser of this distribution's command `name` (COMMANDS), its module imported now."""
    return plugins.import_object(COMMANDS[name][0])


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (Slurm, Kubernetes, `timeout`, a closed terminal) during `main`: raised
    where the program is, like Ctrl-C's KeyboardInterrupt, which it is a kind of, so that every
    cleanup Ctrl-C runs runs too (rerank.io.atomic_write removes its temporary file, a cache
    keeps only whole entries, the output lock is released)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def _terminate_like_ctrl_c() -> Callable[[], None]:
    """For one command in the main thread: SIGTERM and SIGHUP raise Terminated (the handlers
    Python had are put back by the function returned). A signal this process ignores (`nohup`
    ignores SIGHUP) stays ignored, and one handled by native code is left alone. A torchrun rank
    gets them too: torchrun sends SIGTERM to the other ranks when one fails, and the rank then
    removes its temporary files and exits 143 as any command does (its process group is ended by
    rerank.distributed.ranks on the way out)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def raise_terminated(signum, frame):
        raise Terminated(signum)

    previous = {}
    for number in TERMINATING:
        handler = signal.getsignal(number)
        if handler is not signal.SIG_IGN and handler is not None:
            previous[number] = signal.signal(number, raise_terminated)

    def restore():
        for number, handler in previous.items():
            signal.signal(number, handler)

    return restore


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status. Ctrl-C at any point (plug-in loading, parsing, the
    command) exits 130 with one line and no traceback, SIGTERM and SIGHUP exit 143 and 129 the
    same way (`rerank CMD: terminated (SIGTERM)`, Terminated); bad input exits 2 (argparse's own
    errors raise SystemExit(2) as argparse does); a command that needs the `neural` extra (torch,
    scikit-learn) on an install without it says in one line what to install, exit status 2; any
    other exception is a bug: its traceback and one line saying so, exit status 1
    (`_internal_error`). Under torchrun, an error every rank raised together (rerank.distributed)
    is said once, by rank 0."""
    name = "rerank"
    prefer_passive_openmp()
    token = set_command_line(argv)
    restore = _report_on_stderr()
    restore_signals = _terminate_like_ctrl_c()
    stdout = _WatchedStdout.install()
    parser = args = None
    try:
        parser = _parser(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
        name = f"rerank {args.command}"
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # inside: a full disk under standard output is said as any other
        return status
    except InputError as exc:
        if distributed.speaks(exc):
            print(f"{name}: error: {_with_flag(exc, parser, args)}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # a command of the `neural` extra on a core install
        module = missing_neural(exc)
        if module is None:
            return _internal_error(name, exc)
        print(f"{name}: error: {MissingDependency(module, 'this command')}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as exc:
        problem = stdout.refused(exc) if stdout is not None else None
        if problem is None:
            return _internal_error(name, exc)
        print(f"{name}: error: {problem}", file=sys.stderr)
        return 2
    except Terminated as exc:   # under torchrun said by rank 0: torchrun sends it to every rank
        if distributed.is_main():
            print(f"{name}: terminated ({signal.Signals(exc.signum).name})", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: its traceback and one line saying so, exit status 1
        return _internal_error(name, exc)
    finally:
        if stdout is not None:
            stdout.restore()
        restore_signals()
        distributed.close()
        restore()
        reset_command_line(token)


class _WatchedStdout:
    """The process's standard output during a command, keeping the OSError its writes raise, so
    that a full disk (or /dev/full) under it is said in one line, `standard output: no space left
    on device` (rerank.io.RESOURCE_ERRNOS), exit status 2, and not taken for a bug; the files the
    library writes say their own (rerank.io.atomic_write). Everything but write, writelines and
    flush is the stream's own."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._failure: OSError | None = None

    @classmethod
    def install(cls) -> _WatchedStdout | None:
        """Watch sys.stdout when it is the process's own (a caller's replacement is left alone)."""
        if sys.stdout is None or sys.stdout is not sys.__stdout__:
            return None
        sys.stdout = watched = cls(sys.stdout)
        return watched

    def restore(self) -> None:
        if sys.stdout is self:
            sys.stdout = self._stream

    def refused(self, exc: OSError) -> InputError | None:
        """`exc` as the one-line error when it is this stream's write failing for want of room."""
        from rerank.io import resource_error

        return resource_error(exc, "standard output") if exc is self._failure else None

    def _watch(self, method: Callable, *args):
        try:
            return method(*args)
        except OSError as exc:
            self._failure = exc
            raise

    def write(self, text: str) -> int:
        return self._watch(self._stream.write, text)

    def writelines(self, lines) -> None:
        self._watch(self._stream.writelines, lines)

    def flush(self) -> None:
        self._watch(self._stream.flush)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _internal_error(name: str, exc: Exception) -> int:
    """Report `exc`, which is no bad input but a bug (in this package or a plug-in), being handled
    now: its traceback, then one line that says so, which a user quotes in a report; exit status 1
    (never 2, which means bad input). Under torchrun a rank's own failure is told by that rank,
    before the ranks part (torchrun stops the rest); another rank's failure (PeerFailed, its
    traceback on that rank's stderr) is said once, by rank 0."""
    peer = isinstance(exc, distributed.PeerFailed)
    if peer and not distributed.speaks(exc):
        return 1
    if not peer:
        traceback.print_exc()
    where = "on that rank's stderr" if peer else "above"
    print(f"{name}: internal error (a bug in mlmme-rerank or a plug-in, not bad input): "
          f"{'' if peer else type(exc).__name__ + ': '}{' '.join(str(exc).split())}; please report it with the "
          f"traceback {where}", file=sys.stderr)
    return 1


def _chosen_actions(command: argparse.ArgumentParser, args: argparse.Namespace) -> list[argparse.Action]:
    """The actions of `command` and of the verbs chosen under it (`rerank embed train`: embed's,
    then train's), outermost first."""
    actions: list[argparse.Action] = []
    parser: argparse.ArgumentParser | None = command
    while parser is not None:
        actions += parser._actions
        verbs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(args, verbs.dest, None) if verbs is not None else None
        parser = verbs.choices.get(chosen) if verbs is not None and isinstance(chosen, str) else None
    return actions


def _with_flag(exc: Exception, parser: argparse.ArgumentParser | None, args: argparse.Namespace | None) -> str:
    """The error's message with the options it names said as the command's flags of the same
    destination, where the command has them: the option it is about (InputError.option) at the
    start of the message or of a parenthesis (`bootstrap must be ...` reads `--bootstrap must be
    ...`, `... (replace overwrites it)` reads `... (--replace overwrites it)`), and the other options
    it names (InputError.mentions) wherever they stand unquoted (`the metric comet needs comet_model
    PATH` reads `... needs --comet-model PATH`). A parenthesis that holds nothing but one of those
    names says how to give it: `needs references (refs)` reads `needs references (-r REF)`. Nothing
    else is rewritten: a feature or a file named like an option keeps its name."""
    if not isinstance(exc, InputError) or parser is None or args is None:
        return str(exc)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags: dict[str, str] = {}
    given: dict[str, str] = {}   # dest -> "-r REF": the shortest flag with its value's placeholder
    for action in reversed(_chosen_actions(commands.choices[args.command], args)):   # a verb's own flags first
        if action.option_strings:
            flags.setdefault(action.dest, max(action.option_strings, key=len))
            value = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            given.setdefault(action.dest, min(action.option_strings, key=len) + value)
    dest = exc.dests.get   # a plug-in's fields (centroids) -> their destinations under its prefix (mbr_centroids)
    option = exc.option if exc.option and dest(exc.option, exc.option) in flags else None
    mentions = [name for name in exc.mentions if dest(name, name) in flags]
    named = {*mentions, *([option] if option else [])}
    problem = re.sub(r"\((\w+)\)", lambda m: f"({given[dest(m.group(1), m.group(1))]})" if m.group(1) in named
                     else m.group(0), exc.problem)
    places = [rf"(?:^|(?<=\())(?:{re.escape(option)})"] if option else []                     # start, or "("
    places += [rf"(?<![\w'./:-])(?:{'|'.join(map(re.escape, mentions))})"] if mentions else []  # anywhere, unquoted
    if places:
        word = re.compile(rf"(?:{'|'.join(places)})(?![\w'./-])")
        problem = word.sub(lambda m: flags[dest(m.group(0), m.group(0))], problem)
    return str(InputError(problem, exc.path, exc.line)) if problem != exc.problem else str(exc)


def run() -> NoReturn:
    """The `rerank` console script and `python -m rerank`: `main`, then `exit_process`."""
    exit_process(main())


def exit_process(status: int) -> NoReturn:
    """End the `rerank` command (console script or `python -m rerank`) with `status`. A torchrun
    rank (a process that joined a process group) skips the interpreter's teardown (os._exit, once stdout, stderr and the log handlers are
    flushed): its outputs are written and its group ended, but a native library's thread still
    running while the C++ static objects are destroyed made a finished rank abort now and then
    ('terminate called without an active exception', SIGABRT: 1 run in 5 of the users'-model
    torchrun test beside a busy neighbour), and torchrun then stops its peers and fails the run.

    Any other process freezes the objects it holds (gc.freeze) before the interpreter's teardown,
    so that its last collections do not walk them: with torch loaded they took 0.3 to 0.4 s of
    every command's time. The atexit functions run, the standard streams are flushed and objects
    freed by reference counting are finalised as before; an object in a reference cycle is no
    longer finalised (an unclosed file there would not be flushed, a NamedTemporaryFile not
    removed), which Python never promised: the toolkit's outputs are written and closed
    (rerank.io.atomic_write) before the command returns."""
    if not distributed.joined():
        gc.freeze()
        raise SystemExit(status)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    logging.shutdown()
    os._exit(status)


def _report_on_stderr():
    """For one command: the library's warnings and notes (logger `rerank`) on stderr as the
    message alone (cliargs.stderr_log). (Progress bars: each command passes rerank.cliargs.bars.)
    Returns the function that undoes it."""
    logs = stderr_log(logging.WARNING)
    logs.__enter__()

    def restore():
        logs.__exit__(None, None, None)

    return restore


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser of the command `argv` runs (build_parser: its name comes first, since `rerank`'s
    own options, --help and --version, end the command line where they stand), or of the listing;
    two plug-ins adding the same option to one command are an InputError."""
    try:
        if argv and argv[0] in COMMANDS:
            return build_parser(argv[0])
        return build_parser(listing=True)
    except argparse.ArgumentError as exc:
        raise InputError(f"the options of the installed plug-ins clash: {exc}") from exc


if __name__ == "__main__":
    raise SystemExit(main())
