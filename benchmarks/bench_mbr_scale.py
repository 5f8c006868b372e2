"""MBR at any size: time and peak memory of exact and aggregate MBR (rerank.consensus) for 20, 50,
200 and 1,000 hypotheses per sentence, top-1 agreement of the aggregate with exact MBR, and the
same computations by the mbrs library (Deguchi et al.) as the anchor, in the same run.

    python benchmarks/bench_mbr_scale.py --mbrs-python /tmp/mbrs-venv/bin/python \\
        [--sizes 20,50,200,1000] [--utilities bleu,chrf] [--scale 3000x1000] [--out docs/benchmarks/mbr_scale]

mbrs is not a dependency of this project: give the python of a separate environment that has it
(`python3 -m venv /tmp/mbrs-venv && /tmp/mbrs-venv/bin/pip install mbrs`); without
--mbrs-python its columns are left out.

Lists. 20 and 50: the shipped optimised test_2016 20- and 50-best lists as they are (1,000
sentences). 200 and 1,000: with --nmt-lists DIR, real NMT lists: DIR/test.1000best.gz (and
DIR/val.1000best.gz), written by `rerank nmt translate --beam 1000 --nbest 1000` with a briefly
trained model of the project's NMT (the 200-best is the top 200 of each); --scale then cycles
through the val and test lists of DIR (every pass the same lists: the timing is what counts).
Without --nmt-lists, they are built from the shipped 50-best lists: per sentence, the distinct
hypotheses of the three systems' (optimised, regular, weak) 50-best lists with their NMT
log-probabilities (the highest where systems share one), then recombinants until the list has n
distinct entries: the first i words of a pooled hypothesis followed by the words of another from
its word j on (i, j uniform), scored with the length-weighted mix of the two NMT scores; --scale
builds N x n lists the same way from the val and test_2016 pools.

--tuning adds the question that matters for reranking: the shipped 50-best lists of the three
systems and the NMT 1,000-best lists, each with an mbr column by exact and by aggregate MBR
(BLEU+1, T = 1), tuned with the NMT features by k-best MIRA on val (3 runs, 60 epochs) and
scored on test: top-1 agreement of the untuned features, test BLEU (mean of the runs) of both
and of MIRA on the NMT features alone.

Every cell runs in a fresh subprocess (the list is read from a JSON-lines file the parent wrote):
seconds of the MBR computation alone (the list already in memory, tokenisation included) and
peak resident memory of the process (VmHWM, the list included) and its increase over the
resident memory just before the computation. mbrs: its metrics' expected_scores (exact: all
pairs, what DecoderMBR calls) and expected_scores_reference_aggregation (what DecoderAggregateMBR
calls), per sentence, with reference_lprobs = NMT score / T, BLEU as the toolkit's BLEU+1
(smooth_method add-k, smooth_value 1, tokenize 13a) and chrF with sacrebleu's defaults, one
worker process. Exact MBR at n = 200 and 1,000 is quadratic, so those cells use the first
sentences only (--sentences, --mbrs-sentences); time per sentence is the comparable figure.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
DATA = os.path.join(ROOT, "rerank", "data", "multi30k")
FLAVOURS = ("optimised", "regular", "weak")
SENTENCES = {20: 1000, 50: 1000, 200: 100, 1000: 10}     # sentences per cell, this toolkit
MBRS_SENTENCES = {20: 100, 50: 40, 200: 5, 1000: 1}       # mbrs exact (pure Python, sacrebleu per pair)


# ---- lists -----------------------------------------------------------------------------------

def read_moses(path: str) -> list[tuple[list[str], list[float]]]:
    """[(hypotheses, nmt scores)] per sentence of a shipped Moses list (no project import: the
    mbrs worker runs in another environment)."""
    out: list[tuple[list[str], list[float]]] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            sid, hyp, feats = line.rstrip("\n").split(" ||| ")[:3]
            while len(out) <= int(sid):
                out.append(([], []))
            fields = feats.split()
            out[int(sid)][0].append(hyp)
            out[int(sid)][1].append(float(fields[fields.index("nmt=") + 1]))
    return out


def pool(split: str) -> list[dict[str, float]]:
    """Per sentence: every distinct hypothesis of the three systems' 50-best lists -> NMT score."""
    pools: list[dict[str, float]] = []
    for flavour in FLAVOURS:
        for s, (hyps, scores) in enumerate(read_moses(os.path.join(DATA, f"{flavour}.{split}.50best.gz"))):
            if s == len(pools):
                pools.append({})
            for h, x in zip(hyps, scores):
                pools[s][h] = max(x, pools[s].get(h, -float("inf")))
    return pools


def grow(entries: dict[str, float], n: int, rng: random.Random) -> tuple[list[str], list[float]]:
    """n distinct hypotheses: the pooled ones (the n best if more), then recombinants."""
    items = sorted(entries.items(), key=lambda kv: -kv[1])[:n]
    hyps, scores = [h for h, _ in items], [x for _, x in items]
    seen, words = set(hyps), [(h.split(), x) for h, x in items]
    attempts = 0
    while len(hyps) < n and attempts < 50 * n:
        attempts += 1
        (a, xa), (b, xb) = rng.choice(words), rng.choice(words)
        i, j = rng.randint(0, len(a)), rng.randint(0, len(b))
        h = " ".join(a[:i] + b[j:])
        if h in seen:
            continue
        wa, wb = i / max(len(a), 1), (len(b) - j) / max(len(b), 1)
        seen.add(h)
        hyps.append(h)
        scores.append((wa * xa + wb * xb) / max(wa + wb, 1e-9) if wa + wb else min(xa, xb))
    while len(hyps) < n:  # a pool too small to recombine (a one-word sentence): repeat entries
        k = rng.randrange(len(items))
        hyps.append(items[k][0])
        scores.append(items[k][1])
    return hyps, scores


def write_lists(path: str, lists) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for hyps, scores in lists:
            f.write(json.dumps({"hyps": hyps, "scores": scores}, ensure_ascii=False) + "\n")


def build_cell(n: int, sentences: int, path: str, seed: int = 1, nmt_lists: str | None = None) -> None:
    if n in (20, 50):
        lists = read_moses(os.path.join(DATA, f"optimised.test_2016.{n}best.gz"))[:sentences]
    elif nmt_lists:
        lists = [(h[:n], x[:n]) for h, x in read_moses(os.path.join(nmt_lists, "test.1000best.gz"))[:sentences]]
    else:
        pools = pool("test_2016")
        rng = random.Random(seed)
        lists = [grow(pools[s], n, rng) for s in range(sentences)]
    write_lists(path, lists)


def build_scale(sentences: int, n: int, path: str, nmt_lists: str | None = None) -> None:
    if nmt_lists:
        lists = [(h[:n], x[:n]) for split in ("val", "test")
                 for h, x in read_moses(os.path.join(nmt_lists, f"{split}.1000best.gz"))]
        write_lists(path, (lists[s % len(lists)] for s in range(sentences)))
        return
    pools = pool("val") + pool("test_2016")
    with open(path, "w", encoding="utf-8") as f:
        for s in range(sentences):
            if s % len(pools) == 0:
                rng = random.Random(1000 + s // len(pools))
            hyps, scores = grow(pools[s % len(pools)], n, rng)
            f.write(json.dumps({"hyps": hyps, "scores": scores}, ensure_ascii=False) + "\n")


# ---- workers (fresh processes) ----------------------------------------------------------------

def resident_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load(path: str, sentences: int) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(sentences), f)]


def worker_ours(args) -> dict:
    sys.path.insert(0, ROOT)
    import numpy as np

    from rerank.consensus import MBROptions, mbr_scores
    from rerank.nbest import NBestList

    lists = load(args.file, args.sentences)
    nbest = NBestList.from_lists([d["hyps"] for d in lists], [np.zeros((len(d["hyps"]), 0)) for d in lists], [],
                                 [np.asarray(d["scores"]) for d in lists])
    del lists
    base = resident_mb("VmRSS")
    t = time.perf_counter()
    values = mbr_scores(nbest, nbest.scores, MBROptions(args.utility, args.temperature, method=args.method))
    seconds = time.perf_counter() - t
    if args.scores_out:
        np.save(args.scores_out, values)
    return {"seconds": seconds, "peak_mb": resident_mb("VmHWM"), "base_mb": base, "hyps": nbest.n_hyps}


def worker_mbrs(args) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(1)
    if args.utility == "bleu":
        from mbrs.metrics import MetricBLEU

        metric = MetricBLEU(MetricBLEU.Config(tokenize="13a", smooth_method="add-k", smooth_value=1, num_workers=1))
    else:
        from mbrs.metrics import MetricChrF

        metric = MetricChrF(MetricChrF.Config(num_workers=1))
    lists = load(args.file, args.sentences)
    base = resident_mb("VmRSS")
    out = []
    t = time.perf_counter()
    for d in lists:
        lprobs = torch.tensor(d["scores"], dtype=torch.float64) / args.temperature
        if args.method == "exact":
            e = metric.expected_scores(d["hyps"], d["hyps"], reference_lprobs=lprobs)
        else:
            e = metric.expected_scores_reference_aggregation(d["hyps"], d["hyps"], reference_lprobs=lprobs)
        out.append(e.double().numpy())
    seconds = time.perf_counter() - t
    if args.scores_out:
        np.save(args.scores_out, np.concatenate(out))
    return {"seconds": seconds, "peak_mb": resident_mb("VmHWM"), "base_mb": base,
            "hyps": sum(len(d["hyps"]) for d in lists)}


def run_worker(python: str, which: str, file: str, sentences: int, method: str, utility: str,
               temperature: float, scores_out: str | None) -> dict:
    argv = [python, os.path.abspath(__file__), "--worker", which, "--file", file, "--count", str(sentences),
            "--method", method, "--utility", utility, "--temperature", str(temperature)]
    if scores_out:
        argv += ["--scores-out", scores_out]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- the table ---------------------------------------------------------------------------------

def picks(values, sizes, hyps):
    """The top hypothesis's text per sentence (ties: the first), so duplicates compare equal."""
    import numpy as np

    out, start = [], 0
    for k, size in enumerate(sizes):
        out.append(hyps[k][int(np.argmax(values[start:start + size]))])
        start += size
    return out


def agreement(a, b) -> float:
    return 100.0 * sum(x == y for x, y in zip(a, b)) / len(a)


def cell(args, n: int, utility: str, tmp: str) -> dict:
    import numpy as np

    sentences, mbrs_sentences = args.sentences.get(n, SENTENCES[n]), args.mbrs_sentences.get(n, MBRS_SENTENCES[n])
    path = os.path.join(tmp, f"lists.{n}.jsonl")
    if not os.path.exists(path):
        build_cell(n, sentences, path, nmt_lists=args.nmt_lists)
    lists = load(path, sentences)
    hyps, sizes = [d["hyps"] for d in lists], [len(d["hyps"]) for d in lists]
    row: dict = {"n": n, "utility": utility, "sentences": sentences, "mean_size": sum(sizes) / len(sizes),
                 "distinct_per_sentence": sum(len(set(h)) for h in hyps) / len(hyps)}
    scores = {}
    runs = [("ours", m, sentences) for m in ("exact", "aggregate")]
    if args.mbrs_python:
        runs += [("mbrs", "exact", mbrs_sentences), ("mbrs", "aggregate", sentences)]
    for who, method, count in runs:
        out = os.path.join(tmp, f"{who}.{method}.{n}.{utility}.npy")
        python = sys.executable if who == "ours" else args.mbrs_python
        result = run_worker(python, who, path, count, method, utility, args.temperature, out)
        result["sentences"] = count
        result["seconds_per_sentence"] = result["seconds"] / count
        row[f"{who}_{method}"] = result
        scores[who, method] = np.load(out)
        print(f"  n={n} {utility} {who} {method}: {count} sentences, {result['seconds']:.2f} s, "
              f"peak {result['peak_mb']:.0f} MB (+{result['peak_mb'] - result['base_mb']:.0f})", flush=True)
    top = {key: picks(v, sizes, hyps) for key, v in scores.items() if len(v) == sum(sizes)}
    row["agree_aggregate_exact"] = agreement(top["ours", "aggregate"], top["ours", "exact"])
    if args.mbrs_python:
        k = mbrs_sentences
        m = sum(sizes[:k])
        row["mbrs_exact_max_abs_diff"] = float(np.max(np.abs(scores["ours", "exact"][:m] - scores["mbrs", "exact"])))
        row["mbrs_aggregate_max_abs_diff"] = float(np.max(np.abs(scores["ours", "aggregate"] - scores["mbrs", "aggregate"])))
        row["agree_mbrs_exact"] = agreement(picks(scores["mbrs", "exact"], sizes[:k], hyps[:k]), top["ours", "exact"][:k])
        row["agree_mbrs_aggregate"] = agreement(top["mbrs", "aggregate"], top["ours", "aggregate"])
    return row


def scale(args, tmp: str) -> list[dict]:
    sentences, n = (int(x) for x in args.scale.split("x"))
    path = os.path.join(tmp, "scale.jsonl")
    t = time.perf_counter()
    build_scale(sentences, n, path, args.nmt_lists)
    print(f"  built {sentences} x {n} in {time.perf_counter() - t:.0f} s", flush=True)
    rows = []
    for utility in args.utilities:
        result = run_worker(sys.executable, "ours", path, sentences, "aggregate", utility, args.temperature, None)
        result.update(sentences=sentences, n=n, utility=utility)
        rows.append(result)
        print(f"  {sentences} x {n} aggregate {utility}: {result['seconds']:.1f} s, peak {result['peak_mb']:.0f} MB "
              f"(+{result['peak_mb'] - result['base_mb']:.0f} over the loaded list)", flush=True)
    return rows


def tuning(args) -> list[dict]:
    """Exact against aggregate MBR as a tuned feature (see the module doc)."""
    sys.path.insert(0, ROOT)
    import numpy as np
    import sacrebleu

    import rerank
    from rerank.consensus import MBROptions, mbr_scores
    from rerank.recipes.demo import BASE_FEATURES
    from rerank.recipes.experiment import leading_references, mira, rerank as rerank_list, tune_system

    text = args.text_dir
    pairs = [(f"{f} 50-best", os.path.join(DATA, f"{f}.val.50best.gz"), os.path.join(DATA, f"{f}.test_2016.50best.gz"))
             for f in FLAVOURS]
    if args.nmt_lists:
        pairs.append(("NMT 1000-best", os.path.join(args.nmt_lists, "val.1000best.gz"),
                      os.path.join(args.nmt_lists, "test.1000best.gz")))
    rows = []
    for name, dev_path, test_path in pairs:
        dev, test = rerank.read_nbest(dev_path), rerank.read_nbest(test_path)
        dev_refs = leading_references(os.path.join(text, "val.de.gz"), dev.n_sentences)
        test_refs = leading_references(os.path.join(text, "test_2016_flickr.de.gz"), test.n_sentences)
        row = {"list": name, "val_sentences": dev.n_sentences, "test_sentences": test.n_sentences,
               "test_hyps": test.n_hyps, "seconds": {}}
        cols = {}
        for method in ("exact", "aggregate"):
            t = time.perf_counter()
            cols[method] = [mbr_scores(nb, nb.column("nmt"), MBROptions(method=method)) for nb in (dev, test)]
            row["seconds"][method] = time.perf_counter() - t
        picks_ = {m: rerank_list(test.with_feature("mbr", cols[m][1]), {"mbr": 1.0}) for m in cols}
        row["top1_agreement"] = agreement(picks_["exact"], picks_["aggregate"])
        row["decision_bleu"] = {m: sacrebleu.corpus_bleu(picks_[m], test_refs).score for m in cols}

        def tuned(features, d, t_):
            weights, _ = tune_system(d, dev_refs, features, mira(3, 1, 60, "13a"))
            return float(np.mean([sacrebleu.corpus_bleu(rerank_list(t_, w), test_refs).score for w in weights]))

        row["one_best_bleu"] = sacrebleu.corpus_bleu([test.hyps[int(i)] for i in test.offsets[:-1]], test_refs).score
        row["mira_nmt_bleu"] = tuned(BASE_FEATURES, dev, test)
        row["tuned_bleu"] = {m: tuned(BASE_FEATURES + ["mbr"], dev.with_feature("mbr", cols[m][0]),
                                      test.with_feature("mbr", cols[m][1])) for m in cols}
        print(f"  tuning {name}: top-1 agreement {row['top1_agreement']:.1f}%, tuned BLEU exact "
              f"{row['tuned_bleu']['exact']:.2f} / aggregate {row['tuned_bleu']['aggregate']:.2f}", flush=True)
        rows.append(row)
    return rows


def markdown(record: dict) -> str:
    lines = [f"Made by `{record['command']}` on {record['date']} ({record['cpus']} CPUs; load average (1/5/15 min) "
             f"{record['load_start']} at the start, {record['load_end']} at the end; {record['minutes']:.1f} minutes)."]
    if record["cells"]:
        lines += ["", "Seconds per sentence (MBR computation alone, the list in memory) and peak resident MB of the process "
             "(the list included; in brackets the increase over the loaded list). Agreement: % of sentences whose "
             "top hypothesis (by text) is the same.", "",
             "| n | utility | sentences | exact s/sent | exact peak MB | aggregate s/sent | aggregate peak MB "
             "| top-1 agg = exact | mbrs exact s/sent (sentences) | mbrs aggregate s/sent | top-1 mbrs = ours exact / aggregate "
             "| max abs diff vs mbrs exact / aggregate |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in record["cells"]:
        e, a = r["ours_exact"], r["ours_aggregate"]
        row = (f"| {r['n']} | {r['utility']} | {r['sentences']} | {e['seconds_per_sentence']:.4f} | "
               f"{e['peak_mb']:.0f} (+{e['peak_mb'] - e['base_mb']:.0f}) | {a['seconds_per_sentence']:.5f} | "
               f"{a['peak_mb']:.0f} (+{a['peak_mb'] - a['base_mb']:.0f}) | {r['agree_aggregate_exact']:.1f} |")
        if "mbrs_exact" in r:
            me, ma = r["mbrs_exact"], r["mbrs_aggregate"]
            row += (f" {me['seconds_per_sentence']:.3f} ({me['sentences']}) | {ma['seconds_per_sentence']:.4f} | "
                    f"{r['agree_mbrs_exact']:.0f} / {r['agree_mbrs_aggregate']:.1f} | "
                    f"{r['mbrs_exact_max_abs_diff']:.1e} / {r['mbrs_aggregate_max_abs_diff']:.1e} |")
        else:
            row += " - | - | - | - |"
        lines.append(row)
    if record.get("scale"):
        made = "NMT 1,000-best lists, cycled" if record.get("nmt_lists") else "synthetic"
        lines += ["", f"| list ({made}) | utility | aggregate seconds | peak MB (increase over the loaded list) |",
                  "|---|---|---|---|"]
        for r in record["scale"]:
            lines.append(f"| {r['sentences']} x {r['n']} | {r['utility']} | {r['seconds']:.1f} | "
                         f"{r['peak_mb']:.0f} (+{r['peak_mb'] - r['base_mb']:.0f}) |")
    if record.get("tuning"):
        lines += ["", "MBR as a tuned feature (BLEU+1, T = 1; MIRA, 3 runs, mean test BLEU): exact against aggregate.", "",
                  "| list | val / test sentences | top-1 agreement (untuned) | MBR decision BLEU exact / aggregate "
                  "| 1-best | MIRA: NMT features | + mbr exact | + mbr aggregate | mbr seconds exact / aggregate |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in record["tuning"]:
            lines.append(f"| {r['list']} | {r['val_sentences']} / {r['test_sentences']} | {r['top1_agreement']:.1f}% | "
                         f"{r['decision_bleu']['exact']:.2f} / {r['decision_bleu']['aggregate']:.2f} | "
                         f"{r['one_best_bleu']:.2f} | {r['mira_nmt_bleu']:.2f} | {r['tuned_bleu']['exact']:.2f} | "
                         f"{r['tuned_bleu']['aggregate']:.2f} | {r['seconds']['exact']:.1f} / {r['seconds']['aggregate']:.1f} |")
    return "\n".join(lines) + "\n"


def parse_counts(text: str) -> dict[int, int]:
    return {int(k): int(v) for k, v in (item.split(":") for item in text.split(",") if item)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="20,50,200,1000")
    ap.add_argument("--utilities", default="bleu,chrf")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--sentences", type=parse_counts, default={},
                    help="n:sentences,... (default 20:1000,50:1000,200:100,1000:10)")
    ap.add_argument("--mbrs-sentences", type=parse_counts, default={},
                    help="n:sentences for mbrs exact (default 20:100,50:40,200:5,1000:1)")
    ap.add_argument("--mbrs-python", help="python of an environment with mbrs installed")
    ap.add_argument("--scale", help="SENTENCESxN: also time aggregate MBR on a synthetic list of that size, e.g. 3000x1000")
    ap.add_argument("--no-cells", action="store_true", help="only the --scale (and --tuning) runs")
    ap.add_argument("--nmt-lists", help="directory with val.1000best.gz and test.1000best.gz from rerank nmt translate")
    ap.add_argument("--tuning", action="store_true", help="also tune exact and aggregate mbr columns (see above)")
    ap.add_argument("--text-dir", default=DATA, help="references: val.de.gz, test_2016_flickr.de.gz (default: shipped)")
    ap.add_argument("--out", help="write OUT.json and OUT.md")
    ap.add_argument("--worker", choices=("ours", "mbrs"), help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--method", help=argparse.SUPPRESS)
    ap.add_argument("--utility", help=argparse.SUPPRESS)
    ap.add_argument("--scores-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.sentences = args.count
        print(json.dumps(worker_ours(args) if args.worker == "ours" else worker_mbrs(args)))
        return
    args.utilities = args.utilities.split(",")
    start, load_start = time.time(), " / ".join(f"{x:.2f}" for x in os.getloadavg())
    record = {"benchmark": "bench_mbr_scale", "machine": platform.platform(), "cpus": os.cpu_count(),
              "command": "python benchmarks/bench_mbr_scale.py " + " ".join(
                  os.path.relpath(a) if a.startswith(os.path.abspath(ROOT) + os.sep) else a for a in sys.argv[1:]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": load_start,
              "cells": [], "scale": [], "tuning": [], "nmt_lists": args.nmt_lists}
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_cells:
            for n in (int(x) for x in args.sizes.split(",")):
                for utility in args.utilities:
                    record["cells"].append(cell(args, n, utility, tmp))
        if args.scale:
            record["scale"] = scale(args, tmp)
    if args.tuning:
        record["tuning"] = tuning(args)
    record["load_end"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    record["minutes"] = (time.time() - start) / 60
    text = markdown(record)
    print(text)
    if args.out:
        with open(args.out + ".json", "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2)
        with open(args.out + ".md", "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
