"""The `rerank` command line: parse, dispatch, print errors; nothing else.

Subcommands are plug-ins of the entry-point group `rerank.commands` (rerank.plugins): each is
an `add_parser(subparsers)` that creates its parser and sets `func`; `func(args)` returns an
exit status. Bad input raises InputError, printed as `rerank <command>: error: FILE:LINE:
problem` with exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from rerank import __version__, plugins
from rerank.errors import InputError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rerank",
        description="Rerank MT n-best lists with multilingual multi-modal sentence embeddings: "
        "read and convert n-best formats, add features, tune weights, rerank, and evaluate "
        "with significance tests.",
    )
    parser.add_argument("--version", action="version", version=f"mlmme-rerank {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for add_parser in plugins.commands().values():
        add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
    except plugins.PluginError as exc:
        print(f"rerank: error: {exc}", file=sys.stderr)
        return 2
    except argparse.ArgumentError as exc:  # two plug-ins add the same option to one command
        print(f"rerank: error: the options of the installed plug-ins clash: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"rerank {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print(f"rerank {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
