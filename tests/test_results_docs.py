"""Every number in docs/results/*.md is the one in the JSON beside it: the paper-style tables
re-render from results.json byte for byte, every `<!-- BEGIN name -->` block of the other pages
re-renders from its JSON (recipes.results_docs), and outside blocks and code the prose holds no
measured (decimal) number. Each page names the command that made it."""

import json
import re
from pathlib import Path

import pytest

from rerank.recipes.results_docs import BLOCK, DOCS, RENDER, render
from rerank.recipes.tables import table_latex, table_markdown

RESULTS = Path(DOCS)
DECIMAL = re.compile(r"(?<![\w.])[−+-]?\d+\.\d+(?![\w.])")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
SETTINGS = {"0.05", "1.5"}  # the significance level (results.json config "alpha") and Meteor's version


def _results() -> dict:
    return json.loads((RESULTS / "results.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("n", [20, 50])
def test_the_tables_are_the_results_json(n):
    results = _results()
    assert (RESULTS / f"table.{n}best.md").read_text(encoding="utf-8") == table_markdown(
        results["experiments"], n, results["text_only"])
    assert (RESULTS / f"table.{n}best.tex").read_text(encoding="utf-8") == table_latex(results["experiments"], n)


@pytest.mark.parametrize("page", sorted(RENDER))
def test_every_block_renders_from_its_json(page):
    path = RESULTS / page
    text = path.read_text(encoding="utf-8")
    assert BLOCK.search(text), f"{page} has no rendered block"
    assert render(str(path), RENDER[page], str(RESULTS)) == text, f"{page} differs from its JSON: python -m rerank.recipes.results_docs"


@pytest.mark.parametrize("page", sorted(p.name for p in RESULTS.glob("*.md") if not p.name.startswith("table.")))
def test_no_measured_number_outside_the_blocks(page):
    text = (RESULTS / page).read_text(encoding="utf-8")
    prose = CODE.sub("", BLOCK.sub("", text))
    measured = [x for x in DECIMAL.findall(prose) if x not in SETTINGS]
    assert measured == [], f"{page}: numbers in the prose must come from a rendered block"
    assert "make reproduce" in text or "Made by `" in text, f"{page} does not name the command that made it"


def test_the_checks_catch_a_changed_number(tmp_path):
    """The block test is not vacuous: a number edited in a copy of the page no longer re-renders."""
    page = next(iter(RENDER))
    text = (RESULTS / page).read_text(encoding="utf-8")
    match = DECIMAL.search(BLOCK.search(text).group(3))
    assert match, "the first block holds a number"
    for src in RESULTS.iterdir():
        if src.suffix == ".json" or src.is_dir():
            (tmp_path / src.name).symlink_to(src, target_is_directory=src.is_dir())
    edited = text[:BLOCK.search(text).start(3) + match.start()] + "99.99" + text[BLOCK.search(text).start(3) + match.end():]
    (tmp_path / page).write_text(edited, encoding="utf-8")
    assert render(str(tmp_path / page), RENDER[page], str(tmp_path)) == text


def test_the_prose_check_finds_decimals_but_not_dates_or_counts():
    assert DECIMAL.findall("gains +0.34 and −1.2 over 3 runs (2026-11-22, 10,000 trials, v1.2.3)") == ["+0.34", "−1.2"]
