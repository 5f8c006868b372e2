"""The record that describes one n-best format to the rest of the toolkit.

A format is one module with one `NBestFormat` record (a module may hold two, as rerank.formats.moses holds
Moses and Joshua). The table (rerank.formats.table) lists the built-in records and the plug-ins
of the entry-point group `rerank.formats`; the readers' dispatch, the detection order, the
command line's `--format`/`--to` choices and options, the help text and the formats table of
docs/formats.md all come from these records, so a new format touches nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rerank.nbest import NBestList


@dataclass(frozen=True)
class ReadOption:
    """A reading option of a format: the keyword its reader takes and the command-line flag that
    fills it (every command that reads an n-best list offers it)."""

    key: str                            # the reader's keyword and the argparse dest
    flag: str                           # "--nbest-size"
    help: str
    type: Callable[[str], Any] | None = None
    choices: Sequence[str] | None = None
    default: Any = None
    metavar: str | None = None
    file: bool = False                  # its value is a file the read opens (commands check it is no output)


DETECT_LINES = 1000  # how far detection looks (fairseq's first S-/H- line may follow log lines)


@dataclass(frozen=True)
class Sample:
    """What detection sees of a file: its first lines (up to DETECT_LINES, with
    their line numbers, empty ones left out), the reading options given and the file's path (a
    format may look for its side files)."""

    lines: list[tuple[int, str]]
    options: dict[str, Any] = field(default_factory=dict)
    path: str = "-"

    @property
    def first(self) -> str:
        return self.lines[0][1] if self.lines else ""


@dataclass(frozen=True)
class NBestFormat:
    """One n-best format.

    read(path, *, strict, report, **options) -> NBestList reads it (options: the keys of the
    format's `options`, None when not given); `detect(sample)` claims a file from its first lines:
    False (not this format), True, or a note to report with the reading; `write(nbest, path,
    first_id=0)` writes it (None where the format cannot hold a list) and returns the paths written.
    """

    name: str
    layout: str                          # one line: how a hypothesis looks in the file
    producers: str                       # who writes it (for the help text and docs)
    read: Callable[..., NBestList]
    detect: Callable[[Sample], bool | str] | None = None
    write: Callable[..., list[str]] | None = None
    options: tuple[ReadOption, ...] = ()
    detect_order: int = 60               # detection asks the formats in this order (plain last)
    streamed: bool = False               # rerank.formats.moses.stream reads it in two passes
    cached: bool = False                 # single file, kept in the n-best cache (rerank.formats.cache)
    losses: Callable[[NBestList], list[str]] | None = None   # what `write` leaves out, one note each
    outputs: Callable[[str], list[str]] | None = None        # the files `write(..., path)` makes (default [path])
    side_inputs: Callable[[str, dict], list[str]] | None = None  # files besides `path` a read may open

    def output_paths(self, path: str) -> list[str]:
        return self.outputs(path) if self.outputs is not None and path != "-" else [path]
