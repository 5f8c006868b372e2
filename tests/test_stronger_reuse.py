"""rerank.recipes.stronger --reuse-columns: the channel and LM columns of the shipped lists are taken from
the lists (no LM or channel model needed), s_s and mbr are computed, the columns come out in the
order of a run that computed them all, and the models' record is carried over from --models-record."""

import json

import numpy as np
import pytest

from rerank.recipes import stronger
from rerank.recipes.demo import shipped_lists
from rerank.formats import read_nbest

RECORD = {"channel": {"epochs": 4, "best_epoch": 4, "val_bleu_greedy": 30.03},
          "lm": {"epochs": 6, "stopped": "max-epochs", "val_perplexity": 28.67}, "embedding": "mlmme-small.pt"}


@pytest.mark.neural
def test_reuse_columns_takes_channel_and_lm_from_the_lists(tmp_path):
    (tmp_path / "published.json").write_text(json.dumps({"command": "x", "models": RECORD, "experiments": {}}))
    args = ["--reuse-columns", "--models-record", str(tmp_path / "published.json"), "--out", str(tmp_path / "run"),
            "--flavours", "optimised", "--nbest", "20", "--sentences", "12", "--runs", "1", "--epochs", "2",
            "--ar", "20", "--bootstrap", "0"]
    assert stronger.main(args) == 0
    shipped = read_nbest(shipped_lists()[("optimised", 20)]["test_2016"]).select_sentences(range(12))
    featured = read_nbest(str(tmp_path / "run" / "features" / "optimised.test_2016.20best.feat.gz"))
    assert featured.feature_names == ["nmt", "nmt_norm", "len", "s_s", "mbr", "mbr_mlmme", "channel", "channel_norm",
                                      "lm", "lm_norm"]
    assert list(featured.hyps) == list(shipped.hyps)
    for name in ("nmt", "channel", "channel_norm", "lm", "lm_norm"):
        np.testing.assert_array_equal(featured.column(name), shipped.column(name))
    assert np.ptp(featured.column("s_s")) > 0 and np.ptp(featured.column("mbr")) > 0  # computed here
    log = (tmp_path / "run" / "stronger.log").read_text()
    assert "computing s_s, mbr, s_s_mbr; taking channel, channel_norm, lm, lm_norm from" in log
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["models"]["lm"] == RECORD["lm"] and saved["models"]["channel"] == RECORD["channel"]
    assert saved["models"]["reused_from"]["record"] == str(tmp_path / "published.json")
    assert saved["command"].startswith("python -m rerank.recipes.stronger --reuse-columns")
    assert saved["experiments"]["optimised.20best"]["systems"][-1] == "all"
    assert stronger.main(args) == 0  # resumes: every step reused
    assert "steps run: 0 (none); steps reused: 3" in (tmp_path / "run" / "stronger.log").read_text()


@pytest.mark.neural
def test_reuse_columns_names_a_missing_column_and_model(tmp_path, capsys):
    """Lists without the LM columns and no LM model: one error line, exit status 2."""
    from rerank.formats import write_nbest

    lists = tmp_path / "lists"
    lists.mkdir()
    for split, path in shipped_lists()[("optimised", 20)].items():
        nbest = read_nbest(path).select_sentences(range(5))
        write_nbest(nbest.select_features(["nmt", "nmt_norm", "len", "channel", "channel_norm"]),
                    str(lists / f"optimised.{split}.20best.gz"))
    (tmp_path / "published.json").write_text(json.dumps({"models": RECORD}))
    args = ["--reuse-columns", "--models-record", str(tmp_path / "published.json"), "--nbest-dir", str(lists),
            "--out", str(tmp_path / "run"), "--flavours", "optimised", "--nbest", "20", "--sentences", "5",
            "--runs", "1", "--epochs", "1", "--ar", "10", "--bootstrap", "0"]
    assert stronger.main(args) == 2
    assert "no lm, lm_norm column(s) to reuse and no --lm-model was given" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--out", "x"], ["--reuse-columns", "--out", "x"],
                                  ["--models-record", "r.json", "--lm-model", "a", "--channel-model", "b", "--out", "x"]])
def test_the_models_or_reuse_columns_are_required(args, capsys):
    with pytest.raises(SystemExit) as e:
        stronger.main(args)
    assert e.value.code == 2 and "error:" in capsys.readouterr().err
