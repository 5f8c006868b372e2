"""Time native METEOR 1.5 against the Meteor jar on 1,000 Multi30k sentences, and check agreement.

German (exact+stem) and English (exact, stem, synonym, paraphrase). Both sides start cold in
this process each time: the jar time includes Java start-up and resource loading, the native time
building the metric (function words, synonyms read from the jar) and opening the paraphrase
index from the user's cache (built once per table before the timed runs, its build time printed).
Each side runs --repeat times; the best time counts, and the figure is the ratio native / jar.

With the paraphrase module there is also a first-run figure: a native run with an empty cache (a
temporary $RERANK_CACHE_DIR, the caches' root, so the user's cache is untouched), which builds the index as a user's
first run does, against the jar's best time (--repeat such runs, the best counts). The 1/5/15-min
load averages are printed beside the figures; --json FILE writes them all.

    python benchmarks/bench_meteor.py --data-dir /work/shared/data/multi30k --json docs/benchmarks/meteor.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np

from rerank.caches import CACHE_ENV
from rerank.io import atomic_write
from rerank.metrics.meteor import MeteorMetric
from rerank.metrics.meteor import paraphrase
from rerank.metrics.meteor.jar import java_available
from rerank.metrics.meteor.resources import load_resources


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


def first_run(lang, modules, hyp, ref):
    """(seconds, seconds of the index build in it, statistics) of a native run with an empty cache
    ($RERANK_CACHE_DIR, the caches' root, a new temporary folder, removed after): a user's first run."""
    builds, real = [], paraphrase.build_arrays

    def timed(path):
        t = time.perf_counter()
        built = real(path)
        builds.append(time.perf_counter() - t)
        return built

    before = os.environ.get(CACHE_ENV)
    with tempfile.TemporaryDirectory(prefix="bench-meteor-cache-") as tmp:
        os.environ[CACHE_ENV] = tmp
        paraphrase.build_arrays = timed
        try:
            seconds, _, stats = cold_run(lang, modules, hyp, ref, "native")
        finally:
            paraphrase.build_arrays = real
            paraphrase._OPEN.clear()
            if before is None:
                del os.environ[CACHE_ENV]
            else:
                os.environ[CACHE_ENV] = before
    return seconds, sum(builds), stats


def ensure_index(lang, modules):
    """Build the paraphrase index into the cache if it is not there; say how long that took."""
    if "paraphrase" not in modules:
        return
    path = load_resources(None).paraphrase_path(lang)
    t = time.perf_counter()
    paraphrase.open_index(path)
    print(f"{lang}: paraphrase index of {path} opened in {time.perf_counter() - t:.2f} s "
          f"(a first run builds it into {paraphrase.cache_dir()})")


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="/work/shared/data/multi30k")
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side; the best counts")
    ap.add_argument("--langs", default="de,en")
    ap.add_argument("--json", metavar="FILE", help="also write the figures to FILE (JSON)")
    args = ap.parse_args()
    if not java_available():
        sys.exit("bench_meteor: needs Java for the jar side")
    configs = {"de": ["exact", "stem"], "en": ["exact", "stem", "synonym", "paraphrase"]}
    record = {"benchmark": "bench_meteor", "command": "python benchmarks/bench_meteor.py " + " ".join(sys.argv[1:]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.platform(),
              "cpus": os.cpu_count(), "load_start": load_average(), "langs": {}}
    for lang in args.langs.split(","):
        modules = configs[lang]
        ref = read(os.path.join(args.data_dir, f"task1/raw/test_2016_flickr.{lang}.gz"), args.sentences)
        hyp = read(os.path.join(args.data_dir, f"task2/raw/test_2016.1.{lang}.gz"), args.sentences)
        ensure_index(lang, modules)
        best, times, firsts = {}, {"native": [], "jar": []}, []
        for _ in range(args.repeat):
            for backend in ("native", "jar"):
                run = cold_run(lang, modules, hyp, ref, backend)
                times[backend].append(run[0])
                if backend not in best or run[0] < best[backend][0]:
                    best[backend] = run
            if "paraphrase" in modules:
                firsts.append(first_run(lang, modules, hyp, ref))
        (t_native, native, ns), (t_jar, jar, js) = best["native"], best["jar"]
        diff = int((np.abs(ns - js).sum(axis=1) > 0).sum())
        load = load_average()
        figures = {"modules": modules, "sentences": len(hyp), "jar_s": t_jar, "native_s": t_native,
                   "ratio": t_native / t_jar, "runs_s": times, "score_native": native.score_from_stats(ns.sum(0)),
                   "score_jar": jar.score_from_stats(js.sum(0)), "segments_differing": diff}
        print(f"{lang} {'+'.join(modules)}, {len(hyp)} sentences: native {t_native:.2f} s, jar {t_jar:.2f} s, "
              f"ratio {t_native / t_jar:.2f}; score native {figures['score_native']:.4f} "
              f"jar {figures['score_jar']:.4f}; segments with different statistics: {diff}/{len(hyp)}")
        if firsts:
            t_first, t_build, first_stats = min(firsts, key=lambda run: run[0])
            figures.update(first_run_s=t_first, first_run_index_build_s=t_build, first_ratio=t_first / t_jar,
                           first_runs_s=[run[0] for run in firsts], index_builds_s=[run[1] for run in firsts],
                           first_run_stats_equal=bool(np.array_equal(first_stats, ns)))
            print(f"{lang} first run (empty cache, index built in the run): native {t_first:.2f} s "
                  f"(index build {t_build:.2f} s), jar {t_jar:.2f} s, ratio {t_first / t_jar:.2f}; "
                  f"warm ratio {t_native / t_jar:.2f}; statistics as the warm run's: "
                  f"{figures['first_run_stats_equal']}")
        figures["load_after"] = load
        print(f"{lang}: load average (1/5/15 min) {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} "
              f"on {os.cpu_count()} CPUs")
        record["langs"][lang] = figures
    if args.json:
        with atomic_write(args.json) as fh:
            json.dump(record, fh, indent=2)
            fh.write("\n")
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
