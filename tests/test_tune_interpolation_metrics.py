"""Interpolated tuning objectives with METEOR and TER components (`rerank tune --metric ter=0.5,meteor=0.5`):
a one-component interpolation and a zero-weighted component against the plain metric, and the
objective's value against its components computed apart (sacrebleu, rerank.metrics, the column)."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, TER

from rerank.formats import read_nbest
from rerank.metrics import make_metric
from rerank.mira.kbmira import kbmira
from rerank.mira.mert import mert
from rerank.mira.pro import pro
from rerank.tuning import prepare

DATA = os.path.join(os.path.dirname(__file__), "data", "joshua10")
FEATURES = ["lm_0", "tm_pt_2", "tm_pt_5", "tm_pt_6", "tm_glue_0", "WordPenalty"]


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read().splitlines()


REFS = [read(os.path.join(DATA, f"ref.{k}")) for k in range(4)]
X = np.random.default_rng(7).uniform(0, 100, 82)


@pytest.fixture(scope="module")
def nbest():
    """Joshua's 10 lists (82 hypotheses, 4 references) with six features and a column x."""
    full = read_nbest(os.path.join(DATA, "nbest.joshua"))
    assert full.n_hyps == len(X)
    return full.select_features(FEATURES).with_feature("x", X)


@functools.cache
def prepared(spec: str, column: bool = True, lower_better: tuple = ()):
    """The tuning data of an objective on the list with the column x (`column`) or without it
    (tuners do not change it; each objective's statistics are computed once per module)."""
    full = read_nbest(os.path.join(DATA, "nbest.joshua")).select_features(FEATURES)
    if column:
        full = full.with_feature("x", X)
    return prepare(full, REFS, metric=spec, lower_better=lower_better)


def run(tuner: str, data, *, seed: int = 1, **options):
    if tuner == "mira":
        return kbmira(data, seed=seed, epochs=options.pop("epochs", 4), **options)
    if tuner == "mert":
        return mert(data, seed=seed, restarts=2, **options)
    return pro(data, seed=seed, **options)


TUNERS = ["mira", "mert", pytest.param("pro", marks=pytest.mark.neural)]


def test_mert_tunes_a_one_component_interpolation_as_the_plain_metric():
    """MERT reads the corpus objective alone: `ter=1` is 1 x (-TER), the plain TER objective, so the
    weights are the same; the value is the objective (-TER) where the plain metric's is TER. So for
    `meteor=1` and `bleu=1,ter=0` (BLEU: +BLEU)."""
    for spec, name, sign in (("ter=1", "ter", -1.0), ("meteor=1", "meteor", 1.0), ("bleu=1,ter=0", "bleu", 1.0)):
        a, b = prepared(spec, False), prepared(name, False)
        ra, rb = run("mert", a, seed=3), run("mert", b, seed=3)
        np.testing.assert_array_equal(ra.weights, rb.weights)
        assert ra.best_score == pytest.approx(sign * rb.best_score, abs=1e-9)
        assert ra.initial_score == pytest.approx(sign * rb.initial_score, abs=1e-9)


def test_the_sentence_level_of_a_component_is_in_points():
    """MIRA and PRO also read the sentence-level objective. The plain metric's is a fraction (-TER /
    100); an interpolation's is on the corpus objective's scale, points (docs/tuning.md), so `ter=1`
    and `ter` differ there by a factor of 100 and MIRA's steps and PRO's pairs differ with it."""
    a, b = prepared("ter=1", False), prepared("ter", False)
    np.testing.assert_allclose(a.sentence_objectives(), 100 * b.sentence_objectives(), rtol=1e-12, atol=1e-9)
    assert np.all(a.sentence_objectives() <= 0)  # -TER


@pytest.mark.neural
def test_pro_tunes_ter_1_as_ter_with_the_threshold_on_the_objectives_scale():
    """PRO's pairs and labels depend on the sentence-level scores through the gap threshold and their
    signs alone when every sampled pair is kept (samples <= keep). The threshold is a fraction of the
    objective's scale (TuningMetric.scale: 1 for a metric's fraction, 100 for a metric in points), so
    `ter=1` (points) and `ter` (fraction) train on the same pairs at the same threshold, and so to the
    same weights. (With samples > keep the pairs kept are the largest gaps, and ties among equal gaps,
    frequent for TER's integer edits, may fall apart differently after the scaling.)"""
    a, b = prepared("ter=1", False), prepared("ter", False)
    assert a.metric.scale == 100.0 and b.metric.scale == 1.0
    ra = run("pro", a, seed=2, threshold=0.031, samples=40, keep=50)
    rb = run("pro", b, seed=2, threshold=0.031, samples=40, keep=50)
    assert ra.n_pairs == rb.n_pairs
    np.testing.assert_allclose(ra.weights, rb.weights, rtol=1e-9, atol=1e-12)
    assert ra.best_score == pytest.approx(-rb.best_score, abs=1e-9)


@pytest.mark.parametrize("tuner", TUNERS)
@pytest.mark.parametrize("spec, same", [("bleu=1,ter=0", "bleu=1"), ("ter=1,meteor=0", "ter=1"),
                                        ("meteor=0.5,column:x=0.5,ter=0", "meteor=0.5,column:x=0.5")])
def test_a_zero_weighted_metric_component_changes_nothing(nbest, tuner, spec, same):
    a, b = prepared(spec), prepared(same)
    assert a.feature_names == b.feature_names
    np.testing.assert_array_equal(a.sentence_objectives(), b.sentence_objectives())
    ra, rb = run(tuner, a, seed=2), run(tuner, b, seed=2)
    np.testing.assert_array_equal(ra.weights, rb.weights)
    assert ra.best_score == rb.best_score and ra.initial_score == rb.initial_score


def components(data, w):
    """The model 1-best of the tuning data under w, as strings and as rows of the full list."""
    rows = data.best_rows(w)
    return [data.nbest.hyps[int(r)] for r in rows], data.kept_rows[rows]


METEOR = make_metric("meteor", lang="en")


@pytest.mark.parametrize("tuner", TUNERS)
def test_meteor_and_a_column_interpolate_to_the_weighted_sum(nbest, tuner):
    data = prepared("meteor=0.5,column:x=0.5")
    assert data.feature_names == FEATURES and data.metric.info.higher_is_better
    assert data.metric.display == "0.5*METEOR+0.5*column:x"
    res = run(tuner, data)
    x = nbest.column("x")
    for w, value in ((res.weights, res.best_score), (np.zeros(len(FEATURES)), res.initial_score)):
        hyps, rows = components(data, w)
        expected = 0.5 * METEOR.corpus_score(hyps, REFS) + 0.5 * float(np.mean(x[rows]))
        assert value == pytest.approx(expected, abs=1e-9)
        assert data.evaluate(w) == pytest.approx(expected, abs=1e-9)


def test_the_sentence_level_of_meteor_and_a_column(nbest):
    """MIRA's gains and PRO's pairs: 0.5 x METEOR of each hypothesis alone, in points, + 0.5 x x."""
    data = prepared("meteor=0.5,column:x=0.5")
    x = nbest.column("x")
    hyps = list(data.nbest.hyps)
    sentence_refs = [[stream[int(i)] for i in data.nbest.sentence_of_hyp] for stream in REFS]
    meteor = np.array([METEOR.corpus_score([h], [[r[j]] for r in sentence_refs]) for j, h in enumerate(hyps)])
    np.testing.assert_allclose(data.sentence_objectives(), 0.5 * meteor + 0.5 * x[data.kept_rows], atol=1e-9)


@pytest.mark.parametrize("tuner", TUNERS)
def test_ter_enters_as_minus_ter(tuner):
    """bleu=0.6,ter=0.4: 0.6 x BLEU - 0.4 x TER, both sacrebleu's corpus scores in points, at the tuned,
    the start and other weights (MERT, which only takes improving steps, ends no worse than it starts)."""
    data = prepared("bleu=0.6,ter=0.4", False)
    assert data.metric.display == "0.6*BLEU+0.4*TER" and data.metric.info.higher_is_better
    assert [c["higher_is_better"] for c in data.metric.components] == [True, False]
    res = run(tuner, data)
    rng = np.random.default_rng(0)
    for w, value in ((res.weights, res.best_score), (np.zeros(len(FEATURES)), res.initial_score),
                     (rng.normal(size=len(FEATURES)), None)):
        hyps, _ = components(data, w)
        expected = 0.6 * BLEU().corpus_score(hyps, REFS).score - 0.4 * TER().corpus_score(hyps, REFS).score
        assert data.evaluate(w) == pytest.approx(expected, abs=1e-9)
        if value is not None:
            assert value == pytest.approx(expected, abs=1e-9)
    assert tuner != "mert" or res.best_score >= res.initial_score


def test_ter_and_meteor_with_a_lower_better_column(nbest):
    """Every component oriented by its own direction: -TER, +METEOR, -x for a lower-is-better x."""
    data = prepared("ter=1,meteor=2,column:x=0.01", True, ("x",))
    ter = make_metric("ter")
    x = nbest.column("x")
    for w in (np.zeros(len(FEATURES)), np.random.default_rng(1).normal(size=len(FEATURES))):
        hyps, rows = components(data, w)
        expected = -ter.corpus_score(hyps, REFS) + 2 * METEOR.corpus_score(hyps, REFS) - 0.01 * float(np.mean(x[rows]))
        assert data.evaluate(w) == pytest.approx(expected, abs=1e-9)
    assert data.metric.components == [{"weight": 1.0, "metric": "ter", "higher_is_better": False},
                                      {"weight": 2.0, "metric": "meteor", "higher_is_better": True},
                                      {"weight": 0.01, "column": "x", "higher_is_better": False}]
