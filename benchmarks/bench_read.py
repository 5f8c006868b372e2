"""Speed of reading Moses/Joshua n-best lists, as ratios to a bare Python loop over the same file.

Usage: python benchmarks/bench_read.py [--lines 1000000] [--kind moses,joshua] [--repeat 3]
           [--file NBEST] [--json out.json]

A big file is made by tiling a shipped list (Moses: rerank/data/multi30k/optimised.test_2016.50best.gz;
Joshua: rerank/data/examples/joshua-bn-en.10.nbest) to --lines lines, renumbering the sentences
(--file takes an existing file instead). In one process, best of --repeat runs each, it times
(a) the bare loop: for each line split on ' ||| ', split the feature field and float() every
value token; (b) `read_nbest` (no cache); (c) the `rerank info` command end to end in a
subprocess (no cache); (d) `read_nbest` from the binary cache (rerank.formats.cache, in a
temporary folder; the first read, which parses, hashes and writes the entry, is timed too);
(e) `rerank info --cache` end to end. The machine's load cancels out of the printed ratios to a
and of the cache's speed-up b/d.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from rerank.formats import read_nbest
from rerank.io import atomic_write

DATA = os.path.join(os.path.dirname(__file__), "..", "rerank", "data")
SOURCES = {"moses": os.path.join(DATA, "multi30k", "optimised.test_2016.50best.gz"),
           "joshua": os.path.join(DATA, "examples", "joshua-bn-en.10.nbest")}


def build(kind: str, n_lines: int, path: str) -> None:
    """Write `n_lines` lines of the shipped `kind` list, tiled with the sentence ids continued."""
    opener = gzip.open if SOURCES[kind].endswith(".gz") else open
    with opener(SOURCES[kind], "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n").split(" ||| ", 1) for line in f]
    n_base = int(lines[-1][0]) + 1
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        for tile in range(n_lines // len(lines) + 1):
            block = [f"{int(i) + tile * n_base} ||| {rest}\n" for i, rest in lines[:n_lines - written]]
            out.writelines(block)
            written += len(block)


def bare_loop(path: str) -> int:
    """The reference: split every line and float every feature value (and the total)."""
    count = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split(" ||| ")
            for token in fields[2].split():
                float(token.rpartition("=")[2] or 0)
            if len(fields) > 3:
                float(fields[3])
            count += 1
    return count


def best_of(repeat: int, fn, *args, **kwargs) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - t)
    return min(times)


def run_info(path: str, cache: str | None = None) -> None:
    env = dict(os.environ, RERANK_CACHE_DIR=cache or "")
    subprocess.run([sys.executable, "-m", "rerank", "info", path, "--quiet", "--cache" if cache else "--no-cache"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def first_cached_read(path: str, cache: str) -> None:
    shutil.rmtree(cache, ignore_errors=True)
    read_nbest(path, cache=cache)


def measure(path: str, kind: str, repeat: int, cache: str) -> dict:
    n = bare_loop(path)
    loop = best_of(repeat, bare_loop, path)
    read = best_of(repeat, read_nbest, path, cache=False)
    info = best_of(repeat, run_info, path)
    miss = best_of(repeat, first_cached_read, path, cache)
    hit = best_of(repeat, read_nbest, path, cache=cache)
    info_hit = best_of(repeat, run_info, path, cache)
    record = {"kind": kind, "lines": n, "loop_seconds": loop, "read_seconds": read, "info_seconds": info,
              "read_over_loop": read / loop, "info_over_loop": info / loop, "first_cached_read_seconds": miss,
              "cached_read_seconds": hit, "cached_info_seconds": info_hit, "first_cached_read_over_read": miss / read,
              "cached_read_over_loop": hit / loop, "cache_speedup": read / hit, "cached_info_over_loop": info_hit / loop}
    print(f"{kind:6s} {n:9d} lines: loop {loop:6.2f}s  read_nbest {read:6.2f}s ({read / loop:4.2f}x)  "
          f"rerank info {info:6.2f}s ({info / loop:4.2f}x)\n{'':23s}cache: first read {miss:6.2f}s ({miss / read:4.2f}x "
          f"read_nbest)  cached read {hit:6.2f}s ({hit / loop:4.2f}x loop, {read / hit:4.1f}x faster than "
          f"read_nbest)  rerank info --cache {info_hit:6.2f}s ({info_hit / loop:4.2f}x)", flush=True)
    return record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--kind", default="moses,joshua", help="comma-separated: moses, joshua")
    ap.add_argument("--file", help="time this n-best file instead of a tiled one")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs each; the fastest counts (default 3)")
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args()
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.file:
            records.append(measure(args.file, "file", args.repeat, os.path.join(tmp, "cache")))
        for kind in [] if args.file else args.kind.split(","):
            path = os.path.join(tmp, f"big.{kind}")
            build(kind, args.lines, path)
            records.append(measure(path, kind, args.repeat, os.path.join(tmp, "cache")))
    if args.json:
        with atomic_write(args.json) as out:
            json.dump({"benchmark": "bench_read", "machine": platform.platform(), "cpus": os.cpu_count(),
                       "records": records}, out, indent=2)


if __name__ == "__main__":
    main()
