"""Speed of `rerank tune --tuner mira`: hypotheses/second and linear growth with the list size.

Usage: python benchmarks/bench_tune.py [--data-dir /work/shared/data/nbest/joshua-bn-en]
           [--sentences 2000] [--size 100] [--features 20] [--epochs 60] [--cli | --cli-only] [--json out.json]

A large list is made by tiling the real Joshua bn-en n-best lists: sentence i is Joshua sentence
i mod 100, its hypotheses are repeated up to --size with Gaussian noise on the features (so no
two are exact duplicates) and the first --features columns are kept. The MIRA loop is timed at
1/4, 1/2 and all of the sentences; the per-hypothesis cost is reported as a ratio to the
smallest run of the same process (1.0 = perfectly linear). With --cli (or --cli-only) the whole
command (reading, BLEU statistics, tuning, writing) runs on the full list in a subprocess, and is
reported as a ratio to the bare loop over its file (bench_read.py's), best of --repeat runs each.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
from bench_read import bare_loop, best_of

from rerank.tuning import prepare
from rerank.mira.kbmira import kbmira
from rerank.formats import read_nbest, read_references, write_nbest
from rerank.io import atomic_write
from rerank.nbest import NBestList


SHIPPED_20BEST = os.path.join(os.path.dirname(__file__), "..", "rerank", "data", "multi30k", "regular.val.20best.gz")


def tiled(data_dir: str, n_sent: int, size: int, n_feats: int, seed: int = 0):
    base = read_nbest(os.path.join(data_dir, "orig", "output.gold"))
    refs = read_references([os.path.join(data_dir, "orig", f"reference.en.{k}") for k in range(4)], base.n_sentences)
    rng = np.random.default_rng(seed)
    hyps, feats = [], []
    scale = base.features[:, :n_feats].std(axis=0) * 0.05 + 1e-3
    for i in range(n_sent):
        src = base.sentence(i % base.n_sentences)
        rows = np.resize(np.arange(src.start, src.stop), size)
        hyps.append([base.hyps[int(r)] for r in rows])
        feats.append(base.features[rows, :n_feats] + rng.normal(size=(size, n_feats)) * scale)
    nbest = NBestList.from_lists(hyps, feats, base.feature_names[:n_feats])
    return nbest, [[stream[i % base.n_sentences] for i in range(n_sent)] for stream in refs]


def time_kbmira(nbest, refs, full, args) -> list[dict]:
    """kbmira on a quarter, a half and all of the list: seconds, CPU seconds, cost per hypothesis."""
    rows = []
    for frac in (4, 2, 1):
        n = args.sentences // frac
        part = full if frac == 1 else prepare(nbest.select_sentences(range(n)), [r[:n] for r in refs], tokenize="none")
        wall, cpu = [], []
        for _ in range(args.repeat):  # the machine is shared: keep the fastest of a few runs
            t, c = time.perf_counter(), time.process_time()
            res = kbmira(part, epochs=args.epochs, seed=1)
            wall.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        secs, cpu_secs = min(wall), min(cpu)
        work = part.nbest.n_hyps * args.epochs
        rows.append({"sentences": n, "hypotheses": part.nbest.n_hyps, "epochs": args.epochs, "seconds": secs,
                     "cpu_seconds": cpu_secs, "hyps_per_second": work / secs, "hyps_per_cpu_second": work / cpu_secs,
                     "tuned_bleu": res.best_score, "initial_bleu": res.initial_score})
        print(f"kbmira {n:6d} sentences, {part.nbest.n_hyps:8d} hyps, {args.epochs} epochs: {secs:7.2f}s wall, "
              f"{cpu_secs:7.2f}s CPU = {work / cpu_secs:,.0f} hyp-visits per CPU second  "
              f"(BLEU {res.initial_score:.2f} -> {res.best_score:.2f})", flush=True)
    ref = rows[0]["cpu_seconds"] / rows[0]["hypotheses"]
    for r in rows:
        r["cost_per_hyp_ratio"] = (r["cpu_seconds"] / r["hypotheses"]) / ref
    print("CPU cost per hypothesis relative to the smallest run (1.0 = linear): "
          + ", ".join(f"{r['hypotheses']}: {r['cost_per_hyp_ratio']:.2f}" for r in rows))

    return rows


def compile_bytecode() -> None:
    """Write the package's bytecode caches first, as an installed package has them (pip compiles a
    wheel's modules on install; an editable checkout writes them on first import unless
    PYTHONDONTWRITEBYTECODE is set): otherwise every timed command also compiles ~80 modules."""
    import compileall

    import rerank

    dirs = {os.path.dirname(rerank.__file__)}
    for sub in ("mira", "embeddings", "nmt", "recipes"):
        try:
            dirs.update(__import__(f"rerank.{sub}", fromlist=["_"]).__path__)
        except ImportError:  # a component that needs torch, in the core install
            pass
    for d in sorted(dirs):
        compileall.compile_dir(d, quiet=1)


def time_cli(nbest, refs, epochs: int, repeat: int = 1) -> dict:
    """Seconds of the whole `rerank tune` command (read, statistics, kbmira, write) on the list, and
    their ratio to the bare loop over its file (bench_read.bare_loop), best of `repeat` each. The
    package's bytecode is compiled first (`compile_bytecode`); MIRA's epochs run in the C kernel
    where it is built (the record's `mira_backend`)."""
    from rerank.mira.kbmira import backend

    compile_bytecode()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.nbest")
        write_nbest(nbest, path, "moses")
        ref_paths = []
        for k, stream in enumerate(refs):
            ref_paths.append(os.path.join(tmp, f"ref.{k}"))
            with atomic_write(ref_paths[-1]) as out:
                out.write("\n".join(stream) + "\n")
        cmd = [sys.executable, "-m", "rerank", "tune", "--nbest", path, *[x for p in ref_paths for x in ("-r", p)],
               "--epochs", str(epochs), "-o", os.path.join(tmp, "w.json"), "--quiet"]
        loop = best_of(repeat, bare_loop, path)
        secs = best_of(repeat, lambda: subprocess.run(cmd, check=True))
        loop_cpu, cli_cpu = [], []  # CPU seconds too: on a loaded machine they vary less than wall time
        for _ in range(repeat):
            c = time.process_time()
            bare_loop(path)
            loop_cpu.append(time.process_time() - c)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(cmd, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    print(f"rerank tune (whole command) on {nbest.n_hyps} hyps: {secs:.1f}s = "
          f"{nbest.n_hyps * epochs / secs:,.0f} hyp-visits/s = {secs / loop:.1f}x the bare loop over its file ({loop:.2f}s); "
          f"CPU: {min(cli_cpu):.2f}s = {min(cli_cpu) / min(loop_cpu):.1f}x the loop's {min(loop_cpu):.2f}s; "
          f"load average {_loadavg()}")
    return {"cli_seconds": secs, "loop_seconds": loop, "cli_over_loop": secs / loop, "cli_cpu_seconds": min(cli_cpu),
            "loop_cpu_seconds": min(loop_cpu), "cli_over_loop_cpu": min(cli_cpu) / min(loop_cpu), "loadavg": _loadavg(),
            "mira_backend": backend(), "bytecode_compiled": True}


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def pro_column(path: str, seeds=(0, 1)) -> list[dict]:
    """PRO toward a planted column q = f . w (w ~ N(0, 1), seeded) of the list at `path`: the share
    of sentences whose model 1-best is q's best, higher and lower is better, per PRO setting
    (docs/tuning.md's table); MIRA's beside it."""
    from rerank.mira.pro import pro
    from rerank.nbest import segment_argmax

    nbest = read_nbest(path)
    settings: dict[str, dict[str, Any]] = {
        "defaults (largest gaps, threshold 0.05 x spread)": {},
        "keep 200": {"keep": 200},
        "keep 200, threshold 0": {"keep": 200, "threshold": 0.0},
        "pick random, threshold 0": {"pick": "random", "threshold": 0.0}}
    rows = []
    for seed in seeds:
        w = np.random.default_rng(seed).normal(size=nbest.features.shape[1])
        planted = nbest.with_feature("q", nbest.features @ w)
        for lower in (False, True):
            data = prepare(planted, None, metric="column:q", lower_better=("q",) if lower else ())
            q = planted.column("q")[data.kept_rows]
            best = segment_argmax(-q if lower else q, data.offsets)
            fits = [(name, pro(data, seed=1, **o).weights) for name, o in settings.items()]
            # the threshold as it was before it followed the column's scale: 0.05 in the column's units
            fits.append(("absolute threshold 0.05", pro(data, seed=1, threshold=0.05 / data.metric.scale).weights))
            fits.append(("mira", kbmira(data, seed=1).weights))
            for name, weights in fits:
                share = float((segment_argmax(data.features @ weights, data.offsets) == best).mean())
                rows.append({"seed": seed, "lower_better": lower, "setting": name, "argmax_share": share})
                print(f"w seed {seed}, {'lower' if lower else 'higher'} is better, {name}: {share:.1%}", flush=True)
    return rows


def pro_heldout(seeds=(1, 2, 3)) -> list[dict]:
    """PRO toward a noisy real column, each hypothesis's sentence chrF against its reference, tuned on
    each shipped val list and read on its test_2016 list: the mean test chrF of the model 1-best with a
    defaults (largest gaps, threshold 0.05 of the spread) and with `--pro-pick random --pro-threshold 0`
    (what an exact column wants), mean and sd over the PRO seeds."""
    import gzip

    from sacrebleu.metrics import CHRF

    from rerank.mira.pro import pro
    from rerank.nbest import segment_argmax

    data_dir = os.path.dirname(SHIPPED_20BEST)
    chrf = CHRF()

    def with_chrf(name: str, refs_file: str) -> NBestList:
        nbest = read_nbest(os.path.join(data_dir, name))
        with gzip.open(os.path.join(data_dir, refs_file), "rt", encoding="utf-8") as f:
            refs = f.read().splitlines()
        values = [chrf.sentence_score(h, [refs[i]]).score for h, i in zip(nbest.hyps, nbest.sentence_of_hyp.tolist())]
        return nbest.with_feature("c", np.array(values))

    rows = []
    settings: dict[str, dict[str, Any]] = {"defaults": {}, "random, threshold 0": {"threshold": 0.0, "pick": "random"}}
    for kind in ("weak", "regular", "optimised"):
        for size in (20, 50):
            val = with_chrf(f"{kind}.val.{size}best.gz", "val.de.gz")
            test = with_chrf(f"{kind}.test_2016.{size}best.gz", "test_2016_flickr.de.gz")
            data = prepare(val, None, metric="column:c")
            X, c = test.select_features(data.feature_names).features, test.column("c")
            row: dict[str, Any] = {"list": f"{kind} {size}-best"}
            for name, options in settings.items():
                means = [float(c[segment_argmax(X @ pro(data, seed=seed, **options).weights, test.offsets)].mean())
                         for seed in seeds]
                row[name] = {"mean": float(np.mean(means)), "sd": float(np.std(means)), "runs": means}
            rows.append(row)
            print(f"{row['list']}: " + " | ".join(f"{n} {row[n]['mean']:.2f} (sd {row[n]['sd']:.2f})" for n in settings),
                  flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default="/work/shared/data/nbest/joshua-bn-en")
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per size; the fastest counts (default 2)")
    ap.add_argument("--cli", action="store_true", help="also time the whole `rerank tune` command on the full list")
    ap.add_argument("--cli-only", action="store_true", help="time only the whole command (and its bare loop)")
    ap.add_argument("--json", help="write the measurements here")
    ap.add_argument("--pro-column", nargs="?", const=SHIPPED_20BEST, metavar="NBEST",
                    help="instead: PRO (and MIRA) toward a planted linear column of this list (default: the shipped "
                         "regular 20-best val list), the share of sentences where each picks the column's best")
    ap.add_argument("--pro-heldout", action="store_true",
                    help="instead: PRO toward sentence chrF on each shipped val list, read on its test list, at the "
                         "defaults and with --pro-pick random --pro-threshold 0")
    args = ap.parse_args()
    if args.pro_heldout:
        rows = pro_heldout()
        if args.json:
            with atomic_write(args.json) as out:
                json.dump({"benchmark": "bench_tune --pro-heldout", "rows": rows}, out, indent=2)
        return
    if args.pro_column:
        rows = pro_column(args.pro_column)
        if args.json:
            with atomic_write(args.json) as out:
                json.dump({"benchmark": "bench_tune --pro-column", "list": args.pro_column, "rows": rows}, out, indent=2)
        return

    t = time.perf_counter()
    nbest, refs = tiled(args.data_dir, args.sentences, args.size, args.features)
    print(f"built {nbest.n_sentences} x {args.size} = {nbest.n_hyps} hypotheses, {args.features} features "
          f"in {time.perf_counter() - t:.1f}s", flush=True)
    record: dict[str, Any] = {"benchmark": "bench_tune", "machine": platform.platform(), "cpus": os.cpu_count(),
              "list": {"sentences": args.sentences, "size": args.size, "features": args.features}}
    if not args.cli_only:
        t = time.perf_counter()
        full = prepare(nbest, refs, tokenize="none")
        record["prepare_seconds"] = prep_time = time.perf_counter() - t
        print(f"prepare (merge + BLEU statistics): {prep_time:.1f}s = {nbest.n_hyps / prep_time:,.0f} hyps/s", flush=True)
        record["kbmira"] = time_kbmira(nbest, refs, full, args)
    if args.cli or args.cli_only:
        record.update(time_cli(nbest, refs, args.epochs, args.repeat))
    if args.json:
        with atomic_write(args.json) as out:
            json.dump(record, out, indent=2)


if __name__ == "__main__":
    main()
