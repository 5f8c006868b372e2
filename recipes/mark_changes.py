"""What a re-evaluation changed in the significance marks of a results JSON: for every system,
mark († against the NMT 1-best, ‡ against the second baseline) and metric, on how many lists the
mark was set before and after, and which lists gained or lost it.

    python -m rerank.recipes.mark_changes OLD.json NEW.json [--title NAME]

OLD and NEW are results.json files of the recipe (docs/results/results.json) or of the stronger
reranker (docs/results/stronger/results.json): {"experiments": {"<flavour>.<n>best": summary}}.
Prints Markdown: totals per mark, then one row per (system, mark, metric) that is set on some list.
"""

from __future__ import annotations

import argparse
import json
import sys

MARKS = ("†", "‡")
METRICS = {"bleu": "BLEU", "meteor": "METEOR", "ter": "TER"}


def marks(results: dict) -> dict[tuple[str, str, str], set[str]]:
    """{(system, mark, metric): {list key, ...}} of every mark set in a results JSON."""
    found: dict[tuple[str, str, str], set[str]] = {}
    for key, summary in results["experiments"].items():
        for record in summary["results"]:
            if record["metric"] not in METRICS:
                continue
            for mark in MARKS:
                if mark in (record.get("marks") or ""):
                    found.setdefault((record["system"], mark, record["metric"]), set()).add(key)
    return found


def p_values(old: dict, new: dict, attr: str) -> list[tuple[float, float]]:
    """(before, after) of p-value `attr` ("p" or "p2") of every cell tested in both."""
    def cells(results):
        return {(key, r["system"], r["metric"]): r.get(attr) for key, e in results["experiments"].items()
                for r in e["results"] if r["metric"] in METRICS}

    before, after = cells(old), cells(new)
    return [(before[k], after[k]) for k in before if before[k] is not None and after.get(k) is not None]


def _lists(keys: set[str]) -> str:
    return ", ".join(k.replace("best", "-best").replace(".", " ") for k in sorted(keys)) or "–"


def changes(old: dict, new: dict) -> str:
    """The Markdown report of what changed between two results JSONs of the same lists and systems."""
    if set(old["experiments"]) != set(new["experiments"]):
        raise ValueError(f"different lists: {sorted(old['experiments'])} and {sorted(new['experiments'])}")
    before, after = marks(old), marks(new)
    lists = len(new["experiments"])
    cells = len(lists_systems := [(k, s) for k, e in new["experiments"].items() for s in e["systems"]
                                  if s != e["baseline"]]) * len(METRICS)
    lines = [f"{lists} lists, {len(lists_systems)} (list, system) pairs, {cells} cells of three metrics.", ""]
    for mark in MARKS:
        n_before = sum(len(v) for k, v in before.items() if k[1] == mark)
        n_after = sum(len(v) for k, v in after.items() if k[1] == mark)
        lines.append(f"- {mark}: {n_before} cells before, {n_after} after")
    for attr, what in (("p", "p against the NMT 1-best (†)"), ("p2", "p‡ against the second baseline (‡)")):
        pairs = p_values(old, new, attr)
        if pairs:
            rose = sum(b > a for a, b in pairs)
            fell = sum(b < a for a, b in pairs)
            lines.append(f"- {what}: larger on {rose} of {len(pairs)} cells, smaller on {fell}, the same on "
                         f"{len(pairs) - rose - fell}")
    lines += ["", "| system | mark | metric | lists before | lists after | lost on | gained on |",
              "|---|---|---|---|---|---|---|"]
    order = {s: i for i, s in enumerate(next(iter(new["experiments"].values()))["systems"])}
    for key in sorted(set(before) | set(after), key=lambda k: (order.get(k[0], 99), k[1], list(METRICS).index(k[2]))):
        b, a = before.get(key, set()), after.get(key, set())
        system, mark, metric = key
        lines.append(f"| {system} | {mark} | {METRICS[metric]} | {len(b)} | {len(a)} | {_lists(b - a)} | {_lists(a - b)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rerank.recipes.mark_changes", description=__doc__.split("\n\n")[0])
    ap.add_argument("old", help="results.json before")
    ap.add_argument("new", help="results.json after")
    args = ap.parse_args(argv)
    loaded = []
    for path in (args.old, args.new):
        with open(path, encoding="utf-8") as f:
            loaded.append(json.load(f))
    sys.stdout.write(changes(*loaded))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
