"""The `lm` and `channel` features: a GRU LM (`rerank lm train|score`) and a reverse NMT model,
trained on a toy language, scoring n-best hypotheses."""

import gzip
import json
import random

import numpy as np
import pytest
import torch

from rerank.nmt.scoring import channel_scores
from rerank.nmt.lm import LanguageModel
from rerank.cli import main
from rerank.formats import read_nbest

pytestmark = pytest.mark.neural

WORDS = [f"w{i}" for i in range(8)]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A language whose sentences count up (w1 w2 w3 ...); the reverse model maps de -> en by identity."""
    d = tmp_path_factory.mktemp("toy")
    rng = random.Random(3)
    for split, n in (("train", 300), ("val", 30)):
        lines = []
        for _ in range(n):
            start = rng.randint(0, 4)
            lines.append(" ".join(WORDS[start:start + rng.randint(2, 4)]))
        for lang in ("en", "de"):
            with gzip.open(d / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
    assert main(["lm", "train", "--train", str(d / "train.de.gz"), "--val", str(d / "val.de.gz"), "--lang", "de",
                 "--out", str(d / "lm"), "--emb-dim", "16", "--hidden", "32", "--min-freq", "1", "--max-epochs", "4",
                 "--threads", "1"]) == 0
    assert main(["nmt", "train", "--data-dir", str(d), "--src-lang", "de", "--tgt-lang", "en", "--out", str(d / "rev"),
                 "--size", "tiny", "--max-epochs", "2", "--min-freq", "1", "--threads", "1"]) == 0
    return d


def test_lm_prefers_the_language_and_scores_are_sums_of_token_logprobs(toy):
    lm = LanguageModel.load(str(toy / "lm"))
    sums, counts = lm.score(["w1 w2 w3", "w3 w2 w1", ""])
    assert counts == [4, 4, 1]  # tokens + </s>
    assert sums[0] > sums[1]
    ids = torch.tensor([[lm.vocab.encode(["w1", "w2", "w3"])[k] for k in range(3)] + [3]])
    with torch.no_grad():
        assert sums[0] == pytest.approx(float(lm.model.token_logprobs(ids).sum()), abs=1e-5)
    done = json.loads((toy / "lm" / "DONE.json").read_text())
    assert done["epochs"] >= 1 and done["stopped"] in ("max-epochs", "early-stopping")


def test_lm_score_command_writes_tsv(toy, tmp_path):
    (tmp_path / "in.txt").write_text("w1 w2 w3\nw3 w2 w1\n")
    assert main(["lm", "score", "--model", str(toy / "lm"), "--input", str(tmp_path / "in.txt"),
                 "-o", str(tmp_path / "out.tsv"), "--threads", "1"]) == 0
    rows = [line.split("\t") for line in (tmp_path / "out.tsv").read_text().splitlines()]
    sums, _ = LanguageModel.load(str(toy / "lm")).score(["w1 w2 w3", "w3 w2 w1"])
    assert [float(r[0]) for r in rows] == pytest.approx(sums, abs=1e-5) and [r[1] for r in rows] == ["4", "4"]


def test_lm_and_channel_features_on_an_nbest_list(toy, tmp_path, capsys):
    lists = [["w1 w2 w3", "w3 w2 w1", "w1 w2 w3"], ["w4 w5", "w4"]]
    (tmp_path / "in.nbest").write_text("".join(f"{i} ||| {h} ||| nmt= {-k} ||| {-k}\n"
                                               for i, hyps in enumerate(lists) for k, h in enumerate(hyps)))
    (tmp_path / "src.en").write_text("w1 w2 w3\nw4 w5\n")
    args = ["features", str(tmp_path / "in.nbest"), "--src", str(tmp_path / "src.en"),
            "--which", "lm,lm_norm,channel,channel_norm", "--lm-model", str(toy / "lm"), "--channel-model", str(toy / "rev")]
    assert main(args + ["-o", str(tmp_path / "out.nbest")]) == 0
    out = read_nbest(str(tmp_path / "out.nbest"))
    assert out.feature_names == ["nmt", "lm", "lm_norm", "channel", "channel_norm"]
    sums, counts = LanguageModel.load(str(toy / "lm")).score([h for hyps in lists for h in hyps])
    np.testing.assert_allclose(out.column("lm"), sums, atol=1e-5)
    np.testing.assert_allclose(out.column("lm_norm"), np.array(sums) / counts, atol=1e-5)
    sources = ["w1 w2 w3"] * 3 + ["w4 w5"] * 2
    expected, lengths = channel_scores(str(toy / "rev"), [h for hyps in lists for h in hyps], sources)
    np.testing.assert_allclose(out.column("channel"), expected, atol=1e-5)
    np.testing.assert_allclose(out.column("channel_norm"), expected / lengths, atol=1e-5)
    assert lengths.tolist() == [4, 4, 4, 3, 3]
    assert out.column("channel")[0] == out.column("channel")[2]  # the repeated pair, scored once


def test_model_features_need_their_models_and_sources(toy, tmp_path, capsys):
    (tmp_path / "in.nbest").write_text("0 ||| w1 w2 ||| nmt= -1 ||| -1\n")
    base = ["features", str(tmp_path / "in.nbest"), "-o", str(tmp_path / "o")]
    assert main(base + ["--which", "lm"]) == 2
    assert "lm needs a language model: a `rerank lm train` run, a Hugging Face causal LM" in capsys.readouterr().err
    assert main(base + ["--which", "channel", "--channel-model", str(toy / "rev")]) == 2
    assert "channel needs the source sentences" in capsys.readouterr().err
    assert main(base + ["--which", "lm", "--lm-model", str(tmp_path)]) == 2
    assert "not a model directory: no config.json" in capsys.readouterr().err
    assert main(base + ["--which", "lm", "--lm-model", str(toy / "lm"), "--tgt-lang", "en"]) == 2
    assert "the language model is for 'de'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_lm_training_resumes_where_it_stopped(toy, tmp_path):
    args = ["lm", "train", "--train", str(toy / "train.de.gz"), "--val", str(toy / "val.de.gz"), "--out",
            str(tmp_path / "lm"), "--emb-dim", "8", "--hidden", "8", "--min-freq", "1", "--threads", "1", "--patience", "9"]
    assert main(args + ["--max-epochs", "1"]) == 0
    assert json.loads((tmp_path / "lm" / "DONE.json").read_text())["epochs"] == 1
    assert main(args + ["--max-epochs", "2"]) == 0
    log = json.loads((tmp_path / "lm" / "DONE.json").read_text())
    assert log["epochs"] == 2 and log["stopped"] == "max-epochs"


def test_lm_time_budget_counts_whole_epochs(toy, tmp_path):
    """A fake clock that advances one minute per reading: the budget is spent in whole epochs."""
    from rerank.nmt.lm import LMConfig, train_lm
    from rerank.io import read_lines

    ticks = iter(range(1000))
    cfg = LMConfig(emb_dim=8, hidden=8, min_freq=1, max_epochs=10, patience=10, max_minutes=5.0)
    state = train_lm(cfg, read_lines(str(toy / "train.de.gz")), read_lines(str(toy / "val.de.gz")),
                     str(tmp_path / "lm"), log=lambda msg: None, clock=lambda: 60.0 * next(ticks))
    # readings: start 0; epoch 1 starts at 1, ends at 2 (1 min); epoch 2 starts at 3 (3 + 1 <= 5), ends at 4;
    # at 5 another epoch (mean 1 min) would end at 6 > 5: stop after two whole epochs
    assert state["epoch"] == 2 and state["stopped"] == "time budget"
    assert json.loads((tmp_path / "lm" / "DONE.json").read_text())["stopped"] == "time budget"


def test_the_stronger_reranker_experiment_runs_and_resumes(toy, tmp_path):
    """rerank.recipes.stronger on the first sentences of the shipped optimised 20-best lists, with the toy
    LM and channel model (their scores are noise here: this checks the plumbing and the resume)."""
    from rerank.recipes import stronger

    args = ["--lm-model", str(toy / "lm"), "--channel-model", str(toy / "rev"), "--out", str(tmp_path / "run"),
            "--flavours", "optimised", "--nbest", "20", "--sentences", "12", "--runs", "1", "--epochs", "2",
            "--ar", "20", "--bootstrap", "0"]
    assert stronger.main(args) == 0
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    results = saved["experiments"]["optimised.20best"]
    assert saved["command"].startswith("python -m rerank.recipes.stronger --lm-model")
    assert saved["models"]["channel"]["epochs"] >= 1 and saved["models"]["embedding"] == "mlmme-bpe.pt"
    assert results["systems"] == ["NMT 1-best", "MIRA: NMT features", "+ s_s", "+ s_s mbr", "+ s_s + s_s mbr", "+ mbr",
                                  "+ channel + lm", "all"]
    assert set(results["weights"]["all"][0]) == {"nmt", "nmt_norm", "len", "s_s", "mbr", "channel", "channel_norm",
                                                 "lm", "lm_norm"}
    featured = read_nbest(str(tmp_path / "run" / "features" / "optimised.test_2016.20best.feat.gz"))
    sums, counts = LanguageModel.load(str(toy / "lm")).score(list(featured.hyps))
    np.testing.assert_allclose(featured.column("lm"), sums, atol=1e-5)
    # mbr_mlmme is what `rerank features --which mbr --mbr-utility mlmme` gives (the API's feature)
    from rerank.api import add_features as api_features
    from rerank.recipes.demo import default_model

    shipped_model = default_model()
    expected = api_features(featured.select_features(["nmt"]), "mbr", mbr_utility="mlmme", model=shipped_model,
                            tgt_lang="de")
    np.testing.assert_allclose(featured.column("mbr_mlmme"), expected.column("mbr"), atol=1e-4)
    table = (tmp_path / "run" / "stronger.md").read_text()
    base = next(r["score"] for r in results["results"] if r["system"] == "NMT 1-best" and r["metric"] == "bleu")
    mbr = next(r["score"] for r in results["results"] if r["system"] == "+ mbr" and r["metric"] == "bleu")
    assert f"| optimised | + mbr | {mbr:.2f}" in table and f"| {mbr - base:+.2f} |" in table
    assert "python -m rerank.recipes.stronger --lm-model" in table
    assert stronger.main(args) == 0
    assert "steps run: 0 (none); steps reused: 3" in (tmp_path / "run" / "stronger.log").read_text()


def test_lm_trains_on_several_files_in_order_and_names_an_empty_one(toy, tmp_path, capsys):
    """Two halves of the training text give the model the whole text gives (same vocabulary and
    weights); an empty file among them is refused by name."""
    lines = gzip.open(toy / "train.de.gz", "rt", encoding="utf-8").read().splitlines()
    (tmp_path / "a.de").write_text("\n".join(lines[:120]) + "\n", encoding="utf-8")
    (tmp_path / "b.de").write_text("\n".join(lines[120:]) + "\n", encoding="utf-8")
    (tmp_path / "empty.de").write_text("\n", encoding="utf-8")
    common = ["--val", str(toy / "val.de.gz"), "--emb-dim", "8", "--hidden", "8", "--min-freq", "1", "--max-epochs", "1",
              "--threads", "1"]
    assert main(["lm", "train", "--train", str(tmp_path / "a.de"), str(tmp_path / "b.de"), "--out", str(tmp_path / "two")]
                + common) == 0
    assert main(["lm", "train", "--train", str(toy / "train.de.gz"), "--out", str(tmp_path / "one")] + common) == 0
    assert (tmp_path / "two" / "vocab.json").read_text() == (tmp_path / "one" / "vocab.json").read_text()
    two = torch.load(tmp_path / "two" / "best.pt", weights_only=True)
    one = torch.load(tmp_path / "one" / "best.pt", weights_only=True)
    two, one = two.get("model", two), one.get("model", one)
    assert all(torch.equal(two[k], one[k]) for k in one)
    capsys.readouterr()
    assert main(["lm", "train", "--train", str(tmp_path / "a.de"), str(tmp_path / "empty.de"), "--out",
                 str(tmp_path / "bad")] + common) == 2
    assert f"{tmp_path / 'empty.de'}: no training sentences" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
