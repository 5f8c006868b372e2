"""Wall-clock time of `rerank features --which s_s` as one 1-thread process and as
`torchrun --nproc_per_node N` ranks of 1 thread each, on the same list, with the machine's load.

Both runs are whole commands (start-up, model loading, reading and writing included), each the
best of --repeat; the outputs must be byte-identical. Also timed: the same two commands on one
sentence, the fixed cost (interpreters, torch, the process group) that a short job's ratio
includes. With N idle cores the time of a long job's work approaches 1/N; the load average
printed with it says how idle they were (another job on one of two cores leaves the ranks
sharing one). The CPU seconds of each command (its processes together) do not depend on the
load: about equal, the ranks split the work rather than each doing all of it.

The list is the shipped optimised val and test_2016 50-best lists one after the other (2,014
sentences, about 100,000 distinct hypotheses), or --nbest/--src (repeatable, in pairs).

    python benchmarks/bench_torchrun.py [--nbest F --src F ...] [--sentences N] [--nproc 2] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rerank.formats import read_nbest, write_nbest  # noqa: E402
from rerank.io import read_lines  # noqa: E402

DATA = os.path.join(ROOT, "rerank", "data")


def run_once(command: list[str], env: dict) -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds: user + system of all its processes) of one run of a
    command, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def timed(command: list[str], repeat: int) -> tuple[float, float]:
    """(smallest wall-clock seconds, CPU seconds of that run) of `repeat` runs of a command."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return min(run_once(command, env) for _ in range(repeat))


def joined_list(nbests: list[str], srcs: list[str], n: int, out: str, tag: str) -> tuple[str, str, int]:
    """The lists one after the other (ids renumbered), cut to their first n sentences, and their sources."""
    path, src_path, written, hyps = os.path.join(out, f"{tag}.nbest"), os.path.join(out, f"{tag}.en"), 0, 0
    with open(path, "wb") as joined, open(src_path, "w", encoding="utf-8") as sources:
        for nbest_path, source_path in zip(nbests, srcs):
            if written >= n:
                break
            nbest = read_nbest(nbest_path)
            part = nbest.select_sentences(range(min(n - written, nbest.n_sentences)))
            write_nbest(part, os.path.join(out, "part.nbest"), first_id=written)
            with open(os.path.join(out, "part.nbest"), "rb") as f:
                joined.write(f.read())
            sources.write("".join(line + "\n" for line in read_lines(source_path)[:part.n_sentences]))
            written, hyps = written + part.n_sentences, hyps + part.n_hyps
    return path, src_path, hyps


def commands(nbest: str, src: str, model: str, out: str, nproc: int) -> tuple[list[str], list[str]]:
    features = ["features", nbest, "--src", src, "--which", "s_s", "-m", model, "--threads", "1", "--quiet"]
    one = [sys.executable, "-m", "rerank", *features, "-o", out + ".one"]
    ranks = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
             "-m", "rerank", *features, "-o", out + ".ranks"]
    return one, ranks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nbest", action="append", help="n-best list (repeatable; default: the shipped optimised "
                        "val and test_2016 50-best lists)")
    parser.add_argument("--src", action="append", help="its source sentences (one --src per --nbest)")
    parser.add_argument("--model", default=os.path.join(DATA, "models", "mlmme-small.pt"))
    parser.add_argument("--sentences", type=int, default=10**9, help="the first N sentences (default: all)")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the fastest counts")
    args = parser.parse_args()
    shipped = os.path.join(DATA, "multi30k")
    nbests = args.nbest or [os.path.join(shipped, f"optimised.{s}.50best.gz") for s in ("val", "test_2016")]
    srcs = args.src or [os.path.join(shipped, f"{s}.en.gz") for s in ("val", "test_2016_flickr")]
    if len(nbests) != len(srcs):
        sys.exit("give one --src per --nbest")

    with tempfile.TemporaryDirectory(prefix="bench-torchrun-") as tmp:
        load_before = os.getloadavg()
        small = joined_list(nbests, srcs, 1, tmp, "small")
        one, ranks = commands(small[0], small[1], args.model, os.path.join(tmp, "small"), args.nproc)
        (fixed_one, fixed_cpu_one), (fixed_ranks, fixed_cpu_ranks) = timed(one, args.repeat), timed(ranks, args.repeat)
        nbest, src, n_hyps = joined_list(nbests, srcs, args.sentences, tmp, "big")
        one, ranks = commands(nbest, src, args.model, os.path.join(tmp, "big"), args.nproc)
        (t_one, cpu_one), (t_ranks, cpu_ranks) = timed(one, args.repeat), timed(ranks, args.repeat)
        load_after = os.getloadavg()
        same = open(one[-1], "rb").read() == open(ranks[-1], "rb").read()

    print(f"s_s with {os.path.basename(args.model)} on {n_hyps} hypotheses of "
          f"{', '.join(os.path.basename(p) for p in nbests)}, {os.cpu_count()} CPUs, OMP_NUM_THREADS=1, --threads 1")
    print(f"load average (1, 5, 15 min) before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
          f"after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print(f"fixed cost (1 sentence): one process {fixed_one:.1f} s wall, {fixed_cpu_one:.1f} s CPU; "
          f"torchrun x{args.nproc} {fixed_ranks:.1f} s wall, {fixed_cpu_ranks:.1f} s CPU")
    print(f"one process:  {t_one:6.1f} s wall ({n_hyps / t_one:,.0f} hyp/s), {cpu_one:6.1f} s CPU")
    print(f"torchrun x{args.nproc}:  {t_ranks:6.1f} s wall ({n_hyps / t_ranks:,.0f} hyp/s), {cpu_ranks:6.1f} s CPU "
          f"(launcher and {args.nproc} ranks)")
    print(f"wall ratio (torchrun / one process): {t_ranks / t_one:.2f}; without the fixed costs: "
          f"{(t_ranks - fixed_ranks) / max(t_one - fixed_one, 1e-9):.2f}")
    print(f"CPU without the fixed costs: one process {cpu_one - fixed_cpu_one:.1f} s, torchrun x{args.nproc} "
          f"{cpu_ranks - fixed_cpu_ranks:.1f} s (equal: the ranks split the work, none is done twice)")
    print(f"outputs byte-identical: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
