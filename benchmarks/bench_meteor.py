"""Time native METEOR 1.5 against the Meteor jar on 1,000 Multi30k sentences, and check agreement.

German (exact+stem) and English (exact, stem, synonym, paraphrase); the jar time includes Java
start-up and resource loading, the native time includes loading the paraphrase table.

    python benchmarks/bench_meteor.py --data-dir /work/shared/data/multi30k
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from rerank.metrics.meteor import MeteorMetric  # noqa: E402
from rerank.metrics.meteor.jar import java_available  # noqa: E402


def read(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [next(fh).rstrip("\n") for _ in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="/work/shared/data/multi30k")
    ap.add_argument("--sentences", type=int, default=1000)
    args = ap.parse_args()
    if not java_available():
        sys.exit("bench_meteor: needs Java for the jar side")
    for lang, modules in (("de", ["exact", "stem"]), ("en", ["exact", "stem", "synonym", "paraphrase"])):
        ref = read(os.path.join(args.data_dir, f"task1/raw/test_2016_flickr.{lang}.gz"), args.sentences)
        hyp = read(os.path.join(args.data_dir, f"task2/raw/test_2016.1.{lang}.gz"), args.sentences)
        t = time.perf_counter()
        native = MeteorMetric(lang, modules)
        ns = native.sentence_stats(hyp, [ref])
        t_native = time.perf_counter() - t
        t = time.perf_counter()
        jar = MeteorMetric(lang, modules, backend="jar")
        js = jar.sentence_stats(hyp, [ref])
        t_jar = time.perf_counter() - t
        diff = int((np.abs(ns - js).sum(axis=1) > 0).sum())
        print(f"{lang} {'+'.join(modules)}: native {t_native:.2f} s, jar {t_jar:.2f} s, ratio {t_native / t_jar:.2f}; "
              f"score native {native.score_from_stats(ns.sum(0)):.4f} jar {jar.score_from_stats(js.sum(0)):.4f}; "
              f"segments with different statistics: {diff}/{len(hyp)}")


if __name__ == "__main__":
    main()
