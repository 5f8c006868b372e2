"""`rerank features --which s_s` idle and beside a busy neighbour: throughput and CPU time per hypothesis.

Three cases, each a whole command (start-up, model loading, reading and writing included) in a
subprocess, with the machine's load average printed beside it:

  idle    nothing else runs
  python  beside one pure-Python busy loop (`while True: pass`: one core taken)
  torch   beside another torch process that uses both cores (torch's default thread count,
          small matrix products and tanh in a loop: the GRU-like work of a second `rerank`
          training or feature job, which is the case users hit)

For each --threads value and wait policy asked for, the table gives hypotheses per second, its
ratio to idle, CPU seconds (user + system of the command alone, from its rusage), and CPU time
per hypothesis relative to idle. The goals (issue 28): loaded throughput >= 0.45x idle and CPU
time per hypothesis <= 1.2x idle. Threads that spin while they wait for a core burn CPU time
without work, so the CPU column is what shows them.

The list is the shipped optimised test_2016 50-best (--nbest/--src for another) and the model
the shipped mlmme-small; --sentences cuts the list.

--idle-cost measures what passive waiting costs on an idle machine instead: a decoder-like loop of
small torch operations (a GRU cell on 60 rows, an 8,000-word output layer, log-softmax and top-5,
--steps times), the worst case for threads that sleep between operations, with 1 and 2 threads,
OMP_WAIT_POLICY ACTIVE and PASSIVE, each in a fresh process (the policy is read at start-up).

    python benchmarks/bench_load.py [--threads 1,2] [--omp-wait default,passive] [--cases idle,python,torch]
           [--sentences N] [--repeat 1] [--json out.json]
    python benchmarks/bench_load.py --idle-cost [--steps 1000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.abspath(os.path.dirname(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_torchrun import run_once  # noqa: E402

from rerank.formats import read_nbest, write_nbest  # noqa: E402
from rerank.io import atomic_write, read_lines  # noqa: E402

DATA = os.path.join(ROOT, "rerank", "data")
NEIGHBOURS = {
    "idle": None,
    "python": "while True:\n    pass\n",
    "torch": ("import torch\n"
              "a, b = torch.randn(256, 512), torch.randn(512, 512)\n"
              "while True:\n"
              "    torch.tanh(a @ b)\n"),
}


SMALL_OPS = ("import sys, time, torch\n"
             "torch.set_num_threads(int(sys.argv[1]))\n"
             "torch.manual_seed(0)\n"
             "cell, out = torch.nn.GRUCell(256, 512), torch.nn.Linear(512, 8000)\n"
             "x, h = torch.randn(60, 256), torch.zeros(60, 512)\n"
             "with torch.no_grad():\n"
             "    start = time.perf_counter()\n"
             "    for _ in range(int(sys.argv[2])):\n"
             "        h = cell(x, h)\n"
             "        out(h).log_softmax(-1).topk(5)\n"
             "print(time.perf_counter() - start)\n")


def idle_cost(steps: int) -> list[dict]:
    """Seconds of the small-operation loop per thread count and wait policy, on this machine as it is."""
    records = []
    for threads in (1, 2):
        for policy in ("ACTIVE", "PASSIVE"):
            env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
            env["OMP_WAIT_POLICY"] = policy
            load = os.getloadavg()[0]
            done = subprocess.run([sys.executable, "-c", SMALL_OPS, str(threads), str(steps)], env=env,
                                  capture_output=True, text=True, check=True)
            seconds = float(done.stdout.split()[-1])
            records.append({"threads": threads, "omp_wait": policy, "steps": steps, "seconds": seconds,
                            "load_1min_before": load})
            print(f"small operations, {threads} thread(s), OMP_WAIT_POLICY={policy:7s}: {seconds:6.2f} s "
                  f"(load {load:.2f})", flush=True)
    return records


def neighbour(case: str):
    """The neighbour process of a case (None when idle), given a moment to reach full speed."""
    code = NEIGHBOURS[case]
    if code is None:
        return None
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    time.sleep(3.0)
    return child


def run_case(case: str, command: list[str], env: dict, repeat: int) -> dict:
    """Best of `repeat` runs (lowest CPU time, the load-independent one) beside the case's neighbour.
    The neighbour is reaped after the timing, so its CPU time is not in the command's rusage."""
    best = None
    for _ in range(repeat):
        other = neighbour(case)
        try:
            load = os.getloadavg()[0]
            wall, cpu = run_once(command, env)
        finally:
            if other is not None:
                other.kill()
                other.wait()
        if best is None or cpu < best["cpu_seconds"]:
            best = {"wall_seconds": wall, "cpu_seconds": cpu, "load_1min_before": load}
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nbest", default=os.path.join(DATA, "multi30k", "optimised.test_2016.50best.gz"))
    parser.add_argument("--src", default=os.path.join(DATA, "multi30k", "test_2016_flickr.en.gz"))
    parser.add_argument("--model", default=os.path.join(DATA, "models", "mlmme-small.pt"))
    parser.add_argument("--sentences", type=int, default=10**9, help="the first N sentences (default: all)")
    parser.add_argument("--threads", default="1,2", help="comma-separated --threads values (default: %(default)s)")
    parser.add_argument("--omp-wait", default="default",
                        help="comma-separated OMP_WAIT_POLICY settings for the command: default (what rerank "
                        "sets), active, passive (default: %(default)s)")
    parser.add_argument("--cases", default=",".join(NEIGHBOURS), help="comma-separated, of: " + ", ".join(NEIGHBOURS))
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the lowest CPU time counts")
    parser.add_argument("--idle-cost", action="store_true", help="time the small-operation loop instead (see above)")
    parser.add_argument("--steps", type=int, default=1000, help="steps of the --idle-cost loop (default: %(default)s)")
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()

    if args.idle_cost:
        write_json(args.json, "bench_load --idle-cost", idle_cost(args.steps))
        return
    records = []
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        nbest = read_nbest(args.nbest)
        part = nbest.select_sentences(range(min(args.sentences, nbest.n_sentences)))
        path, src = os.path.join(tmp, "list.nbest"), os.path.join(tmp, "src.en")
        write_nbest(part, path)
        with open(src, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in read_lines(args.src)[:part.n_sentences])
        print(f"s_s with {os.path.basename(args.model)} on {part.n_hyps:,d} hypotheses ({part.n_sentences} sentences), "
              f"{os.cpu_count()} CPUs", flush=True)
        for threads in args.threads.split(","):
            for policy in args.omp_wait.split(","):
                env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
                if policy != "default":
                    env["OMP_WAIT_POLICY"] = policy.upper()
                command = [sys.executable, "-m", "rerank", "features", path, "--src", src, "--which", "s_s",
                           "-m", args.model, "--threads", threads, "--quiet", "-o", os.path.join(tmp, "out.nbest")]
                idle = None
                for case in args.cases.split(","):
                    r = run_case(case, command, env, args.repeat)
                    r.update(case=case, threads=int(threads), omp_wait=policy, hypotheses=part.n_hyps,
                             hyps_per_second=part.n_hyps / r["wall_seconds"])
                    idle = idle or (r if case == "idle" else None)
                    if idle:
                        r["throughput_vs_idle"] = r["hyps_per_second"] / idle["hyps_per_second"]
                        r["cpu_per_hyp_vs_idle"] = r["cpu_seconds"] / idle["cpu_seconds"]
                    records.append(r)
                    ratios = (f"  {r['throughput_vs_idle']:4.2f}x idle throughput, {r['cpu_per_hyp_vs_idle']:4.2f}x "
                              f"idle CPU/hyp" if idle else "")
                    print(f"--threads {threads} OMP_WAIT_POLICY={policy:8s} {case:6s}: {r['wall_seconds']:6.1f} s wall "
                          f"({r['hyps_per_second']:6,.0f} hyp/s), {r['cpu_seconds']:6.1f} s CPU, load "
                          f"{r['load_1min_before']:.2f}{ratios}", flush=True)
    write_json(args.json, "bench_load", records)


def write_json(path: str | None, name: str, records: list[dict]) -> None:
    if path:
        with atomic_write(path) as out:
            json.dump({"benchmark": name, "machine": platform.platform(), "cpus": os.cpu_count(), "records": records},
                      out, indent=2)


if __name__ == "__main__":
    main()
