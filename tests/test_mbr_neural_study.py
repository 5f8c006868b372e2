"""rerank.recipes.mbr_neural_study: its mbr columns are `rerank.consensus.mbr_scores` with the same settings
(chrF exact, the shipped MLMME model's cosine, the two-stage candidates), the study tunes the mbr
columns next to the NMT features (their weights in the tuned weights files), and the table renders
from the JSON (on the first sentences of the shipped Multi30k lists)."""
import gzip
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from rerank import consensus as C
from rerank.formats import read_nbest, read_references, write_nbest
from rerank.recipes import mbr_neural_study as study_module
from rerank.recipes.demo import data_dir

DOCS = Path(__file__).resolve().parent.parent / "docs" / "results"
N = 8  # sentences of the shipped lists


@pytest.fixture(scope="module")
def small_lists(tmp_path_factory):
    """The first N sentences of the shipped optimised 20-best lists and their references."""
    folder = tmp_path_factory.mktemp("lists")
    shipped = os.path.join(data_dir(), "multi30k")
    for split, stem in study_module.SPLITS.items():
        nbest = read_nbest(os.path.join(shipped, f"optimised.{split}.20best.gz")).select_sentences(range(N))
        write_nbest(nbest, str(folder / f"optimised.{split}.20best.gz"))
        refs = read_references([os.path.join(shipped, f"{stem}.de.gz")])[0][:N]
        with gzip.open(folder / f"{stem}.de.gz", "wt", encoding="utf-8") as f:
            f.writelines(r + "\n" for r in refs)
    return folder


@pytest.mark.neural
def test_the_columns_are_mbr_scores_with_the_same_settings(small_lists):
    nbest = read_nbest(str(small_lists / "optimised.val.20best.gz"))
    scores = nbest.column("nmt")
    model = C.make_utility("mlmme", study_module.model_path(study_module.MODEL), None)
    offsets = np.asarray(nbest.offsets, dtype=np.int64)
    top5 = C.top_rows(scores, offsets, 5)
    expected = {"chrf": C.mbr_scores(nbest, scores, C.MBROptions("chrf", temperature=1.0)),
                "mlmme": C.mbr_scores(nbest, scores, C.MBROptions("mlmme", temperature=1.0), model=model),
                "mlmme_nmt5": C.mbr_scores(nbest, scores, C.MBROptions("mlmme", temperature=1.0), model=model,
                                           candidates=top5)}
    assert study_module.mbr_columns(nbest, "nmt") is nbest
    for system, values in expected.items():
        featured = study_module.mbr_columns(nbest, system)
        assert featured.feature_names == nbest.feature_names + study_module.SYSTEMS[system][2]
        np.testing.assert_allclose(featured.column("mbr"), values, rtol=0, atol=1e-9)
    featured = study_module.mbr_columns(nbest, "mlmme_nmt5")
    np.testing.assert_array_equal(featured.column("mbr_candidate"), top5.astype(float))
    # the two-stage column: no non-candidate outranks a candidate, and the candidates keep full MBR's order
    # up to the renormalisation, which is none: every hypothesis stays a pseudo-reference
    np.testing.assert_allclose(featured.column("mbr")[top5], expected["mlmme"][top5], atol=1e-9)
    for a, b in zip(offsets[:-1], offsets[1:]):
        mbr, cand = featured.column("mbr")[a:b], top5[a:b]
        assert mbr[~cand].max(initial=-np.inf) <= mbr[cand].min()


@pytest.mark.neural
def test_the_columns_command_writes_the_list(small_lists, tmp_path):
    out = tmp_path / "val.mbr.gz"
    assert study_module.main(["columns", str(small_lists / "optimised.val.20best.gz"), "--system", "mlmme_nmt5",
                              "-o", str(out)]) == 0
    written = read_nbest(str(out))
    assert written.feature_names[-2:] == ["mbr", "mbr_candidate"]
    assert written.column("mbr_candidate").reshape(N, 20).sum(axis=1).tolist() == [5.0] * N


@pytest.mark.neural
def test_the_study_tunes_the_mbr_columns_and_reports(small_lists, tmp_path):
    out = tmp_path / "out"
    args = ["study", "--nbest-dir", str(small_lists), "--out", str(out), "--flavours", "optimised", "--nbest", "20",
            "--runs", "2", "--epochs", "2", "--ar", "50", "--bootstrap", "20"]
    assert study_module.main(args) == 0
    study = json.loads((out / "mbr_neural_study.json").read_text())
    assert study["config"]["seeds"] == [1, 2] and study["config"]["metric"] == "bleu"
    res = study["lists"]["optimised 20-best"]
    assert list(res["systems"]) == list(study_module.SYSTEMS)
    for key, row in res["systems"].items():
        features = study_module.NMT_FEATURES + study_module.SYSTEMS[key][2]
        assert row["features"] == features
        assert [r["seed"] for r in row["runs"]] == [1, 2]
        for r in row["runs"]:
            assert set(r["weights"]) == set(features)
            tuned = json.loads((out / "optimised.20best" / f"{key}.run{r['run']}.json").read_text())
            weights = tuned.get("weights", tuned)
            for f in features:  # the weights file has every tuned feature, the mbr columns included
                assert weights[f] == pytest.approx(r["weights"][f])
        for m in study_module.METRICS:
            assert row["test_eval"][m]["score"] == pytest.approx(np.mean([r["test"][m] for r in row["runs"]]))
        assert ("decision" in row) == (key != "nmt")
    # the featured test list of a system is what its mbr column would be on the test list
    test = read_nbest(str(small_lists / "optimised.test_2016.20best.gz"))
    np.testing.assert_allclose(read_nbest(str(out / "optimised.20best" / "chrf.test_2016.gz")).column("mbr"),
                               C.mbr_scores(test, test.column("nmt"), C.MBROptions("chrf")), atol=1e-9)
    table = (out / "mbr_neural_study.md").read_text()
    assert table == study_module.report(study)
    assert table.count("| optimised 20-best |") == 1 + len(study_module.SYSTEMS)


def test_the_published_table_is_the_json():
    """stronger.md's table of the study (a text block after its "Made by" line) is `report` of the JSON."""
    path = DOCS / "stronger" / "mbr_neural_study.json"
    if not path.exists():
        pytest.skip("the study is not published yet")
    study = json.loads(path.read_text(encoding="utf-8"))
    page = (DOCS / "stronger.md").read_text(encoding="utf-8")
    match = re.search(r"Made by `(python -m rerank\.recipes\.mbr_neural_study [^`]*)`.*?```text\n(.*?)```", page, re.S)
    assert match, "stronger.md names the study's command and shows its table"
    assert match.group(1) == study["command"]
    assert match.group(2) == study_module.report(study)
