"""Parity and speed of our COMET MBR against mbrs's, in one process (issue 36 item 4).

    PYTHONPATH=/tmp/mbrs_pkgs HF_HUB_OFFLINE=1 .venv-compat/bin/python benchmarks/bench_mbr_comet.py \\
        --threads 1 --sentences 20 --out docs/benchmarks/mbr_comet

Ours: rerank.consensus.mbr_scores(..., MBROptions("comet", method="exact"|"aggregate"),
model=rerank.metrics.comet.MBRUtility(...)), 100 sum_j p_j COMET(src, h_i, h_j) with
p = softmax(score / T) within each list, called once on all the lists (as the mbr feature runs).
mbrs: mbrs.metrics.MetricCOMET with mbrs.decoders.DecoderMBR (`mbr`) and DecoderAggregateMBR
(`aggregate_mbr`), `decode(hyps, hyps, source, nbest=len(hyps), reference_lprobs=score / T)` per
list (its API takes one source at a time), which returns every hypothesis's expected utility
sum_j softmax(reference_lprobs)_j COMET(src, h_i, h_j); ours / 100 is compared with it.

Posteriors compared (both sides get the same weights):
- model: p = softmax(nmt / T) over every row of the list, duplicates included (ours; mbrs's
  decoder API given references = the hypotheses and reference_lprobs = nmt / T; it softmaxes in
  float32);
- uniform: ours with all scores 0, mbrs with reference_lprobs=None (its default: the mean);
- mbrs-CLI dedup (a different definition, reported, not a parity goal): `mbrs-decode
  --reference_lprobs` drops repeated (reference, log-prob) pairs before the softmax, so a text
  that occurs k times in a list weighs 1/k of what it weighs in ours; the benchmark does the same
  to the references and compares.

Lists: the first --sentences sentences of the shipped Multi30k test_2016 lists; 20-best and 50-best
are rerank/data/multi30k/optimised.test_2016.{20,50}best.gz as they are; 100-best is, per sentence,
the optimised 50-best followed by the regular 50-best (regular.test_2016.50best.gz), each row with
its own nmt score (duplicates across the two are kept, as rows). Sources: the same lines of
rerank/data/multi30k/test_2016_flickr.en.gz. The model: a tiny random-weight COMET-22-style
regression checkpoint (rerank.recipes.tiny_models.build_comet, kind regression, --seed) built
into --scratch, or --model PATH. mbrs loads it through its own MetricCOMET, whose constructor
calls comet.download_model(name), which takes Hub names only: the benchmark points that one call
(mbrs.metrics.comet.download_model) at the local checkpoint file, offline (HF_HUB_OFFLINE=1).

Speed: seconds per sentence for ours exact and aggregate (all lists in one call, and one list per
call) and mbrs's mbr and aggregate_mbr, the same process, --threads torch threads (and
OMP/MKL/OpenBLAS threads), --batch-size sentences per encoder batch for both; models loaded and
each method run once on --warmup sentences before timing; --repeat timed runs of every method,
interleaved (the order rotates each repeat); the median and the minimum are reported, and the
ratio mbrs / ours of the medians (> 1: ours is faster). /proc/loadavg is read before and after.

Without mbrs importable the script still times ours and says so in its output and its files
("mbrs: NOT FOUND ..."); no parity is reported then.

--out PREFIX writes PREFIX.json (the resolved configuration, versions, machine, load, every
number) and PREFIX.md (the tables).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from gpu_check import cpu_name  # benchmarks/ is this script's directory, first on sys.path

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "rerank", "data", "multi30k")
SIZES = (20, 50, 100)


def loadavg() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())




def git_state() -> dict:
    def run(*cmd):
        try:
            return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    return {"head": run("git", "rev-parse", "HEAD"),
            "uncommitted_under_rerank": run("git", "status", "--porcelain", "--", "rerank").splitlines()}


def read_sources(n: int) -> list[str]:
    with gzip.open(os.path.join(DATA, "test_2016_flickr.en.gz"), "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for _, line in zip(range(n), f)]
    if len(lines) < n:
        raise SystemExit(f"only {len(lines)} source sentences, --sentences {n}")
    return lines


def build_lists(size: int, n: int):
    """(NBestList with the one column nmt, description) of the first n sentences' size-best lists."""
    import numpy as np

    from rerank.api import read_nbest
    from rerank.nbest import NBestList

    def first(name):
        nb = read_nbest(os.path.join(DATA, name))
        if nb.n_sentences < n:
            raise SystemExit(f"{name} has {nb.n_sentences} sentences, --sentences {n}")
        nb = nb.select_sentences(np.arange(n))
        return [list(nb.hyps[nb.sentence(i)]) for i in range(n)], [nb.column("nmt")[nb.sentence(i)] for i in range(n)]

    if size in (20, 50):
        name = f"optimised.test_2016.{size}best.gz"
        hyps, nmt = first(name)
        what = f"{name}, as shipped"
    elif size == 100:
        a, b = "optimised.test_2016.50best.gz", "regular.test_2016.50best.gz"
        (ha, sa), (hb, sb) = first(a), first(b)
        hyps = [x + y for x, y in zip(ha, hb)]
        nmt = [np.concatenate([x, y]) for x, y in zip(sa, sb)]
        what = f"per sentence {a} followed by {b} (each row its own nmt score, duplicates kept)"
    else:
        raise SystemExit(f"--sizes: one of {SIZES}, got {size}")
    nb = NBestList.from_lists(hyps, [s[:, None] for s in nmt], ["nmt"])
    return nb, what


def lists_of(nb):
    return [list(nb.hyps[nb.sentence(i)]) for i in range(nb.n_sentences)]


def median_min(times: list[float], n: int) -> dict:
    return {"median_s_per_sentence": statistics.median(times) / n, "min_s_per_sentence": min(times) / n,
            "runs_s": times}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--threads", type=int, required=True, help="torch (and OMP/MKL/OpenBLAS) threads, both sides")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--sentences", type=int, default=20, help="the first N sentences of each list file")
    ap.add_argument("--sizes", default="20,50,100", help="list sizes, of 20, 50, 100")
    ap.add_argument("--temperature", type=float, default=1.0, help="posterior = softmax(nmt / T)")
    ap.add_argument("--batch-size", type=int, default=64, help="encoder batch, both sides (mbrs's default 64)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of every method")
    ap.add_argument("--warmup", type=int, default=2, help="sentences of the untimed warm-up run of every method")
    ap.add_argument("--seed", type=int, default=0, help="seed of the tiny checkpoint and of torch")
    ap.add_argument("--model", help="a COMET-22-style checkpoint directory (default: build the tiny one)")
    ap.add_argument("--scratch", help="where the tiny checkpoint is built (default: a new temporary folder)")
    ap.add_argument("--out", required=True, help="PREFIX: writes PREFIX.json and PREFIX.md")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.threads < 1 or args.sentences < 1 or args.repeat < 1 or args.warmup < 1:
        raise SystemExit("--threads, --sentences, --repeat and --warmup must be >= 1")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    load_before = loadavg()
    sys.path.insert(0, ROOT)

    import numpy as np
    import torch

    from rerank.consensus import MBROptions, mbr_scores, posterior
    from rerank.metrics import comet as our_comet
    from rerank.recipes import tiny_models

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device")

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    scratch = args.scratch or tempfile.mkdtemp(prefix="bench_mbr_comet.")
    model_path = args.model
    if model_path is None:
        model_path = os.path.join(scratch, "comet-regression")
        tiny_models.build_comet(model_path, tiny_models.read_text(tiny_models.DEFAULT_TEXT), seed=args.seed,
                                kind="regression")
    our_comet.checkpoint_file(model_path)   # a bad --model fails here, before anything is timed

    try:
        import mbrs
        import mbrs.metrics.comet as mbrs_comet
        from mbrs.decoders import DecoderAggregateMBR, DecoderMBR
        from mbrs.metrics import MetricCOMET
        mbrs_found: dict = {"found": True, "version": getattr(mbrs, "__version__", None), "path": mbrs.__file__}
        try:
            from importlib.metadata import version
            mbrs_found["version"] = version("mbrs")
        except Exception:  # noqa: BLE001 - a version is a nicety
            pass
    except ImportError as exc:
        mbrs_found = {"found": False, "error": f"{type(exc).__name__}: {exc}"}
        print(f"mbrs: NOT FOUND ({mbrs_found['error']}): only ours is timed, no parity", file=sys.stderr, flush=True)

    utility = our_comet.MBRUtility(model_path, args.batch_size, args.device)
    utility.model()   # loaded before timing
    mbrs_metric = None
    if mbrs_found["found"]:
        mbrs_comet.download_model = lambda name, *a, **k: our_comet.checkpoint_file(name)
        mbrs_metric = MetricCOMET(MetricCOMET.Config(model=model_path, batch_size=args.batch_size,
                                                     cpu=args.device == "cpu"))
        decoders = {"mbr": DecoderMBR(DecoderMBR.Config(), mbrs_metric),
                    "aggregate_mbr": DecoderAggregateMBR(DecoderAggregateMBR.Config(), mbrs_metric)}
        mbrs_found["device"] = str(mbrs_metric.device)

    def ours(nb, scores, srcs, method, per_list=False):
        options = MBROptions("comet", temperature=args.temperature, method=method)
        if not per_list:
            return mbr_scores(nb, scores, options, model=utility, sources=srcs)
        return np.concatenate([mbr_scores(nb.select_sentences([i]), scores[nb.sentence(i)], options, model=utility,
                                          sources=[srcs[i]]) for i in range(nb.n_sentences)])

    def run_mbrs(decoder, lists, srcs, lprobs, refs=None):
        """Every hypothesis's expected utility, list by list (mbrs's decode returns them sorted; put back)."""
        out = []
        for k, (hyps, src) in enumerate(zip(lists, srcs)):
            res = decoder.decode(hyps, hyps if refs is None else refs[k], src, nbest=len(hyps),
                                 reference_lprobs=None if lprobs is None else lprobs[k])
            values = np.empty(len(hyps))
            values[res.idx] = res.score
            out.append(values)
        return out

    def compare(ours_pct, theirs, nb, lists):
        """max |ours / 100 - mbrs| in COMET units, and per list whether the chosen texts agree."""
        diffs, same_text, same_index, gaps, margins, spreads = [], 0, 0, [], [], []
        for i, hyps in enumerate(lists):
            a, b = ours_pct[nb.sentence(i)] / 100.0, theirs[i]
            diffs.append(float(np.max(np.abs(a - b))))
            spreads.append(float(a.max() - a.min()))
            others = [v for h, v in zip(hyps, a) if h != hyps[int(np.argmax(a))]]
            if others:   # how far the best text is ahead of the best other text: what the argmax check resolves
                margins.append(float(a.max() - max(others)))
            ia, ib = int(np.argmax(a)), int(np.argmax(b))
            same_index += ia == ib
            if hyps[ia] == hyps[ib]:
                same_text += 1
            else:
                gaps.append({"list": i, "ours": ia, "mbrs": ib, "ours_gap": float(a[ia] - a[ib]),
                             "mbrs_gap": float(b[ib] - b[ia])})
        return {"max_abs_diff": max(diffs), "lists": len(lists), "same_argmax_text": same_text,
                "median_spread": statistics.median(spreads), "min_margin": min(margins, default=None),
                "median_margin": statistics.median(margins) if margins else None,
                "same_argmax_index": same_index, "disagreements": gaps}

    record: dict = {
        "benchmark": "bench_mbr_comet",
        "command": " ".join(["benchmarks/bench_mbr_comet.py", *sys.argv[1:]]),
        "config": {**vars(args), "sizes": sizes, "model": model_path, "scratch": scratch,
                   "model_built": args.model is None, "score_column": "nmt",
                   "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                         "HF_HUB_OFFLINE", "PYTHONPATH")},
                   "torch_threads": torch.get_num_threads()},
        "machine": {"platform": platform.platform(), "cpu": cpu_name(), "cpus": os.cpu_count(),
                    "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                    "python": platform.python_version()},
        "versions": {m: _version(m) for m in ("torch", "unbabel-comet", "transformers", "numpy", "mbrs")},
        "git": git_state(), "mbrs": mbrs_found, "load": {"before": load_before}, "sizes": {}}
    print(f"load before: {load_before}; mbrs: {'found ' + str(mbrs_found.get('version')) if mbrs_found['found'] else 'NOT FOUND'}",
          flush=True)

    for size in sizes:
        nb, what = build_lists(size, args.sentences)
        srcs = read_sources(args.sentences)
        scores = nb.column("nmt")
        lists = lists_of(nb)
        n = nb.n_sentences
        entry: dict = {"lists": what, "sentences": n, "hypotheses": nb.n_hyps,
                       "lists_with_duplicates": sum(len(set(h)) < len(h) for h in lists),
                       "lists_with_repeated_text_and_score": sum(
                           len(set(zip(h, scores[nb.sentence(i)].tolist()))) < len(h) for i, h in enumerate(lists)),
                       "load_before": loadavg()}
        lprobs = uniform = dedup = None
        if mbrs_metric is not None:
            dev = mbrs_metric.device
            lprobs = [torch.tensor((scores[nb.sentence(i)] / args.temperature).tolist(), dtype=torch.float32,
                                   device=dev) for i in range(n)]
            uniform = [None] * n
            dedup_refs, dedup_lp = [], []
            for i, hyps in enumerate(lists):   # as mbrs-decode --reference_lprobs: (ref, lprob) pairs once
                kept = list(dict.fromkeys(zip(hyps, scores[nb.sentence(i)].tolist())))
                dedup_refs.append([r for r, _ in kept])
                dedup_lp.append(torch.tensor([s / args.temperature for _, s in kept], dtype=torch.float32, device=dev))
            dedup = (dedup_refs, dedup_lp)

        # ---- parity ----
        if mbrs_metric is not None:
            parity = {}
            ours_exact = ours(nb, scores, srcs, "exact")
            ours_agg = ours(nb, scores, srcs, "aggregate")
            zeros = np.zeros_like(scores)
            parity["model posterior, exact vs mbr"] = compare(ours_exact, run_mbrs(decoders["mbr"], lists, srcs, lprobs),
                                                              nb, lists)
            parity["model posterior, aggregate vs aggregate_mbr"] = compare(
                ours_agg, run_mbrs(decoders["aggregate_mbr"], lists, srcs, lprobs), nb, lists)
            parity["uniform, exact vs mbr"] = compare(ours(nb, zeros, srcs, "exact"),
                                                      run_mbrs(decoders["mbr"], lists, srcs, uniform), nb, lists)
            parity["uniform, aggregate vs aggregate_mbr"] = compare(
                ours(nb, zeros, srcs, "aggregate"), run_mbrs(decoders["aggregate_mbr"], lists, srcs, uniform), nb, lists)
            parity["mbrs-CLI dedup (different definition), exact vs mbr"] = compare(
                ours_exact, run_mbrs(decoders["mbr"], lists, srcs, dedup[1], dedup[0]), nb, lists)
            p = posterior(scores, nb.offsets, args.temperature)
            entry["posterior_max_weight_median"] = float(np.median([p[nb.sentence(i)].max() for i in range(n)]))
            entry["parity"] = parity

        # ---- speed ----
        warm = nb.select_sentences(np.arange(min(args.warmup, n)))
        wn = warm.n_sentences
        methods = {"ours exact": lambda b, s, m, src: ours(b, s, src, "exact"),
                   "ours aggregate": lambda b, s, m, src: ours(b, s, src, "aggregate"),
                   "ours exact, one list per call": lambda b, s, m, src: ours(b, s, src, "exact", True),
                   "ours aggregate, one list per call": lambda b, s, m, src: ours(b, s, src, "aggregate", True)}
        if mbrs_metric is not None:
            methods["mbrs mbr"] = lambda b, s, m, src: run_mbrs(decoders["mbr"], lists_of(b), src, m)
            methods["mbrs aggregate_mbr"] = lambda b, s, m, src: run_mbrs(decoders["aggregate_mbr"], lists_of(b), src, m)
        for fn in methods.values():   # warm-up, untimed
            fn(warm, warm.column("nmt"), None if lprobs is None else lprobs[:wn], srcs[:wn])
        sync()
        times: dict[str, list[float]] = {name: [] for name in methods}
        names = list(methods)
        for r in range(args.repeat):
            for name in names[r % len(names):] + names[:r % len(names)]:
                sync()
                t = time.perf_counter()
                methods[name](nb, scores, lprobs, srcs)
                sync()
                times[name].append(time.perf_counter() - t)
        entry["speed"] = {name: median_min(ts, n) for name, ts in times.items()}
        entry["load_after"] = loadavg()
        if mbrs_metric is not None:
            med = {k: v["median_s_per_sentence"] for k, v in entry["speed"].items()}
            entry["ratio_mbrs_over_ours"] = {"exact": med["mbrs mbr"] / med["ours exact"],
                                             "aggregate": med["mbrs aggregate_mbr"] / med["ours aggregate"],
                                             "exact, one list per call": med["mbrs mbr"] / med["ours exact, one list per call"],
                                             "aggregate, one list per call":
                                                 med["mbrs aggregate_mbr"] / med["ours aggregate, one list per call"]}
        record["sizes"][str(size)] = entry
        print(f"{size}-best done ({n} sentences, {nb.n_hyps} hypotheses); load {entry['load_after']}", flush=True)

    record["load"]["after"] = loadavg()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".json", "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    table = markdown(record)
    with open(args.out + ".md", "w", encoding="utf-8") as f:
        f.write(table)
    print(table)


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def markdown(record: dict) -> str:
    cfg = record["config"]
    lines = [f"`{record['command']}`", "",
             f"{record['machine']['cpu']}, {record['machine']['affinity']} CPUs usable, torch threads "
             f"{cfg['torch_threads']}, device {cfg['device']}, encoder batch {cfg['batch_size']}, "
             f"T = {cfg['temperature']}, {cfg['repeat']} timed runs per method (median; warm-up excluded).", "",
             f"Load (/proc/loadavg) before: `{record['load']['before']}`, after: `{record['load']['after']}`.", ""]
    if not record["mbrs"]["found"]:
        lines += [f"**mbrs: NOT FOUND** ({record['mbrs']['error']}): only ours was timed; no parity.", ""]
    else:
        lines += [f"mbrs {record['mbrs'].get('version')} ({record['mbrs'].get('device')}).", "",
                  "Parity: max |ours / 100 - mbrs| in COMET units; argmax: lists whose chosen hypothesis is the same "
                  "text (same index) / lists.", "",
                  "(spread: max - min of ours in a list; margin: ours' best minus the best other text; medians "
                  "over lists, and the smallest margin.)", "",
                  "| list | comparison | max abs diff | same argmax text (index) | spread | margin (min) |",
                  "|---|---|---:|---|---:|---:|"]
        for size, e in record["sizes"].items():
            for name, c in e["parity"].items():
                lines.append(f"| {size}-best | {name} | {c['max_abs_diff']:.2e} | {c['same_argmax_text']} "
                             f"({c['same_argmax_index']}) / {c['lists']} | {c['median_spread']:.2e} | "
                             f"{c['median_margin']:.2e} ({c['min_margin']:.2e}) |")
        lines.append("")
    lines += ["Speed: milliseconds per sentence (median of the timed runs; min in the JSON).", ""]
    names = list(next(iter(record["sizes"].values()))["speed"])
    lines += ["| list | hyps | " + " | ".join(names) + " |", "|---|---:|" + "---:|" * len(names)]
    for size, e in record["sizes"].items():
        lines.append(f"| {size}-best | {e['hypotheses']} | "
                     + " | ".join(f"{1000 * e['speed'][k]['median_s_per_sentence']:.1f}" for k in names) + " |")
    if record["mbrs"]["found"]:
        ratios = list(next(iter(record["sizes"].values()))["ratio_mbrs_over_ours"])
        lines += ["", "Ratio mbrs time / ours (> 1: ours is faster), medians:", "",
                  "| list | " + " | ".join(ratios) + " |", "|---|" + "---:|" * len(ratios)]
        for size, e in record["sizes"].items():
            lines.append(f"| {size}-best | " + " | ".join(f"{e['ratio_mbrs_over_ours'][k]:.2f}" for k in ratios) + " |")
    lines += ["", "Lists: " + "; ".join(f"{size}-best: {e['lists']} ({e['lists_with_duplicates']} of {e['sentences']} "
                                          f"lists hold a repeated text, {e['lists_with_repeated_text_and_score']} a "
                                          "repeated (text, nmt) pair, which mbrs-decode's dedup would merge)"
                                          for size, e in record["sizes"].items()), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
