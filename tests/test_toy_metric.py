"""A plug-in metric (entry-point group rerank.metrics) is a metric like the built-in ones: the
registry's views list it after them, make_metric, the direction helpers, the objective parser, the
tuning data and the oracle take it, and what a metric class does not override comes from
rerank.metrics.base.Metric (its sentence-level score is its own score of the sentence, its
signature before scoring its signature). Built-in names are found without reading any plug-in, so
a broken plug-in stops only what names it, and a command's help loads none. A plug-in that is no
Metric, is named otherwise than its class, is spelled so that an objective cannot name it, or takes
an option make_metric does not pass is refused, naming itself.

The toy metric (tests/toy_plugins, `unigram-f1`: corpus unigram F1) is checked against the brute
force of tests/test_toy_plugins.py; its commands (eval, tune, oracle, report) are tested there.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import rerank
from rerank import plugins
from rerank.errors import InputError
from rerank.metrics.registry import (BUILTIN, EVAL_METRIC_NAMES, METRIC_NAMES, METRICS, QUALITY_METRICS, REGISTRY,
                                     display_name, higher_is_better, make_metric, metric_info, objective_signature,
                                     parse_objective)
from rerank.plugins import PluginError
from rerank.tuning import prepare
from tests.test_toy_plugins import M_LISTS, M_NMT, REF, corpus_f1
from tests.toy_plugins import SITE, toy_plugins  # noqa: F401 - the fixture, used by name

TOY = "unigram-f1"


def toy_nbest():
    return rerank.NBestList.from_lists(M_LISTS, [np.array(M_NMT)[:, None] for _ in M_LISTS], ["nmt"])


@pytest.mark.usefixtures("toy_plugins")
def test_the_registry_lists_the_plugin_after_the_builtin_metrics():
    builtin = list(BUILTIN)
    assert list(METRICS) == list(REGISTRY) == list(METRIC_NAMES) == [*builtin, TOY]
    assert list(QUALITY_METRICS) == [name for name, cls in METRICS.items() if cls.quality] and TOY in QUALITY_METRICS
    assert list(EVAL_METRIC_NAMES)[:len(METRIC_NAMES)] == list(METRIC_NAMES)
    cls = METRICS[TOY]
    metric = make_metric(TOY.upper(), lang="de", tokenize="none", lowercase=True)  # options it does not declare
    assert type(metric) is cls and metric_info(TOY) is cls.class_info() is REGISTRY[TOY] is metric.info
    assert display_name(TOY) == "UniF1" and higher_is_better(TOY) and parse_objective(TOY) == ("metric", TOY)


def test_without_the_toy_package_the_name_is_unknown():
    plugins.load.cache_clear()
    with pytest.raises(InputError, match="unknown metric 'unigram-f1' \\(known: bleu, meteor, ter"):
        make_metric(TOY)
    with pytest.raises(InputError, match="is not a metric"):
        parse_objective(TOY)
    assert TOY not in QUALITY_METRICS and TOY not in METRICS


@pytest.mark.usefixtures("toy_plugins")
def test_tuning_data_and_oracle_of_the_plugin_use_the_metric_classs_defaults():
    nbest = toy_nbest()
    data = prepare(nbest, [REF], metric=TOY)
    hyps = list(data.nbest.hyps)
    refs = [REF[i] for i in data.nbest.sentence_of_hyp]
    # Metric.sentence_scores: the metric of the sentence alone, a fraction for the tuners
    np.testing.assert_allclose(data.sentence_objectives(), [corpus_f1([h], [r]) / 100 for h, r in zip(hyps, refs)],
                               rtol=0, atol=1e-12)
    found = rerank.oracle(nbest, [REF], metric=TOY)
    picks = [lst[int(np.argmax([corpus_f1([h], [r]) for h in lst]))] for lst, r in zip(M_LISTS, REF)]
    assert found.hypotheses == picks and found.display == "UniF1" and found.higher_is_better
    assert found.score == pytest.approx(corpus_f1(picks, REF), abs=1e-9) == data.oracle()
    signature = make_metric(TOY).signature()
    assert found.signature == objective_signature(TOY, n_refs=1) == signature   # Metric.signature_for: signature()
    assert objective_signature(f"bleu=1,{TOY}=0.5").endswith(" + 0.5 * " + signature)


@pytest.mark.usefixtures("toy_plugins")
def test_an_interpolation_with_the_plugin_sums_the_components_sentence_scores():
    data = prepare(toy_nbest(), [REF], metric=f"ter=0.5,{TOY}=2")
    hyps, refs = list(data.nbest.hyps), [REF[i] for i in data.nbest.sentence_of_hyp]
    ter = make_metric("ter")
    expected = [-0.5 * ter.corpus_score([h], [[r]]) + 2 * corpus_f1([h], [r]) for h, r in zip(hyps, refs)]
    np.testing.assert_allclose(data.sentence_objectives(), expected, rtol=0, atol=1e-9)


def plugin_dir(tmp_path, name, body):
    """A distribution in tmp_path whose module bad_metric holds `body` and registers `name` in rerank.metrics."""
    (tmp_path / "bad_metric.py").write_text("from rerank.metrics.base import Metric\n\n" + body, encoding="utf-8")
    info = tmp_path / "bad_metric-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-metric\nVersion: 0.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[rerank.metrics]\n{name} = bad_metric:Bad\n", encoding="utf-8")
    return tmp_path


GOOD = "class Bad(Metric):\n    name = {name!r}\n    options = {options!r}\n"


@pytest.mark.parametrize("name, body, message", [
    ("bad", "class Bad:\n    name = 'bad'\n", "is not a rerank.metrics.base.Metric subclass"),
    ("bad", GOOD.format(name="other", options=()), "its class Bad is named 'other'"),
    ("Bad", GOOD.format(name="Bad", options=()), "a metric's name is lower case"),
    ("comet", GOOD.format(name="comet", options=()), "a metric's name is lower case, without"),
    ("bleu", GOOD.format(name="bleu", options=()), "clashes with a built-in metric"),
    ("bad", GOOD.format(name="bad", options=("beam",)), "takes the option 'beam', which make_metric does not have"),
])
def test_a_bad_plugin_is_refused_naming_itself_and_builtin_names_still_work(tmp_path, monkeypatch, name, body, message):
    monkeypatch.syspath_prepend(str(plugin_dir(tmp_path, name, body)))
    monkeypatch.delitem(sys.modules, "bad_metric", raising=False)   # each case's own module
    plugins.load.cache_clear()
    try:
        with pytest.raises(PluginError, match=message):
            list(METRIC_NAMES)
        with pytest.raises(PluginError):
            make_metric("nope")
        assert type(make_metric("bleu")) is BUILTIN["bleu"] and "ter" in QUALITY_METRICS   # no plug-in read
        assert parse_objective("chrf") == ("metric", "chrf") and metric_info("ter").higher_is_better is False
    finally:
        monkeypatch.undo()
        plugins.load.cache_clear()


PROBE = """
import sys
from rerank import plugins
from rerank.cli import main

read, load = [], plugins.load
plugins.load = lambda group, *args: read.append(group) or load(group, *args)   # every registry reads through it
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("READ=" + ",".join(read))
"""


@pytest.mark.usefixtures("toy_plugins")
@pytest.mark.parametrize("args", [("eval", "--help"), ("tune", "--help"), ("oracle", "--help"), ("report", "--help"),
                                  ("oracle", "--metric", "bleu", "-r", "REF", "NBEST"),
                                  ("oracle", "--metric", TOY, "-r", "REF", "NBEST")])
def test_only_a_command_that_names_a_plugin_metric_reads_the_metric_plugins(args, tmp_path):
    (tmp_path / "REF").write_text("\n".join(REF) + "\n", encoding="utf-8")
    (tmp_path / "NBEST").write_text("".join(f"{i} ||| {h} ||| nmt= {s!r} ||| {s!r}\n" for i, lst in enumerate(M_LISTS)
                                            for h, s in zip(lst, M_NMT)), encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    read = result.stdout.rpartition("READ=")[2].strip().split(",")
    assert ("rerank.metrics" in read) == (TOY in args), (args, read)
    assert "oracle" not in args or "--help" in args or "sentences changed" in result.stdout
    assert str(SITE) in os.environ["PYTHONPATH"]   # the toys were there to be read
