"""`rerank recipe reproduce` end to end with tiny configurations on a miniature Multi30k: every
model, list, table and page it promises, the resume, and --publish into given folders."""

import json
import shutil
from pathlib import Path

import pytest

from recipes.reproduce import CONFIGS, load_config
from rerank.cli import main

TINY = {
    "embedding": {"preset": "tiny", "languages": ["en", "de"], "sources": ["task1"], "max_epochs": 1, "seed": 3},
    "nmt": {"max_epochs": 1},
    "recipe": {"preset": "tiny", "nbest_sizes": [3], "flavours": ["weak", "optimised"], "runs": 1, "epochs": 2,
               "ar_trials": 50, "bootstrap": 10, "seed": 1},
    "lm": {"emb_dim": 16, "hidden": 16, "max_epochs": 1},
    "channel": {"size": "tiny", "flavour": "optimised", "src_lang": "de", "tgt_lang": "en", "max_epochs": 1},
    "stronger": {"flavours": ["optimised"], "nbest": [3], "runs": 1, "epochs": 2, "ar": 20, "bootstrap": 0},
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
    exported = json.loads((run / "embedding" / "mlmme-small.json").read_text())
    assert exported["dtype"] == "float16" and exported["training"]["config"]["seed"] == 3
    assert set(exported["evaluation"]["translation_retrieval_test_2016"]) == {"en->de", "de->en"}
    nmt = json.loads((run / "nmt_results.json").read_text())
    assert list(nmt) == ["weak", "optimised"]
    assert set(nmt["weak"]["lists"]) == {"val.3best", "test_2016.3best"}
    assert nmt["weak"]["epochs"] == 1 and nmt["weak"]["config"]["flavour"] == "weak"
    assert 0 <= nmt["weak"]["lists"]["test_2016.3best"]["bleu"] <= nmt["weak"]["lists"]["test_2016.3best"]["oracle"]
    stronger = json.loads((run / "stronger" / "results.json").read_text())
    assert list(stronger["experiments"]) == ["optimised.3best"]
    assert "--text-dir" in stronger["command"] and stronger["models"]["channel"]["epochs"] == 1
    assert (run / "recipe" / "tables" / "table.3best.md").exists()
    lm_marker = json.loads((run / "lm" / "de.DONE.json").read_text())
    assert lm_marker["config"]["hidden"] == 16


def test_a_second_run_reuses_every_step(reproduced, capsys):
    root, args = reproduced
    assert main(args) == 0
    summaries = [line for line in (root / "run" / "reproduce.log").read_text().splitlines() if "steps run:" in line]
    assert "steps run: 4" in summaries[0] and "steps run: 0 (none); steps reused: 4" in summaries[1]


def test_publish_copies_and_renders_the_pages(reproduced, tmp_path):
    from recipes.reproduce import publish

    root, _ = reproduced
    docs, package = tmp_path / "docs", tmp_path / "package"
    docs.mkdir()
    (docs / "README.md").write_text(PAGE)
    written = publish(str(root / "run"), str(docs), str(package), str(root / "configs"))
    assert (package / "multi30k" / "optimised.val.3best.gz").exists()
    assert (package / "models" / "mlmme-small.pt").exists() and (docs / "stronger" / "results.json").exists()
    page = (docs / "README.md").read_text()
    nmt = json.loads((docs / "nmt_results.json").read_text())
    bleu = nmt["optimised"]["lists"]["test_2016.3best"]["bleu"]
    assert "stale" not in page and f"| {bleu:.2f} |" in page and "Prose without numbers." in page
    assert "| weak | 3-best | MIRA: NMT features |" in page
    model = json.loads((docs / "embedding-model.json").read_text())
    assert "vocab" not in model and model["dtype"] == "float16" and "translation_retrieval_test_2016" in model["evaluation"]
    assert str(docs / "README.md") in written


def test_the_committed_configurations_are_complete():
    from dataclasses import fields

    from nmt.config import TrainConfig
    from nmt.lm_config import LMConfig
    from recipes.multi30k import RecipeConfig

    assert set(load_config("nmt")) <= {f.name for f in fields(TrainConfig)}
    assert set(load_config("lm")) <= {f.name for f in fields(LMConfig)}
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
