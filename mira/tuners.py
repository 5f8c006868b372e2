"""The tuners of this package as `rerank.tuners` plug-ins: mira (k-best batch MIRA), mert, pro.

Each class declares its options as a dataclass (`Options`), adds them as flags to `rerank tune`,
and runs its algorithm on rerank.tuning.TuningData. The algorithms are imported when a tuner
runs, so that listing the plug-ins (every `rerank` command does) does not load scikit-learn
(PRO's, of the `neural` extra).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from rerank.cliargs import nonnegative_float, nonnegative_int, positive_float, positive_int, unit_interval
from rerank.errors import needs_neural
from rerank.metrics.registry import QUALITY_METRICS
from rerank.tuning import TuneResult, Tuner


ALL_METRICS = QUALITY_METRICS  # every quality metric of the registry (TER minimised)


@dataclass(frozen=True)
class KBMiraOptions:
    epochs: int = 60
    C: float = 0.01                   # step-size cap
    decay: float = 0.999              # background BLEU decay
    model_bg: bool = False            # background from the model 1-best instead of the hope
    shuffle: bool = True              # visit sentences in random order (False: file order)


@dataclass(frozen=True)
class MertOptions:
    restarts: int = 20                # start points: the initial one plus random ones
    random_directions: int = 10       # random directions per iteration besides the coordinates
    max_iterations: int = 100         # line-search rounds per start point


@dataclass(frozen=True)
class ProOptions:
    samples: int = 5000               # pairs sampled per sentence
    keep: int = 50                    # pairs kept per sentence
    threshold: float = 0.05           # minimum sentence-metric difference of a pair
    C: float = 1.0                    # inverse L2 strength of the logistic regression (Moses' default)


class KBMiraTuner(Tuner):
    description = ("k-best batch MIRA as Moses kbmira runs it (C=0.01, 60 epochs, averaged weights, background "
                   "BLEU with decay 0.999, best epoch by the corpus metric in its direction; other metrics: sentence-level "
                   "gains)")
    metrics = ALL_METRICS
    step_name = "epoch"
    Options = KBMiraOptions

    def add_arguments(self, group):
        group.add_argument("--epochs", type=positive_int, default=60, help="epochs (default 60)")
        group.add_argument("--C", dest="C", type=positive_float, default=0.01, help="step-size cap C (default 0.01)")
        group.add_argument("--decay", type=unit_interval, default=0.999, help="background BLEU decay (default 0.999)")
        group.add_argument("--model-bg", action="store_true", help="background from the model 1-best instead of the hope")
        group.add_argument("--no-shuffle", action="store_true", help="visit sentences in file order")

    def options_from_args(self, args):
        return KBMiraOptions(epochs=args.epochs, C=args.C, decay=args.decay, model_bg=args.model_bg,
                             shuffle=not args.no_shuffle)

    def tune(self, data, w0, *, seed=1, options=None, progress=False, log=None):
        from rerank.mira.kbmira import kbmira

        options = self.make_options(options)

        def show(rec):
            if log is not None:
                log(f"epoch {rec['epoch']}: {data.metric.info.display} {rec['score']:.2f}, {rec['updates']} updates, "
                    f"avg loss {rec['avg_loss']:.4f}")

        res = kbmira(data, w0, seed=seed, progress=progress, on_epoch=show, **asdict(options))
        curve = [[h["epoch"], h["score"]] for h in res.history]
        return TuneResult(res.weights, res.initial_score, res.best_score, curve, {"best_epoch": res.best_epoch})


class MertTuner(Tuner):
    description = "Och's MERT with exact line search, random directions and restarts (any metric)"
    metrics = ALL_METRICS
    step_name = "line-search step"
    Options = MertOptions

    def add_arguments(self, group):
        group.add_argument("--restarts", type=positive_int, default=20, help="start points: the initial one plus random ones (default 20)")
        group.add_argument("--random-directions", type=nonnegative_int, default=10,
                           help="random directions per iteration besides the coordinates (default 10)")
        group.add_argument("--max-iterations", type=positive_int, default=100, help="line-search rounds per start point (default 100)")

    def tune(self, data, w0, *, seed=1, options=None, progress=False, log=None):
        from rerank.mira.mert import mert

        options = self.make_options(options)

        def show(rec):
            if log is not None:
                log(f"start {rec['restart']} iteration {rec['iteration']}: {data.metric.info.display} {rec['score']:.2f}")

        res = mert(data, w0, seed=seed, progress=progress, on_iteration=show, **asdict(options))
        curve = [[k + 1, h["score"]] for k, h in enumerate(res.history)]
        return TuneResult(res.weights, res.initial_score, res.best_score, curve)


class ProTuner(Tuner):
    description = "Hopkins & May's pairwise ranking optimisation with logistic regression (pairs by sentence score)"
    metrics = ALL_METRICS
    step_name = "fit"
    Options = ProOptions
    requires = ("sklearn",)

    def add_arguments(self, group):
        group.add_argument("--pro-samples", type=positive_int, default=5000, help="pairs sampled per sentence (default 5000)")
        group.add_argument("--pro-keep", type=positive_int, default=50, help="pairs kept per sentence (default 50)")
        group.add_argument("--pro-threshold", type=nonnegative_float, default=0.05, help="minimum sentence-BLEU difference (default 0.05)")
        group.add_argument("--pro-C", type=positive_float, default=1.0,
                           help="the logistic regression minimises sum(log-loss over all 2 x kept pairs) + |w|^2 / (2 C): "
                           "C = 1 / lambda of MegaM as Moses runs it; more pairs weaken the L2 term (default 1, as Moses)")

    def options_from_args(self, args):
        return ProOptions(samples=args.pro_samples, keep=args.pro_keep, threshold=args.pro_threshold, C=args.pro_C)

    def tune(self, data, w0, *, seed=1, options=None, progress=False, log=None):
        with needs_neural("the PRO tuner"):  # scikit-learn, imported by rerank.mira.pro when it fits
            import sklearn  # noqa: F401
        from rerank.mira.pro import pro

        options = self.make_options(options)
        res = pro(data, w0, seed=seed, **asdict(options))
        if log is not None:
            log(f"PRO: {res.n_pairs} pairs")
        return TuneResult(res.weights, res.initial_score, res.best_score, [[1, res.best_score]], {"pairs": res.n_pairs})
