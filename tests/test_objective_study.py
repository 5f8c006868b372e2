"""rerank.recipes.objective_study: its score files are sacrebleu's sentence chrF and the tuners' BLEU+1 of
every hypothesis, they join with `rerank add-feature`, and the study tunes toward each objective (on the
10-sentence Joshua list of tests/data and the first sentences of the shipped Multi30k lists)."""
import gzip
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

import rerank
from rerank.formats import read_nbest, read_references, write_nbest
from rerank.recipes import objective_study
from rerank.recipes.demo import data_dir
from rerank.tuning import prepare
from tests.cli_helpers import run

DATA = Path(__file__).parent / "data" / "joshua10"
REFS = [str(DATA / f"ref.{k}") for k in range(4)]
NBEST = str(DATA / "nbest.joshua")
DOCS = Path(__file__).resolve().parent.parent / "docs" / "results"


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    out = tmp_path_factory.mktemp("scores")
    return objective_study.write_scores(NBEST, REFS, str(out))


def read_column(path: str) -> np.ndarray:
    return np.array([float(line) for line in open(path, encoding="utf-8")])


def test_the_sentence_chrf_column_is_sacrebleus_sentence_chrf(scores):
    nbest, refs = read_nbest(NBEST), read_references(REFS)
    column = read_column(scores["chrf_sent"])
    assert len(column) == nbest.n_hyps
    for row, (hyp, sentence) in enumerate(zip(nbest.hyps, nbest.sentence_of_hyp)):
        expected = sacrebleu.sentence_chrf(hyp, [stream[int(sentence)] for stream in refs]).score
        assert column[row] == expected  # exact: the file holds the float's repr


def test_the_bleu1_column_is_the_tuners_bleu_plus_1(scores):
    nbest, refs = read_nbest(NBEST), read_references(REFS)
    column = read_column(scores["bleu1_sent"])
    data = prepare(nbest, refs, metric="bleu")  # duplicates merged: kept_rows maps back to the list
    np.testing.assert_allclose(column[data.kept_rows], 100.0 * data.sentence_objectives(), rtol=0, atol=1e-12)
    assert 0 <= column.min() and column.max() <= 100 and len(set(column.round(6))) > 10


def test_the_columns_join_with_add_feature_and_are_the_objective(scores, tmp_path, capsys):
    out = tmp_path / "joined.nbest"
    args = ["add-feature", NBEST]
    for name, path in scores.items():
        args += ["--name", name, "--scores", path]
    code, _, err = run(args + ["-o", str(out)], capsys)
    assert code == 0, err
    joined = read_nbest(str(out))
    for name, path in scores.items():
        np.testing.assert_array_equal(joined.column(name), read_column(path))  # repr round-trips exactly
    features = [f for f in joined.feature_names if f not in objective_study.COLUMNS]
    tuned = rerank.tune(joined, metric="column:bleu1_sent", tune_features=tuple(features), epochs=2, runs=1,
                        events=rerank.TuneEvents(verbose=lambda _: None))
    firsts = joined.offsets[:-1]
    assert tuned.runs[0].initial_score == pytest.approx(joined.column("bleu1_sent")[firsts].mean())
    assert "bleu1_sent" not in tuned.weights  # the objective is no feature


def test_the_scores_command_writes_one_value_per_line(tmp_path, capsys):
    assert objective_study.main(["scores", NBEST, "-r", REFS[0], "--out", str(tmp_path)]) == 0
    n = read_nbest(NBEST).n_hyps
    assert [len(read_column(str(tmp_path / f"{c}.txt"))) for c in objective_study.COLUMNS] == [n, n]
    assert "chrf_sent.txt" in capsys.readouterr().out


N = 12


@pytest.fixture(scope="module")
def small_lists(tmp_path_factory):
    """The first N sentences of the shipped optimised 20-best lists and their references."""
    folder = tmp_path_factory.mktemp("lists")
    shipped = os.path.join(data_dir(), "multi30k")
    for split, stem in objective_study.SPLITS.items():
        nbest = read_nbest(os.path.join(shipped, f"optimised.{split}.20best.gz")).select_sentences(range(N))
        write_nbest(nbest, str(folder / f"optimised.{split}.20best.gz"))
        refs = read_references([os.path.join(shipped, f"{stem}.de.gz")])[0][:N]
        with gzip.open(folder / f"{stem}.de.gz", "wt", encoding="utf-8") as f:
            f.writelines(r + "\n" for r in refs)
    return folder


def test_the_study_tunes_toward_each_objective_and_reports(small_lists, tmp_path):
    out = tmp_path / "out"
    args = ["study", "--nbest-dir", str(small_lists), "--out", str(out), "--flavours", "optimised", "--nbest", "20",
            "--runs", "2", "--epochs", "2", "--ar", "50", "--bootstrap", "20"]
    assert objective_study.main(args) == 0
    study = json.loads((out / "objective_study.json").read_text())
    assert study["config"]["seeds"] == [1, 2]
    res = study["lists"]["optimised 20-best"]
    for system, features in objective_study.SYSTEMS.items():
        rows = res["systems"][system]["objectives"]
        assert list(rows) == list(objective_study.OBJECTIVES)
        for key, row in rows.items():
            assert [r["seed"] for r in row["runs"]] == [1, 2]
            for r in row["runs"]:
                assert set(r["weights"]) == set(features)
                if key in objective_study.COLUMNS:  # a column objective's value is the column's mean on val
                    assert r["objective"] == pytest.approx(r["val"][key])
                else:
                    assert r["objective"] == pytest.approx(r["val"]["chrf"])
            assert row["test_eval"]["chrf"]["score"] == pytest.approx(np.mean([r["test"]["chrf"] for r in row["runs"]]))
    table = (out / "objective_study.md").read_text()
    assert table == objective_study.report(study)
    assert table.count("| optimised 20-best |") == len(objective_study.SYSTEMS) * (1 + len(objective_study.OBJECTIVES))


def test_the_published_table_is_the_json():
    """stronger.md's table of the study (a text block after its "Made by" line) is `report` of the JSON."""
    path = DOCS / "stronger" / "objective_study.json"
    if not path.exists():
        pytest.skip("the study is not published yet")
    study = json.loads(path.read_text(encoding="utf-8"))
    page = (DOCS / "stronger.md").read_text(encoding="utf-8")
    match = re.search(r"Made by `(python -m rerank\.recipes\.objective_study [^`]*)`.*?```text\n(.*?)```", page, re.S)
    assert match, "stronger.md names the study's command and shows its table"
    assert match.group(1) == study["command"]
    assert match.group(2) == objective_study.report(study)
