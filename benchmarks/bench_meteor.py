"""Time native METEOR 1.5 against the Meteor jar on 1,000 Multi30k sentences, and check agreement.

German (exact+stem) and English (exact, stem, synonym, paraphrase). Both sides start cold in
this process each time: the jar time includes Java start-up and resource loading, the native time
building the metric (function words, synonyms read from the jar) and opening the paraphrase
index from the user's cache (built once per table before the timed runs, its build time printed).
Each side runs --repeat times; the best time counts, and the figure is the ratio native / jar.

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
from rerank.metrics.meteor import paraphrase  # noqa: E402
from rerank.metrics.meteor.jar import java_available  # noqa: E402
from rerank.metrics.meteor.resources import load_resources  # noqa: E402


def read(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [next(fh).rstrip("\n") for _ in range(n)]


def cold_run(lang, modules, hyp, ref, backend):
    """(seconds, metric, statistics) of one run with no resource kept in this process."""
    load_resources.cache_clear()
    paraphrase._OPEN.clear()
    t = time.perf_counter()
    metric = MeteorMetric(lang, modules, backend=backend)
    stats = metric.sentence_stats(hyp, [ref])
    seconds = time.perf_counter() - t
    if metric._jar is not None:
        metric._jar.close()
    return seconds, metric, stats


def ensure_index(lang, modules):
    """Build the paraphrase index into the cache if it is not there; say how long that took."""
    if "paraphrase" not in modules:
        return
    path = load_resources(None).paraphrase_path(lang)
    t = time.perf_counter()
    paraphrase.open_index(path)
    print(f"{lang}: paraphrase index of {path} opened in {time.perf_counter() - t:.2f} s "
          f"(a first run builds it into {paraphrase.cache_dir()})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="/work/shared/data/multi30k")
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side; the best counts")
    ap.add_argument("--langs", default="de,en")
    args = ap.parse_args()
    if not java_available():
        sys.exit("bench_meteor: needs Java for the jar side")
    configs = {"de": ["exact", "stem"], "en": ["exact", "stem", "synonym", "paraphrase"]}
    for lang in args.langs.split(","):
        modules = configs[lang]
        ref = read(os.path.join(args.data_dir, f"task1/raw/test_2016_flickr.{lang}.gz"), args.sentences)
        hyp = read(os.path.join(args.data_dir, f"task2/raw/test_2016.1.{lang}.gz"), args.sentences)
        ensure_index(lang, modules)
        best = {}
        for _ in range(args.repeat):
            for backend in ("native", "jar"):
                run = cold_run(lang, modules, hyp, ref, backend)
                if backend not in best or run[0] < best[backend][0]:
                    best[backend] = run
        (t_native, native, ns), (t_jar, jar, js) = best["native"], best["jar"]
        diff = int((np.abs(ns - js).sum(axis=1) > 0).sum())
        print(f"{lang} {'+'.join(modules)}, {len(hyp)} sentences: native {t_native:.2f} s, jar {t_jar:.2f} s, "
              f"ratio {t_native / t_jar:.2f}; score native {native.score_from_stats(ns.sum(0)):.4f} "
              f"jar {jar.score_from_stats(js.sum(0)):.4f}; segments with different statistics: {diff}/{len(hyp)}")


if __name__ == "__main__":
    main()
