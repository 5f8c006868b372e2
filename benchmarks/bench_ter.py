"""Time the toolkit's TER (rerank.metrics.ter) against sacrebleu's, in one process, as ratios.

    python benchmarks/bench_ter.py [--data-dir ../shared/data/multi30k] [--repeat 3] [--sacre-limit 400]
                                   [--json OUT.json]

Four cases, each checked for identical statistics before it is timed:

- `corpus`: corpus TER of the NMT 1-best of the shipped test_2016 20-best list against the German
  references (1,000 sentences of about 12 words);
- `25 words`: 2,489 sentences of about 25 words (MultEval's example size), each the 1-best of
  one val/test sentence followed by that of another, against the matching references;
- `long`: 300 sentences of about 66 words (six sentences joined);
- `joshua`: every hypothesis of the Joshua Bengali-English Hiero n-best list under ../shared
  (805 hypotheses of real decoder output, four references), as `tune --metric ter` scores them;
- `tune`: `rerank.tune` (one kbmira run) on the val 20-best list with `metric="ter"`, against the
  same with `metric="bleu"`; the TER statistics of every distinct hypothesis through sacrebleu
  (what `tune --metric ter` computed before) are timed apart;
- `mbr`: the `mbr` feature (rerank.consensus.mbr_scores, exact) on the test 20-best list with the
  ter utility, against the bleu utility; sacrebleu's sentence TER per pair (what
  `--mbr-utility ter` computed before) is timed on the first --mbr-sacre-sentences lists.

With `--cases lists` (not in the default), every hypothesis of the four shipped Multi30k 20-best
lists (80,518) is compared with sacrebleu's statistics, untimed: about 30 s.

sacrebleu is timed on the first --sacre-limit sentences of the two long cases (it takes minutes on
all of them); the ratio compares the same sentences. Every figure is the best of --repeat runs,
printed with the load average (`os.getloadavg`) before and after. The C kernel and the pure-Python
fallback (`backend="python"`, what runs without a compiler) are both timed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from sacrebleu.metrics import TER  # noqa: E402

from rerank.consensus import MBROptions, mbr_scores, pair_index  # noqa: E402
from rerank.formats import read_nbest  # noqa: E402
from rerank.io import atomic_write  # noqa: E402
from rerank.metrics import ter  # noqa: E402
from rerank.metrics.sacre_stats import corpus_segment_stats  # noqa: E402

SHIPPED = os.path.join(HERE, "..", "rerank", "data", "multi30k")


def read_lines(path: str) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh]


def best_of(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def firsts(nbest) -> list[str]:
    return [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]


def joined(hyps: list[str], refs: list[str], n: int, parts: int) -> tuple[list[str], list[str]]:
    """n sentences, each `parts` consecutive-by-stride sentences joined (hypotheses and references alike)."""
    m = len(hyps)
    picks = [[(k + j * (1 + k // m) * 7) % m for j in range(parts)] for k in range(n)]
    return ([" ".join(hyps[i] for i in p) for p in picks], [" ".join(refs[i] for i in p) for p in picks])


def corpus_case(name: str, hyps: list[str], refs: list, args, record: dict) -> None:
    """refs: one reference per sentence, or a list of reference streams."""
    streams = refs if refs and isinstance(refs[0], list) else [refs]
    k = min(len(hyps), args.sacre_limit)
    first = [stream[:k] for stream in streams]
    t_sacre, sacre = best_of(lambda: corpus_segment_stats(TER(), hyps[:k], first), 1 if k > 500 else args.repeat)
    t_c_k, ours = best_of(lambda: ter.segment_stats(hyps[:k], first, backend="c"), args.repeat)
    t_py_k, ours_py = best_of(lambda: ter.segment_stats(hyps[:k], first, backend="python"), max(1, args.repeat // 3))
    same = np.array_equal(np.asarray(sacre, dtype=np.float64), ours) and np.array_equal(ours, ours_py)
    t_c, _ = best_of(lambda: ter.segment_stats(hyps, streams, backend="c"), args.repeat)
    words = np.mean([len(h.split()) for h in hyps])
    row = {"sentences": len(hyps), "words_per_hyp": round(float(words), 1), "sacre_sentences": k,
           "sacrebleu_s": t_sacre, "c_s": t_c_k, "python_s": t_py_k, "c_all_s": t_c,
           "speedup_c": t_sacre / t_c_k, "speedup_python": t_sacre / t_py_k, "identical": bool(same)}
    record[name] = row
    print(f"{name}: {len(hyps)} sentences of {words:.1f} words; on the first {k}: sacrebleu {t_sacre:.3f} s, "
          f"C {t_c_k:.4f} s ({row['speedup_c']:.0f}x), Python {t_py_k:.3f} s ({row['speedup_python']:.1f}x); "
          f"C on all {len(hyps)}: {t_c:.3f} s; identical: {same}", flush=True)


def joshua_case(args, record: dict) -> None:
    from rerank.metrics.base import expand_refs

    folder = os.path.join(args.data_dir, "..", "nbest", "joshua-bn-en", "orig")
    nbest = read_nbest(os.path.join(folder, "output.gold"))
    refs = []
    for k in range(4):
        with open(os.path.join(folder, f"reference.en.{k}"), encoding="utf-8") as fh:
            refs.append([line.rstrip("\n") for line in fh])
    corpus_case("joshua", list(nbest.hyps), expand_refs(refs, nbest.sentence_of_hyp), args, record)


def lists_case(args, record: dict) -> None:
    from rerank.metrics.base import expand_refs

    raw, rows = os.path.join(args.data_dir, "task1", "raw"), {}
    for name in ("optimised", "regular"):
        for split, ref in (("val", "val.de.gz"), ("test_2016", "test_2016_flickr.de.gz")):
            nbest = read_nbest(os.path.join(SHIPPED, f"{name}.{split}.20best.gz"))
            refs = expand_refs([read_lines(os.path.join(raw, ref))], nbest.sentence_of_hyp)
            same = np.array_equal(np.asarray(corpus_segment_stats(TER(), list(nbest.hyps), refs), dtype=np.float64),
                                  ter.segment_stats(list(nbest.hyps), refs))
            rows[f"{name}.{split}.20best"] = {"hypotheses": nbest.n_hyps, "identical": bool(same)}
            print(f"lists: {name}.{split}.20best, {nbest.n_hyps} hypotheses: identical: {same}", flush=True)
    record["lists"] = rows


def tune_case(args, record: dict) -> None:
    from rerank.api import tune
    from rerank.metrics.base import expand_refs
    from rerank.tuning import unique_strings

    nbest = read_nbest(os.path.join(SHIPPED, "optimised.val.20best.gz"))
    refs = [read_lines(os.path.join(args.data_dir, "task1", "raw", "val.de.gz"))]
    times = {}
    for metric in ("bleu", "ter"):
        times[metric], _ = best_of(lambda: tune(nbest, refs, runs=1, metric=metric, seed=1), args.repeat)
    rows, _ = unique_strings(nbest)
    k = min(len(rows), args.sacre_limit * 10)
    hyps = [nbest.hyps[int(r)] for r in rows[:k]]
    refs_k = expand_refs(refs, nbest.sentence_of_hyp[rows[:k]])
    t_sacre, sacre = best_of(lambda: corpus_segment_stats(TER(), hyps, refs_k), 1)
    t_ours, ours = best_of(lambda: ter.segment_stats(hyps, refs_k), args.repeat)
    same = np.array_equal(np.asarray(sacre, dtype=np.float64), ours)
    row = {"hypotheses": nbest.n_hyps, "distinct": len(rows), "tune_bleu_s": times["bleu"], "tune_ter_s": times["ter"],
           "ter_over_bleu": times["ter"] / times["bleu"], "stats_hypotheses": k, "stats_sacrebleu_s": t_sacre,
           "stats_ours_s": t_ours, "stats_speedup": t_sacre / t_ours, "identical": bool(same),
           "sacrebleu_all_estimate_s": t_sacre * len(rows) / k}
    record["tune"] = row
    print(f"tune (1 kbmira run, val 20-best, {nbest.n_hyps} hypotheses): bleu {times['bleu']:.2f} s, "
          f"ter {times['ter']:.2f} s = {row['ter_over_bleu']:.2f}x; TER statistics of {k} distinct hypotheses: "
          f"sacrebleu {t_sacre:.2f} s, ours {t_ours:.3f} s ({row['stats_speedup']:.0f}x), identical: {same}", flush=True)


def mbr_case(args, record: dict) -> None:
    nbest = read_nbest(os.path.join(SHIPPED, "optimised.test_2016.20best.gz"))
    scores = nbest.column("nmt")
    times = {}
    for utility in ("bleu", "ter"):
        times[utility], _ = best_of(lambda: mbr_scores(nbest, scores, MBROptions(utility)), args.repeat)
    k = args.mbr_sacre_sentences
    sub = nbest.offsets[: k + 1]
    texts = list(nbest.hyps[0:int(sub[-1])])
    I, J, _ = pair_index(np.asarray(sub, dtype=np.int64))
    sacre_ter = TER()

    def sacre_pairs() -> np.ndarray:
        cache: dict = {}
        for i, j in zip(I.tolist(), J.tolist()):
            if (i, j) not in cache:
                cache[i, j] = sacre_ter.sentence_score(texts[i], [texts[j]]).score / 100.0
        return np.array([cache[i, j] for i, j in zip(I.tolist(), J.tolist())])

    t_sacre, sacre = best_of(sacre_pairs, 1)
    t_ours, ours = best_of(lambda: ter.pair_ter(texts, I, J), args.repeat)
    same = np.array_equal(sacre, ours)
    row = {"hypotheses": nbest.n_hyps, "mbr_bleu_s": times["bleu"], "mbr_ter_s": times["ter"],
           "ter_over_bleu": times["ter"] / times["bleu"], "pairs_sacre": len(I), "pairs_sacrebleu_s": t_sacre,
           "pairs_ours_s": t_ours, "pairs_speedup": t_sacre / t_ours, "identical": bool(same)}
    record["mbr"] = row
    print(f"mbr (test 20-best, {nbest.n_hyps} hypotheses): bleu {times['bleu']:.2f} s, ter {times['ter']:.2f} s = "
          f"{row['ter_over_bleu']:.2f}x; {len(I)} pairs of the first {k} lists: sacrebleu {t_sacre:.2f} s, ours "
          f"{t_ours:.4f} s ({row['pairs_speedup']:.0f}x), identical: {same}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.path.join(HERE, "..", "..", "shared", "data", "multi30k"),
                    help="Multi30k (task1/raw/*.de.gz; default ../shared/data/multi30k)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sacre-limit", type=int, default=400, help="sentences sacrebleu scores in the long cases "
                    "(all 805 of joshua: give 805 or more)")
    ap.add_argument("--mbr-sacre-sentences", type=int, default=20, help="lists whose pairs sacrebleu scores")
    ap.add_argument("--cases", default="corpus,25,long,joshua,tune,mbr")
    ap.add_argument("--json")
    args = ap.parse_args()
    if ter.BACKEND != "c":
        sys.exit("bench_ter: the compiled TER kernel is not built (pip install -e . with a C compiler)")
    cases = set(args.cases.split(","))
    load0 = os.getloadavg()
    record: dict = {"benchmark": "bench_ter", "machine": platform.platform(), "cpus": os.cpu_count(),
                    "command": "python benchmarks/bench_ter.py " + " ".join(sys.argv[1:]), "load_start": load0}
    print(f"load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; TER backend {ter.BACKEND}", flush=True)
    raw = os.path.join(args.data_dir, "task1", "raw")
    test_hyps = firsts(read_nbest(os.path.join(SHIPPED, "optimised.test_2016.20best.gz")))
    val_hyps = firsts(read_nbest(os.path.join(SHIPPED, "optimised.val.20best.gz")))
    test_refs, val_refs = read_lines(os.path.join(raw, "test_2016_flickr.de.gz")), read_lines(os.path.join(raw, "val.de.gz"))
    if "corpus" in cases:
        corpus_case("corpus", test_hyps, test_refs, args, record)
    if "25" in cases:
        corpus_case("25 words", *joined(val_hyps + test_hyps, val_refs + test_refs, 2489, 2), args, record)
    if "long" in cases:
        corpus_case("long", *joined(val_hyps + test_hyps, val_refs + test_refs, 300, 6), args, record)
    if "joshua" in cases:
        joshua_case(args, record)
    if "lists" in cases:
        lists_case(args, record)
    if "tune" in cases:
        tune_case(args, record)
    if "mbr" in cases:
        mbr_case(args, record)
    record["load_end"] = os.getloadavg()
    print(f"load average {record['load_end'][0]:.2f} {record['load_end'][1]:.2f} {record['load_end'][2]:.2f}")
    if args.json:
        with atomic_write(args.json) as out:
            json.dump(record, out, indent=2)


if __name__ == "__main__":
    main()
