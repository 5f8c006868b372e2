"""The tuners of this package as `rerank.tuners` plug-ins: mira (k-best batch MIRA), mert, pro.

Each class adds its options to `rerank tune`, records them in weights.json and runs its
algorithm on rerank.tuning.TuningData. The algorithms are imported when a tuner runs, so that
listing the plug-ins (every `rerank` command does) does not load scikit-learn.
"""

from __future__ import annotations

from rerank.cliargs import nonnegative_float, nonnegative_int, positive_float, positive_int, unit_interval
from rerank.metrics.registry import QUALITY_METRICS
from rerank.tuning import TuneResult, Tuner


ALL_METRICS = QUALITY_METRICS  # every quality metric of the registry (TER minimised)


class KBMiraTuner(Tuner):
    description = ("k-best batch MIRA as Moses kbmira runs it (C=0.01, 60 epochs, averaged weights, background "
                   "BLEU with decay 0.999, best epoch by the corpus metric in its direction; other metrics: sentence-level "
                   "gains)")
    metrics = ALL_METRICS
    step_name = "epoch"

    def add_arguments(self, group):
        group.add_argument("--epochs", type=positive_int, default=60, help="epochs (default 60)")
        group.add_argument("--C", dest="C", type=positive_float, default=0.01, help="step-size cap C (default 0.01)")
        group.add_argument("--decay", type=unit_interval, default=0.999, help="background BLEU decay (default 0.999)")
        group.add_argument("--model-bg", action="store_true", help="background from the model 1-best instead of the hope")
        group.add_argument("--no-shuffle", action="store_true", help="visit sentences in file order")

    def options(self, args):
        return {"epochs": args.epochs, "C": args.C, "decay": args.decay, "model_bg": args.model_bg,
                "shuffle": not args.no_shuffle}

    def tune(self, data, w0, *, seed, options, progress=False, log=None):
        from rerank.mira.kbmira import kbmira

        def show(rec):
            if log is not None:
                log(f"epoch {rec['epoch']}: {data.metric.info.display} {rec['score']:.2f}, {rec['updates']} updates, "
                    f"avg loss {rec['avg_loss']:.4f}")

        res = kbmira(data, w0, seed=seed, progress=progress, on_epoch=show, **options)
        curve = [[h["epoch"], h["score"]] for h in res.history]
        return TuneResult(res.weights, res.initial_score, res.best_score, curve, {"best_epoch": res.best_epoch})


class MertTuner(Tuner):
    description = "Och's MERT with exact line search, random directions and restarts (any metric)"
    metrics = ALL_METRICS
    step_name = "line-search step"

    def add_arguments(self, group):
        group.add_argument("--restarts", type=positive_int, default=20, help="start points: the initial one plus random ones (default 20)")
        group.add_argument("--random-directions", type=nonnegative_int, default=10,
                           help="random directions per iteration besides the coordinates (default 10)")
        group.add_argument("--max-iterations", type=positive_int, default=100, help="line-search rounds per start point (default 100)")

    def options(self, args):
        return {"restarts": args.restarts, "random_directions": args.random_directions,
                "max_iterations": args.max_iterations}

    def tune(self, data, w0, *, seed, options, progress=False, log=None):
        from rerank.mira.mert import mert

        def show(rec):
            if log is not None:
                log(f"start {rec['restart']} iteration {rec['iteration']}: {data.metric.info.display} {rec['score']:.2f}")

        res = mert(data, w0, seed=seed, progress=progress, on_iteration=show, **options)
        curve = [[k + 1, h["score"]] for k, h in enumerate(res.history)]
        return TuneResult(res.weights, res.initial_score, res.best_score, curve)


class ProTuner(Tuner):
    description = "Hopkins & May's pairwise ranking optimisation with logistic regression (pairs by sentence score)"
    metrics = ALL_METRICS
    step_name = "fit"

    def add_arguments(self, group):
        group.add_argument("--pro-samples", type=positive_int, default=5000, help="pairs sampled per sentence (default 5000)")
        group.add_argument("--pro-keep", type=positive_int, default=50, help="pairs kept per sentence (default 50)")
        group.add_argument("--pro-threshold", type=nonnegative_float, default=0.05, help="minimum sentence-BLEU difference (default 0.05)")
        group.add_argument("--pro-C", type=positive_float, default=1.0,
                           help="the logistic regression minimises sum(log-loss over all 2 x kept pairs) + |w|^2 / (2 C): "
                           "C = 1 / lambda of MegaM as Moses runs it; more pairs weaken the L2 term (default 1, as Moses)")

    def options(self, args):
        return {"samples": args.pro_samples, "keep": args.pro_keep, "threshold": args.pro_threshold, "C": args.pro_C}

    def tune(self, data, w0, *, seed, options, progress=False, log=None):
        from rerank.mira.pro import pro

        res = pro(data, w0, seed=seed, **options)
        if log is not None:
            log(f"PRO: {res.n_pairs} pairs")
        return TuneResult(res.weights, res.initial_score, res.best_score, [[1, res.best_score]], {"pairs": res.n_pairs})
