"""Decoding speed of the attention NMT: sentences/second for greedy and beam 20/50 on Multi30k val.

Usage: python benchmarks/bench_nmt_decode.py --model /work/runs/nmt/cpu/optimised \
           --data-dir /work/shared/data/multi30k/task1/raw [--n 1000] [--beams 20 50] [--threads 2]
Greedy decoding is the in-process reference: the beam timings are also reported as a ratio to it,
so runs on a busy machine stay comparable. Writes a JSON record with --json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from rerank.nmt.data import split_paths
from rerank.nmt.train import load_model
from rerank.nmt.translate import Search, translate
from rerank.device import resolve_device
from rerank.io import atomic_write, read_lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="/work/runs/nmt/cpu/optimised")
    ap.add_argument("--data-dir", default="/work/shared/data/multi30k/task1/raw")
    ap.add_argument("--split", default="val")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--beams", type=int, nargs="+", default=[20, 50])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", help="append the results to this JSON file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    model, sv, tv, cfg = load_model(args.model, "best", device)
    src_path, _ = split_paths(args.data_dir, args.split, cfg["train"]["src_lang"], cfg["train"]["tgt_lang"])
    lines = read_lines(src_path)[: args.n]
    rows = []
    for beam in [1] + args.beams:
        t0 = time.perf_counter()
        out = translate(model, sv, tv, lines, cfg["train"]["src_lang"], cfg["train"]["tgt_lang"],
                        Search(beam=beam, batch_size=args.batch_size), device=device, progress=False)
        sec = time.perf_counter() - t0
        assert len(out) == len(lines)
        rows.append({"beam": beam, "sentences": len(lines), "seconds": round(sec, 2),
                     "sent_per_s": round(len(lines) / sec, 1)})
    for r in rows:
        r["time_vs_greedy"] = round(r["seconds"] / rows[0]["seconds"], 2)
    print("| beam | sentences | seconds | sent/s | time vs greedy |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['beam']} | {r['sentences']} | {r['seconds']} | {r['sent_per_s']} | {r['time_vs_greedy']} |")
    record = {"model": os.path.abspath(args.model), "size": cfg["train"]["size"], "threads": args.threads,
              "device": str(device), "batch_size": args.batch_size, "host": platform.node(),
              "load_avg": os.getloadavg(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}
    if args.json:
        old = json.load(open(args.json)) if os.path.exists(args.json) else []
        with atomic_write(args.json) as f:
            json.dump(old + [record], f, indent=1)


if __name__ == "__main__":
    main()
