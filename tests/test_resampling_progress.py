"""The randomisation and the bootstrap report their progress per block of trials (issue 46 item 4):
a callback sees the count grow, block by block, to the number of trials or resamples, and the
results do not depend on whether anyone watches."""

import os

import numpy as np

import rerank
from rerank.metrics import make_metric
from rerank.significance import Resamples, approximate_randomization, bootstrap_weights

DATA = os.path.join(os.path.dirname(__file__), "data", "eval")


def lines(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read().splitlines()


class Calls:
    """A progress callback that records (desc, done, total)."""

    def __init__(self):
        self.seen = []

    def __call__(self, desc, done, total):
        self.seen.append((desc, done, total))

    def of(self, desc):
        return [(done, total) for d, done, total in self.seen if d == desc]


def bleu_stats():
    bleu, ref = make_metric("bleu"), [lines("ref.de")]
    return bleu, bleu.sentence_stats(lines("cap1.de"), ref), bleu.sentence_stats(lines("cap2.de"), ref)


def test_randomisation_ticks_per_block_up_to_its_trials_and_gives_the_same_result():
    bleu, a, b = bleu_stats()
    calls = Calls()
    watched = approximate_randomization(bleu, a, b, trials=5000, seed=7, batch_size=1000, progress=calls)
    done = calls.of("randomisation")
    assert len(done) > 1 and done[-1] == (5000, 5000)   # several blocks, the last one at the total
    assert [d for d, _ in done] == sorted(d for d, _ in done)
    assert watched == approximate_randomization(bleu, a, b, trials=5000, seed=7, batch_size=1000)


def test_bootstrap_ticks_up_to_its_resamples_and_gives_the_same_products():
    _, a, _ = bleu_stats()
    calls = Calls()
    samples = 3000
    resamples = Resamples(5, samples, len(a), progress=calls)
    product = resamples @ a
    assert calls.of("bootstrap")[-1] == (samples, samples)
    assert np.array_equal(product, bootstrap_weights(np.random.default_rng(5), samples, len(a)) @ a)
    before = len(calls.seen)
    assert (Resamples(5, 0, len(a), progress=calls) @ a).shape == (0, a.shape[1])
    assert len(calls.seen) == before   # no resamples: no bar


def test_evaluate_reports_the_randomisation_and_the_bootstrap():
    calls = Calls()
    table = rerank.evaluate([os.path.join(DATA, "ref.en")], ("cap1", os.path.join(DATA, "cap1.en")),
                            [("cap2", os.path.join(DATA, "cap2.en"))], metrics=("bleu",), ar=200, bootstrap=100,
                            progress=calls)
    assert calls.of("randomisation")[-1] == (200, 200)
    assert calls.of("bootstrap")[-1] == (100, 100)
    quiet = rerank.evaluate([os.path.join(DATA, "ref.en")], ("cap1", os.path.join(DATA, "cap1.en")),
                            [("cap2", os.path.join(DATA, "cap2.en"))], metrics=("bleu",), ar=200, bootstrap=100)
    assert table.cell("cap2", "bleu") == quiet.cell("cap2", "bleu")
