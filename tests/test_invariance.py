"""Invariance and equivalence of the evaluation: what must not change a result does not.

- system order and unrelated systems: a pair's numbers are its own (exactly: the random draws of a
  pair depend on the seed, the run counts and the sentences only);
- metric set and order: every metric of a pair shares the pair's random splits, so adding or
  reordering metrics leaves each metric's p-value exactly as it was;
- sentence order: the same test on the same data, so scores are equal and p-values agree within
  Monte-Carlo noise;
- the CLI and the Python entry point give the same table;
- Holm: `p_raw` is the pair's own, `p` is Holm's function of the table's `p_raw`s.
"""

import json
import os

import numpy as np
import pytest

from rerank.cli import main
from rerank.evaluation import evaluate_systems
from rerank.significance import holm_bonferroni

DATA = os.path.join(os.path.dirname(__file__), "data", "eval")
FIELDS = ("score", "s_sel", "s_opt", "p", "p_raw", "p2", "bs_p", "delta", "delta_low", "delta_high", "marks")


def lines(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read().splitlines()


@pytest.fixture(scope="module")
def texts():
    return {"ref": lines("ref.de"), "cap1": [lines("cap1.de")], "cap2": [lines("cap2.de")], "cap3": [lines("cap3.de")],
            "good": [lines(f"good.de.run{k}") for k in (1, 2, 3)], "base": [lines(f"base.de.run{k}") for k in (1, 2, 3)]}


OPTIONS = dict(ar=400, bootstrap=200, seed=7, lang="de")


def cell_values(table, system, metric):
    c = table.cells[(system, metric)]
    return tuple(getattr(c, f) for f in FIELDS)


def test_system_order_and_unrelated_systems_change_nothing(texts):
    systems = {"good": texts["good"], "cap2": texts["cap2"], "base": texts["base"]}
    table = evaluate_systems([texts["ref"]], texts["cap1"], systems, metrics=["bleu", "ter"], **OPTIONS)
    reordered = evaluate_systems([texts["ref"]], texts["cap1"], dict(reversed(list(systems.items()))),
                                 metrics=["bleu", "ter"], **OPTIONS)
    for name in systems:
        alone = evaluate_systems([texts["ref"]], texts["cap1"], {name: systems[name]}, metrics=["bleu", "ter"], **OPTIONS)
        for m in ("bleu", "ter"):
            assert cell_values(table, name, m) == cell_values(reordered, name, m) == cell_values(alone, name, m)


def test_metric_set_and_order_change_nothing(texts):
    systems = {"good": texts["good"], "cap2": texts["cap2"]}
    one = evaluate_systems([texts["ref"]], texts["cap1"], systems, metrics=["bleu"], **OPTIONS)
    many = evaluate_systems([texts["ref"]], texts["cap1"], systems, metrics=["chrf", "ter", "bleu"], **OPTIONS)
    for name in systems:
        assert cell_values(one, name, "bleu") == cell_values(many, name, "bleu")


def test_sentence_order_changes_only_monte_carlo_noise(texts):
    n = len(texts["ref"])
    order = np.random.default_rng(3).permutation(n)
    shuffle = lambda runs: [[run[i] for i in order] for run in runs]  # noqa: E731
    options = dict(OPTIONS, ar=3000, bootstrap=0)
    systems = {"cap2": texts["cap2"], "base": texts["base"]}
    table = evaluate_systems([texts["ref"]], texts["cap1"], systems, metrics=["bleu", "ter"], **options)
    shuffled = evaluate_systems([[texts["ref"][i] for i in order]], shuffle(texts["cap1"]),
                                {k: shuffle(v) for k, v in systems.items()}, metrics=["bleu", "ter"], **options)
    for name in systems:
        for m in ("bleu", "ter"):
            a, b = table.cells[(name, m)], shuffled.cells[(name, m)]
            assert a.score == pytest.approx(b.score, abs=1e-9)
            se = np.sqrt(a.p * (1 - a.p) / 3000) + 1 / 3000
            assert abs(a.p - b.p) < 5 * np.sqrt(2) * se, (name, m, a.p, b.p)


def test_cli_equals_python(texts, capsys):
    ref = os.path.join(DATA, "ref.de")
    code = main(["eval", "-r", ref, "-b", "base=" + os.path.join(DATA, "cap1.de"), "good=" + os.path.join(DATA, "good.de"),
                 "cap2=" + os.path.join(DATA, "cap2.de"), "--metrics", "bleu,ter", "--lang", "de", "--ar", "400",
                 "--bootstrap", "200", "--seed", "7", "--to", "json", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    cli = {(r["system"], r["metric"]): r for r in json.loads(out)["results"]}
    table = evaluate_systems([texts["ref"]], texts["cap1"], {"good": texts["good"], "cap2": texts["cap2"]},
                             metrics=["bleu", "ter"], baseline_name="base", **OPTIONS)
    for (name, m), cell in table.cells.items():
        for f in FIELDS:
            want = getattr(cell, f)
            got = cli[(name, m)][f]
            assert got == (pytest.approx(want, rel=1e-12) if isinstance(want, float) else want), (name, m, f)


def test_holm_adjusts_the_pairs_own_p_values(texts):
    systems = {"good": texts["good"], "cap2": texts["cap2"], "cap3": texts["cap3"]}
    plain = evaluate_systems([texts["ref"]], texts["cap1"], systems, metrics=["bleu", "ter"], **OPTIONS)
    holm = evaluate_systems([texts["ref"]], texts["cap1"], systems, metrics=["bleu", "ter"], holm=True, **OPTIONS)
    keys = [(s, m) for s in ("baseline", *systems) for m in ("bleu", "ter") if plain.cells[(s, m)].p is not None]
    assert [holm.cells[k].p_raw for k in keys] == [plain.cells[k].p for k in keys]
    assert [holm.cells[k].p for k in keys] == pytest.approx(holm_bonferroni([plain.cells[k].p for k in keys]))


def test_a_mark_needs_both_tests_and_never_stands_beside_an_interval_across_zero(texts):
    """Every mark is backed by the randomisation test and the bootstrap (its interval of the
    improvement clear of zero), in the metric's direction; a pair one test rejects and the other
    does not stays unmarked. Checked over every pair of these systems, TER included."""
    names = ["cap1", "cap2", "cap3", "good", "base"]
    seen = {"marked": 0}
    for i, base in enumerate(names):
        others = {k: texts[k] for k in names if k != base}
        table = evaluate_systems([texts["ref"]], texts[base], others, metrics=["bleu", "ter", "chrf"],
                                 second_baseline=names[(i + 1) % len(names)], ar=300, bootstrap=300, seed=3,
                                 lang="de")
        for (name, m), c in table.cells.items():
            if name == "baseline":
                continue
            if "\u2020" in c.marks:
                seen["marked"] += 1
                assert c.p < 0.05 and c.bs_p < 0.05 and c.delta > 0 and c.delta_low > 0, (base, name, m)
            elif c.p < 0.05 and c.delta > 0:
                assert c.bs_p >= 0.05 or c.delta_low <= 0, (base, name, m)
            if "\u2021" in c.marks:
                assert c.p2 < 0.05 and c.bs_p2 < 0.05, (base, name, m)
    assert seen["marked"] > 0


@pytest.mark.parametrize("p,bs_p,boot,marked", [
    (0.01, 0.01, 0.5, True),      # both tests reject, the bootstrap on the same side
    (0.01, 0.20, 0.5, False),     # randomisation alone: no mark
    (0.20, 0.01, 0.5, False),     # bootstrap alone: no mark
    (0.01, 0.01, -0.5, False),    # the bootstrap's difference on the other side
    (0.01, None, None, True),     # no bootstrap run (--bootstrap 0): randomisation alone decides
])
def test_the_mark_rule(p, bs_p, boot, marked):
    from rerank.evaluation import MARK_BASE, Cell, _marks
    from rerank.metrics import make_metric

    cell = Cell(score=1.0, s_sel=None, s_opt=None, runs=[1.0], p=p, bs_p=bs_p)
    boot_diffs = {} if boot is None else {("base", "sys", "bleu"): boot}
    marks = _marks(cell, {("base", "sys", "bleu"): 0.5}, boot_diffs, "sys", make_metric("bleu"),
                   (("base", MARK_BASE, "p", "bs_p"),), 0.05)
    assert marks == (MARK_BASE if marked else "")
