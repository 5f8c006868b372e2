"""One feature, one tuner, one command and one n-best format, each registered in pyproject.toml."""

from dataclasses import dataclass

import numpy as np

from rerank.errors import InputError
from rerank.features import Feature
from rerank.formats import NBestFormat
from rerank.options import NONNEGATIVE_INT, option
from rerank.tuning import Tuner, TunerOutput


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
    # declared once: `rerank tune` gets --samples (help ends "(default: 200)"), a script samples=200
    samples: int = option(200, "random weight vectors", check=NONNEGATIVE_INT)


class RandomSearch(Tuner):
    """Best of `samples` random weight vectors (uniform in [-1, 1]) by the tuning metric."""

    description = "random search: the best of N random weight vectors"
    step_name = "sample"
    Options = RandomSearchOptions

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
        return TunerOutput(best_w, initial, best, curve)


def add_count_parser(subparsers):
    parser = subparsers.add_parser("count", help="print sentences and hypotheses of an n-best list")
    parser.add_argument("nbest")
    parser.set_defaults(func=_count)


def _count(args):
    from rerank.formats import read_nbest

    nbest = read_nbest(args.nbest)
    print(f"{nbest.n_sentences} sentences, {nbest.n_hyps} hypotheses")
    return 0


# ---- a format: `tsv-nbest`, one `sentence<TAB>hypothesis<TAB>name=value,...` line per hypothesis ----

def read_tsv_nbest(path, *, strict=False, report=None):
    """Hypotheses of sentence 0, 0, 1, ... with their named scores; every line names the same scores."""
    from rerank.io import iter_lines
    from rerank.nbest import NBestList

    hyps, sentences, rows, names = [], [], [], None
    for number, text in iter_lines(path):
        parts = text.split("\t")
        if len(parts) != 3 or not parts[0].isdigit():
            raise InputError("expected `sentence<TAB>hypothesis<TAB>name=value,...`", path, number)
        pairs = [item.split("=", 1) for item in parts[2].split(",") if item]
        if names is None:
            names = [name for name, _ in pairs]
        elif [name for name, _ in pairs] != names:
            raise InputError(f"the scores are not {','.join(names)} as on the first line", path, number)
        sentences.append(int(parts[0]))
        hyps.append(parts[1])
        rows.append([float(value) for _, value in pairs])
    sizes = np.bincount(sentences) if sentences else np.zeros(0, dtype=np.int64)
    if (np.diff(sentences) < 0).any() or (sizes == 0).any():
        raise InputError("sentence numbers must run 0, 0, 1, ... without gaps", path)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return NBestList(offsets, hyps, np.array(rows, dtype=np.float64).reshape(len(hyps), len(names or [])), names or [])


def write_tsv_nbest(nbest, path, first_id=0):
    from rerank.io import atomic_write

    with atomic_write(path) as out:
        for row, (sentence, hyp) in enumerate(zip(nbest.sentence_of_hyp + first_id, nbest.hyps)):
            scores = ",".join(f"{name}={value!r}" for name, value in zip(nbest.feature_names, nbest.features[row].tolist()))
            out.write(f"{sentence}\t{hyp}\t{scores}\n")
    return [path]


def _looks_like_tsv_nbest(sample):
    parts = sample.first.split("\t")
    return len(parts) == 3 and parts[0].isdigit() and "=" in parts[2]


TSV_NBEST = NBestFormat(
    name="tsv-nbest", layout="sentence<TAB>hypothesis<TAB>name=value,name=value", producers="the example plug-in",
    read=read_tsv_nbest, write=write_tsv_nbest, detect=_looks_like_tsv_nbest, detect_order=45)
