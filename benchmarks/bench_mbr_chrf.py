"""chrF MBR against fastchrf 0.2.1 (the Rust library of Vamvas & Sennrich's reference aggregation),
side by side in one run: seconds, peak memory and the values, exact and aggregate.

    python benchmarks/bench_mbr_chrf.py --fastchrf-python /tmp/fc/bin/python \\
        [--sizes 50,256,1024] [--sentences 50:1000,256:20,1024:4] [--out docs/benchmarks/mbr_chrf]

fastchrf is not a dependency of this project: give the python of a scratch environment that has it
(`python3 -m venv /tmp/fc && /tmp/fc/bin/pip install fastchrf==0.2.1 numpy`).

Lists: 50, the shipped optimised test_2016 50-best list (1,000 sentences) as it is; 256 and 1,024,
lists of that many distinct hypotheses per sentence built from the shipped 50-best lists
(benchmarks/bench_mbr_scale.py's `grow`: the pooled hypotheses of the three systems, then
recombinants), the first --sentences of test_2016.

Every cell runs in a fresh process that reads the lists from a JSON-lines file: seconds of the MBR
computation alone (the lists in memory), peak resident memory of the process (VmHWM, the lists
included) and its increase over the resident memory just before. The posterior is uniform, since
fastchrf has no weights: exact is the mean chrF of each hypothesis against every hypothesis of
its list (ours: the mbr feature, rerank.consensus.mbr_scores, method exact; fastchrf:
pairwise_chrf, then the mean of each row with numpy), aggregate its chrF against the list's
averaged n-gram counts (ours: method aggregate; fastchrf: aggregate_chrf). Both with sacrebleu's
chrF (character 6-grams, beta 2, whitespace removed, no epsilon smoothing). fastchrf runs its
batch on every core (rayon), ours on one. --out writes OUT.json and OUT.md.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, HERE)

import bench_mbr_scale as scale  # noqa: E402  (the lists and the resident-memory reader: stdlib alone)

SENTENCES = {50: 1000, 256: 20, 1024: 4}


def worker(args) -> dict:
    """One computation in this fresh process; prints its record as JSON."""
    import numpy as np

    lists = [d["hyps"] for d in scale.load(args.file, args.count)]
    if args.worker == "ours":
        sys.path.insert(0, ROOT)
        from rerank.consensus import MBROptions, mbr_scores
        from rerank.nbest import NBestList

        nbest = NBestList.from_lists(lists, [np.zeros((len(h), 0)) for h in lists], [],
                                     [np.zeros(len(h)) for h in lists])
        base = scale.resident_mb("VmRSS")
        t = time.perf_counter()
        values = mbr_scores(nbest, nbest.scores, MBROptions("chrf", method=args.method))
    else:
        import fastchrf

        base = scale.resident_mb("VmRSS")
        t = time.perf_counter()
        if args.method == "exact":
            values = np.concatenate([np.asarray(m, dtype=np.float64).mean(axis=1)
                                     for m in fastchrf.pairwise_chrf(lists, lists)])
        else:
            values = np.concatenate([np.asarray(v, dtype=np.float64) for v in fastchrf.aggregate_chrf(lists, lists)])
    seconds = time.perf_counter() - t
    np.save(args.values_out, values)
    return {"seconds": seconds, "peak_mb": scale.resident_mb("VmHWM"), "base_mb": base,
            "hyps": sum(len(h) for h in lists)}


def run(python: str, who: str, method: str, file: str, count: int, values_out: str) -> dict:
    argv = [python, os.path.abspath(__file__), "--worker", who, "--method", method, "--file", file,
            "--count", str(count), "--values-out", values_out]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cell(args, n: int, tmp: str) -> dict:
    import numpy as np

    count = args.sentences.get(n, SENTENCES.get(n, 4))
    path = os.path.join(tmp, f"lists.{n}.jsonl")
    scale.build_cell(n, count, path)
    row: dict = {"n": n, "sentences": count}
    for method in ("exact", "aggregate"):
        values = {}
        for who, python in (("ours", sys.executable), ("fastchrf", args.fastchrf_python)):
            out = os.path.join(tmp, f"{who}.{method}.{n}.npy")
            result = run(python, who, method, path, count, out)
            values[who] = np.load(out)
            row[f"{who}_{method}"] = result
            print(f"  n={n} {method} {who}: {count} sentences, {result['seconds']:.2f} s, peak "
                  f"{result['peak_mb']:.0f} MB (+{result['peak_mb'] - result['base_mb']:.0f})", flush=True)
        row[f"max_abs_diff_{method}"] = float(np.max(np.abs(values["ours"] - values["fastchrf"])))
        row[f"speedup_{method}"] = row[f"fastchrf_{method}"]["seconds"] / row[f"ours_{method}"]["seconds"]
    return row


def markdown(record: dict) -> str:
    lines = [f"Made by `{record['command']}` on {record['date']} ({record['cpus']} CPUs; "
             f"load average (1/5/15 min) {record['load_start']} at the start, {record['load_end']} at the end; "
             f"{record['minutes']:.1f} minutes).", "",
             "Seconds of the MBR computation (the lists in memory), peak resident MB of the process (the lists "
             "included; in brackets the increase over the loaded lists), max abs difference of the values (chrF "
             "points). Uniform posterior. fastchrf runs on every core, ours on one.", "",
             "| n | sentences | method | ours s | fastchrf s | ours faster | ours peak MB | fastchrf peak MB | "
             "max abs diff |", "|---|---|---|---|---|---|---|---|---|"]
    for row in record["rows"]:
        for method in ("exact", "aggregate"):
            ours, fast = row[f"ours_{method}"], row[f"fastchrf_{method}"]
            lines.append(f"| {row['n']} | {row['sentences']} | {method} | {ours['seconds']:.2f} | {fast['seconds']:.2f} "
                         f"| {row[f'speedup_{method}']:.1f}x | {ours['peak_mb']:.0f} "
                         f"(+{ours['peak_mb'] - ours['base_mb']:.0f}) | {fast['peak_mb']:.0f} "
                         f"(+{fast['peak_mb'] - fast['base_mb']:.0f}) | {row[f'max_abs_diff_{method}']:.1e} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fastchrf-python")
    ap.add_argument("--sizes", default="50,256,1024")
    ap.add_argument("--sentences", default="", help="N:COUNT,... (default 50:1000,256:20,1024:4)")
    ap.add_argument("--out", help="write OUT.json and OUT.md")
    ap.add_argument("--worker", choices=("ours", "fastchrf"), help=argparse.SUPPRESS)
    ap.add_argument("--method", default="exact", help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--values-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    if not args.fastchrf_python:
        ap.error("--fastchrf-python PYTHON is needed (a scratch environment with fastchrf 0.2.1)")
    args.sentences = {int(k): int(v) for k, v in (p.split(":") for p in args.sentences.split(",") if p)}
    start, load_start = time.time(), " / ".join(f"{x:.2f}" for x in os.getloadavg())
    record: dict = {"benchmark": "bench_mbr_chrf", "command": "python " + " ".join(
                        [os.path.relpath(os.path.abspath(__file__), os.getcwd()), *sys.argv[1:]]),
                    "machine": platform.platform(), "cpus": os.cpu_count(),
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": load_start, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            record["rows"].append(cell(args, n, tmp))
    record["load_end"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    record["minutes"] = (time.time() - start) / 60
    text = markdown(record)
    print(text)
    if args.out:
        sys.path.insert(0, ROOT)
        from rerank.io import atomic_write

        with atomic_write(args.out + ".json") as out:
            json.dump(record, out, indent=2)
        with atomic_write(args.out + ".md") as out:
            out.write(text)


if __name__ == "__main__":
    main()
