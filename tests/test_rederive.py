"""Re-deriving published results on the shipped lists: recipes.reproduce.publish_results copies
only the tuned and evaluated results (never the shipped lists, model or NMT scores), and
recipes.mark_changes counts the marks that changed between two results JSONs."""

import json

import pytest

from rerank.recipes.mark_changes import changes, main as mark_changes_main
from rerank.recipes.reproduce import publish_results


def _summary(marks: dict[tuple[str, str], str]) -> dict:
    systems = ["NMT 1-best", "MIRA: NMT features", "+ s_s"]
    return {"baseline": "NMT 1-best", "systems": systems,
            "results": [{"system": s, "metric": m, "score": 1.0, "marks": marks.get((s, m), ""),
                         "p": None if s == "NMT 1-best" else 0.5, "p2": None}
                        for s in systems for m in ("bleu", "meteor", "ter", "length")]}


def test_mark_changes_counts_lists_per_system_mark_and_metric(tmp_path, capsys):
    old = {"experiments": {"weak.20best": _summary({("MIRA: NMT features", "bleu"): "†", ("+ s_s", "meteor"): "†‡"}),
                           "weak.50best": _summary({("+ s_s", "meteor"): "‡"})}}
    new = {"experiments": {"weak.20best": _summary({("+ s_s", "meteor"): "‡"}),
                           "weak.50best": _summary({("+ s_s", "meteor"): "‡", ("+ s_s", "ter"): "†"})}}
    text = changes(old, new)
    assert "- †: 2 cells before, 1 after" in text and "- ‡: 2 cells before, 2 after" in text
    assert "p against the NMT 1-best (†): larger on 0 of 12 cells, smaller on 0, the same on 12" in text
    assert "| MIRA: NMT features | † | BLEU | 1 | 0 | weak 20-best | – |" in text
    assert "| + s_s | † | METEOR | 1 | 0 | weak 20-best | – |" in text
    assert "| + s_s | ‡ | METEOR | 2 | 2 | – | – |" in text
    assert "| + s_s | † | TER | 0 | 1 | – | weak 50-best |" in text
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    assert mark_changes_main([str(tmp_path / "old.json"), str(tmp_path / "new.json")]) == 0
    assert capsys.readouterr().out == text
    with pytest.raises(ValueError, match="different lists"):
        changes(old, {"experiments": {"weak.20best": new["experiments"]["weak.20best"]}})


def _run(root, sizes=(3,), flavours=("weak",)):
    (root / "recipe" / "tables").mkdir(parents=True)
    (root / "stronger").mkdir()
    for name in ("oracle_curve.json", "oracle_curve.png"):
        (root / "recipe" / "tables" / name).write_text(name)
    experiments = {f"{flavour}.{n}best": {**_summary({("+ s_s", "bleu"): "†"}), "second_baseline": "MIRA: NMT features",
                                          "oracle_bleu": 2.0, "signatures": {"bleu": "BLEU|x"},
                                          "config": {"runs": {"NMT 1-best": 1, "+ s_s": 3}, "ar_trials": 10}}
                   for n in sizes for flavour in flavours}
    (root / "recipe" / "tables" / "results.json").write_text(json.dumps({"text_only": True, "experiments": experiments}))
    (root / "recipe" / "recipe.config.json").write_text("config")
    (root / "stronger" / "results.json").write_text("stronger")
    for n in sizes:
        for flavour in flavours:
            (root / "recipe" / "experiments" / f"{flavour}.{n}best").mkdir(parents=True)
            (root / "recipe" / "experiments" / f"{flavour}.{n}best" / "deltas.png").write_text("plot")


def test_publish_results_copies_the_results_only(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "recipe.json").write_text(json.dumps({"flavours": ["weak"], "nbest_sizes": [3]}))
    _run(tmp_path / "run")
    (tmp_path / "run" / "nmt_results.json").write_text("new NMT scores")  # a rerun has none; never copied
    docs = tmp_path / "docs"
    (docs / "stronger").mkdir(parents=True)
    (docs / "nmt_results.json").write_text("published NMT scores")
    written = publish_results(str(tmp_path / "run"), str(docs), str(tmp_path / "configs"))
    names = sorted(str(p.relative_to(docs)) for p in docs.rglob("*") if p.is_file())
    assert names == ["deltas.weak.3best.png", "nmt_results.json", "oracle_curve.json", "oracle_curve.png",
                     "recipe.config.json", "results.json", "stronger/results.json", "table.3best.md", "table.3best.tex"]
    assert len(written) == len(names) - 1 and (docs / "nmt_results.json").read_text() == "published NMT scores"
    assert (docs / "stronger" / "results.json").read_text() == "stronger"
    table = (docs / "table.3best.md").read_text()  # rendered from results.json, not copied
    assert "| weak | + s_s | 1.00 † |" in table and "Scores are means over 3 MIRA runs" in table
    assert "a system's 3 runs" in table and "**Text only**" in table


def test_publish_results_writes_nothing_when_a_result_is_missing(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "recipe.json").write_text(json.dumps({"flavours": ["weak"], "nbest_sizes": [3]}))
    _run(tmp_path / "run")
    (tmp_path / "run" / "stronger" / "results.json").unlink()
    docs = tmp_path / "docs"
    docs.mkdir()
    with pytest.raises(FileNotFoundError, match="stronger/results.json: missing"):
        publish_results(str(tmp_path / "run"), str(docs), str(tmp_path / "configs"))
    assert not any(docs.iterdir())
