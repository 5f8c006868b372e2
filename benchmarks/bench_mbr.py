"""Time the mbr feature (rerank.consensus) on a shipped 1,000-sentence n-best list.

    python benchmarks/bench_mbr.py [--nbest rerank/data/multi30k/optimised.test_2016.50best.gz] [--repeat 3]

Prints seconds per run for each utility (best of --repeat) and hypotheses per second; the goal
of the issue that introduced it is at most 10 s for a 1,000-sentence 50-best list on two cores
with the default (BLEU) utility. --json writes the record.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rerank.consensus import MBROptions, mbr_scores
from rerank.formats import read_nbest
from rerank.io import atomic_write

SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rerank", "data", "multi30k",
                       "optimised.test_2016.50best.gz")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nbest", default=SHIPPED)
    ap.add_argument("--utilities", default="bleu,chrf", help="comma-separated (ter is much slower)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    nbest = read_nbest(args.nbest)
    record = {"benchmark": "bench_mbr", "machine": platform.platform(), "cpus": os.cpu_count(),
              "nbest": os.path.basename(args.nbest), "sentences": nbest.n_sentences, "hypotheses": nbest.n_hyps}
    for utility in args.utilities.split(","):
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            mbr_scores(nbest, nbest.column("nmt"), MBROptions(utility))
            times.append(time.perf_counter() - t)
        record[utility] = {"seconds": min(times), "hyps_per_second": nbest.n_hyps / min(times)}
        print(f"mbr {utility}: {nbest.n_sentences} sentences, {nbest.n_hyps} hypotheses: {min(times):.2f} s "
              f"(best of {args.repeat}) = {nbest.n_hyps / min(times):,.0f} hyps/s", flush=True)
    if args.json:
        with atomic_write(args.json) as out:
            json.dump(record, out, indent=2)


if __name__ == "__main__":
    main()
