"""The metrics table: METRICS = {name: class} is the one list that make_metric, the registry, the
command line and the docs read (rerank.metrics.registry)."""

import re
from pathlib import Path

import pytest

from rerank.cli import build_parser
from rerank.errors import InputError
from rerank.metrics import METRICS, Metric, make_metric
from rerank.metrics.registry import (METRIC_NAMES, MODEL_METRICS, OPTIONS, QUALITY_METRICS, REGISTRY, display_name, higher_is_better,
                                     markdown_table, metric_info)

DOCS = Path(__file__).parent.parent / "docs" / "evaluation.md"
NEEDS_RESOURCES = {"meteor"}  # its default modules read resources (paraphrase tables) the suite may lack


def _parser(command: str):
    return build_parser()._subparsers._group_actions[0].choices[command]


def test_every_entry_is_a_metric_class_under_its_own_name():
    for name, cls in METRICS.items():
        assert issubclass(cls, Metric) and cls.name == name
        assert set(cls.options) <= OPTIONS


def test_the_registry_is_the_table():
    assert list(REGISTRY) == list(METRICS) == list(METRIC_NAMES)
    assert list(QUALITY_METRICS) == [name for name, cls in METRICS.items() if cls.quality]
    for name, cls in METRICS.items():
        info = metric_info(name)
        assert info is cls.class_info() is REGISTRY[name]
        assert (info.name, info.display, info.higher_is_better, info.decimals, info.scale, info.quality) == (
            cls.name, cls.display or cls.name, cls.higher_is_better, cls.decimals, cls.scale, cls.quality)
        assert display_name(name) == info.display and higher_is_better(name) == info.higher_is_better


@pytest.mark.parametrize("name", [n for n in METRICS if n not in NEEDS_RESOURCES])
def test_make_metric_builds_the_tables_class(name):
    for spelling in (name, name.upper()):
        metric = make_metric(spelling, lang="en", tokenize="13a", lowercase=False, ter_case_sensitive=False,
                         meteor_options={})
        assert type(metric) is METRICS[name] and metric.info is metric_info(name)


def test_make_metric_builds_meteor_from_its_options():
    metric = make_metric("meteor", lang="de", tokenize="13a", meteor_options={"modules": ["exact"]})
    assert type(metric) is METRICS["meteor"] and metric.lang == "de" and metric.modules == ("exact",)


def test_make_metric_refuses_an_unknown_name_naming_the_known_ones_and_an_unknown_option():
    with pytest.raises(InputError) as caught:
        make_metric("rouge")
    assert all(name in str(caught.value) for name in METRICS)
    with pytest.raises(InputError, match="tokenise"):
        make_metric("bleu", tokenise="none")


def test_the_command_line_offers_the_tables_names():
    tune = _parser("tune")._option_string_actions["--metric"]
    assert tune.choices is None  # column:NAME and interpolations too: the names are in the help
    assert f"{', '.join(name for name, cls in METRICS.items() if cls.quality)} (TER" in tune.help
    assert "column:NAME" in tune.help
    apply_metrics = _parser("apply")._option_string_actions["--metrics"]
    for command in ("eval", "report"):
        help_text = " ".join(_parser(command)._option_string_actions["--metrics"].help.split())
        assert f"comma-separated: {', '.join([*METRICS, *MODEL_METRICS])} (comet: with --comet-model) or" in help_text, \
            command
    assert all(name in apply_metrics.help for name in QUALITY_METRICS)


def test_the_docs_table_is_the_metrics_table():
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- metrics-table: begin -->\n(.*?)<!-- metrics-table: end -->", text, re.S)
    assert found and found.group(1) == markdown_table()
