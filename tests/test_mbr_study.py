"""rerank.recipes.mbr_study on the first sentences of the shipped optimised 20-best lists."""
import json
import os

import numpy as np
import pytest
import sacrebleu

from rerank.recipes import mbr_study
from rerank.recipes.demo import data_dir, shipped_lists
from rerank.recipes.experiment import leading_references, rerank
from rerank.consensus import MBROptions, mbr_scores
from rerank.formats import read_nbest, write_nbest

N = 30


@pytest.fixture(scope="module")
def stronger_dir(tmp_path_factory):
    """A stronger-run layout: features/ with the first N sentences of the shipped lists."""
    run = tmp_path_factory.mktemp("stronger")
    for split, path in shipped_lists()[("optimised", 20)].items():
        nbest = read_nbest(path).select_sentences(range(N))
        write_nbest(nbest, str(run / "features" / f"optimised.{split}.20best.feat.gz"))
    return run


def test_the_study_tunes_every_variant_and_reports_the_untuned_decision(stronger_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--stronger-dir", str(stronger_dir), "--text-dir", os.path.join(data_dir(), "multi30k"), "--out", str(out), "--flavours",
            "optimised", "--nbest", "20", "--runs", "1", "--epochs", "2"]
    assert mbr_study.main(args) == 0
    study = json.loads((out / "mbr_study.json").read_text())
    assert study["command"].startswith("python -m rerank.recipes.mbr_study --stronger-dir")
    res = study["lists"]["optimised 20-best"]
    assert list(res["variants"]) == list(mbr_study.VARIANTS)
    assert all(0 < row["test_ratio"] < 2 and 0 <= row["val_bleu"] <= 100 for row in res["variants"].values())
    # the untuned decision of T=0.5 is the argmax of the mbr column at that temperature
    test = read_nbest(str(stronger_dir / "features" / "optimised.test_2016.20best.feat.gz"))
    refs = leading_references(os.path.join(data_dir(), "multi30k", "test_2016_flickr.de.gz"), N)
    column = mbr_scores(test, test.column("nmt"), MBROptions(temperature=0.5))
    picked = rerank(test.with_feature("m", column), {"m": 1.0})
    expected = sacrebleu.corpus_bleu(picked, refs)
    assert res["variants"]["T=0.5"]["decision_bleu"] == pytest.approx(expected.score)
    assert res["variants"]["T=0.5"]["decision_ratio"] == pytest.approx(expected.sys_len / expected.ref_len)
    table = (out / "mbr_study.md").read_text()
    assert table.count("| optimised 20-best |") == 1 + len(mbr_study.VARIANTS)
    chrf = res["variants"]["chrF"]
    assert f"| chrF | {chrf['val_bleu']:.2f} | {chrf['test_bleu']:.2f} | {chrf['gain']:+.2f} |" in table
    assert "MBR decision BLEU" in capsys.readouterr().out


def test_variant_columns_differ_by_temperature(stronger_dir):
    nbest = read_nbest(str(stronger_dir / "features" / "optimised.val.20best.feat.gz"))
    cols = mbr_study.variant_columns(nbest, {"a": {}, "b": {"temperature": 4.0}})
    np.testing.assert_allclose(cols["a"], mbr_scores(nbest, nbest.column("nmt")))
    assert not np.allclose(cols["a"], cols["b"])


def test_too_few_references_name_the_file(tmp_path):
    from rerank.errors import InputError

    path = tmp_path / "refs.de"
    path.write_text("a\nb\n", encoding="utf-8")
    assert leading_references(str(path), 1) == [["a"]]
    with pytest.raises(InputError, match="2 reference lines for 3 n-best sentences") as e:
        leading_references(str(path), 3)
    assert str(path) in str(e.value)


def test_a_missing_list_is_named_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--stronger-dir", str(tmp_path), "--text-dir", os.path.join(data_dir(), "multi30k"), "--out", str(out),
            "--flavours", "regular", "--nbest", "20"]
    assert mbr_study.main(args) == 2
    err = capsys.readouterr().err
    assert "regular.val.20best.feat.gz" in err and err.count("\n") == 1
    assert not out.exists()
