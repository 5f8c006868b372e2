"""Cross-validated selection (rerank.selection; `rerank tune --select cv:K`, `--select-features`):
the folds, the slicing of the cached statistics, the noise rule on planted columns, the record in
the weights file, and the bad options."""

from __future__ import annotations

import json
import os

from dataclasses import replace

import numpy as np
import pytest

import rerank
from rerank.errors import InputError
from rerank.multirun import TuneSettings
from rerank.nbest import NBestList, StringColumn
from rerank.selection import (CrossValidation, FeatureRule, check_selection, fold_ids, grid_points, parse_grid,
                              parse_select, run_selection, select_features, subset)
from rerank.tunejob import tuner_for
from rerank.tuning import prepare
from tests.cli_helpers import run
from tests.mira_helpers import joshua, NBEST, REFS


def test_folds_are_a_seeded_balanced_partition():
    folds = fold_ids(103, 5, seed=7)
    assert sorted(np.bincount(folds).tolist()) == [20, 20, 21, 21, 21]
    assert np.array_equal(folds, fold_ids(103, 5, seed=7))
    assert not np.array_equal(folds, fold_ids(103, 5, seed=8))
    with pytest.raises(InputError, match="2 .. the number of sentences"):
        fold_ids(4, 5, seed=1)


def test_select_syntax_and_grid_keys():
    assert parse_select("cv:5") == 5 and parse_select(None) is None
    for bad in ("cv:1", "cv:0", "cv", "5", "cv:x"):
        with pytest.raises(InputError):
            parse_select(bad)
    tuner = tuner_for(TuneSettings())
    grid = parse_grid(["C=0.1,0.2", "epochs=3"], tuner)
    assert grid["C"] == (0.1, 0.2) and grid["epochs"] == (3,)
    assert len(grid_points(grid)) == 2
    with pytest.raises(InputError, match="unknown grid key 'Cee'"):
        parse_grid(["Cee=1"], tuner)
    with pytest.raises(InputError, match="epochs must be"):
        parse_grid(["epochs=0"], tuner)
    assert parse_grid([], tuner) == {k: tuple(v) for k, v in type(tuner).grid.items()}   # the declared grid


def test_folds_slice_the_statistics_without_recomputing():
    nbest, refs = joshua(0, 40)
    data = prepare(nbest, refs)
    folds = fold_ids(40, 4, seed=1)
    parts = [subset(data, np.flatnonzero(folds == f)) for f in range(4)]
    assert sum(p.nbest.n_hyps for p in parts) == data.nbest.n_hyps
    w = np.random.default_rng(0).normal(size=len(data.feature_names))
    whole = data.stats[data.best_rows(w)].sum(axis=0)
    assert np.allclose(sum(p.stats[p.best_rows(w)].sum(axis=0) for p in parts), whole)   # a sum of rows
    # a fold's statistics are the whole list's rows for its sentences: equal to computing them anew
    first = np.flatnonzero(folds == 0)
    fresh = prepare(nbest.select_sentences(first), [[s[i] for i in first] for s in refs])
    assert np.allclose(parts[0].stats, fresh.stats)


def _planted(seed: int, n: int = 80, k: int = 8, metric: str = "bleu"):
    """A list whose `base` column is the decoder's (the sentence metric plus much noise), `metric`
    equals each hypothesis's sentence metric oriented so that higher is better (BLEU+1, or -TER for
    `metric` "ter") and `noise` is pure noise, with its tuning data for `metric`."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)]
    refs, hyps = [], []
    for _ in range(n):
        ref = list(rng.choice(words, size=8))
        refs.append(" ".join(ref))
        for j in range(k):
            hyp = [w if rng.random() > 0.12 * j else str(rng.choice(words)) for w in ref]
            hyps.append(" ".join(hyp))
    offsets = np.arange(0, n * k + 1, k)
    texts = StringColumn.from_strings(hyps)
    plain = NBestList(offsets, texts, np.zeros((n * k, 1)), ["zero"])
    x = plain.with_feature("x", rng.normal(size=n * k))
    own = prepare(x, [refs], metric=metric).metric.sentence_scores(fraction=True)
    feats = np.column_stack([own + rng.normal(scale=0.3, size=n * k), own, rng.normal(scale=0.3, size=n * k)])
    nbest = NBestList(offsets, texts, feats, ["base", "metric", "noise"])
    return prepare(nbest, [refs], metric=metric)


RULES = [FeatureRule(d, r) for d in ("forward", "backward") for r in ("fold-sd", "paired")]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.direction}-{r.rule}")
def test_the_noise_rule_on_planted_columns(rule):
    """Over 20 seeds: a pure-noise column is left out in at least 19, a column equal to the sentence
    metric is taken in all (docs/tuning.md's rules, either direction)."""
    tuner = tuner_for(TuneSettings())
    options = tuner.make_options({"epochs": 5})
    noise_alone, noise_beside, metric_in = 0, 0, 0
    for seed in range(20):
        data = _planted(seed)
        cv = CrossValidation(data, tuner, 5, seed=seed)
        seeded = FeatureRule(rule.direction, rule.rule, rule.alpha, seed)
        choice = select_features(cv, options, ["base"], ["noise", "metric"], np.zeros(3, bool), seeded)
        metric_in += "metric" in choice.selected
        noise_beside += "noise" in choice.selected
        noise_alone += "noise" in select_features(cv, options, ["base"], ["noise"], np.zeros(3, bool), seeded).selected
    assert metric_in == 20
    assert noise_alone <= 1 and noise_beside <= 1


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_the_paired_rule_follows_a_lower_is_better_metric(direction):
    """Tuned toward TER, the column equal to each hypothesis's -TER is taken and pure noise is not:
    the rule's gain is oriented by the metric's direction (TER is minimised)."""
    tuner = tuner_for(TuneSettings(metric="ter"))
    options = tuner.make_options({"epochs": 5})
    for seed in range(5):
        data = _planted(seed, metric="ter")
        cv = CrossValidation(data, tuner, 5, seed=seed)
        choice = select_features(cv, options, ["base"], ["noise", "metric"], np.zeros(3, bool),
                                 FeatureRule(direction, "paired", seed=seed))
        assert choice.selected[0] == "base" and "metric" in choice.selected and "noise" not in choice.selected
        step = next(s for s in choice.steps if s["best"] == "metric")
        assert step["pooled_gain"] > 0 and step["p"] < 0.05   # lower TER with it, oriented as a gain


def _halves(seed: int):
    """The planted list of `_planted` with a weak decoder column `base` (the sentence metric plus
    noise three times its spread) and two columns that carry the metric only together: `a` = metric
    + z, `b` = -z for a per-hypothesis z five times the metric's spread."""
    data = _planted(seed)
    rng = np.random.default_rng(1000 + seed)
    metric = data.features[:, data.feature_names.index("metric")]
    z = rng.normal(scale=5 * metric.std(), size=len(metric))
    base = metric + rng.normal(scale=3 * metric.std(), size=len(metric))
    nbest = data.nbest.select_features([]).with_feature("base", base).with_feature("a", metric + z).with_feature("b", -z)
    return replace(data, nbest=nbest, tuned=np.ones(3, bool))


@pytest.mark.parametrize("test", ["fold-sd", "paired"])
def test_backward_keeps_columns_that_help_only_together(test):
    """Neither half helps alone, so forward selection takes neither; backward, which starts from both
    and drops one only when the set loses nothing by it, keeps both on every seed."""
    tuner = tuner_for(TuneSettings())
    options = tuner.make_options({"epochs": 20})
    forward = backward = 0
    for seed in range(10):
        cv = CrossValidation(_halves(seed), tuner, 5, seed=seed)
        pick = {d: select_features(cv, options, ["base"], ["a", "b"], np.zeros(3, bool),
                                   FeatureRule(d, test, seed=seed)).selected for d in ("forward", "backward")}
        forward += set(pick["forward"]) >= {"a", "b"}
        backward += set(pick["backward"]) >= {"a", "b"}
    assert backward == 10 and forward == 0


def test_the_paired_rule_tests_the_pooled_held_out_outputs():
    """The pooled outputs are each sentence's pick by the fit that did not see it: their corpus score
    is the one the rule compares, and their sum over a fold is that fold's held-out statistics."""
    data = _planted(3)
    tuner = tuner_for(TuneSettings())
    cv = CrossValidation(data, tuner, 4, seed=3)
    found = cv.score(tuner.make_options({"epochs": 3}), np.ones(3, bool))
    for f in range(4):
        held = cv.held[f]
        rows = held.best_rows(found.weights[f])
        assert np.array_equal(found.pooled[cv.folds == f], held.stats[rows])
        assert found.scores[f] == pytest.approx(held.metric.value(found.pooled[cv.folds == f].sum(axis=0)))
    base = cv.score(tuner.make_options({"epochs": 3}), np.array([True, False, False]))
    verdict = FeatureRule(rule="paired", seed=3).beats(cv, found, base)
    value = data.metric.value
    assert verdict["pooled_gain"] == pytest.approx(value(found.pooled.sum(axis=0)) - value(base.pooled.sum(axis=0)))
    assert 0 < verdict["p"] <= 1 and verdict["beats"] == (verdict["pooled_gain"] > 0 and verdict["p"] < 0.05)


def test_cv_remembers_fits_and_refits_on_all():
    nbest, refs = joshua(0, 60)
    data = prepare(nbest, refs)
    tuner = tuner_for(TuneSettings())
    settings = TuneSettings(select="cv:3", grid=("C=0.001,0.01", "epochs=2"))
    plan = check_selection(settings, tuner)
    cv = CrossValidation(data, tuner, 3, seed=1)
    tuned, options, record = run_selection(data, tuner, plan, settings, None, cv=cv)
    assert record["fold_fits"] == 6 and cv.fits == 6
    again = run_selection(data, tuner, plan, settings, None, cv=cv)[2]
    assert again["fold_fits"] == 0 and again["settings"] == record["settings"]   # remembered, not refitted
    means = [p["mean"] for p in record["settings"]["points"]]
    assert options.C == record["settings"]["chosen"]["C"] == [0.001, 0.01][int(np.argmax(means))]
    for point in record["settings"]["points"]:
        assert point["mean"] == pytest.approx(np.mean(point["folds"]))
        assert point["sd"] == pytest.approx(np.std(point["folds"], ddof=1))


def test_tune_records_the_grid_and_the_choice(tmp_path):
    nbest, refs = joshua(0, 50)
    out = tmp_path / "w.json"
    result = rerank.tune(nbest, refs, select="cv:2", grid={"C": [0.001, 0.01], "epochs": [2]}, runs=2,
                         output=out)
    meta = json.loads(out.read_text())["meta"]
    sel = meta["selection"]
    assert sel["folds"] == 2 and sel["settings"]["grid"] == {"C": [0.001, 0.01], "epochs": [2]}
    assert len(sel["settings"]["points"]) == 2 and all(len(p["folds"]) == 2 for p in sel["settings"]["points"])
    assert meta["options"]["C"] == sel["settings"]["chosen"]["C"] and meta["options"]["epochs"] == 2
    assert len(result.runs) == 2 and os.path.exists(tmp_path / "w.run2.json")
    assert json.loads((tmp_path / "w.run1.json").read_text())["meta"]["selection"] == sel


def test_select_features_keeps_and_fixes(tmp_path):
    nbest, refs = joshua(0, 50)
    names = nbest.feature_names
    keep, fix = names[0], names[1]
    result = rerank.tune(nbest, refs, select_features=True, keep=(keep,), fix=(fix,), epochs=2)
    meta = result.best_run.meta
    chosen = meta["selection"]["features"]["selected"]
    assert chosen[0] == keep and fix not in chosen
    assert meta["tuned_features"] == chosen and fix in meta["fixed_features"]
    assert result.weights[fix] == 0.0
    assert all(result.weights[n] == 0.0 for n in names if n not in chosen)   # left out: at their start weight


@pytest.mark.parametrize("flags, message", [
    (["--select", "cv:1"], "at least 2 folds"),
    (["--select", "cv:500"], "500 folds for 30 dev sentences"),
    (["--select", "cv:3", "--grid", "Cee=1"], "unknown grid key"),
    (["--grid", "C=1"], "give --select too"),
    (["--keep", "x"], "give --select-features too"),
    (["--select-direction", "forward"], "give --select-features too"),
    (["--select-features", "--select-rule", "fold-sd", "--select-alpha", "0.1"], "give --select-rule paired too"),
])
def test_bad_selection_options_exit_2_and_write_nothing(tmp_path, capsys, flags, message):
    out = tmp_path / "w.json"
    code, _, err = run(["tune", NBEST, *sum((["-r", r] for r in REFS), []), "--sentences", "0-29", *flags,
                        "-o", out, "--quiet"], capsys)
    assert code == 2 and message in err and err.count("error:") == 1
    assert os.listdir(tmp_path) == []
