"""`python -m rerank.nmt train|translate ...`: the same commands as `rerank nmt ...`."""

import argparse
import sys

from rerank.nmt.command import add_parser
from rerank.errors import InputError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rerank.nmt")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["nmt"] + list(sys.argv[1:] if argv is None else argv))
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"nmt {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"nmt {args.verb}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
