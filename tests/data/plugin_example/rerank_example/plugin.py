"""One feature, one tuner and one command, each registered in pyproject.toml."""

from dataclasses import dataclass

import numpy as np

from rerank.errors import InputError
from rerank.features import Feature
from rerank.tuning import TuneResult, Tuner


class LengthRatio(Feature):
    """len_ratio = hypothesis words / source words (0 for an empty source)."""

    columns = ("len_ratio",)
    description = "hypothesis length / source length, in whitespace tokens"

    def compute(self, nbest, which, context=None, options=None):  # no options: Feature.Options is NoOptions
        if context is None or context.sources is None:
            raise InputError("len_ratio needs the source sentences")
        src_len = np.array([len(s.split()) for s in context.sources], dtype=np.float64)
        hyp_len = np.array([len(h.split()) for h in nbest.hyps], dtype=np.float64)
        per_hyp = src_len[nbest.sentence_of_hyp]
        return {"len_ratio": np.divide(hyp_len, per_hyp, out=np.zeros_like(hyp_len), where=per_hyp > 0)}


@dataclass(frozen=True)
class RandomSearchOptions:
    samples: int = 200                # random weight vectors


class RandomSearch(Tuner):
    """Best of `samples` random weight vectors (uniform in [-1, 1]) by the tuning metric."""

    description = "random search: the best of N random weight vectors"
    step_name = "sample"
    Options = RandomSearchOptions

    def add_arguments(self, group):   # the command line's flag --samples fills the field `samples`
        group.add_argument("--samples", type=int, default=200, help="random weight vectors (default 200)")

    def tune(self, data, w0, *, seed=1, options=None, progress=False, log=None):
        options = self.make_options(options)  # a RandomSearchOptions, a dict of its fields, or None
        rng = np.random.default_rng(seed)
        best_w, best = np.array(w0, dtype=np.float64), data.evaluate(w0)
        initial, curve = best, [[0, best]]
        for k in range(1, options.samples + 1):
            w = best_w.copy()
            w[data.tuned] = rng.uniform(-1, 1, int(data.tuned.sum()))
            score = data.evaluate(w)
            if data.metric.better(score, best):  # in the metric's direction (lower TER is better)
                best_w, best = w, score
            curve.append([k, best])
        return TuneResult(best_w, initial, best, curve)


def add_count_parser(subparsers):
    parser = subparsers.add_parser("count", help="print sentences and hypotheses of an n-best list")
    parser.add_argument("nbest")
    parser.set_defaults(func=_count)


def _count(args):
    from rerank.formats import read_nbest

    nbest = read_nbest(args.nbest)
    print(f"{nbest.n_sentences} sentences, {nbest.n_hyps} hypotheses")
    return 0
