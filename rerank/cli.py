"""The `rerank` command line: one subcommand per module in rerank/commands/.

Each command module defines `add_parser(subparsers)` which creates its parser and sets
`func=run`; `run(args)` returns an exit status. Bad input raises InputError, which is
printed as `rerank <command>: error: FILE:LINE: problem` with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rerank import __version__
from rerank.errors import InputError

# Order is the order in `rerank --help`. Add a command by adding its module name here.
COMMAND_MODULES = [
    "info",
    "convert",
    "add_feature",
    "apply",
    "oracle",
    "features",
    "embed",
    "nmt",
    "eval",
    "tune",
    "demo",
    "recipe",
]


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
    for name in COMMAND_MODULES:
        importlib.import_module(f"rerank.commands.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
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
