"""`rerank info`: counts and problems of an n-best list."""

from __future__ import annotations

import json

import numpy as np

from rerank.cliargs import add_quiet
from rerank.commands._common import format_help, add_nbest_input, load_nbest
from rerank.dedup import distinct_bytes
from rerank.formats import ReadReport
from rerank.nbest import NBestList, StringColumn

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

def summarize(nbest: NBestList, report: ReadReport | None = None) -> dict:
    """Counts, list sizes, per-feature min/mean/max and problems, computed over the arrays; with the
    read's `report`, the format (and whether it was detected), what each column means where the
    format says it, the post-processing applied, and hints for text that looks segmented or escaped."""
    sizes = nbest.sizes
    empty = count_blank(nbest.hyps)
    duplicates = count_repeats(nbest.hyps, nbest.offsets)
    features = {}
    for name, stats in zip(nbest.feature_names, column_stats(nbest.features)):
        features[name] = {**stats, "missing": int(nbest.missing.get(name, 0))}
    problems = [] if nbest.n_hyps else ["no hypotheses: the n-best list is empty"]
    if nbest.n_hyps and (sizes == 1).all() and not nbest.feature_names and nbest.scores is None:
        problems.append("no n-best structure: one hypothesis per sentence and no features or scores (a plain text "
                        "file, such as references or a 1-best? see docs/formats.md)")
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
    read = {}
    if report is not None:
        problems += report.hints
        if report.detected is not None and report.detected_lines == 1:
            problems.append(f"format {report.detected} guessed from the file's only line (--format sets it)")
        for name, meaning in report.columns.items():
            if name in features:
                features[name]["meaning"] = meaning
        read = {"format": report.format, "detected": report.detected is not None, "text": report.text}
    return {**read,
        "sentences": nbest.n_sentences,
        "hypotheses": nbest.n_hyps,
        "list_size": {"min": int(sizes.min()), "mean": float(sizes.mean()), "max": int(sizes.max())} if len(sizes) else None,
        "has_total_score": nbest.scores is not None,
        "features": features,
        "problems": problems,
    }


def column_stats(features: np.ndarray) -> list[dict]:
    """min, mean and max of every column (None without rows), the numbers `features[:, k].min()`,
    `.mean()` and `.max()` give. Columns are copied out a few at a time, a block of rows at once,
    and reduced contiguously (the mean is numpy's pairwise sum over the whole column either way)
    at a fraction of the memory traffic of reducing strided columns."""
    n, width = features.shape
    if not n:
        return [{"min": None, "mean": None, "max": None} for _ in range(width)]
    step, rows, stats = max(1, (1 << 23) // n), 1 << 12, []  # 64 MB of copies (one column if longer)
    for first in range(0, width, step):
        block = np.empty((min(step, width - first), n))
        for row in range(0, n, rows):
            block[:, row:row + rows] = features[row:row + rows, first:first + step].T
        for k, column in enumerate(block, start=first):
            low, high = column.min(), column.max()
            if (low == 0 or high == 0) and len(np.unique(np.signbit(column[column == 0]))) > 1:
                low, high = features[:, k].min(), features[:, k].max()  # which zero, -0.0 or 0.0, as before
            stats.append({"min": float(low), "mean": float(column.mean()), "max": float(high)})
    return stats


# first bytes of the UTF-8 encodings of every character str.isspace() accepts (tested)
_SPACE_LEAD = np.zeros(256, dtype=bool)
_SPACE_LEAD[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 0xC2, 0xE1, 0xE2, 0xE3]] = True


def count_blank(hyps: StringColumn) -> int:
    """How many strings are empty or white space only (`not h.strip()`): only those whose first
    byte may begin a white-space character are decoded."""
    buffer, offsets = hyps.raw()
    starts, ends = offsets[:-1], offsets[1:]
    filled = np.flatnonzero(ends > starts)
    first = np.frombuffer(buffer, dtype=np.uint8)[starts[filled]] if len(filled) else np.zeros(0, np.uint8)
    maybe = filled[_SPACE_LEAD[first]].tolist()
    return len(hyps) - len(filled) + sum(1 for row in maybe if not hyps[row].strip())


def count_repeats(hyps: StringColumn, offsets: np.ndarray) -> int:
    """How many strings equal an earlier string of their own segment (CSR `offsets`): the strings
    less the distinct (segment, string) pairs, compared by their bytes in the buffer (rerank.dedup)."""
    if len(hyps) < 2:
        return 0
    buffer, string_offsets = hyps.raw()
    segment = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    return len(hyps) - len(distinct_bytes(buffer, string_offsets[:-1], np.diff(string_offsets), salt=segment)[1])


def run(args) -> int:
    nbest, report = load_nbest(args, allow_empty=True)
    info = summarize(nbest, report)
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
