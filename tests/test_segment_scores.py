"""--segment-scores NAME=FILE.tsv: scores computed elsewhere (COMET, human) as an averaged metric with
randomisation, bootstrap intervals and multi-run stratification; clear errors for bad tables."""

import json
import os

import numpy as np
import pytest

from rerank.cli import main
from rerank.metrics.external import SegmentScoresMetric, read_segment_scores
from rerank.evaluation import evaluate_systems
from rerank.significance import approximate_randomization, bootstrap_weights

DATA = os.path.join(os.path.dirname(__file__), "data", "eval")
REF = os.path.join(DATA, "ref.en")
N = 40  # lines of ref.en


def write_tsv(path, columns: dict, rows=None):
    names = list(columns)
    n = len(next(iter(columns.values()))) if rows is None else rows
    lines = ["\t".join(names)] + ["\t".join(repr(float(columns[c][i])) for c in names) for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def scores():
    rng = np.random.default_rng(3)
    base = rng.uniform(0.5, 0.9, N)
    return {"base": base, "good": base + rng.uniform(0.0, 0.1, N), "same": base.copy()}


def eval_json(capsys, *argv):
    code = main(["eval", "-r", REF, "--to", "json", "--quiet", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def test_mean_score_marks_and_bootstrap_interval(tmp_path, capsys, scores):
    tsv = write_tsv(tmp_path / "comet.tsv", {"good": scores["good"], "base": scores["base"], "extra": scores["same"]})
    args = ["-b", "base=" + os.path.join(DATA, "cap1.en"), "good=" + os.path.join(DATA, "cap2.en"),
            "--segment-scores", f"comet={tsv}", "--metrics", "bleu,comet", "--ar", "999", "--bootstrap", "300"]
    code, res, _ = eval_json(capsys, *args)
    assert code == 0 and res["metrics"] == ["bleu", "comet"]
    cell = {(r["system"], r["metric"]): r for r in res["results"]}
    assert cell[("base", "comet")]["score"] == pytest.approx(scores["base"].mean())
    assert cell[("good", "comet")]["score"] == pytest.approx(scores["good"].mean())
    # every segment improves: no random swap reaches the observed difference
    assert cell[("good", "comet")]["p"] == pytest.approx(1 / 1000) and cell[("good", "comet")]["marks"] == "\u2020"
    # s_sel and the interval are those of the mean over the same resamples (drawn as sacrebleu draws them)
    w = bootstrap_weights(np.random.default_rng(12345), 300, N)
    means = w @ np.stack([scores["base"], scores["good"]], axis=1) / N
    assert cell[("base", "comet")]["s_sel"] == pytest.approx(means[:, 0].std(ddof=1))
    lo, hi = np.percentile(means[:, 1] - means[:, 0], [2.5, 97.5])
    assert (cell[("good", "comet")]["delta_low"], cell[("good", "comet")]["delta_high"]) == (pytest.approx(lo), pytest.approx(hi))
    assert res["signatures"]["comet"].startswith("comet|segment-scores:comet.tsv|sha256:")
    code = main(["eval", "-r", REF, "--quiet", *args])
    table = capsys.readouterr().out
    assert f"{scores['good'].mean():.4f} \u2020" in table  # scores below 10 get 4 decimals


def test_identical_columns_give_p_one_and_lower_better_flips_marks(tmp_path, capsys, scores):
    tsv = write_tsv(tmp_path / "err.tsv", {"base": scores["base"], "same": scores["same"], "good": scores["good"]})
    code, res, _ = eval_json(capsys, "-b", "base=" + os.path.join(DATA, "cap1.en"),
                             "same=" + os.path.join(DATA, "cap2.en"), "good=" + os.path.join(DATA, "cap3.en"),
                             "--segment-scores", f"errors={tsv}", "--lower-better", "errors", "--metrics", "errors",
                             "--ar", "500", "--bootstrap", "0")
    cell = {(r["system"], r["metric"]): r for r in res["results"]}
    assert cell[("same", "errors")]["p"] == 1.0 and cell[("same", "errors")]["marks"] == ""
    assert cell[("good", "errors")]["p"] == pytest.approx(1 / 501) and cell[("good", "errors")]["marks"] == ""
    assert "lower-is-better" in res["signatures"]["errors"]


def test_runs_are_stratified_like_any_metric(tmp_path, capsys):
    """Three runs per system from NAME.run1..3 columns; the test equals the stratified test on the
    [score, 1] statistics, and a deterministic baseline (one file) uses its single column."""
    rng = np.random.default_rng(5)
    base = rng.uniform(0, 1, N)
    runs = {f"sys.run{r}": base + rng.normal(0.005, 0.05, N) for r in (1, 2, 3)}
    tsv = write_tsv(tmp_path / "h.tsv", {"base": base, **runs})
    for r in (1, 2, 3):
        (tmp_path / f"sys.run{r}").write_text("".join(f"hyp {i} {r}\n" for i in range(N)))
    code, res, _ = eval_json(capsys, "-b", "base=" + os.path.join(DATA, "cap1.en"), "sys=" + str(tmp_path / "sys"),
                             "--segment-scores", f"human={tsv}", "--metrics", "human", "--ar", "2000",
                             "--bootstrap", "100")
    assert code == 0 and res["config"]["runs"] == {"base": 1, "sys": 3}
    cell = {(r["system"], r["metric"]): r for r in res["results"]}
    run_means = [runs[f"sys.run{r}"].mean() for r in (1, 2, 3)]
    assert cell[("sys", "human")]["runs"] == pytest.approx(run_means)
    assert cell[("sys", "human")]["s_opt"] == pytest.approx(np.std(run_means, ddof=1))
    metric = SegmentScoresMetric("human", {"base": base, **runs})
    expect = approximate_randomization(metric, metric.system_stats("base", 1), metric.system_stats("sys", 3),
                                       trials=2000, seed=12345)
    assert cell[("sys", "human")]["p"] == pytest.approx(expect.p_value)
    assert 1 / 2001 < expect.p_value < 1  # stratification over runs: not the trivially extreme value


def test_python_api_and_report(tmp_path, scores):
    metric = SegmentScoresMetric("comet", {"baseline": scores["base"], "good": scores["good"]})
    hyps = open(os.path.join(DATA, "cap1.en"), encoding="utf-8").read().splitlines()
    refs = [open(REF, encoding="utf-8").read().splitlines()]
    table = evaluate_systems(refs, [hyps], {"good": [hyps[::-1]]}, metrics=["bleu", metric], ar=200,
                             bootstrap=50)
    assert table.cells[("good", "comet")].delta == pytest.approx(scores["good"].mean() - scores["base"].mean())
    assert table.decimals == {"bleu": 2, "comet": 4}


@pytest.mark.parametrize("content,message", [
    ("base\tgood\n" + "0.5\t0.6\n" * N, "no column 'other' for system 'other'"),
    ("base\tgood\tother\n" + "0.5\t0.6\t0.7\n" * (N - 1), f"{N - 1} rows of scores but the references have {N} lines"),
    ("base\tgood\tother\n" + "0.5\t0.6\t0.7\n" * (N + 2), f"{N + 2} rows of scores but the references have {N} lines"),
    ("base\tgood\tother\n" + "0.5\t0.6\t0.7\n" * 3 + "0.5\tabc\t0.7\n", "column 'good': 'abc' is not a number"),
    ("base\tgood\tother\n" + "0.5\t0.6\t0.7\n" * 3 + "0.5\tnan\t0.7\n", "column 'good': 'nan' is not a finite number"),
    ("base\tgood\tother\n" + "0.5\t0.6\n", "2 fields but the header has 3"),
    ("base\tbase\tother\n", "column 'base' appears twice in the header"),
    ("", "empty file"),
])
def test_bad_tables_exit_2_naming_file_and_line(tmp_path, capsys, content, message):
    tsv = tmp_path / "s.tsv"
    tsv.write_text(content, encoding="utf-8")
    out = tmp_path / "table.md"
    code = main(["eval", "-r", REF, "-b", "base=" + os.path.join(DATA, "cap1.en"), "good=" + os.path.join(DATA, "cap2.en"),
                 "other=" + os.path.join(DATA, "cap3.en"), "--segment-scores", f"comet={tsv}", "--metrics", "bleu,comet",
                 "--ar", "10", "--bootstrap", "0", "-o", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith(f"rerank eval: error: {tsv}") and message in err[0], err
    assert not out.exists() and not (tmp_path / "table.config.json").exists()
    line = {"no column": 1, "appears twice": 1, "fields": 2, "'abc'": 5, "'nan'": 5, "+2": N + 2}
    for key, number in line.items():
        if key in message or (key == "+2" and f"{N + 2} rows" in message):
            assert err[0].startswith(f"rerank eval: error: {tsv}:{number}: ")


@pytest.mark.parametrize("extra,message", [
    (["--segment-scores", "bleu=x.tsv"], "--segment-scores bleu: the name is taken"),
    (["--segment-scores", "comet"], "expected NAME=FILE.tsv"),
    (["--segment-scores", "co,met=x.tsv"], "NAME must start with a letter"),
    (["--lower-better", "comet"], "--lower-better comet: not a --segment-scores NAME"),
    (["--metrics", "bleu,comet"], "the metric comet needs --comet-model PATH"),
])
def test_bad_options(capsys, extra, message):
    code = main(["eval", "-r", REF, "-b", os.path.join(DATA, "cap1.en"), "--quiet", *extra])
    assert code == 2 and message in capsys.readouterr().err


def test_reader_accepts_run1_for_a_single_run_and_gzip(tmp_path):
    import gzip

    path = tmp_path / "s.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("\ufeffa.run1\tb\n1\t2\n3\t4\n")
    metric = read_segment_scores("m", str(path), 2)
    np.testing.assert_array_equal(metric.system_stats("a", 1)[0, :, 0], [1, 3])
    assert metric.system_stats("b", 1).shape == (1, 2, 2) and metric.decimals == 4
