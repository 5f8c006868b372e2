"""rerank.recipes.embedding_study end to end with tiny variants on a miniature Multi30k: every stage kind
(training, pseudo-pairs, training from scratch on them, fine-tuning, AME), shared stages, the
evaluation and tables, the resume, --publish into a given folder, and configurations that are
refused with their file named."""

import gzip
import json

import pytest

from rerank.recipes.embedding_study import main, publish
from rerank.recipes.embedding_variants import CONFIGS, ISSUE14, LEVERS, ORDER, available, load_variant, select
from rerank.recipes.results_docs import RENDER
from rerank.io import read_lines
from tests.conftest import PACKAGE_DATA

pytestmark = pytest.mark.neural  # the study trains embedding models (torch), which the imports do not show

TINY = {"preset": "tiny", "languages": ["en", "de"], "sources": ["task2", "task1"], "comparable_per_image": 1,
        "contrastive": "max", "min_freq": 1, "batch_size": 16, "max_epochs": 1, "select_images": 10,
        "checkpoint_minutes": 1000, "max_minutes": None}
SLICE = {**TINY, "disjoint_halves": True, "aligned_images": 10}
PAIRS = {"name": "pairs", "kind": "pseudopairs", "model": "slice", "src_lang": "en", "tgt_lang": "de", "filter": 25}
VARIANTS = {
    "aligned": [{"name": "train", "kind": "train", "config": TINY}],
    "ame": [{"name": "train", "kind": "train", "config": {**TINY, "align_loss": "rcsls", "dictionary": "muse/dict.txt.gz"}}],
    "pseudo-scratch": [{"name": "slice", "kind": "train", "config": SLICE}, PAIRS,
                       {"name": "scratch", "kind": "train", "pseudo_pairs": ["pairs"], "config": SLICE}],
    "pseudo-finetune": [{"name": "slice", "kind": "train", "config": SLICE}, PAIRS,
                        {"name": "tuned", "kind": "train", "init": "slice", "pseudo_pairs": ["pairs"], "config": SLICE}],
}
WORDS = "man mann\nwoman frau\ndog hund\ngirl mädchen\nboy junge\nwater wasser\ntwo zwei\nred rot\n"
PAGE = "# Embeddings\n\nMade by `python -m rerank.recipes.embedding_study`.\n\n<!-- BEGIN embeddings -->\nstale\n<!-- END embeddings -->\n"


def _data(root, m30k):
    (root / "data").mkdir()
    (root / "data" / "multi30k").symlink_to(m30k)
    (root / "data" / "sts").mkdir()
    en = read_lines(str(PACKAGE_DATA / "val.en.gz"))[:13]
    rows = [f"{i % 5}.0\t{en[i]}\t{en[i + 1]}" for i in range(12)]
    (root / "data" / "sts" / "sts2014-images.test.tsv").write_text("\n".join(rows) + "\n")
    (root / "data" / "muse").mkdir()
    for name in ("dict.txt.gz", "en-de.full.txt.gz"):
        with gzip.open(root / "data" / "muse" / name, "wt", encoding="utf-8") as f:
            f.write(WORDS)
    return root / "data"


def _configs(root, variants):
    (root / "configs").mkdir(exist_ok=True)
    for name, stages in variants.items():
        (root / "configs" / f"{name}.json").write_text(json.dumps({"description": name, "stages": stages}))
    return root / "configs"


@pytest.fixture(scope="module")
def study(mini_multi30k, tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    data, configs = _data(root, mini_multi30k), _configs(root, VARIANTS)
    args = ["--data-dir", str(data), "--out", str(root / "run"), "--configs", str(configs), "--threads", "1", "--quiet"]
    assert main(args) == 0
    return root, args


def test_every_variant_is_trained_evaluated_and_tabulated(study):
    root, _ = study
    run = root / "run"
    results = json.loads((run / "results.json").read_text())
    assert list(results["variants"]) == ["ame", "aligned", "pseudo-finetune", "pseudo-scratch"]  # study order, then by name
    ft = results["variants"]["pseudo-finetune"]
    assert [s["kind"] for s in ft["stages"]] == ["train", "pseudopairs", "train"]
    assert set(ft["translation_retrieval"]) == {"en->de", "de->en"} and "sts2014-images" in ft["sts"]
    assert ft["alignment"]["pairs"] > 0 and ft["fp16_mb"] > 0 and ft["minutes"] >= 0
    pairs = ft["stages"][1]
    assert pairs["targets"] == 40 * 6 and 180 <= pairs["pairs"] < 240   # German captions of the German half, top 3/4
    assert results["variants"]["ame"]["alignment"]["learned_map"] is True
    # the slice stage and its pairs are shared by both pseudo-pair variants: one run each
    assert len(list((run / "stages").glob("slice-*"))) == 1 and len(list((run / "stages").glob("pairs-*.tsv"))) == 1
    tuned = json.loads((run / ft["stages"][2]["dir"] / "config.json").read_text())
    assert tuned["init"].endswith("model.pt") and tuned["pseudo_pairs"][0]["file"].endswith(".tsv")
    table = (run / "results.md").read_text()
    assert "| pseudo-finetune | slice → pairs → tuned |" in table and (run / "ame" / "eval.md").exists()


def test_a_second_run_reuses_every_step(study):
    root, args = study
    assert main(args) == 0
    summaries = [x for x in (root / "run" / "study.log").read_text().splitlines() if "steps run:" in x]
    assert "steps run: 10" in summaries[0] and "steps reused: 2 (pseudo-scratch: train slice, pseudo-scratch: " \
        "pseudo-pairs pairs)" in summaries[0]   # shared with pseudo-finetune, run first
    assert "steps run: 0 (none); steps reused: 12" in summaries[1]


def test_a_stopped_stage_resumes_from_its_checkpoint(study):
    root, args = study
    run = root / "run"
    stage = run / json.loads((run / "aligned" / "result.json").read_text())["stages"][0]["dir"]
    (stage / "DONE.json").unlink()
    assert main(args + ["--variants", "aligned"]) == 0
    log = (run / "study.log").read_text()
    assert "has no DONE marker (unfinished or from an older run): redoing it from its checkpoint" in log
    assert "resumed from" in (stage / "train.log").read_text() and (stage / "DONE.json").exists()


def test_publish_renders_the_block(study, tmp_path):
    root, _ = study
    (tmp_path / "embeddings.md").write_text(PAGE)
    written = publish(str(root / "run"), str(tmp_path))
    page = (tmp_path / "embeddings.md").read_text()
    r1 = json.loads((tmp_path / "embeddings.json").read_text())["variants"]["aligned"]["translation_retrieval"]["en->de"]["r1"]
    assert "stale" not in page and "| aligned | train | " in page and f"{r1:.1f} / " in page
    assert "Made by `python -m rerank.recipes.embedding_study`." in page and len(written) == 2
    assert RENDER["embeddings.md"]["embeddings"](str(tmp_path / "none")).startswith("Pending:")


def test_publishing_a_few_variants_keeps_the_published_others(study, tmp_path):
    from rerank.recipes.embedding_study import merged

    root, _ = study
    run = json.loads((root / "run" / "results.json").read_text())
    (name, row), = list(run["variants"].items())[:1]
    other = next(n for n in ORDER if n not in run["variants"])
    published = {"command": "old", "variants": {other: {"old": 1}, name: {"old": 2}}}
    both = merged(published, run)
    assert both["variants"][name] == row and both["variants"][other] == {"old": 1}
    assert both["command"] == run["command"] and both["earlier_commands"] == ["old"]
    assert list(both["variants"]) == sorted(both["variants"], key=lambda n: ORDER.index(n) if n in ORDER else 99)
    again = merged(both, {"command": "newer", "variants": {other: {"new": 3}}})
    assert again["variants"][other] == {"new": 3} and again["earlier_commands"] == ["old", run["command"]]
    assert merged({"command": "old", "variants": {name: {}}}, run)["earlier_commands"] == []   # nothing kept
    assert merged(None, run) == run


def test_the_choice_is_the_best_mean_val_r1():
    from rerank.recipes.embedding_study import best_on_val, table

    def row(val, test):
        r = lambda x: {"r1": x, "r5": x, "r10": x}  # noqa: E731
        out = {"stages": [], "minutes": 1.0, "fp16_mb": 1.0, "sts": {}, "translation_retrieval": {"en->de": r(test),
               "de->en": r(test)}}
        if val is not None:
            out["translation_retrieval_val"] = {"en->de": r(val), "de->en": r(val - 2)}
        return out

    # chosen on val, whatever test says; a row without val (an older run) is never chosen
    results = {"variants": {"a": row(90, 99), "b": row(93, 80), "c": row(None, 100), "d": row(93, 70)}}
    assert best_on_val(results) == "b"
    text = table(results)
    assert "Best on val (mean R@1 of en→de and de→en on all of task1 val, 92.00): `b`" in text
    assert "| c |  | 0 | 1.0 | – | – | 100.0 / 100.0 / 100.0 |" in text
    assert best_on_val({"variants": {"c": row(None, 100)}}) is None


@pytest.mark.parametrize("text,message", [
    ('{"stages": [\n oops]}', ":2: not JSON"),
    ('{"stages": []}', 'a non-empty list "stages"'),
    ('{"stages": [{"name": "a", "kind": "train", "config": {"presett": "tiny"}}]}', "stage a: unknown config keys: presett"),
    ('{"stages": [{"name": "a", "kind": "train", "config": {"max_minutes": 5}}]}', "stage a: max_minutes must be null"),
    ('{"stages": [{"name": "a", "kind": "train", "config": {}, "init": "b"}]}', "init must name an earlier train stage"),
    ('{"stages": [{"name": "a", "kind": "train", "config": {}}, {"name": "p", "kind": "pseudopairs", "model": "a", '
     '"src_lang": "en", "tgt_lang": "de"}]}', "stage p: the model's stage a must train on disjoint_halves"),
    ('{"stages": [{"name": "a", "kind": "train", "config": {"disjoint_halves": true}}, {"name": "p", "kind": '
     '"pseudopairs", "model": "a", "src_lang": "en", "tgt_lang": "de"}]}', "the last stage must be a train stage"),
    ('{"stages": [{"name": "a", "kind": "train", "config": {"pseudo_pairs": []}}]}', "set pseudo_pairs on the stage"),
])
def test_a_bad_configuration_is_named(tmp_path, mini_multi30k, capsys, text, message):
    data = _data(tmp_path, mini_multi30k)
    configs = _configs(tmp_path, {"aligned": VARIANTS["aligned"]})
    (configs / "bad.json").write_text(text)
    args = ["--data-dir", str(data), "--out", str(tmp_path / "run"), "--configs", str(configs), "--threads", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{configs / 'bad.json'}" in err and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()   # checked before any work
    assert main(args[:4] + ["--variants", "aligned,nope"] + args[4:]) == 2
    assert "unknown variant 'nope'" in capsys.readouterr().err


def test_the_committed_variants():
    assert available() == list(ORDER)
    for name in ORDER:
        variant = load_variant(name)
        for stage in variant["stages"]:
            if stage["kind"] == "train":
                assert stage["config"]["max_minutes"] is None and stage["config"].get("preset") == "small"
        assert variant["estimated_minutes"] > 0
    study = sum(load_variant(n)["estimated_minutes"] for n in ISSUE14)
    assert study <= 190 and load_variant("default")["estimated_minutes"] <= 120
    # each lever trains within the two hours of CPU a shipped model may take
    assert all(load_variant(v)["estimated_minutes"] <= 120 for v in LEVERS)
    assert select("levers") == list(LEVERS) and "default" not in select("study")
    scratch, tuned = load_variant("disjoint-pseudo-scratch"), load_variant("disjoint-pseudo-finetune")
    assert scratch["stages"][0] == tuned["stages"][0] == load_variant("disjoint-aligned-slice")["stages"][0]
    assert CONFIGS.endswith("embeddings")


def test_a_result_whose_configuration_changed_is_left_out(study, tmp_path):
    import shutil

    from rerank.recipes.embedding_study import Study

    root, _ = study
    run, configs = tmp_path / "run", tmp_path / "configs"
    shutil.copytree(root / "run", run)
    shutil.copytree(root / "configs", configs)
    changed = json.loads((configs / "aligned.json").read_text())
    changed["stages"][0]["config"]["max_epochs"] = 2
    (configs / "aligned.json").write_text(json.dumps(changed))
    results = Study(str(root / "data"), str(run), str(configs), quiet=True).gather()
    assert "aligned" not in results["variants"] and "ame" in results["variants"]
    assert (run / "study.log").read_text().count("aligned: result.json left out, its configuration has changed since") == 1


def test_the_default_variant_is_the_reproduction_s_embedding_config():
    from rerank.embeddings.config import resolve_config
    from rerank.recipes.reproduce import load_config

    base, tuned = load_variant("default")["stages"]
    config = load_config("embedding")
    finetune = config.pop("finetune")
    assert resolve_config(base["config"]) == resolve_config(config)
    assert resolve_config(tuned["config"]) == resolve_config({**config, **finetune}) and tuned["init"] == base["name"]
    assert load_variant("default")["stages"] == load_variant("infonce-4lang-bpe-max")["stages"]   # one run serves both


def test_a_tab_in_a_caption_becomes_a_space_in_the_pairs(study, tmp_path):
    from rerank.embeddings.tokenize import tokenize
    from rerank.recipes.embedding_study import Study

    root, _ = study
    (tmp_path / "run").mkdir()
    runner = Study(str(root / "data"), str(tmp_path / "run"), quiet=True)
    captions = ["Ein Mann\tgeht.", "Eine Frau."]
    written = runner.untabbed(captions, "de")
    assert written == ["Ein Mann geht.", "Eine Frau."] and captions[0] == "Ein Mann\tgeht."
    assert tokenize(written[0], "de") == tokenize(captions[0], "de")   # training sees the same tokens
    assert "pseudo-pairs: 1 de caption(s) hold a tab" in (tmp_path / "run" / "study.log").read_text()
    assert runner.untabbed(["a b"], "en") == ["a b"]
