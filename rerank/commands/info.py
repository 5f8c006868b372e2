"""`rerank info`: counts and problems of an n-best list (`rerank.summarize_file`)."""

from __future__ import annotations

import json

import rerank
from rerank.cliargs import add_quiet, bars
from rerank.commands._common import add_nbest_input, format_help, nbest_file, reading


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "info", help="print counts and problems of an n-best list",
        description="Print the number of sentences and hypotheses, list sizes, feature names and "
        "ranges, and problems found (empty hypotheses, duplicate hypotheses, missing features, "
        "lists shorter than the longest). " + format_help(),
    )
    add_nbest_input(parser)
    add_quiet(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


def run(args) -> int:
    with reading():
        info = rerank.summarize_file(nbest_file(args), bars(args))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    size = info["list_size"]
    print(f"file:        {args.nbest}")
    print(f"format:      {info['format']}{' (detected)' if info['detected'] else ''}")
    text = [f"{k.replace('_', '-')} {v}" for k, v in info["text"].items() if v != "none"]
    if text:
        print(f"text:        {', '.join(text)}")
    print(f"sentences:   {info['sentences']}")
    print(f"hypotheses:  {info['hypotheses']}")
    print(f"list size:   min {size['min']}  mean {size['mean']:.2f}  max {size['max']}" if size else "list size:   -")
    print(f"total score: {'yes' if info['has_total_score'] else 'no'}")
    print(f"features:    {len(info['features'])}")
    width = max((len(n) for n in info["features"]), default=4)
    for name, f in info["features"].items():
        miss = f"  missing {f['missing']}" if f["missing"] else ""
        ranges = f"  min {f['min']:.6g}  mean {f['mean']:.6g}  max {f['max']:.6g}" if f["min"] is not None else ""
        meaning = f"  ({f['meaning']})" if f.get("meaning") else ""
        print(f"  {name:<{width}}{ranges}{miss}{meaning}")
    print("problems:    " + ("none" if not info["problems"] else ""))
    for p in info["problems"]:
        print(f"  - {p}")
    return 0
