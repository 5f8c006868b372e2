"""The tuners of this package as `rerank.tuners` plug-ins: mira (k-best batch MIRA), mert, pro.

Each class declares its options once, as a dataclass (`Options`) of `rerank.options.option`
fields (default, help, check: the flags of `rerank tune` are generated from them), and runs its
algorithm on rerank.tuning.TuningData. The algorithms are imported when a tuner
runs, so that listing the plug-ins (every `rerank` command does) does not load scikit-learn
(PRO's, of the `neural` extra).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from rerank.errors import needs_neural
from rerank.metrics.registry import QUALITY_METRICS
from rerank.options import MAX_EPOCHS, NONNEGATIVE, NONNEGATIVE_INT, POSITIVE, POSITIVE_INT, UNIT_INTERVAL, at_most, option
from rerank.tuning import Tuner, TunerOutput


ALL_METRICS = QUALITY_METRICS  # every quality metric of the registry, plug-ins included (TER minimised)


@dataclass(frozen=True)
class KBMiraOptions:
    epochs: int = option(60, f"epochs (at most {MAX_EPOCHS:,}: each keeps a record)", check=at_most(POSITIVE_INT, MAX_EPOCHS))
    C: float = option(0.01, "step-size cap C", check=POSITIVE)
    decay: float = option(0.999, "background BLEU decay", check=UNIT_INTERVAL)
    model_bg: bool = option(False, "background from the model 1-best instead of the hope")
    shuffle: bool = option(True, "each epoch's sentence order: seeded random (on) or the file's (off)")


@dataclass(frozen=True)
class MertOptions:
    restarts: int = option(20, "start points: the initial one plus random ones", check=POSITIVE_INT)
    random_directions: int = option(10, "random directions per iteration besides the coordinates",
                                    check=NONNEGATIVE_INT)
    max_iterations: int = option(100, "line-search rounds per start point", check=POSITIVE_INT)


@dataclass(frozen=True)
class ProOptions:
    """PRO's options; their flags are --pro-samples, ... (ProTuner.option_prefix)."""

    samples: int = option(5000, "pairs sampled per sentence (at most 100,000: drawn for 256 sentences at once)",
                          check=at_most(POSITIVE_INT, 100_000))
    keep: int = option(50, "pairs kept per sentence (at most 10,000: every kept pair is a training row)",
                       check=at_most(POSITIVE_INT, 10_000))
    threshold: float = option(0.05, "minimum sentence-level difference of a pair, as a fraction of the objective's scale "
                              "(1 for a metric, a column's 1st-99th percentile spread)", check=NONNEGATIVE)
    pick: str = option("largest", "which of a sentence's pairs above the threshold are kept: largest (the keep largest "
                       "gaps, Hopkins & May) or random (keep of them, uniformly; with threshold 0, for an exact "
                       "column: docs/tuning.md)", choices=("largest", "random"))
    C: float = option(1.0, "the logistic regression minimises sum(log-loss over all 2 x kept pairs) + |w|^2 / (2 C): "
                      "C = 1 / lambda of MegaM as Moses runs it (1, Moses' default); more pairs weaken the L2 term",
                      check=POSITIVE)
    smoothing: str = option("lin-och", "sentence BLEU of the pairs: lin-och (BLEU+1, +1 on orders 2-4) or moses "
                            "(Moses' PRO: +1 on all four orders)", choices=("lin-och", "moses"))


class KBMiraTuner(Tuner):
    description = ("k-best batch MIRA as Moses kbmira runs it (C=0.01, 60 epochs, averaged weights, background "
                   "BLEU with decay 0.999, best epoch by the corpus metric in its direction; other metrics: sentence-level "
                   "gains)")
    metrics = ALL_METRICS
    step_name = "epoch"
    Options = KBMiraOptions
    grid = {"C": (0.001, 0.01, 0.1), "epochs": (10, 60)}   # `--select cv:K` searches these



    def tune(self, data, w0, *, seed=1, options=None, progress=False, log=None):
        from rerank.mira.kbmira import kbmira

        options = self.make_options(options)

        def show(rec):
            if log is not None:
                log(f"epoch {rec['epoch']}: {data.metric.info.display} {rec['score']:.2f}, {rec['updates']} updates, "
                    f"avg loss {rec['avg_loss']:.4f}")

        res = kbmira(data, w0, seed=seed, progress=progress, on_epoch=show, **asdict(options))
        curve = [[h["epoch"], h["score"]] for h in res.history]
        return TunerOutput(res.weights, res.initial_score, res.best_score, curve, {"best_epoch": res.best_epoch})


class MertTuner(Tuner):
    description = "Och's MERT with exact line search, random directions and restarts (any metric)"
    metrics = ALL_METRICS
    step_name = "line-search step"
    Options = MertOptions
    grid = {"restarts": (5, 20)}


    def tune(self, data, w0, *, seed=1, options=None, progress=False, log=None):
        from rerank.mira.mert import mert

        options = self.make_options(options)

        def show(rec):
            if log is not None:
                log(f"start {rec['restart']} iteration {rec['iteration']}: {data.metric.info.display} {rec['score']:.2f}")

        res = mert(data, w0, seed=seed, progress=progress, on_iteration=show, **asdict(options))
        curve = [[k + 1, h["score"]] for k, h in enumerate(res.history)]
        return TunerOutput(res.weights, res.initial_score, res.best_score, curve)


class ProTuner(Tuner):
    description = "Hopkins & May's pairwise ranking optimisation with logistic regression (pairs by sentence score)"
    metrics = ALL_METRICS
    step_name = "fit"
    Options = ProOptions
    grid = {"C": (0.1, 1.0, 10.0)}   # the L2 term: 1 / C
    option_prefix = "pro-"            # --pro-samples, --pro-C: the flags PRO has always had
    requires = ("sklearn",)



    def tune(self, data, w0, *, seed=1, options=None, progress=False, log=None):
        with needs_neural("the PRO tuner"):  # scikit-learn, imported by rerank.mira.pro when it fits
            import sklearn  # noqa: F401
        from rerank.mira.pro import pro

        options = self.make_options(options)
        res = pro(data, w0, seed=seed, **asdict(options))
        if log is not None:
            log(f"PRO: {res.n_pairs} pairs")
        return TunerOutput(res.weights, res.initial_score, res.best_score, [[1, res.best_score]], {"pairs": res.n_pairs})
