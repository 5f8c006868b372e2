"""Scaling of the commands that read a whole n-best list: time and peak memory at several sizes.

Usage: python benchmarks/bench_scale.py [--lines 1000000,10000000] [--commands info,convert,apply,oracle]
           [--repeat 1] [--dir /tmp] [--json out.json]
       python benchmarks/bench_scale.py --pipeline [--lines 1000000,10000000] [--dir /tmp] [--json out.json]

For each size a Moses list is tiled from the shipped 50-best (benchmarks/bench_read.py, sentence
ids continued) with its references tiled alike, in a temporary folder under --dir (removed at
the end). Each command runs in a subprocess, without the n-best cache:

  info     rerank info LIST
  convert  rerank convert LIST -o OUT.nbest            (Moses to Moses)
  apply    rerank apply LIST -w WEIGHTS.json -o OUT.txt
  oracle   rerank oracle LIST -r REF -o OUT.txt

and its wall time and peak resident memory (/usr/bin/time's %e and %M) are recorded, next to the
bare Python loop over the same file (bench_read.bare_loop) timed in this process just before:
time / loop is the load-independent cost per line, which stays flat when a command is linear.
The last table gives, per command, the ratios of the largest size to the smallest: time (~ the
size ratio when linear), time / loop and peak memory.

--pipeline runs the chain a WMT-size job goes through instead, each step on the previous one's
output, once per size:

  info      rerank info LIST
  mbr       rerank features LIST --which mbr --mbr-method aggregate -o MBR.nbest
  tune      rerank tune MBR.nbest -r REF -o WEIGHTS.json            (k-best batch MIRA)
  apply     rerank apply MBR.nbest -w WEIGHTS.json -o OUT.txt
  eval      rerank eval -b OUT.txt -r REF --lang de --meteor-modules exact,stem   (BLEU, METEOR, TER)

(the tiled list is German; Meteor 1.5 has no German paraphrase table)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_read import DATA, bare_loop, build

from rerank.io import atomic_write

TIME = "/usr/bin/time"  # GNU time: wall time and the peak resident memory of the command alone
REFS = os.path.join(DATA, "multi30k", "test_2016_flickr.de.gz")  # the references of the tiled 50-best
WEIGHTS = {"nmt": 1.0, "nmt_norm": 0.5, "len": 0.1}
COMMANDS = {
    "info": ["info", "{list}"],
    "convert": ["convert", "{list}", "-o", "{out}.nbest"],
    "apply": ["apply", "{list}", "-w", "{weights}", "-o", "{out}.txt"],
    "oracle": ["oracle", "{list}", "-r", "{ref}", "-o", "{out}.txt"],
}
PIPELINE = {
    "info": ["info", "{list}"],
    "mbr": ["features", "{list}", "--which", "mbr", "--mbr-method", "aggregate", "-o", "{out}.mbr.nbest"],
    "tune": ["tune", "{out}.mbr.nbest", "-r", "{ref}", "-o", "{out}.weights.json"],
    "apply": ["apply", "{out}.mbr.nbest", "-w", "{out}.weights.json", "-o", "{out}.txt"],
    "eval": ["eval", "-b", "{out}.txt", "-r", "{ref}", "--lang", "de", "--meteor-modules", "exact,stem"],
}


def build_refs(n_sentences: int, path: str) -> None:
    with gzip.open(REFS, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    with open(path, "w", encoding="utf-8") as out:
        for start in range(0, n_sentences, len(lines)):
            out.writelines(line + "\n" for line in lines[:n_sentences - start])


def run_command(argv: list[str], stdout=subprocess.DEVNULL) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of `rerank ARGV` from /usr/bin/time: a child forked from
    this process would count this process's pages in its own peak. The n-best cache stays off."""
    env = dict(os.environ, RERANK_CACHE_DIR="")
    with tempfile.NamedTemporaryFile("r", suffix=".time") as timing:
        child = subprocess.run([TIME, "-o", timing.name, "-f", "%e %M", sys.executable, "-m", "rerank", *argv, "--quiet"],
                               stdout=stdout, stderr=subprocess.PIPE, env=env)
        if child.returncode:
            raise RuntimeError(f"rerank {' '.join(argv)} failed ({child.returncode}): {child.stderr.decode(errors='replace')}")
        seconds, kilobytes = timing.read().split()[-2:]
    return float(seconds), float(kilobytes) / 1024


def build_size(n_lines: int, folder: str) -> tuple[str, str]:
    """The tiled list of N_LINES lines and its tiled references in FOLDER."""
    nbest, ref = os.path.join(folder, "list.nbest"), os.path.join(folder, "ref.txt")
    build("moses", n_lines, nbest)
    with open(nbest, "rb") as f:
        f.seek(-300, os.SEEK_END)
        n_sentences = int(f.read().splitlines()[-1].split(b" ||| ")[0]) + 1
    build_refs(n_sentences, ref)
    return nbest, ref


def measure_size(n_lines: int, commands: list[str], repeat: int, folder: str) -> list[dict]:
    nbest, ref = build_size(n_lines, folder)
    weights = os.path.join(folder, "weights.json")
    with open(weights, "w") as f:
        json.dump(WEIGHTS, f)
    records = []
    for name in commands:
        argv = [a.format(list=nbest, out=os.path.join(folder, "out"), weights=weights, ref=ref) for a in COMMANDS[name]]
        best = None
        for _ in range(repeat):
            loop_start = time.perf_counter()
            bare_loop(nbest)
            loop = time.perf_counter() - loop_start
            seconds, rss = run_command(argv + ["--no-cache"])
            if best is None or seconds / loop < best["seconds"] / best["loop_seconds"]:
                best = {"command": name, "lines": n_lines, "seconds": seconds, "loop_seconds": loop, "peak_rss_mb": rss}
        for leftover in ("out.nbest", "out.txt"):
            if os.path.exists(os.path.join(folder, leftover)):
                os.unlink(os.path.join(folder, leftover))
        records.append(best)
        print(f"{name:8s} {n_lines:>10,d} lines: {best['seconds']:8.1f} s  ({best['seconds'] / best['loop_seconds']:5.2f}x "
              f"the loop)  peak {best['peak_rss_mb']:8.0f} MB", flush=True)
    for name in (nbest, ref, weights):
        os.unlink(name)
    return records


def measure_pipeline(n_lines: int, folder: str) -> list[dict]:
    """Each PIPELINE step on the previous one's output: wall time, peak memory, and the
    scores `eval` printed."""
    nbest, ref = build_size(n_lines, folder)
    out = os.path.join(folder, "out")
    loop_start = time.perf_counter()
    bare_loop(nbest)
    loop = time.perf_counter() - loop_start
    records = []
    for name, template in PIPELINE.items():
        argv = [a.format(list=nbest, out=out, ref=ref) for a in template]
        with tempfile.TemporaryFile("w+") as printed:
            seconds, rss = run_command(argv, stdout=printed)
            printed.seek(0)
            text = printed.read()
        record = {"step": name, "lines": n_lines, "seconds": seconds, "loop_seconds": loop, "peak_rss_mb": rss,
                  "load_1min_after": os.getloadavg()[0],
                  "command": "rerank " + " ".join(os.path.relpath(a, folder) if a.startswith(folder) else a for a in argv)}
        if name == "eval":
            record["printed"] = text
        records.append(record)
        print(f"{name:6s} {n_lines:>10,d} lines: {seconds:8.1f} s  peak {rss:8.0f} MB", flush=True)
    if records[-1].get("printed"):
        print(records[-1]["printed"], flush=True)
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    return records


def summary(records: list[dict]) -> None:
    sizes = sorted({r["lines"] for r in records})
    if len(sizes) < 2:
        return
    small, large = sizes[0], sizes[-1]
    print(f"\n{large:,d} / {small:,d} lines:")
    for name in dict.fromkeys(r["command"] for r in records):
        a = next(r for r in records if r["command"] == name and r["lines"] == small)
        b = next(r for r in records if r["command"] == name and r["lines"] == large)
        per_line = (b["seconds"] / b["loop_seconds"]) / (a["seconds"] / a["loop_seconds"])
        print(f"  {name:8s} time {b['seconds'] / a['seconds']:5.1f}x  time/loop {per_line:4.2f}x  "
              f"peak memory {b['peak_rss_mb'] / a['peak_rss_mb']:5.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", default="1000000,10000000", help="comma-separated list sizes (default: %(default)s)")
    ap.add_argument("--commands", default=",".join(COMMANDS), help="comma-separated, of: " + ", ".join(COMMANDS))
    ap.add_argument("--pipeline", action="store_true", help="time the info, mbr, tune, apply, eval chain instead")
    ap.add_argument("--repeat", type=int, default=1, help="runs per command and size; the lowest time/loop counts (default 1)")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary lists go (default: %(default)s)")
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args()
    records = []
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-scale-") as folder:
        for n_lines in (int(x) for x in args.lines.split(",")):
            if args.pipeline:
                records += measure_pipeline(n_lines, folder)
            else:
                records += measure_size(n_lines, args.commands.split(","), args.repeat, folder)
    if not args.pipeline:
        summary(records)
    if args.json:
        with atomic_write(args.json) as out:
            json.dump({"benchmark": "bench_scale_pipeline" if args.pipeline else "bench_scale",
                       "machine": platform.platform(), "cpus": os.cpu_count(), "records": records}, out, indent=2)


if __name__ == "__main__":
    main()
