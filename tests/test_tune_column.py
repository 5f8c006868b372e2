"""`rerank tune --metric column:NAME` and interpolated objectives (`bleu=0.5,column:comet=0.5`):
every tuner finds a planted objective, the column is no feature, direction, interpolation, the
command line and its errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rerank.errors import InputError
from rerank.mira.kbmira import kbmira
from rerank.mira.mert import mert
from rerank.mira.pro import pro
from rerank.nbest import NBestList, segment_argmax
from rerank.tuning import prepare

W_STAR = np.array([1.0, -2.0, 0.5])


def planted(seed: int = 0, n: int = 15, k: int = 6, margin: float = 1.5, extra: bool = False) -> NBestList:
    """n lists of k hypotheses with features [a, b, c] and a column q = f . W_STAR whose best and
    worst hypothesis of every list stand `margin` apart from the others (distinct values per list);
    with `extra`, a second column r (noise)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n * k, 3))
    unit = W_STAR / (W_STAR @ W_STAR)
    for i in range(n):
        block = slice(i * k, (i + 1) * k)
        q = X[block] @ W_STAR
        X[i * k + int(q.argmax())] += margin * unit  # q of the best rises by margin
        X[i * k + int(q.argmin())] -= margin * unit  # q of the worst falls by margin
    q = X @ W_STAR
    columns = [X, q[:, None]] + ([rng.normal(size=(n * k, 1))] if extra else [])
    names = ["a", "b", "c", "q"] + (["r"] if extra else [])
    return NBestList(np.arange(0, n * k + 1, k), [f"h{j}" for j in range(n * k)], np.hstack(columns), names)


def run_tuner(name: str, data, seed: int = 1):
    if name == "mira":
        return kbmira(data, seed=seed)
    if name == "mert":
        return mert(data, seed=seed, restarts=3)
    return pro(data, seed=seed)


TUNERS = ["mira", "mert", pytest.param("pro", marks=pytest.mark.neural)]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("tuner", TUNERS)
@pytest.mark.parametrize("lower", [False, True])
def test_every_tuner_finds_the_planted_best_of_every_list(tuner, seed, lower):
    nbest = planted(seed)
    data = prepare(nbest, None, metric="column:q", lower_better=("q",) if lower else ())
    assert data.feature_names == ["a", "b", "c"]  # the objective is no feature
    q = nbest.column("q")
    best = segment_argmax(-q if lower else q, nbest.offsets)
    res = run_tuner(tuner, data)
    picks = segment_argmax(data.features @ res.weights, data.offsets)
    np.testing.assert_array_equal(picks, best)
    oracle_mean = float(q[best].mean())
    assert res.best_score == pytest.approx(oracle_mean)            # the value: the mean of q, not its negation
    assert data.evaluate(res.weights) == pytest.approx(oracle_mean)
    initial = data.evaluate(np.zeros(3))
    assert (res.best_score <= initial) if lower else (res.best_score >= initial)
    assert data.oracle() == pytest.approx(oracle_mean)


@pytest.mark.parametrize("tuner", TUNERS)
def test_a_zero_weighted_component_changes_nothing(tuner):
    nbest = planted(3, extra=True)
    alone = prepare(nbest, None, metric="column:q")
    mixed = prepare(nbest, None, metric="column:q=1,column:r=0")
    assert alone.feature_names == ["a", "b", "c", "r"] and mixed.feature_names == ["a", "b", "c"]
    # r is a feature in the first and the objective's column in the second: compare on the same features
    alone = prepare(nbest.select_features(["a", "b", "c", "q"]), None, metric="column:q")
    a, m = run_tuner(tuner, alone, seed=2), run_tuner(tuner, mixed, seed=2)
    np.testing.assert_array_equal(a.weights, m.weights)
    assert a.best_score == pytest.approx(m.best_score) and a.initial_score == pytest.approx(m.initial_score)


def test_interpolation_is_the_weighted_sum_of_oriented_components():
    nbest = planted(4, extra=True)
    data = prepare(nbest, None, metric="column:q=0.5,column:r=2", lower_better=("r",))
    q, r = nbest.column("q"), nbest.column("r")
    w = np.array([0.3, -1.0, 0.2])
    rows = segment_argmax(data.features @ w, data.offsets)
    assert data.evaluate(w) == pytest.approx(0.5 * q[rows].mean() - 2 * r[rows].mean())
    assert data.metric.info.higher_is_better
    np.testing.assert_allclose(data.sentence_objectives(), 0.5 * q - 2 * r)
    assert data.metric.columns == ("q", "r")


def test_interpolation_with_bleu_uses_bleu_points_and_sentence_bleu_plus1():
    from rerank.metrics.bleu import corpus_bleu, sentence_bleu_plus1

    nbest = NBestList(np.array([0, 2, 4]), ["a b c", "x y", "d e", "d f"],
                      np.array([[0.0, 1.0], [1.0, 5.0], [0.0, 2.0], [1.0, 0.0]]), ["f", "q"])
    refs = [["a b c", "d e"]]
    data = prepare(nbest, refs, metric="bleu=0.5,column:q=0.5", tokenize="none")
    bleu = prepare(nbest.select_features(["f"]), refs, metric="bleu", tokenize="none")
    for w in (np.array([-1.0]), np.array([1.0])):
        rows = segment_argmax(data.features @ w, data.offsets)
        expected = 0.5 * corpus_bleu(bleu.stats[rows].sum(0)) + 0.5 * nbest.column("q")[rows].mean()
        assert data.evaluate(w) == pytest.approx(expected)
    np.testing.assert_allclose(data.sentence_objectives(),
                               0.5 * 100 * sentence_bleu_plus1(bleu.stats) + 0.5 * nbest.column("q"))


@pytest.mark.parametrize("spec, lower, message", [
    ("column:zz", (), "no column 'zz' (its columns: a, b, c, q)"),
    ("column:q=1,bleu", (), "not METRIC=WEIGHT"),
    ("column:q=-1", (), "must be finite numbers >= 0"),
    ("column:q=0", (), "every interpolation weight is 0"),
    ("column:q=x", (), "not a number"),
    ("column:q", ("a",), "lower_better a: not a column of the metric"),
])
def test_bad_objectives_are_input_errors(spec, lower, message):
    with pytest.raises(InputError) as info:
        prepare(planted(), None, metric=spec, lower_better=lower)
    assert message in str(info.value)


def test_the_objective_column_cannot_be_tuned_or_fixed():
    for keyword in ("tune", "fix"):
        with pytest.raises(InputError, match="is the objective, not a feature"):
            prepare(planted(), None, metric="column:q", **{keyword: ["q"]})


def test_the_api_writes_weights_without_the_column_and_records_the_objective(tmp_path):
    import rerank

    out = tmp_path / "w.json"
    result = rerank.tune(planted(), metric="column:q", lower_better=("q",), output=out, tuner="mert", restarts=2)
    written = json.loads(out.read_text())
    assert sorted(written["weights"]) == ["a", "b", "c"] and "q" not in result.weights
    meta = written["meta"]
    assert meta["metric"] == "column:q" and meta["lower_better"] == ["q"] and meta["objective_columns"] == ["q"]
    assert meta["objective"] == [{"weight": 1.0, "column": "q", "higher_is_better": False}]
    assert "lower is better" in meta["signature"]
    assert meta["settings"]["options"]["lower_better"] == ["q"]
    assert "lowest" not in result.summary() and "column:q" in result.summary()
    with pytest.raises(InputError, match="needs references"):
        rerank.tune(planted(), metric="bleu=1,column:q=1")


def _write(tmp_path, nbest):
    lines = []
    for j in range(nbest.n_hyps):
        feats = " ".join(f"{n}= {float(v)!r}" for n, v in zip(nbest.feature_names, nbest.features[j]))
        lines.append(f"{int(nbest.sentence_of_hyp[j])} ||| {nbest.hyps[j]} ||| {feats} ||| 0")
    path = tmp_path / "in.nbest"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_cli_tunes_a_column_without_references(tmp_path, capsys):
    from rerank.cli import main

    path = _write(tmp_path, planted())
    out = tmp_path / "w.json"
    assert main(["tune", path, "--metric", "column:q", "--tuner", "mert", "--restarts", "2", "-o", str(out),
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "column:q initial" in printed
    written = json.loads(out.read_text())
    assert sorted(written["weights"]) == ["a", "b", "c"] and written["meta"]["metric"] == "column:q"
    # a different direction is another setting: the run is redone, not reused
    assert main(["tune", path, "--metric", "column:q", "--lower-better", "q", "--tuner", "mert", "--restarts", "2",
                 "-o", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["meta"]["lower_better"] == ["q"]


@pytest.mark.parametrize("args, message", [
    (["--metric", "column:zz"], "no column 'zz' (its columns: a, b, c, q)"),
    (["--metric", "column:q", "--tune", "q"], "--tune q: the column of the tuning metric"),
    (["--metric", "column:q=1,bleu"], "--metric 'column:q=1,bleu': an interpolation is"),
    (["--metric", "column:q=-0.5"], "must be finite numbers >= 0"),
    (["--metric", "column:q=0"], "every interpolation weight is 0"),
    (["--metric", "column:q", "--lower-better", "a"], "--lower-better a: not a column of the metric"),
    (["--metric", "bleu=1,column:q=1"], "needs references (-r REF)"),
])
def test_cli_errors_exit_2_and_write_nothing(tmp_path, capsys, args, message):
    from rerank.cli import main

    path = _write(tmp_path, planted())
    out = tmp_path / "w.json"
    assert main(["tune", path, *args, "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("streamed", [False, True])
def test_applying_column_tuned_weights_ignores_the_objective_column_unwarned(tmp_path, capsys, streamed):
    """The objective column is no feature: `rerank apply` with the tuned weights on the list that still
    carries it ranks by w·f of the features alone (weight 0 on the column) and does not warn that
    the column has no weight; a feature without a weight is still warned about."""
    import rerank
    from rerank.cli import main
    from rerank.weights import best_rows

    nbest = planted()
    path, weights = _write(tmp_path, nbest), tmp_path / "w.json"
    result = rerank.tune(nbest, metric="column:q", output=weights, tuner="mert", restarts=2)
    best = tmp_path / "best.txt"
    option = "--no-cache" if streamed else "--cache"
    assert main(["apply", path, "-w", str(weights), "-o", str(best), option]) == 0
    err = capsys.readouterr().err
    assert "no weight" not in err
    w = np.array([result.weights.get(n, 0.0) for n in nbest.feature_names])
    assert best.read_text().splitlines() == [nbest.hyps[int(r)] for r in best_rows(nbest, w)]
    assert rerank.apply(nbest, weights) == [nbest.hyps[int(r)] for r in best_rows(nbest, w)]
    table = json.loads(weights.read_text())
    del table["weights"]["a"]
    weights.write_text(json.dumps(table))
    assert main(["apply", path, "-w", str(weights), "-o", str(best), option]) == 0
    err = capsys.readouterr().err
    assert "no weight for a;" in err and "q" not in err.split("no weight for", 1)[1].split(";")[0]
