"""The Multi30k recipe end to end on a generated miniature Multi30k (tiny models, seconds)."""

import json

import pytest

from rerank.cli import main

pytestmark = pytest.mark.neural  # the recipe trains NMT and embedding models (torch), which the imports do not show


def test_recipe_runs_and_resumes(mini_multi30k, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["recipe", "multi30k", "--data-dir", str(mini_multi30k), "--out", str(out), "--preset", "tiny",
            "--nbest", "4", "--flavours", "weak", "--nmt-max-epochs", "1", "--embed-max-epochs", "1",
            "--runs", "2", "--epochs", "2", "--ar", "100", "--bootstrap", "20"]
    assert main(args) == 0
    table = (out / "tables" / "table.4best.md").read_text()
    for text in ("| weak | NMT 1-best |", "| weak | MIRA: NMT features |", "| weak | + MLMME-text |",
                 "| weak | Oracle (sentence BLEU+1) |", "Text only"):
        assert text in table
    assert (out / "tables" / "table.4best.tex").exists()
    assert (out / "tables" / "oracle_curve.png").exists()
    curve = json.loads((out / "tables" / "oracle_curve.json").read_text())
    values = curve["oracle_bleu"]["weak"]
    assert curve["k"] == [1, 2, 3] and values == sorted(values)  # more hypotheses, higher oracle
    summary = json.loads((out / "experiments" / "weak.4best" / "summary.json").read_text())
    assert summary["systems"] == ["NMT 1-best", "MIRA: NMT features", "+ MLMME-text"]
    assert summary["second_baseline"] == "MIRA: NMT features"
    config = json.loads((out / "recipe.config.json").read_text())
    assert config["text_only"] is True
    assert "NO IMAGE FEATURES" in (out / "recipe.log").read_text()
    # a second run finds every step complete and redoes nothing
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and p.name != "recipe.log"}
    assert main(args) == 0
    after = {p: p.stat().st_mtime_ns for p in before}
    changed = [p.name for p in before if before[p] != after[p] and "tables" not in p.parts and p.name != "recipe.config.json"]
    assert changed == []
    log = (out / "recipe.log").read_text().split("NO IMAGE FEATURES")[-1]
    assert f"embedding MLMME-text: reusing {out / 'embeddings' / 'mlmme-text'}" in log
    assert "steps run: 0 (none); steps reused: 7 (embedding MLMME-text, NMT weak, n-best weak val 4" in log
    done = json.loads((out / "nmt" / "weak" / "DONE.json").read_text())
    assert done["stopped"] == "max-epochs" and done["config"]["max_epochs"] == 1 and done["epoch"] == 1
    # a changed n-best list makes its features and the experiment stale; the rest is reused
    from rerank.formats import read_nbest, write_nbest
    val_list = out / "nbest" / "weak.val.4best.gz"
    nbest = read_nbest(str(val_list))
    write_nbest(nbest.with_feature("len", nbest.features[:, nbest.feature_names.index("len")] + 1.0, replace=True), str(val_list))
    test_features = out / "features" / "weak.test_2016.4best.feat.gz"
    mtime = test_features.stat().st_mtime_ns
    assert main(args) == 0
    rerun = (out / "recipe.log").read_text().split("NO IMAGE FEATURES")[-1]
    assert "inputs of " + str(out / "features" / "weak.val.4best.feat.gz") + " changed" in rerun
    assert "inputs of " + str(out / "experiments" / "weak.4best") + " changed" in rerun
    assert "experiment weak 4-best: 2 systems" in rerun
    assert test_features.stat().st_mtime_ns == mtime


def test_an_unfinished_step_is_redone_from_its_checkpoint(mini_multi30k, tmp_path):
    """A killed run leaves model.pt without DONE.json: the next run resumes the training."""
    out = tmp_path / "run"
    args = ["recipe", "multi30k", "--data-dir", str(mini_multi30k), "--out", str(out), "--preset", "tiny",
            "--nbest", "3", "--flavours", "weak", "--nmt-max-epochs", "1", "--embed-max-epochs", "1",
            "--runs", "1", "--epochs", "1", "--ar", "20", "--bootstrap", "10"]
    assert main(args) == 0
    (out / "embeddings" / "mlmme-text" / "DONE.json").unlink()
    (out / "nbest" / "weak.test_2016.3best.gz.DONE.json").unlink()
    assert main(args) == 0
    log = (out / "recipe.log").read_text().split("NO IMAGE FEATURES")[-1]
    assert "has no DONE marker (unfinished or from an older run): redoing it from its checkpoint" in log
    assert "translating" in log and "steps run: 2 (embedding MLMME-text, n-best weak test_2016 3)" in log
    assert (out / "embeddings" / "mlmme-text" / "DONE.json").exists()


def test_recipe_configs_are_checked_and_recorded(mini_multi30k, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"dropout": 0.0,\n "oops"}')
    args = ["recipe", "multi30k", "--data-dir", str(mini_multi30k), "--out", str(tmp_path / "run"), "--preset", "tiny",
            "--nbest", "3", "--flavours", "weak", "--nmt-max-epochs", "1", "--embed-max-epochs", "1",
            "--runs", "1", "--epochs", "1", "--ar", "20", "--bootstrap", "10"]
    assert main(args + ["--embedding-config", str(bad)]) == 2
    assert f"{bad}:2: not JSON" in capsys.readouterr().err
    (tmp_path / "emb.json").write_text('{"dropout": 0.0, "init_std": 0.1}')
    (tmp_path / "nmt.json").write_text('{"lr_decay": 0.7}')
    assert main(args + ["--embedding-config", str(tmp_path / "emb.json"), "--nmt-config", str(tmp_path / "nmt.json")]) == 0
    emb = json.loads((tmp_path / "run" / "embeddings" / "mlmme-text" / "DONE.json").read_text())
    assert emb["config"]["dropout"] == 0.0 and emb["config"]["init_std"] == 0.1
    nmt = json.loads((tmp_path / "run" / "nmt" / "weak" / "step.config.json").read_text())
    assert nmt["config"]["lr_decay"] == 0.7 and nmt["config"]["flavour"] == "weak"
