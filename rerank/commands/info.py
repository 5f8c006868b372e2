"""`rerank info`: counts and problems of an n-best list."""

from __future__ import annotations

import json

from rerank.cliargs import add_quiet
from rerank.commands._common import FORMAT_HELP, add_nbest_input, load_nbest
from rerank.nbest import NBestList

def add_parser(subparsers):
    parser = subparsers.add_parser(
        "info", help="print counts and problems of an n-best list",
        description="Print the number of sentences and hypotheses, list sizes, feature names and "
        "ranges, and problems found (empty hypotheses, duplicate hypotheses, missing features, "
        "lists shorter than the longest). " + FORMAT_HELP,
    )
    add_nbest_input(parser)
    add_quiet(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)

def summarize(nbest: NBestList) -> dict:
    sizes = nbest.sizes
    empty = sum(1 for h in nbest.hyps if not h.strip())
    duplicates = 0
    for i in range(nbest.n_sentences):
        block = nbest.hyps[nbest.sentence(i)]
        duplicates += len(block) - len(set(block))
    features = {}
    for k, name in enumerate(nbest.feature_names):
        column = nbest.features[:, k]
        features[name] = {
            "min": float(column.min()) if len(column) else None,
            "mean": float(column.mean()) if len(column) else None,
            "max": float(column.max()) if len(column) else None,
            "missing": int(nbest.missing.get(name, 0)),
        }
    problems = [] if nbest.n_hyps else ["no hypotheses: the n-best list is empty"]
    if empty:
        problems.append(f"{empty} empty hypotheses")
    if duplicates:
        problems.append(f"{duplicates} hypotheses repeat an earlier string of the same list")
    for name, count in nbest.missing.items():
        problems.append(f"feature {name!r} missing on {count} hypotheses (filled with 0)")
    if len(sizes) and sizes.min() < sizes.max():
        short = int((sizes < sizes.max()).sum())
        problems.append(f"{short} sentences have fewer than {int(sizes.max())} hypotheses")
    constant = [n for n, f in features.items() if f["min"] == f["max"]]
    if constant and nbest.n_hyps > 1:
        problems.append(f"constant features (cannot affect ranking): {', '.join(constant)}")
    return {
        "sentences": nbest.n_sentences,
        "hypotheses": nbest.n_hyps,
        "list_size": {"min": int(sizes.min()), "mean": float(sizes.mean()), "max": int(sizes.max())} if len(sizes) else None,
        "has_total_score": nbest.scores is not None,
        "features": features,
        "problems": problems,
    }

def run(args) -> int:
    nbest, _ = load_nbest(args, allow_empty=True)
    info = summarize(nbest)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    size = info["list_size"]
    print(f"file:        {args.nbest}")
    print(f"sentences:   {info['sentences']}")
    print(f"hypotheses:  {info['hypotheses']}")
    print(f"list size:   min {size['min']}  mean {size['mean']:.2f}  max {size['max']}" if size else "list size:   -")
    print(f"total score: {'yes' if info['has_total_score'] else 'no'}")
    print(f"features:    {len(info['features'])}")
    width = max((len(n) for n in info["features"]), default=4)
    for name, f in info["features"].items():
        miss = f"  missing {f['missing']}" if f["missing"] else ""
        ranges = f"  min {f['min']:.6g}  mean {f['mean']:.6g}  max {f['max']:.6g}" if f["min"] is not None else ""
        print(f"  {name:<{width}}{ranges}{miss}")
    print("problems:    " + ("none" if not info["problems"] else ""))
    for p in info["problems"]:
        print(f"  - {p}")
    return 0
