"""Direction everywhere: lower-is-better metrics (TER, segment scores given with --lower-better)
are kept, ranked and compared the right way round by every "keep the best" site.

Each test uses a lower-is-better metric where taking the largest value picks the wrong answer, and
checks a property (the lowest TER is kept, improvements are positive when TER drops), not numbers.
"""

import dataclasses
import json
import types

import numpy as np
import pytest
import sacrebleu

from rerank import consensus
from rerank.htmlreport import analysis, figures
from rerank.metrics import make_metric
from rerank.metrics.external import SegmentScoresMetric, read_segment_scores
from rerank.metrics.registry import (METRIC_NAMES, QUALITY_METRICS, MetricInfo, best_index, best_of, better,
                                     display_name, higher_is_better, improvement, metric_info, objective)
from rerank.nbest import NBestList
from rerank.tuning import prepare
from tests.cli_helpers import run
from tests.mira_helpers import NBEST, REFS, joshua, one_best

REF_ARGS = [x for r in REFS for x in ("-r", r)]
SMALL = ["tune", NBEST, *REF_ARGS, "--sentences", "0-29", "--epochs", "3", "--quiet"]


# ---- the registry ---------------------------------------------------------------------------------

def test_registry_knows_every_builtin_metric_with_its_direction_and_display_name():
    assert set(METRIC_NAMES) == {"bleu", "meteor", "ter", "chrf", "chrf++", "length"}
    assert set(QUALITY_METRICS) == set(METRIC_NAMES) - {"length"}
    assert [m for m in METRIC_NAMES if not higher_is_better(m)] == ["ter"]
    assert {m: display_name(m) for m in METRIC_NAMES} == {
        "bleu": "BLEU", "meteor": "METEOR", "ter": "TER", "chrf": "chrF", "chrf++": "chrF++", "length": "Length"}
    assert display_name("COMET") == "COMET"          # not registered: shown as it is
    with pytest.raises(ValueError, match="unknown metric"):
        higher_is_better("COMET")                     # ... but its direction is never guessed
    for name in ("bleu", "chrf", "chrf++", "ter", "length"):
        metric = make_metric(name)
        assert metric.info is metric_info(name) and metric.higher_is_better == metric_info(name).higher_is_better


def test_helpers_follow_the_direction():
    runs = [48.18, 47.85, 48.00]
    assert best_index(runs, "ter") == 1 and best_index(runs, "bleu") == 0
    assert best_of(["a", "b", "c"], "ter", key=lambda x: runs["abc".index(x)]) == "b"
    assert better(47.85, 48.18, "ter") and not better(48.18, 47.85, "ter") and not better(48.0, 48.0, "ter")
    assert improvement(47.85, 48.18, "ter") == pytest.approx(0.33) and improvement(2.0, 1.0, "bleu") == 1.0
    assert objective(40.0, "ter") == -40.0 and best_index([3.0, 1.0, 1.0], "ter") == 1   # first of equal ones


def test_segment_scores_carry_their_direction(tmp_path):
    path = tmp_path / "errors.tsv"
    path.write_text("base\tsys\n3\t1\n5\t2\n")
    errors = read_segment_scores("errors", str(path), higher_is_better=False)
    assert errors.info == MetricInfo("errors", "errors", higher_is_better=False, decimals=4,
                                     scale="mean of the segment scores")
    assert errors.higher_is_better is False and errors.signature().endswith("lower-is-better")
    base, system = (float(errors.score_from_stats(errors.system_stats(s, 1)[0].sum(0))) for s in ("base", "sys"))
    assert better(system, base, errors) and best_index([base, system], errors) == 1
    assert display_name(errors) == "errors"
    comet = SegmentScoresMetric("comet", {"a": np.array([0.5])})
    assert comet.higher_is_better and metric_info(comet).direction == "higher"


# ---- tuning: TuningMetric names, MIRA, MERT, PRO ---------------------------------------------------

# sacrebleu's TER grows fast with the length: sentences 10 and 11 (references of 26 and 48 words)
# take 7 of the 9 s of the first 20 lists. 20 lists without them, against 2 of their 4 references,
# prepared once per module.
TER_SENTENCES, TER_REFS = [*range(0, 10), *range(12, 22)], 2


@pytest.fixture(scope="module")
def ter_data():
    nbest, refs = joshua(0, max(TER_SENTENCES) + 1)
    nbest = nbest.select_sentences(TER_SENTENCES)
    refs = [[stream[i] for i in TER_SENTENCES] for stream in refs[:TER_REFS]]
    return nbest, refs, prepare(nbest, refs, metric="ter", tokenize="none")


@pytest.fixture(scope="module")
def ter_feature_data(ter_data):
    """The same lists with two features, noise and each hypothesis's sentence TER (lower is better),
    and their tuning data: the TER statistics of ter_data, whose rows are these hypotheses."""
    _, refs, data = ter_data
    sentence_ter = np.asarray(make_metric("ter").score_from_stats(data.stats))
    X = np.column_stack([np.random.default_rng(0).normal(0, 1, data.nbest.n_hyps), sentence_ter])
    nbest = NBestList(data.nbest.offsets, list(data.nbest.hyps), X, ["noise", "ter_feature"])
    return nbest, refs, dataclasses.replace(data, nbest=nbest, tuned=np.ones(2, dtype=bool))


def test_the_ter_feature_is_each_hypothesis_sentence_ter(ter_feature_data):
    nbest, refs, _ = ter_feature_data
    for j in (0, nbest.n_hyps // 2, nbest.n_hyps - 1):
        i = int(nbest.sentence_of_hyp[j])
        expected = sacrebleu.sentence_ter(nbest.hyps[j], [r[i] for r in refs]).score
        assert nbest.features[j, 1] == pytest.approx(expected, abs=1e-9)


def test_tuning_metric_value_is_the_metrics_own_and_objective_is_oriented(ter_data):
    nbest, refs, data = ter_data
    w = np.ones(len(data.feature_names))
    ter = sacrebleu.corpus_ter(one_best(nbest, w), refs).score
    assert data.evaluate(w) == pytest.approx(ter, abs=1e-9)                 # the value: TER itself
    assert data.objective(w) == pytest.approx(-ter, abs=1e-9)               # the objective: higher is better
    summed = data.stats[data.best_rows(w)].sum(axis=0)
    assert data.metric.value(summed) == pytest.approx(ter) and data.metric.value_of(data.metric.objective(summed)) == \
        pytest.approx(ter)
    assert data.metric.info is metric_info("ter") and data.metric.better(ter - 1, ter)


def test_mira_keeps_the_epoch_with_the_lowest_ter(ter_data):
    from rerank.mira.kbmira import kbmira

    _, _, data = ter_data
    res = kbmira(data, seed=2, epochs=8)
    scores = [h["score"] for h in res.history]
    assert min(scores) < max(scores)    # epochs differ, so taking the largest would be wrong
    assert res.best_score == min(scores) == res.history[res.best_epoch - 1]["score"]
    assert res.best_epoch == 1 + scores.index(min(scores))                  # the first of equal ones
    assert data.evaluate(res.weights) == pytest.approx(res.best_score, abs=1e-9)


def test_mert_keeps_the_lowest_ter(ter_data):
    from rerank.mira.mert import mert

    _, _, data = ter_data
    res = mert(data, seed=1, restarts=3, random_directions=2, max_iterations=5)
    values = [h["score"] for h in res.history]
    assert values and res.best_score == pytest.approx(min([res.initial_score, *values]), abs=1e-9)
    assert res.best_score < res.initial_score and data.evaluate(res.weights) == pytest.approx(res.best_score)


@pytest.mark.parametrize("tuner", ["mira", "mert", pytest.param("pro", marks=pytest.mark.neural)])  # PRO: scikit-learn
def test_tuners_learn_that_a_lower_ter_is_better(tuner, ter_feature_data):
    """A feature equal to sentence TER: every tuner must give it a negative weight (the largest TER
    is the worst hypothesis) and end below the TER of the decoder's first hypotheses."""
    from rerank.mira.kbmira import kbmira
    from rerank.mira.mert import mert
    from rerank.mira.pro import pro

    nbest, refs, data = ter_feature_data
    res = {"mira": lambda: kbmira(data, seed=1, epochs=10), "pro": lambda: pro(data, seed=1),
           "mert": lambda: mert(data, seed=1, restarts=2, random_directions=2)}[tuner]()
    assert res.weights[1] < 0
    assert res.best_score < res.initial_score
    assert res.best_score == pytest.approx(sacrebleu.corpus_ter(one_best(nbest, res.weights), refs).score, abs=1e-9)


def test_pro_pairs_prefer_the_lower_ter(ter_data):
    _, _, data = ter_data
    sentence = data.sentence_objectives()
    raw = np.asarray(make_metric("ter").score_from_stats(data.stats)) / 100.0
    np.testing.assert_allclose(sentence, -raw)          # PRO and MIRA gains: higher is better


def test_the_tuning_oracle_picks_the_lowest_sentence_ter(ter_data):
    nbest, refs, data = ter_data
    rows = data.oracle_rows()
    raw = np.asarray(make_metric("ter").score_from_stats(data.stats))
    for i in range(data.nbest.n_sentences):
        lo, hi = data.offsets[i], data.offsets[i + 1]
        assert raw[rows[i]] == raw[lo:hi].min()
    picks = [data.nbest.hyps[int(r)] for r in rows]
    assert data.oracle() == pytest.approx(sacrebleu.corpus_ter(picks, refs).score, abs=1e-9)
    assert data.oracle() < data.evaluate(np.zeros(len(data.feature_names)))


# ---- rerank tune: the best of runs, what it prints, the plot -----------------------------------------

@pytest.mark.parametrize("metric,kept", [("ter", 2), ("bleu", 1)])
def test_best_of_runs_follows_the_direction(metric, kept):
    from rerank.multirun import TuneResult, TuneRun, best_run

    runs = [TuneRun(r, r, s, 50.0, {"f": float(r)}) for r, s in enumerate([48.18, 47.85, 48.00], start=1)]
    best = best_run(runs, metric)
    assert runs[best].run == kept
    result = TuneResult(runs[best].weights, runs, best, metric)
    assert result.weights == {"f": float(kept)} and result.score == (min if metric == "ter" else max)(result.scores)
    assert f"best run {kept} ({'lowest' if metric == 'ter' else 'highest'} {display_name(metric)}" in result.summary()


def test_tune_ter_runs_keep_the_lowest_ter_run_and_plot_its_weights(tmp_path, capsys, monkeypatch):
    plotted = {}
    monkeypatch.setattr("rerank.tuning_plot.plot_tuning",
                        lambda path, curves, names, weights, **kw: plotted.update(weights=list(weights), **kw))
    out = tmp_path / "w.json"
    code, stdout, err = run([*SMALL, "--sentences", "0-9", "--metric", "ter", "--runs", "3", "-o", out,
                             "--plot", tmp_path / "c.png"], capsys)    # sacrebleu's TER is slow: 10 short lists
    assert code == 0, err
    meta = json.loads(out.read_text())["meta"]
    scores = meta["tuned_scores"]
    assert min(scores) < max(scores)    # the runs differ, so taking the largest would be wrong
    assert meta["tuned_score"] == min(scores) and meta["run"] == 1 + scores.index(min(scores))
    chosen = json.loads((tmp_path / f"w.run{meta['run']}.json").read_text())
    assert json.loads(out.read_text())["weights"] == chosen["weights"]
    assert f"best run {meta['run']} (lowest TER" in stdout
    assert plotted["weights"] == [chosen["weights"][n] for n in chosen["weights"]] and not plotted["higher_is_better"]
    # the panel names the run it shows and draws the shares the weights file reports
    assert plotted["run_label"] == f"run {meta['run']} (kept of 3)"
    assert plotted["shares"] == pytest.approx(meta["weight_shares"])


# ---- consensus (MBR) ----------------------------------------------------------------------------------

def test_mbr_with_ter_prefers_the_consensus_hypothesis():
    """TER is a loss: the hypothesis closest to the others must get the highest feature value."""
    lists = [["a b c d e", "a b c d x", "a b c d y", "z z z z z"]]
    nbest = NBestList.from_lists(lists, [np.zeros((4, 1))], ["nmt"], [np.zeros(4)])
    mbr = consensus.mbr_scores(nbest, nbest.scores, consensus.MBROptions(utility="ter"))
    assert int(np.argmax(mbr)) == 0 and int(np.argmin(mbr)) == 3
    I, J, _ = consensus.pair_index(nbest.offsets)
    raw = consensus.ter_values(list(nbest.hyps), I, J)
    assert (raw >= 0).all() and raw.max() > 0
    np.testing.assert_allclose(consensus.ter_utility(list(nbest.hyps), I, J), -raw)


# ---- the HTML report's better/worse sentences, buckets, deltas ---------------------------------------

@pytest.mark.parametrize("direction", ["ter", "metric object", "segment scores"])
def test_changed_sentences_call_a_lower_ter_better(direction):
    metric = {"ter": "ter", "metric object": make_metric("ter"),
              "segment scores": SegmentScoresMetric("errors", {"x": np.zeros(3)}, higher_is_better=False)}[direction]
    ch = analysis.changed_sentences(["a", "b", "c"], ["A", "B", "c"], [50.0, 20.0, 10.0], [30.0, 40.0, 10.0], metric)
    assert ch.better == [0] and ch.worse == [1] and ch.tied == 0
    assert ch.gains.tolist() == [20.0, -20.0, 0.0]


def test_length_buckets_count_a_lower_ter_as_an_improvement():
    ter = make_metric("ter")
    # per-sentence [edits, ref_len]: the system makes fewer edits everywhere
    base = np.array([[[4.0, 5.0], [6.0, 15.0]]])
    system = np.array([[[1.0, 5.0], [3.0, 15.0]]])
    table = types.SimpleNamespace(metrics=["ter"], metric_objects={"ter": ter}, systems=["base", "sys"],
                                  baseline="base", stats={("base", "ter"): base, ("sys", "ter"): system},
                                  higher_is_better={"ter": False})
    refs = [["one two three four five", " ".join(["w"] * 15)]]
    buckets = analysis.length_buckets(table, refs, lambda s: s, edges=(10,))
    assert buckets.scores["ter"]["sys"][0] < buckets.scores["ter"]["base"][0]
    assert all(d > 0 for d in buckets.deltas["ter"]["sys"])


def test_delta_figure_says_how_a_lower_is_better_improvement_is_counted():
    cell = types.SimpleNamespace(delta=1.0, delta_low=0.5, delta_high=1.5)
    table = types.SimpleNamespace(metrics=["bleu", "ter"], systems=["base", "sys"], baseline="base",
                                  cells={("sys", "bleu"): cell, ("sys", "ter"): cell},
                                  higher_is_better={"bleu": True, "ter": False}, display=display_name)
    fig = figures.delta_figure(table)
    labels = {ax.get_title(): ax.get_xlabel() for ax in fig.axes}
    figures._pyplot().close(fig)
    assert labels["BLEU"] == "improvement over base"
    assert labels["TER (lower is better)"] == "improvement over base (baseline \u2212 system)"
