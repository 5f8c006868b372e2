"""`rerank recipe reproduce` end to end with tiny configurations on a miniature Multi30k: every
model, list, table and page it promises, the resume, and --publish into given folders."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from rerank.recipes.reproduce import CONFIGS, load_config
from rerank.cli import main
from rerank.errors import InputError
from rerank.formats import read_nbest, write_nbest
from rerank.nbest import NBestList

pytestmark = pytest.mark.neural  # the recipe trains NMT, LM and embedding models (torch), which the imports do not show

SHIPPED_COLUMNS = ["nmt", "nmt_norm", "len", "channel", "channel_norm", "lm", "lm_norm"]

TINY = {
    "embedding": {"preset": "tiny", "languages": ["en", "de"], "sources": ["task1"], "max_epochs": 1, "seed": 3,
                  "finetune": {"contrastive": "max", "max_epochs": 1}},
    "nmt": {"max_epochs": 1},
    "recipe": {"preset": "tiny", "nbest_sizes": [3], "flavours": ["weak", "optimised"], "runs": 1, "epochs": 2,
               "ar_trials": 50, "bootstrap": 10, "seed": 1},
    "lm": {"emb_dim": 16, "hidden": 16, "max_epochs": 1, "extra_train": ["task2/raw/train.1.de.gz"]},
    "channel": {"size": "tiny", "flavour": "optimised", "src_lang": "de", "tgt_lang": "en", "max_epochs": 1},
    "stronger": {"flavours": ["weak", "optimised"], "nbest": [3], "runs": 1, "epochs": 2, "ar": 20, "bootstrap": 0},
}
PAGE = """# Results

<!-- BEGIN baselines -->
stale
<!-- END baselines -->

Prose without numbers.

<!-- BEGIN gains -->
<!-- END gains -->
"""


@pytest.fixture(scope="module")
def reproduced(mini_multi30k, tmp_path_factory):
    root = tmp_path_factory.mktemp("repro")
    (root / "data").mkdir()
    (root / "data" / "multi30k").symlink_to(mini_multi30k)
    (root / "data" / "sts").mkdir()
    (root / "configs").mkdir()
    for name, values in TINY.items():
        (root / "configs" / f"{name}.json").write_text(json.dumps(values))
    args = ["recipe", "reproduce", "--data-dir", str(root / "data"), "--out", str(root / "run"),
            "--configs", str(root / "configs"), "--threads", "1"]
    assert main(args) == 0
    return root, args


def test_every_step_writes_its_output(reproduced):
    root, _ = reproduced
    run = root / "run"
    exported = json.loads((run / "embedding" / "mlmme-bpe.json").read_text())
    assert exported["dtype"] == "float16" and exported["training"]["config"]["seed"] == 3
    # the exported model is the fine-tuned one: max-violation, started from the first run's model
    assert exported["training"]["config"]["contrastive"] == "max"
    assert exported["training"]["config"]["init"] == str(run / "embedding" / "run" / "model.pt")
    assert set(exported["evaluation"]["translation_retrieval_test_2016"]) == {"en->de", "de->en"}
    nmt = json.loads((run / "nmt_results.json").read_text())
    assert list(nmt) == ["weak", "optimised"]
    assert set(nmt["weak"]["lists"]) == {"val.3best", "test_2016.3best"}
    assert nmt["weak"]["epochs"] == 1 and nmt["weak"]["config"]["flavour"] == "weak"
    assert 0 <= nmt["weak"]["lists"]["test_2016.3best"]["bleu"] <= nmt["weak"]["lists"]["test_2016.3best"]["oracle"]
    stronger = json.loads((run / "stronger" / "results.json").read_text())
    assert list(stronger["experiments"]) == ["weak.3best", "optimised.3best"]
    assert "--text-dir" in stronger["command"] and stronger["models"]["channel"]["epochs"] == 1
    assert (run / "recipe" / "tables" / "table.3best.md").exists()
    lm_marker = json.loads((run / "lm" / "de.DONE.json").read_text())
    assert lm_marker["config"]["hidden"] == 16
    assert [os.path.basename(f) for f in lm_marker["config"]["train_files"]] == ["train.de.gz", "train.1.de.gz"]


def test_a_second_run_reuses_every_step(reproduced, capsys):
    root, args = reproduced
    assert main(args) == 0
    summaries = [line for line in (root / "run" / "reproduce.log").read_text().splitlines() if "steps run:" in line]
    assert "steps run: 5" in summaries[0] and "steps run: 0 (none); steps reused: 5" in summaries[1]


def test_publish_copies_and_renders_the_pages(reproduced, tmp_path):
    from rerank.recipes.reproduce import publish

    root, _ = reproduced
    docs, package = tmp_path / "docs", tmp_path / "package"
    docs.mkdir()
    (docs / "README.md").write_text(PAGE)
    written = publish(str(root / "run"), str(docs), str(package), str(root / "configs"))
    assert (package / "multi30k" / "optimised.val.3best.gz").exists()
    assert (package / "models" / "mlmme-bpe.pt").exists() and (docs / "stronger" / "results.json").exists()
    page = (docs / "README.md").read_text()
    nmt = json.loads((docs / "nmt_results.json").read_text())
    bleu = nmt["optimised"]["lists"]["test_2016.3best"]["bleu"]
    assert "stale" not in page and f"| {bleu:.2f} |" in page and "Prose without numbers." in page
    assert "| weak | 3-best | MIRA: NMT features |" in page
    model = json.loads((docs / "embedding-model.json").read_text())
    assert "vocab" not in model and model["dtype"] == "float16" and "translation_retrieval_test_2016" in model["evaluation"]
    assert str(docs / "README.md") in written
    for flavour in ("weak", "optimised"):
        for split in ("val", "test_2016"):
            shipped = package / "multi30k" / f"{flavour}.{split}.3best.gz"
            featured = read_nbest(str(root / "run" / "stronger" / "features" / f"{flavour}.{split}.3best.feat.gz"))
            nbest, listed = read_nbest(str(shipped)), read_nbest(str(root / "run" / "recipe" / "nbest" / shipped.name))
            assert str(shipped) in written and nbest.feature_names == SHIPPED_COLUMNS
            assert "s_s" in featured.feature_names and nbest.hyps == listed.hyps
            for name in SHIPPED_COLUMNS[:3]:
                assert np.array_equal(nbest.column(name), featured.column(name)), (shipped, name)
            for name in SHIPPED_COLUMNS[3:]:   # rounded to the decoder's 4 decimals
                assert np.array_equal(nbest.column(name), np.round(featured.column(name), 4)), (shipped, name)
                assert np.abs(nbest.column(name) - featured.column(name)).max() <= 5e-5
            assert np.abs(nbest.column("channel")).max() > 0 and np.abs(nbest.column("lm")).max() > 0


def test_publish_refuses_a_feature_list_of_other_hypotheses(reproduced, tmp_path):
    from rerank.recipes.reproduce import publish

    root, _ = reproduced
    run = tmp_path / "run"
    shutil.copytree(root / "run", run, symlinks=True)
    bad = run / "stronger" / "features" / "optimised.test_2016.3best.feat.gz"  # the last list checked
    nbest = read_nbest(str(bad))
    hyps = list(nbest.hyps)
    hyps[4] += " extra"
    write_nbest(NBestList(nbest.offsets, hyps, nbest.features, nbest.feature_names, scores=nbest.scores), str(bad))
    docs, package = tmp_path / "docs", tmp_path / "package"
    docs.mkdir()
    (docs / "README.md").write_text(PAGE)
    with pytest.raises(InputError) as error:
        publish(str(run), str(docs), str(package), str(root / "configs"))
    listed = run / "recipe" / "nbest" / "optimised.test_2016.3best.gz"
    assert str(error.value).startswith(f"{bad}: not the n-best list of {listed}: hypothesis 4 (sentence ")
    assert f"{hyps[4]!r} here, {hyps[4][:-6]!r} there" in str(error.value)
    assert not package.exists() and [p.name for p in docs.iterdir()] == ["README.md"]
    assert (docs / "README.md").read_text() == PAGE


def _moses(path, lines):
    path.write_text("".join(f"{i} ||| {hyp} ||| {features} ||| 0\n" for i, hyp, features in lines))
    return str(path)


def test_a_published_list_must_carry_the_nmt_values_and_the_model_columns(tmp_path):
    from rerank.recipes.reproduce import published_list

    listed = _moses(tmp_path / "list", [(0, "a b", "nmt= -1 nmt_norm= -0.5 len= 2"),
                                        (1, "c", "nmt= -2 nmt_norm= -2 len= 1")])
    model = "channel= -3 channel_norm= -1.5 lm= -4 lm_norm= -2 s_s= 0.5"
    good = _moses(tmp_path / "good", [(0, "a b", f"nmt= -1 nmt_norm= -0.5 len= 2 {model}"),
                                      (1, "c", f"nmt= -2 nmt_norm= -2 len= 1 {model}")])
    nbest = published_list(good, listed)
    assert nbest.feature_names == SHIPPED_COLUMNS and nbest.features[1].tolist() == [-2, -2, 1, -3, -1.5, -4, -2]
    other = _moses(tmp_path / "other", [(0, "a b", f"nmt= -1 nmt_norm= -0.5 len= 2 {model}"),
                                        (1, "c", f"nmt= -2.5 nmt_norm= -2 len= 1 {model}")])
    with pytest.raises(InputError) as error:
        published_list(other, listed)
    assert str(error.value) == (f"{other}: not the n-best list of {listed}: "
                                "nmt of hypothesis 1 (sentence 1): -2.5 here, -2.0 there")
    short = _moses(tmp_path / "short", [(0, "a b", "nmt= -1 nmt_norm= -0.5 len= 2 channel= 1 lm= 2"),
                                        (1, "c", "nmt= -2 nmt_norm= -2 len= 1 channel= 1 lm= 2")])
    with pytest.raises(InputError) as error:
        published_list(short, listed)
    assert str(error.value).startswith(f"{short}: no feature column 'channel_norm', 'lm_norm'; the columns are nmt,")


def test_the_committed_configurations_are_complete():
    from dataclasses import fields

    from rerank.nmt.config import TrainConfig
    from rerank.nmt.lm_config import LMConfig
    from rerank.recipes.multi30k import RecipeConfig

    assert set(load_config("nmt")) <= {f.name for f in fields(TrainConfig)}
    lm = load_config("lm")
    assert set(lm) - {"extra_train"} <= {f.name for f in fields(LMConfig)}
    # more German for the LM: training captions only, never a val or test file
    assert all(name.startswith("task2/raw/train.") for name in lm.get("extra_train", []))
    assert set(load_config("recipe")) <= {f.name for f in fields(RecipeConfig)}
    channel = load_config("channel")
    assert (channel["src_lang"], channel["tgt_lang"]) == ("de", "en")
    assert load_config("embedding")["max_minutes"] is None  # epoch-bound, so the run is regenerable
    assert sorted(p.name for p in Path(CONFIGS).glob("*.json")) == sorted(f"{n}.json" for n in TINY)


def test_a_broken_configuration_is_named(tmp_path, capsys, mini_multi30k):
    configs = tmp_path / "configs"
    shutil.copytree(CONFIGS, configs)
    (configs / "lm.json").write_text('{"hidden": 16,\n oops}')
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "multi30k").symlink_to(mini_multi30k)
    (tmp_path / "data" / "sts").mkdir()
    args = ["recipe", "reproduce", "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "run"),
            "--configs", str(configs)]
    assert main(args) == 2
    assert f"{configs / 'lm.json'}:2: not JSON" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_retrained_base_model_is_fine_tuned_afresh(reproduced, tmp_path):
    """Changed settings of the first embedding step retrain it, and the fine-tuning step then starts
    again from the new model instead of resuming the finished checkpoint of the old one."""
    root, args = reproduced
    shutil.copytree(root / "run", tmp_path / "run")
    shutil.copytree(root / "configs", tmp_path / "configs")
    config = json.loads((tmp_path / "configs" / "embedding.json").read_text())
    config["max_epochs"] = 2
    (tmp_path / "configs" / "embedding.json").write_text(json.dumps(config))
    tuned = tmp_path / "run" / "embedding" / "finetune" / "model.pt"
    before = tuned.read_bytes()
    new_args = list(args)
    new_args[new_args.index("--out") + 1] = str(tmp_path / "run")
    new_args[new_args.index("--configs") + 1] = str(tmp_path / "configs")
    assert main(new_args) == 0
    log = (tmp_path / "run" / "reproduce.log").read_text()
    assert "embedding model: " in log and "embedding fine-tuning: " in log
    assert log.count("was left by other settings or inputs: training afresh, not resuming") >= 2
    assert tuned.read_bytes() != before
    base = json.loads((tmp_path / "run" / "embedding" / "run" / "model.json").read_text())["training"]
    assert base["config"]["max_epochs"] == 2 and base["final_status"] == "completed max_epochs"
