"""Time the paired approximate randomisation test against sacrebleu's PairedTest, in one process.

1,000 Multi30k sentences, 10,000 trials, BLEU + TER (two caption sets of the validation split
play system A and system B). Prints:
- sacrebleu PairedTest (--paired-ar) end to end, and its test part alone (end to end minus
  sacrebleu's own statistics extraction for the same data);
- ours from precomputed statistics, and end to end (statistics through sacrebleu + test);
- the ratios, and METEOR's added cost in the test relative to BLEU's.
p-values of `multeval_compat=True` equal sacrebleu's for the same seed (checked and printed).

    python benchmarks/bench_significance.py --data-dir /work/shared/data/multi30k
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from sacrebleu.metrics import BLEU, TER
from sacrebleu.significance import PairedTest

from rerank.metrics import make_metric
from rerank.significance import approximate_randomization
from rerank.metrics.sacre_stats import corpus_segment_stats


def read(path, n):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [next(fh).rstrip("\n") for _ in range(n)]


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="/work/shared/data/multi30k")
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N for our timings")
    ap.add_argument("--meteor", action="store_true", help="also time METEOR (de, exact+stem) in the test")
    args = ap.parse_args()
    n = args.sentences
    ref = read(os.path.join(args.data_dir, "task1/raw/test_2016_flickr.de.gz"), n)
    hyp_a = read(os.path.join(args.data_dir, "task2/raw/test_2016.1.de.gz"), n)
    hyp_b = read(os.path.join(args.data_dir, "task2/raw/test_2016.2.de.gz"), n)

    # sacrebleu: statistics extraction alone, then the whole PairedTest
    t = time.perf_counter()
    for metric in (BLEU(), TER()):
        corpus_segment_stats(metric, hyp_a, [ref])
        corpus_segment_stats(metric, hyp_b, [ref])
    sb_stats = time.perf_counter() - t
    t = time.perf_counter()
    test = PairedTest([("a", hyp_a), ("b", hyp_b)], {"BLEU": BLEU(), "TER": TER()}, [ref], test_type="ar",
                      n_samples=args.trials)
    _, sb_res = test()
    sb_total = time.perf_counter() - t
    sb_test = max(sb_total - sb_stats, 1e-9)

    bleu, ter = make_metric("bleu"), make_metric("ter")
    t = time.perf_counter()
    sa = [bleu.sentence_stats(hyp_a, [ref]), ter.sentence_stats(hyp_a, [ref])]
    sbb = [bleu.sentence_stats(hyp_b, [ref]), ter.sentence_stats(hyp_b, [ref])]
    our_stats = time.perf_counter() - t
    our_test, res = best_of(lambda: approximate_randomization([bleu, ter], sa, sbb, trials=args.trials, seed=12345,
                                                              multeval_compat=True), args.repeat)
    same = (res[0].p_value == sb_res["BLEU"][1].p_value, res[1].p_value == sb_res["TER"][1].p_value)

    print(f"data: {n} sentences, {args.trials} trials, BLEU+TER")
    print(f"sacrebleu PairedTest: {sb_total:.2f} s end to end ({sb_stats:.2f} s statistics, {sb_test:.2f} s test)")
    print(f"ours: {our_test:.3f} s test from statistics, {our_stats + our_test:.2f} s end to end")
    print(f"ratio test-only (ours / sacrebleu): {our_test / sb_test:.4f}")
    print(f"ratio end to end (ours / sacrebleu): {(our_stats + our_test) / sb_total:.3f}")
    print(f"p-values (BLEU, TER): ours {res[0].p_value:.4f} {res[1].p_value:.4f}, sacrebleu "
          f"{sb_res['BLEU'][1].p_value:.4f} {sb_res['TER'][1].p_value:.4f}, identical: {same}")

    t_bleu, _ = best_of(lambda: approximate_randomization(bleu, sa[0], sbb[0], trials=args.trials), args.repeat)
    t_ter, _ = best_of(lambda: approximate_randomization(ter, sa[1], sbb[1], trials=args.trials), args.repeat)
    print(f"test time per metric: BLEU {t_bleu:.3f} s, TER {t_ter:.3f} s")
    if args.meteor:
        meteor = make_metric("meteor", lang="de", meteor_options={"modules": ["exact", "stem"]})
        ma, mb = meteor.sentence_stats(hyp_a, [ref]), meteor.sentence_stats(hyp_b, [ref])
        t_met, _ = best_of(lambda: approximate_randomization(meteor, ma, mb, trials=args.trials), args.repeat)
        t_both, _ = best_of(lambda: approximate_randomization([bleu, meteor], [sa[0], ma], [sbb[0], mb],
                                                            trials=args.trials), args.repeat)
        print(f"METEOR alone {t_met:.3f} s = {t_met / t_bleu:.2f}x BLEU; BLEU+METEOR together {t_both:.3f} s "
              f"(METEOR adds {(t_both - t_bleu) / t_bleu:.2f}x BLEU's time)")


if __name__ == "__main__":
    main()
