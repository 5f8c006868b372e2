"""`python -m nmt train|translate ...`: the same commands as `rerank nmt ...`."""

import argparse
import sys

from rerank.commands import nmt
from rerank.errors import InputError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nmt")
    sub = parser.add_subparsers(dest="command")
    nmt.add_parser(sub)
    args = parser.parse_args(["nmt"] + list(sys.argv[1:] if argv is None else argv))
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"nmt {args.verb}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
