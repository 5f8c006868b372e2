"""`rerank eval` end to end on a Multi30k slice: table contents, formats, plot, bad input."""

import json
import os
import shutil

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, TER

from rerank.cli import main
from rerank.metrics import Metric
from rerank.evaluation import evaluate_systems

DATA = os.path.join(os.path.dirname(__file__), "data", "eval")


def p(name):
    return os.path.join(DATA, name)


def lines(name):
    with open(p(name), encoding="utf-8") as fh:
        return fh.read().splitlines()


def run_cli(capsys, *argv):
    code = main(["eval", *argv, "--quiet"])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_numbers_match_sacrebleu_and_marks(capsys):
    code, out, _ = run_cli(capsys, "-r", p("ref.de"), "-b", p("base.de"), "good=" + p("good.de"),
                           "--metrics", "bleu,ter,chrf,length", "--lang", "de", "--ar", "500", "--bootstrap", "200",
                           "--to", "json")
    assert code == 0
    res = json.loads(out)
    assert res["systems"] == ["base.de", "good"] and res["config"]["runs"] == {"base.de": 3, "good": 3}
    cell = {(r["system"], r["metric"]): r for r in res["results"]}
    ref = lines("ref.de")
    mean_ter = {}
    for name, stem in (("base.de", "base.de"), ("good", "good.de")):
        runs = [lines(f"{stem}.run{k}") for k in (1, 2, 3)]
        bleu = [BLEU().corpus_score(h, [ref]).score for h in runs]
        ter = [TER().corpus_score(h, [ref]).score for h in runs]
        assert cell[(name, "bleu")]["score"] == pytest.approx(np.mean(bleu))
        assert cell[(name, "bleu")]["s_opt"] == pytest.approx(np.std(bleu, ddof=1))
        assert cell[(name, "ter")]["score"] == pytest.approx(np.mean(ter))
        mean_ter[name] = np.mean(ter)
    assert cell[("good", "bleu")]["marks"] == "\u2020" and cell[("good", "ter")]["marks"] == "\u2020"
    assert cell[("good", "bleu")]["p"] == 1 / 501  # no random split reaches the real difference
    # the TER improvement is positive although TER went down: base - good
    assert cell[("good", "ter")]["delta"] == pytest.approx(mean_ter["base.de"] - mean_ter["good"])
    assert cell[("base.de", "bleu")]["p"] is None
    assert "BLEU|nrefs:1" in res["signatures"]["bleu"]


def test_table_markdown_latex_csv_and_plot(capsys, tmp_path):
    common = ["-r", p("ref.en"), "-b", "base=" + p("cap1.en"), "c2=" + p("cap2.en"), "good=" + p("good.en.run1"),
              "--metrics", "bleu,ter", "--ar", "300", "--bootstrap", "100", "--second-baseline", "c2"]
    code, out, _ = run_cli(capsys, *common)
    assert code == 0 and "\u2020\u2021" in out and "BLEU \u2191" in out and "TER \u2193" in out
    code, out, _ = run_cli(capsys, *common, "--to", "markdown", "--holm")
    assert out.startswith("| System |") and "Holm" in out
    code, out, _ = run_cli(capsys, *common, "--to", "latex")
    assert "\\begin{tabular}" in out and "$^\\dagger$" in out
    png = tmp_path / "d.png"
    csv_path = tmp_path / "t.csv"
    code, out, _ = run_cli(capsys, *common, "-o", str(csv_path), "--plot", str(png))
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    rows = csv_path.read_text().splitlines()
    assert rows[0].startswith("system,metric,score") and len(rows) == 1 + 3 * 2
    assert json.loads((tmp_path / "t.config.json").read_text())["ar_trials"] == 300


SMALL = ["-r", p("ref.en"), "-b", "base=" + p("cap1.en"), "c2=" + p("cap2.en"), "--metrics", "bleu", "--ar", "50",
         "--bootstrap", "0"]


@pytest.mark.parametrize("name,extra,start", [
    ("res.md", [], "| System |"), ("res.markdown", [], "| System |"), ("res.tex", [], "\\begin{tabular}"),
    ("res.csv", [], "system,metric,score"), ("res.json", [], "{"), ("res.txt", [], "System"), ("res", [], "System"),
    ("res.md", ["--to", "json"], "{"), ("res.json", ["--to", "csv"], "system,metric"),
    ("res.md", ["--format", "latex"], "\\begin{tabular}"), ("res.csv", ["--to", "json", "--format", "json"], "{"),
])
def test_output_extension_picks_the_table_format_unless_to_says(capsys, tmp_path, name, extra, start):
    code, _, err = run_cli(capsys, *SMALL, "-o", str(tmp_path / name), *extra)
    assert code == 0, err
    assert (tmp_path / name).read_text().startswith(start)
    assert ("--format` is deprecated, use --to" in err) == ("--format" in extra)


def test_to_and_deprecated_format_must_agree(capsys, tmp_path):
    code, _, err = run_cli(capsys, *SMALL, "--to", "json", "--format", "csv", "-o", str(tmp_path / "r.json"))
    assert code == 2 and "rerank eval: error: --to json and --format csv disagree" in err
    assert list(tmp_path.iterdir()) == []


def test_a_file_and_runs_of_the_same_path_are_refused(capsys, tmp_path):
    for name in ("sys.de", "sys.de.run1", "sys.de.run2"):
        shutil.copy(p("cap1.de"), tmp_path / name)
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir()}
    sys_path = str(tmp_path / "sys.de")
    out = tmp_path / "res.json"
    code, _, err = run_cli(capsys, "-r", p("ref.de"), "-b", p("cap2.de"), sys_path, "--metrics", "bleu", "-o", str(out))
    assert code == 2
    assert f"rerank eval: error: {sys_path}: is a file, and {sys_path}.run1, {sys_path}.run2 are runs of it" in err
    assert {f.name: f.read_bytes() for f in tmp_path.iterdir()} == before   # nothing written
    code, out_text, err = run_cli(capsys, "-r", p("ref.de"), "-b", p("cap2.de"), sys_path + ".run*", "--metrics", "bleu",
                                  "--ar", "20", "--bootstrap", "0", "--to", "json")
    assert code == 0, err
    assert json.loads(out_text)["config"]["runs"] == {"cap2.de": 1, "sys.de": 2}


def test_python_entry_point_second_baseline_and_multeval_rule():
    ref = lines("ref.de")
    base = [lines("cap1.de")]
    table = evaluate_systems([ref], base, {"same": [lines("cap1.de")], "good": [lines("good.de.run1")]},
                             metrics=["bleu"], ar=200, bootstrap=50, second_baseline="same")
    assert table.cells[("same", "bleu")].p == 1.0
    assert table.cells[("good", "bleu")].p2 == 1 / 201 and table.cells[("good", "bleu")].marks == "\u2020\u2021"
    compat = evaluate_systems([ref], base, {"same": [lines("cap1.de")]}, metrics=["bleu"], ar=200,
                              bootstrap=50, multeval_compat=True)
    assert compat.cells[("same", "bleu")].p == pytest.approx(1 / 201)


@pytest.mark.parametrize("make_args,message", [
    (lambda t: ["-r", p("ref.de"), "-b", p("cap1.de"), t["short"]], "lines but the references have 40"),
    (lambda t: ["-r", p("ref.de"), "-b", p("cap1.de"), t["empty"]], "empty file"),
    (lambda t: ["-r", t["empty"], "-b", p("cap1.de")], "empty file"),
    (lambda t: ["-r", p("ref.de"), "-r", t["short"], "-b", p("cap1.de")], "lines but"),
    (lambda t: ["-r", p("ref.de"), "-b", p("cap1.de"), "--metrics", "bleu,rouge"], "unknown metric"),
    (lambda t: ["-r", p("ref.de"), "-b", p("cap1.de"), "--lang", "xx"], "unknown language"),
    (lambda t: ["-r", p("ref.de"), "-b", p("cap1.de"), "--tokenize", "bogus"], "unknown BLEU tokenizer 'bogus'"),
    (lambda t: ["-r", p("ref.de"), "-b", p("cap1.de"), p("nonexistent.de")], "no such file"),
    (lambda t: ["-r", p("ref.de"), "-b", p("cap1.de"), "--second-baseline", "zzz"], "not a system name"),
])
def test_bad_input_exits_2(capsys, tmp_path, make_args, message):
    short = tmp_path / "short.de"
    short.write_text("\n".join(lines("cap1.de")[:30]) + "\n")
    empty = tmp_path / "empty.de"
    empty.write_text("")
    for k in (1, 2):
        shutil.copy(p(f"good.de.run{k}"), tmp_path / f"two.de.run{k}")
    files = {"short": str(short), "empty": str(empty), "tworuns": str(tmp_path / "two.de")}
    code, _, err = run_cli(capsys, *make_args(files), "--metrics", "bleu") if "--metrics" not in make_args(files) \
        else run_cli(capsys, *make_args(files))
    assert code == 2
    assert err.startswith("rerank eval: error:") and message in err


def test_nbest_with_weights_is_a_system(capsys, tmp_path):
    """--nbest F --weights W: the 1-best under W is scored like a hypothesis file."""
    cap, good = lines("cap1.de"), lines("good.de.run1")
    nbest = tmp_path / "test.nbest"
    nbest.write_text("".join(f"{i} ||| {c} ||| f= 1 0 ||| 0\n{i} ||| {g} ||| f= 0 1 ||| 0\n"
                             for i, (c, g) in enumerate(zip(cap, good))), encoding="utf-8")
    (tmp_path / "pick_good.weights").write_text("f= 0 1\n")
    (tmp_path / "pick_cap.weights").write_text("f= 1 0\n")
    code, out, err = run_cli(capsys, "-r", p("ref.de"), "-b", p("cap1.de"), "good=" + p("good.de.run1"),
                             "--nbest", f"nb_good={nbest}", "--weights", str(tmp_path / "pick_good.weights"),
                             "--nbest", f"nb_cap={nbest}", "--weights", str(tmp_path / "pick_cap.weights"),
                             "--metrics", "bleu", "--ar", "100", "--bootstrap", "20", "--to", "json")
    assert code == 0, err
    cells = {(r["system"], r["metric"]): r for r in json.loads(out)["results"]}
    assert cells[("nb_good", "bleu")]["score"] == pytest.approx(cells[("good", "bleu")]["score"])
    assert cells[("nb_cap", "bleu")]["score"] == pytest.approx(cells[("cap1.de", "bleu")]["score"])
    assert cells[("nb_cap", "bleu")]["p"] == 1.0


def test_meteor_column_and_missing_paraphrase_table(capsys):
    code, out, _ = run_cli(capsys, "-r", p("ref.de"), "-b", p("cap1.de"), "good=" + p("good.de.run1"),
                           "--metrics", "bleu,meteor,ter", "--lang", "de", "--meteor-modules", "exact,stem",
                           "--ar", "200", "--bootstrap", "50", "--to", "json")
    assert code == 0
    res = json.loads(out)
    stored = np.loadtxt(p("meteor/good.de.run1.jar-stats"))
    from rerank.metrics.meteor import MeteorMetric, summable

    expect = MeteorMetric("de", ["exact", "stem"]).score_from_stats(summable(stored).sum(0))
    cell = {(r["system"], r["metric"]): r for r in res["results"]}
    assert cell[("good", "meteor")]["score"] == pytest.approx(expect)
    assert cell[("good", "meteor")]["marks"] == "\u2020"
    assert "modules:exact+stem" in res["signatures"]["meteor"]
    code, _, err = run_cli(capsys, "-r", p("ref.de"), "-b", p("cap1.de"), "--metrics", "meteor", "--lang", "de")
    assert code == 2 and "paraphrase-de.gz" in err and "paraphrase module out" in err


def test_single_run_baseline_keeps_its_one_run(capsys, tmp_path):
    """A deterministic 1-best (one file) against a system with 3 tuning runs: the baseline keeps its
    one run (score = its corpus score, no s_opt), and the pair is tested on 1 + 3 runs."""
    single = tmp_path / "one.de"
    shutil.copy(p("base.de.run1"), single)
    code, out, _ = run_cli(capsys, "-r", p("ref.de"), "-b", f"base={single}", "good=" + p("good.de"),
                           "--metrics", "bleu", "--lang", "de", "--ar", "300", "--bootstrap", "50", "--to", "json")
    assert code == 0
    res = json.loads(out)
    assert res["config"]["runs"] == {"base": 1, "good": 3}
    cell = {(r["system"], r["metric"]): r for r in res["results"]}
    expected = BLEU().corpus_score(lines("base.de.run1"), [lines("ref.de")]).score
    assert abs(cell[("base", "bleu")]["score"] - expected) < 1e-9
    assert cell[("base", "bleu")]["s_opt"] is None and cell[("base", "bleu")]["runs"] == [cell[("base", "bleu")]["score"]]


def test_different_run_counts_are_noted_and_tested_on_their_own_runs(capsys, tmp_path):
    for r in (1, 2):
        shutil.copy(p(f"good.de.run{r}"), tmp_path / f"two.run{r}")
    code, out, err = run_cli(capsys, "-r", p("ref.de"), "-b", p("base.de"), "two=" + str(tmp_path / "two"),
                             "--metrics", "bleu", "--ar", "200", "--bootstrap", "0", "--to", "json")
    assert code == 0 and "note: the systems have different run counts (base.de 3, two 2)" in err
    assert json.loads(out)["config"]["runs"] == {"base.de": 3, "two": 2}


class RatioMetric(Metric):
    """Hand-made statistics: a hypothesis "m/l" is the statistics [m, l]; score 100 * sum m / sum l."""

    name = "ratio"
    higher_is_better = True

    def sentence_stats(self, hyps, refs):
        return np.array([[float(x) for x in h.split("/")] for h in hyps])

    def score_from_stats(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        return 100.0 * stats[..., 0] / stats[..., 1]

    def signature(self):
        return "ratio"


def test_mark_direction_comes_from_pooled_statistics_not_mean_of_runs():
    """Two runs per system, 20 sentences each. "mean_up" scores 100 and 25 (mean 62.5 > 50) but its
    pooled statistics give 220/820 = 26.8 < 50; "mean_down" scores 0 and 80 (mean 40 < 50) but pools
    to 800/1020 = 78.4 > 50. The AR test judges the pooled difference, so the dagger goes to mean_down."""
    n = 20
    base = [["5/10"] * n, ["5/10"] * n]
    systems = {"mean_up": [["1/1"] * n, ["10/40"] * n], "mean_down": [["0/1"] * n, ["40/50"] * n]}
    table = evaluate_systems([["ref"] * n], base, systems, metrics=[RatioMetric()], ar=1000, bootstrap=0)
    up, down = table.cells[("mean_up", "ratio")], table.cells[("mean_down", "ratio")]
    assert up.runs == [100.0, 25.0] and up.score == 62.5
    assert down.runs == [0.0, 80.0] and down.score == 40.0
    # no random split of the pooled outputs is as far from the baseline as either system
    assert up.p == down.p == 1 / 1001
    assert up.marks == "" and down.marks == "\u2020"


def test_each_pair_is_tested_on_its_own_runs():
    """A one-run baseline and second baseline next to a 3-run system: every pair's p-values, interval
    and marks equal those of the pair evaluated alone. The table's largest run count used to be
    forced on every pair (a one-run pair was "stratified" over three copies of each system), which
    rejects far more than alpha of equal systems (tests/test_calibration.py)."""
    ref, cap1, cap2, cap3 = lines("ref.de"), lines("cap1.de"), lines("cap2.de"), lines("cap3.de")
    good = [lines(f"good.de.run{k}") for k in (1, 2, 3)]
    options = dict(metrics=["bleu", "ter"], ar=300, bootstrap=100, lang="de")
    table = evaluate_systems([ref], [cap1], {"good": good, "c2": [cap2], "c3": [cap3]}, second_baseline="c2", **options)
    for name, runs in (("good", good), ("c2", [cap2]), ("c3", [cap3])):
        alone = evaluate_systems([ref], [cap1], {name: runs}, **options)
        for m in ("bleu", "ter"):
            got, want = table.cells[(name, m)], alone.cells[(name, m)]
            assert (got.p, got.bs_p, got.delta_low, got.delta_high, got.marks.replace("\u2021", "")) == \
                (want.p, want.bs_p, want.delta_low, want.delta_high, want.marks), (name, m)
    for name, runs in (("good", good), ("c3", [cap3])):  # the double-dagger test is the pair (c2, system) alone
        alone = evaluate_systems([ref], [cap2], {name: runs}, **options)
        for m in ("bleu", "ter"):
            assert table.cells[(name, m)].p2 == alone.cells[(name, m)].p
    assert table.cells[("baseline", "bleu")].s_opt is None and table.cells[("c2", "ter")].runs == \
        [table.cells[("c2", "ter")].score]
