"""Calibration of the significance tests under the null, and their power on planted improvements.

One command makes the whole table (Markdown OUT.md, and OUT.json with the resolved configuration):

    python benchmarks/bench_calibration.py --out docs/results/calibration

Null model: the shipped Multi30k test_2016 20-best list (optimised flavour), each sentence's first
4 hypotheses in list order. Each run of each system picks one of the 4 uniformly at random per
sentence, so the two systems of a pair are exchangeable sentence by sentence. Statistics of every
hypothesis are computed once per metric (BLEU, chrF, TER, METEOR de exact+stem, and an external
segment score: each hypothesis's sentence chrF through `SegmentScoresMetric`; with --comet-model, COMET
computed here, `rerank.metrics.comet.COMETMetric`, the COMET-style column); a simulation only
gathers rows.

Layouts (runs of A vs runs of B): 1 vs 1, 3 vs 3, 1 vs 3 (a deterministic baseline against
3-run systems, as `rerank demo` has it) and 2 vs 3. Tests (`rerank.significance`):
- AR: `approximate_randomization` (paired for 1 vs 1, stratified otherwise);
- AR, MultEval rules: `multeval_compat=True` (refuses 2 vs 3);
- bootstrap: `paired_bootstrap` (p inverts the percentile interval);
- bootstrap, sacrebleu rule: `sacrebleu_compat=True`.
All five metrics of one AR call share its random splits (as the CLI does). Every simulation has
its own seed for the test's draws. Per cell: rejection rate at alpha = 0.05 and 0.01, the
binomial 99% band of alpha, the KS p-value of uniformity (p-values are on a grid, (c + 1)/(N + 1),
so each is spread uniformly over its grid cell, seeded, before `scipy.stats.kstest`).

Also:
- sacrebleu's own `PairedTest` (--paired-ar, --paired-bs; BLEU, chrF, TER) on the first
  `--sacrebleu-sims` 1 vs 1 null pairs with the same seeds: its p-values against ours;
- power: B's picks replaced by each sentence's sentence-BLEU-best of the 4, on sentences taken in
  a random order, until B's corpus BLEU (mean over its runs) gained +0.5 or +1.0 over its own
  null picks; the rate of p < 0.05 with the improvement in the metric's direction;
- mixed tables: `rerank.evaluation.evaluate_systems` on texts, a pair alone and in a table with
  systems of other run counts (and metrics in another order): the pair's p must not change.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NBEST = "rerank/data/multi30k/optimised.test_2016.20best.gz"
REFS = "rerank/data/multi30k/test_2016_flickr.de.gz"
SOURCES = "rerank/data/multi30k/test_2016_flickr.en.gz"   # for the COMET column (--comet-model)
# (runs of A, runs of B, correlated): independent runs, or runs that share a system's picks except
# where a run re-draws (REDRAW of the sentences), as tuning runs agree on most sentences
LAYOUTS = [(1, 1, False), (3, 3, False), (1, 3, False), (2, 3, False), (3, 3, True), (1, 3, True)]
POWER_LAYOUTS = LAYOUTS[:4]
REDRAW = 0.1
METRICS = ["bleu", "chrf", "ter", "meteor", "segchrf"]
DISPLAY = {"bleu": "BLEU", "chrf": "chrF", "ter": "TER", "meteor": "METEOR", "segchrf": "segment chrF (external)"}
TESTS = ["ar", "ar_stratified", "ar_multeval", "bs", "bs_sacrebleu"]
TEST_NAMES = {"ar": "AR (default: paired, runs averaged)", "ar_stratified": "AR, stratified split (`--stratified`)",
              "ar_multeval": "AR, MultEval rules (`--multeval-compat`)",
              "bs": "bootstrap (default: percentile)",
              "bs_sacrebleu": "bootstrap, sacrebleu rule (`--sacrebleu-compat`)"}
DEFAULT_TESTS = ("ar", "bs")
ALPHAS = (0.05, 0.01)
TARGETS = (0.5, 1.0)
SACRE_NAMES = {"bleu": "BLEU", "chrf": "chrF2", "ter": "TER"}
# SeedSequence keys of the independent random streams
PICKS, TEST_SEED, POWER_PICKS, POWER_SEED, PLANT, JITTER, MIXED = range(7)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sims", type=int, default=600, help="simulated null pairs per layout (default 600)")
    ap.add_argument("--power-sims", type=int, default=100, help="simulated pairs per layout and planted gain")
    ap.add_argument("--trials", type=int, default=1000, help="AR trials per test")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per test")
    ap.add_argument("--sentences", type=int, default=None, help="first N sentences (default: all 1,000)")
    ap.add_argument("--top", type=int, default=4, help="hypotheses per sentence a run picks from")
    ap.add_argument("--sacrebleu-sims", type=int, default=20,
                    help="1 vs 1 null pairs also run through sacrebleu's PairedTest (ar and bs)")
    ap.add_argument("--mixed-sims", type=int, default=2, help="simulations of the mixed-table invariance check")
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads (default 1)")
    ap.add_argument("--out", default="calibration", help="output prefix: OUT.md and OUT.json")
    ap.add_argument("--comet-model", metavar="PATH", help="a reference-based COMET checkpoint: adds the COMET-style "
                    "column, COMET computed here (rerank.metrics.comet) of each hypothesis against the reference and "
                    "its source (needs the [comet] extra, e.g. .venv-compat; default: no such column)")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    for name in ("sims", "trials", "resamples", "top"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    if args.comet_model:  # one more metric column, after the others
        METRICS.append("comet")
        DISPLAY["comet"] = "COMET (computed here)"
    bench = Calibration(args)
    bench.run()
    bench.write()


class Calibration:
    def __init__(self, args):
        import numpy as np

        self.np = np
        self.args = args
        self.timings: dict[str, float] = {}
        self.load: dict[str, list[float]] = {"start": list(os.getloadavg())}
        self.t0 = time.perf_counter()

    # ----------------------------------------------------------------- set-up
    def seed(self, *keys) -> int:
        """A non-zero 31-bit seed of the stream `keys` (sacrebleu reads seed 0 as no seed)."""
        state = self.np.random.SeedSequence([self.args.seed, *keys]).generate_state(1)[0]
        return int(state % (2**31 - 1)) + 1

    def rng(self, *keys):
        return self.np.random.default_rng(self.np.random.SeedSequence([self.args.seed, *keys]))

    def prepare(self):
        np = self.np
        import rerank.metrics.external  # every library module the run uses, loaded once at the start
        import rerank.evaluation
        import rerank.significance  # noqa: F401
        import sacrebleu.significance  # noqa: F401
        from rerank.formats import read_nbest
        from rerank.io import iter_lines
        from rerank.metrics import make_metric
        from rerank.metrics.external import SegmentScoresMetric

        t = time.perf_counter()
        nb = read_nbest(os.path.join(ROOT, NBEST))
        refs = [line for _, line in iter_lines(os.path.join(ROOT, REFS))]
        n = min(self.args.sentences or nb.n_sentences, nb.n_sentences)
        top = self.args.top
        if int(np.diff(nb.offsets)[:n].min()) < top:
            raise SystemExit(f"some sentence has fewer than {top} hypotheses")
        self.n, self.refs = n, refs[:n]
        self.hyps = [[nb.hyps[int(nb.offsets[i]) + j] for i in range(n)] for j in range(top)]  # hyps[j][i]
        meteor_options = {"modules": ["exact", "stem"]}  # only paraphrase-en is on these machines
        self.metrics = {name: make_metric(name, lang="de", meteor_options=meteor_options) for name in METRICS[:4]}
        all_texts = [h for run in self.hyps for h in run] + self.refs
        self.H = {}
        for name, metric in self.metrics.items():
            metric.prepare(all_texts)
            self.H[name] = np.stack([metric.sentence_stats(h, [self.refs]) for h in self.hyps], axis=1)  # (n, top, k)
        seg = np.asarray(self.metrics["chrf"].score_from_stats(self.H["chrf"]))  # sentence chrF of each hypothesis
        self.segment = seg
        self.H["segchrf"] = np.stack([seg, np.ones_like(seg)], axis=-1)
        self.metrics["segchrf"] = SegmentScoresMetric("segchrf", {})
        if "comet" in METRICS:  # every hypothesis scored once, then gathered like the others' statistics
            from rerank.metrics.comet import COMETMetric

            sources = [line for _, line in iter_lines(os.path.join(ROOT, SOURCES))][:n]
            comet = self.metrics["comet"] = COMETMetric(self.args.comet_model, sources, batch_size=32)
            comet.prepare_systems(self.hyps, [self.refs])
            self.H["comet"] = np.stack([comet.sentence_stats(h, [self.refs]) for h in self.hyps], axis=1)
        self.metric_list = [self.metrics[m] for m in METRICS]
        self.sign = np.array([1.0 if self.metrics[m].higher_is_better else -1.0 for m in METRICS])
        # sentence-BLEU (sacrebleu's sentence_bleu: exp smoothing, effective order) of each hypothesis
        from sacrebleu.metrics import BLEU

        sent_bleu = BLEU(effective_order=True)
        flat = self.H["bleu"].reshape(-1, self.H["bleu"].shape[-1])
        sb = np.array([sent_bleu._compute_score_from_stats(list(row)).score for row in flat]).reshape(n, top)
        self.best = sb.argmax(axis=1)
        self.timings["statistics"] = time.perf_counter() - t

    # ----------------------------------------------------------------- tests
    def gather(self, picks):
        """Each metric's statistics (R, n, k) of runs that pick hypothesis picks[r, i] of sentence i."""
        rows = self.np.arange(self.n)[None, :]
        return [self.H[m][rows, picks] for m in METRICS]

    def run_tests(self, pa, pb, test_seed, multeval=True):
        """{test: (p-values, improvements in the metric's direction)} of one pair, each (metrics,)."""
        np = self.np
        from rerank.significance import approximate_randomization, bootstrap_weights, paired_bootstrap, run_scores

        A, B = self.gather(pa), self.gather(pb)
        ra, rb = len(pa), len(pb)
        out = {}
        for test, options in (("ar", {}), ("ar_stratified", {"stratified": True})):
            res = approximate_randomization(self.metric_list, A, B, trials=self.args.trials, seed=test_seed, **options)
            out[test] = (np.array([r.p_value for r in res]), self.sign * np.array([r.observed_diff for r in res]))
        if multeval and (ra == rb or min(ra, rb) == 1):
            res = approximate_randomization(self.metric_list, A, B, trials=self.args.trials, seed=test_seed,
                                            multeval_compat=True)
            out["ar_multeval"] = (np.array([r.p_value for r in res]),
                                  self.sign * np.array([r.observed_diff for r in res]))
        weights = bootstrap_weights(np.random.default_rng(test_seed), self.args.resamples, self.n)
        mean_diff = self.sign * np.array([run_scores(m, b).mean() - run_scores(m, a).mean()
                                          for m, a, b in zip(self.metric_list, A, B)])
        for test, compat in (("bs", False), ("bs_sacrebleu", True)):
            p = [paired_bootstrap(m, a, b, weights, sacrebleu_compat=compat).p_value
                 for m, a, b in zip(self.metric_list, A, B)]
            out[test] = (np.array(p), mean_diff)
        return out

    def plant(self, pb, target, rng):
        """B's picks with the sentence-BLEU-best hypothesis swapped in on sentences taken in a random
        order until B's corpus BLEU (mean over runs) gained `target`; (picks, BLEU gain, sentences)."""
        np = self.np
        bleu, H = self.metrics["bleu"], self.H["bleu"]
        rows = np.arange(self.n)
        perm = rng.permutation(self.n)
        base = H[rows[None, :], pb]  # (R, n, k)
        delta = (H[rows, self.best][None] - base)[:, perm]
        steps = np.concatenate([np.zeros_like(delta[:, :1]), np.cumsum(delta, axis=1)], axis=1)
        totals = base.sum(axis=1)[:, None, :] + steps
        scores = np.asarray(bleu.score_from_stats(totals))  # (R, n + 1): after the first j sentences
        gain = scores.mean(axis=0) - scores[:, 0].mean()
        reached = np.flatnonzero(gain >= target - 1e-12)
        if not len(reached):
            raise RuntimeError(f"the top-{self.args.top} oracle cannot add {target} BLEU (at most {gain.max():.2f})")
        j = int(reached[0])
        new = pb.copy()
        new[:, perm[:j]] = self.best[perm[:j]]
        return new, float(gain[j]), j

    # ----------------------------------------------------------------- phases
    def run(self):
        from tqdm import tqdm

        self.prepare()
        a = self.args
        total = (len(LAYOUTS) * a.sims + len(POWER_LAYOUTS) * len(TARGETS) * a.power_sims
                 + min(a.sacrebleu_sims, a.sims) + a.mixed_sims)
        bar = tqdm(total=total, unit="sim", file=sys.stderr, disable=a.no_progress, smoothing=0.05)
        phases = [("null", self.run_null), ("power", self.run_power),
                  ("sacrebleu", lambda bar: self.run_sacrebleu(min(a.sacrebleu_sims, a.sims), bar)),
                  ("mixed tables", lambda bar: self.run_mixed(a.mixed_sims, bar))]
        for name, phase in phases:
            t = time.perf_counter()
            phase(bar)
            self.timings[name] = time.perf_counter() - t
            self.load[f"after {name}"] = list(os.getloadavg())
        bar.close()
        self.timings["total"] = time.perf_counter() - self.t0
        self.load["end"] = list(os.getloadavg())

    def pair(self, kind, li, *keys):
        np = self.np
        """Null picks (R_A, n) and (R_B, n) of simulation `keys` of layout `li`."""
        ra, rb, correlated = LAYOUTS[li]
        rng = self.rng(kind, li, *keys)
        if not correlated:
            return rng.integers(self.args.top, size=(ra, self.n)), rng.integers(self.args.top, size=(rb, self.n))
        out = []
        for runs in (ra, rb):  # a system's picks, re-drawn by each run on about REDRAW of the sentences
            base = rng.integers(self.args.top, size=self.n)
            redraw = rng.random((runs, self.n)) < REDRAW
            out.append(np.where(redraw, rng.integers(self.args.top, size=(runs, self.n)), base[None, :]))
        return tuple(out)

    def run_null(self, bar):
        """self.null[layout][test]: p-values (sims, metrics) of simulated null pairs."""
        self.null = {}
        for li, layout in enumerate(LAYOUTS):
            bar.set_description(f"null {label(layout)}")
            cell = {}
            for s in range(self.args.sims):
                pa, pb = self.pair(PICKS, li, s)
                for test, (p, _) in self.run_tests(pa, pb, self.seed(TEST_SEED, li, s), not layout[2]).items():
                    cell.setdefault(test, []).append(p)
                bar.update()
            self.null[layout] = {test: self.np.array(v) for test, v in cell.items()}

    def run_power(self, bar):
        """self.power[(R_A, R_B, target)][test]: (sims, metrics) booleans, p < 0.05 with the
        improvement in the metric's direction; self.plant_info: the realised gains."""
        np = self.np
        self.power, self.plant_info = {}, {}
        for li, layout in enumerate(POWER_LAYOUTS):
            for ti, target in enumerate(TARGETS):
                bar.set_description(f"power +{target} {label(layout)}")
                cell, gains, sizes, metric_gains = {}, [], [], []
                for s in range(self.args.power_sims):
                    pa, pb = self.pair(POWER_PICKS, li, ti, s)
                    planted, gain, size = self.plant(pb, target, self.rng(PLANT, li, ti, s))
                    gains.append(gain)
                    sizes.append(size)
                    metric_gains.append(self.metric_gain(pb, planted))
                    for test, (p, gain_m) in self.run_tests(pa, planted, self.seed(POWER_SEED, li, ti, s)).items():
                        cell.setdefault(test, []).append((p < 0.05) & (gain_m > 0))
                    bar.update()
                self.power[(layout, target)] = {test: np.array(v) for test, v in cell.items()}
                self.plant_info[(layout, target)] = {"bleu_gain": np.array(gains), "sentences": np.array(sizes),
                                                      "metric_gain": np.array(metric_gains)}

    def metric_gain(self, before, after):
        """Gain (metric direction, mean over runs) of every metric from B's picks `before` to `after`."""
        from rerank.significance import run_scores

        pairs = zip(self.metric_list, self.gather(before), self.gather(after))
        return self.sign * self.np.array([run_scores(m, y).mean() - run_scores(m, x).mean() for m, x, y in pairs])

    def texts(self, picks):
        return [[self.hyps[j][i] for i, j in enumerate(run)] for run in picks]

    def run_sacrebleu(self, sims, bar):
        """self.sacre: sacrebleu's PairedTest (ar, bs) on the first `sims` 1 vs 1 null pairs, with
        their seeds, against our MultEval-rule AR and sacrebleu-rule bootstrap p-values."""
        import logging

        logging.getLogger("sacrebleu").setLevel(logging.WARNING)
        saved = os.environ.get("SACREBLEU_SEED")
        try:
            out = self.sacrebleu_p_values(sims, bar)
        finally:
            if saved is None:
                os.environ.pop("SACREBLEU_SEED", None)
            else:
                os.environ["SACREBLEU_SEED"] = saved
        np, ours = self.np, self.null[(1, 1, False)]
        self.sacre = {}
        for test, ours_test in (("ar", "ar_multeval"), ("bs", "bs_sacrebleu")):
            for m in SACRE_NAMES:
                sb, mine = np.array(out[test][m]), ours[ours_test][:sims, METRICS.index(m)]
                self.sacre[(test, m)] = {"pairs": sims, "identical": int((sb == mine).sum()),
                                         "max_abs_diff": float(np.abs(sb - mine).max()) if sims else 0.0,
                                         "reject_0.05": float((sb < 0.05).mean()) if sims else None,
                                         "ours_reject_0.05": float((mine < 0.05).mean()) if sims else None}

    def sacrebleu_p_values(self, sims, bar):
        """{test: {metric: [p, ...]}} of sacrebleu's PairedTest on the texts of the first `sims`
        1 vs 1 null pairs, seeded (SACREBLEU_SEED) as our tests of those pairs."""
        from sacrebleu.metrics import BLEU, CHRF, TER
        from sacrebleu.significance import PairedTest

        li = LAYOUTS.index((1, 1, False))
        out = {"ar": {m: [] for m in SACRE_NAMES}, "bs": {m: [] for m in SACRE_NAMES}}
        for s in range(sims):
            pa, pb = self.pair(PICKS, li, s)
            os.environ["SACREBLEU_SEED"] = str(self.seed(TEST_SEED, li, s))
            systems = [("A", self.texts(pa)[0]), ("B", self.texts(pb)[0])]
            for test, samples in (("ar", self.args.trials), ("bs", self.args.resamples)):
                metrics = {"BLEU": BLEU(), "chrF": CHRF(), "TER": TER()}
                _, res = PairedTest(systems, metrics, [self.refs], test_type=test, n_samples=samples)()
                for m, key in SACRE_NAMES.items():
                    out[test][m].append(res[key][1].p_value)
            bar.update()
        return out

    def run_mixed(self, sims, bar):
        """self.mixed: a pair's p (AR and bootstrap) from evaluate_systems alone, in a table with
        systems of other run counts and the metrics in another order, and from the pair test on
        the gathered statistics."""
        runs = {"baseline": 1, "B": 3, "E": 1, "C": 3, "D": 2}
        same = {"table": 0, "direct": 0}
        cells, max_diff = 0, 0.0
        for s in range(sims):
            rng = self.rng(MIXED, s)
            picks = {name: rng.integers(self.args.top, size=(r, self.n)) for name, r in runs.items()}
            seed = self.seed(MIXED, s, 1)
            for alone, inside, direct in self.mixed_cells(picks, seed):
                cells += 1
                same["table"] += alone == inside
                same["direct"] += alone == direct
                max_diff = max(max_diff, *(abs(x - y) for x, y in zip(alone, inside + direct)))
            bar.update()
        self.mixed = {"sims": sims, "cells": cells, "same_in_mixed_table": same["table"],
                      "same_as_pair_test": same["direct"], "max_abs_diff": max_diff,
                      "table": "baseline 1 run; B 3 runs and E 1 run tested against it, alone and next to C (3 runs) "
                               "and D (2 runs) with the metrics in reverse order"}

    def mixed_cells(self, picks, seed):
        """(alone, in the mixed table, pair test) (AR p, bootstrap p) of B and E against the
        baseline, for every metric; the external metric reads its columns by system name."""
        np = self.np
        from rerank.metrics.external import SegmentScoresMetric
        from rerank.evaluation import evaluate_systems
        from rerank.significance import approximate_randomization, bootstrap_weights, paired_bootstrap

        columns = {}
        for name, p in picks.items():
            for r, run in enumerate(p):
                columns[name if len(p) == 1 else f"{name}.run{r + 1}"] = self.segment[np.arange(self.n), run]
        metrics = ([self.metrics[m] for m in METRICS[:4]] + [SegmentScoresMetric("segchrf", columns)]
                   + [self.metrics[m] for m in METRICS[5:]])
        texts = {name: self.texts(p) for name, p in picks.items()}
        common = {"ar": self.args.trials, "bootstrap": self.args.resamples, "seed": seed, "lang": "de"}
        full = evaluate_systems([self.refs], texts["baseline"], {k: texts[k] for k in ("C", "B", "D", "E")},
                                metrics=metrics[::-1], **common)
        weights = bootstrap_weights(np.random.default_rng(seed), self.args.resamples, self.n)
        out = []
        for pair in ("B", "E"):
            table = evaluate_systems([self.refs], texts["baseline"], {pair: texts[pair]}, metrics=metrics, **common)
            A, B = self.gather(picks["baseline"]), self.gather(picks[pair])
            direct = approximate_randomization(self.metric_list, A, B, trials=self.args.trials, seed=seed)
            for i, m in enumerate(METRICS):
                alone, inside = table.cells[(pair, m)], full.cells[(pair, m)]
                out.append(((alone.p, alone.bs_p), (inside.p, inside.bs_p),
                            (direct[i].p_value, paired_bootstrap(self.metric_list[i], A[i], B[i], weights).p_value)))
        return out

    # ----------------------------------------------------------------- output
    def band(self, alpha, sims):
        from scipy.stats import binom

        lo, hi = binom.interval(0.99, sims, alpha)
        return int(lo), int(hi)

    def ks(self, p, test, key):
        """KS p-value of uniformity, each p spread uniformly over its grid cell (seeded)."""
        from scipy.stats import kstest

        np = self.np
        if test.startswith("ar"):
            step = 1.0 / (self.args.trials + 1)
        elif test == "bs":
            step = 2.0 / (self.args.resamples + 1)
        else:
            step = 1.0 / (self.args.resamples + 1)
        u = self.rng(JITTER, *key).random(len(p))
        return float(kstest(np.clip(p - u * step, 0.0, 1.0), "uniform").pvalue)

    def summary(self):
        a = self.args
        null = {}
        bands = {alpha: self.band(alpha, a.sims) for alpha in ALPHAS}
        for li, layout in enumerate(LAYOUTS):
            for ti, test in enumerate(TESTS):
                if test not in self.null[layout]:
                    continue
                ps = self.null[layout][test]
                for mi, m in enumerate(METRICS):
                    p = ps[:, mi]
                    rec = {"ks_p": self.ks(p, test, (li, ti, mi)), "mean_p": float(p.mean())}
                    for alpha in ALPHAS:
                        c = int((p < alpha).sum())
                        lo, hi = bands[alpha]
                        rec[f"reject_{alpha}"] = c / len(p)
                        rec[f"count_{alpha}"] = c
                        rec[f"in_band_{alpha}"] = lo <= c <= hi
                    null[(layout, test, m)] = rec
        power = {}
        for (layout, target), cell in self.power.items():
            for test, hits in cell.items():
                for mi, m in enumerate(METRICS):
                    power[(layout, test, m, target)] = float(hits[:, mi].mean())
        plant = {}
        for (layout, target), info in self.plant_info.items():
            plant[(layout, target)] = {
                "bleu_gain_mean": float(info["bleu_gain"].mean()), "bleu_gain_min": float(info["bleu_gain"].min()),
                "bleu_gain_max": float(info["bleu_gain"].max()), "sentences_mean": float(info["sentences"].mean()),
                "metric_gain_mean": {m: float(info["metric_gain"][:, mi].mean()) for mi, m in enumerate(METRICS)}}
        return null, power, plant, bands

    def config(self):
        import numpy
        import sacrebleu
        import scipy

        a = self.args
        return {"command": self.command(), "nbest": NBEST, "references": REFS, "sentences": self.n, "top": a.top,
                "sims": a.sims, "power_sims": a.power_sims, "trials": a.trials, "resamples": a.resamples,
                "sacrebleu_sims": min(a.sacrebleu_sims, a.sims), "mixed_sims": a.mixed_sims, "seed": a.seed,
                "threads": a.threads, "layouts": [label(x) for x in LAYOUTS], "redraw": REDRAW, "metrics": METRICS,
                "tests": TESTS, "alphas": ALPHAS,
                "targets": TARGETS,
                "signatures": {m: self.metrics[m].signature() for m in METRICS if m != "segchrf"},
                "segchrf": "sentence chrF of each hypothesis (sacrebleu CHRF statistics), as external segment scores",
                **({"comet": {"model": a.comet_model, "class": self.metrics["comet"].kind,
                              "what": "COMET computed here (rerank.metrics.comet): each hypothesis's segment score "
                                      "against the reference, given the source (test_2016_flickr.en)"}}
                   if "comet" in METRICS else {}),
                "versions": {"python": platform.python_version(), "numpy": numpy.__version__,
                             "scipy": scipy.__version__, "sacrebleu": sacrebleu.__version__},
                "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}

    def command(self):
        a, d = self.args, parse_args([])
        parts = ["python", "benchmarks/bench_calibration.py"]
        for name in ("sims", "power_sims", "trials", "resamples", "sentences", "top", "sacrebleu_sims", "mixed_sims",
                     "seed", "threads"):
            if getattr(a, name) != getattr(d, name):
                parts += [f"--{name.replace('_', '-')}", str(getattr(a, name))]
        if a.comet_model:
            model = os.path.relpath(os.path.abspath(a.comet_model), os.path.abspath(ROOT))
            parts += ["--comet-model", model if not model.startswith("..") else a.comet_model]
        out = os.path.relpath(os.path.abspath(a.out), os.path.abspath(ROOT))
        parts += ["--out", out if not out.startswith("..") else a.out]
        return " ".join(shlex.quote(p) for p in parts)

    def write(self):
        null, power, plant, bands = self.summary()
        md = self.markdown(null, power, plant, bands)
        out = self.args.out
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        key = lambda k: " | ".join(label(x) if isinstance(x, tuple) else str(x) for x in k)  # noqa: E731
        record = {"config": self.config(), "timings_seconds": {k: round(v, 1) for k, v in self.timings.items()},
                  "load_average": self.load,
                  "bands_99": {str(alpha): [lo / self.args.sims, hi / self.args.sims]
                               for alpha, (lo, hi) in bands.items()},
                  "null": {key(k): v for k, v in null.items()},
                  "power": {key(k): v for k, v in power.items()},
                  "planted": {key(k): v for k, v in plant.items()},
                  "sacrebleu": {key(k): v for k, v in self.sacre.items()},
                  "mixed_tables": self.mixed,
                  "outside_band_default_tests": self.outside(null, DEFAULT_TESTS)}
        with open(out + ".json", "w", encoding="utf-8") as fh:
            json.dump(record, fh, indent=1)
            fh.write("\n")
        with open(out + ".md", "w", encoding="utf-8") as fh:
            fh.write(md)
        print(md)
        print(f"wrote {out}.md and {out}.json", file=sys.stderr)

    @staticmethod
    def outside(null, tests):
        return [f"{label(k[0])} {k[1]} {k[2]}: {v['reject_0.05']:.3f} at 0.05, {v['reject_0.01']:.3f} at 0.01"
                for k, v in null.items() if k[1] in tests and not (v["in_band_0.05"] and v["in_band_0.01"])]

    def markdown(self, null, power, plant, bands):
        a = self.args
        lines = [f"Made by `{self.command()}` in {self.timings['total'] / 60:.1f} minutes "
                 f"({a.threads} thread{'s' if a.threads > 1 else ''}; load average (1/5/15 min) "
                 f"{self._load('start')} at the start, {self._load('end')} at the end; {os.cpu_count()} CPUs).", ""]
        lines += self.null_table(null, bands) + [""] + self.power_table(power) + [""] + self.planted_table(plant)
        lines += [""] + self.sacrebleu_table()
        mx = self.mixed
        lines += ["", f"Mixed tables ({mx['sims']} simulations, `evaluate_systems` on texts; {mx['table']}): the "
                  f"pair's AR p and bootstrap p are the same in the larger table in "
                  f"{mx['same_in_mixed_table']}/{mx['cells']} cells and equal the pair test on the gathered "
                  f"statistics in {mx['same_as_pair_test']}/{mx['cells']} (largest difference "
                  f"{mx['max_abs_diff']:.1g}).", ""]
        outside = self.outside(null, DEFAULT_TESTS)
        lines.append("Default tests outside the 99% band: " + ("; ".join(outside) if outside else "none") + ".")
        return "\n".join(lines) + "\n"

    @staticmethod
    def header(first):
        return [f"| A vs B runs | {first} | " + " | ".join(DISPLAY[m] for m in METRICS) + " |",
                "|---|---|" + "---|" * len(METRICS)]

    def null_table(self, null, bands):
        a = self.args
        band = lambda alpha: f"[{_pct(bands[alpha][0] / a.sims)}, {_pct(bands[alpha][1] / a.sims)}]"  # noqa: E731
        lines = [f"Null: {a.sims} simulated pairs per layout, {self.n} sentences, {a.trials} AR trials, "
                 f"{a.resamples} bootstrap resamples. Cells: % of pairs rejected at α = 0.05 / at α = 0.01 "
                 f"(KS p of uniform p-values). Binomial 99% band: α = 0.05 {band(0.05)}, α = 0.01 {band(0.01)}; "
                 "**bold**: outside the band.", ""] + self.header("test")
        for layout in LAYOUTS:
            for test in TESTS:
                row = f"| {label(layout)} | {TEST_NAMES[test]} | "
                if (layout, test, METRICS[0]) not in null:
                    why = "not run (independent runs only)" if layout[2] else "refused (2 and 3 runs)"
                    lines.append(row + " | ".join(why for _ in METRICS) + " |")
                    continue
                cells = []
                for m in METRICS:
                    r = null[(layout, test, m)]
                    parts = [_pct(r[f"reject_{alpha}"]) if r[f"in_band_{alpha}"]
                             else f"**{_pct(r[f'reject_{alpha}'])}**" for alpha in ALPHAS]
                    cells.append(f"{parts[0]} / {parts[1]} ({self._p(r['ks_p'])})")
                lines.append(row + " | ".join(cells) + " |")
        return lines

    def power_table(self, power):
        lines = [f"Power: {self.args.power_sims} pairs per layout and planted gain; % with p < 0.05 and the "
                 "improvement in the metric's direction, planted +0.5 / +1.0 BLEU (B's corpus BLEU, mean over its "
                 "runs, over its own null picks).", ""] + self.header("test")
        for layout in POWER_LAYOUTS:
            for test in TESTS:
                if (layout, test, METRICS[0], TARGETS[0]) in power:
                    cells = [" / ".join(_pct(power[(layout, test, m, t)]) for t in TARGETS) for m in METRICS]
                    lines.append(f"| {label(layout)} | {TEST_NAMES[test]} | " + " | ".join(cells) + " |")
        return lines

    def planted_table(self, plant):
        lines = ["Realised planted gains (mean over pairs; BLEU gain min–max; sentences swapped):", "",
                 "| A vs B runs | target | " + " | ".join(DISPLAY[m] for m in METRICS)
                 + " | BLEU min–max | sentences |",
                 "|---|---|" + "---|" * (len(METRICS) + 2)]
        for layout in POWER_LAYOUTS:
            for t in TARGETS:
                info = plant[(layout, t)]
                lines.append(f"| {label(layout)} | +{t} | "
                             + " | ".join(f"{info['metric_gain_mean'][m]:+.2f}" for m in METRICS)
                             + f" | {info['bleu_gain_min']:.2f}–{info['bleu_gain_max']:.2f} | "
                             f"{info['sentences_mean']:.0f} |")
        return lines

    def sacrebleu_table(self):
        sims = min(self.args.sacrebleu_sims, self.args.sims)
        lines = [f"sacrebleu {self._version()} `PairedTest` on the first {sims} 1 vs 1 null pairs, same seeds "
                 "(`SACREBLEU_SEED`): its p-values against ours.", "",
                 "| sacrebleu | ours | metric | identical p | sacrebleu rejects at 0.05 | ours (same pairs) |",
                 "|---|---|---|---|---|---|"]
        for test, ours in (("ar", "`multeval_compat=True`"), ("bs", "`sacrebleu_compat=True`")):
            for m in SACRE_NAMES:
                r = self.sacre[(test, m)]
                lines.append(f"| --paired-{test} | {ours} | {DISPLAY[m]} | {r['identical']}/{r['pairs']} | "
                             f"{_pct(r['reject_0.05'])} | {_pct(r['ours_reject_0.05'])} |")
        return lines

    def _load(self, key):
        return "/".join(f"{x:.2f}" for x in self.load[key])

    @staticmethod
    def _p(p):
        return f"{p:.2f}" if p >= 0.01 else f"{p:.0e}" if p >= 1e-99 else "<1e-99"

    @staticmethod
    def _version():
        import sacrebleu

        return sacrebleu.__version__


def label(layout):
    return f"{layout[0]} vs {layout[1]}" + (", correlated runs" if layout[2] else "")


def _pct(x):
    return f"{100 * x:.1f}"


if __name__ == "__main__":
    main()
