"""Training: overfitting 64 tuples (text and image paths), resume after interruption,
DDP (torchrun, gloo, 2 processes) against single-process training, feature-file checks."""

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from rerank.embeddings.data import load_features
from rerank.embeddings.encoder import Encoder
from rerank.embeddings.evaluate import evaluate, image_sentence_ranks, paired_ranks
from rerank.embeddings.train import train
from rerank.errors import InputError
from tests.cli_helpers import HANG_SECONDS

pytestmark = pytest.mark.neural

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "embeddings", "multi30k")
STS = os.path.join(HERE, "data", "embeddings", "sts")
REPO = os.path.dirname(HERE)
TINY = {"word_dim": 16, "hidden_dim": 32, "joint_dim": 32, "min_freq": 1, "batch_size": 16, "select_images": 20,
        "checkpoint_minutes": 1e9}



def features(path, rows, dim=12, seed=0):
    np.save(path, np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32))
    return str(path)


def test_overfits_64_tuples_to_perfect_recall_with_images(tmp_path):
    train_f = features(tmp_path / "train.npy", 64)
    val_f = features(tmp_path / "val.npy", 40, seed=1)
    cfg = {**TINY, "sources": ["task1"], "dropout": 0.0, "init_std": 0.1, "lr": 0.01, "contrastive": "sum",
           "beta": 0.5, "max_epochs": 60, "patience": 1000, "validate": False,
           "image_features": {"train": train_f, "val": val_f}}
    torch.manual_seed(0)
    path = train(cfg, DATA, str(tmp_path / "run"), quiet=True)
    enc = Encoder.load(path)
    assert enc.has_images and enc.meta["training"]["text_only"] is False
    from rerank.embeddings.data import load_translated

    cap = load_translated(DATA, "train", ["en", "de"])
    en, de = enc.encode(cap["en"], "en"), enc.encode(cap["de"], "de")
    img = enc.encode_images(np.load(train_f))
    assert (paired_ranks(en, de) == 1).all() and (paired_ranks(de, en) == 1).all()
    i2t, t2i = image_sentence_ranks(img, en, 1)
    assert (i2t == 1).all() and (t2i == 1).all()
    report = evaluate(enc, DATA, STS, {"val": val_f}, select_images=20)
    assert report["uses_images"] and report["image_sentence"]["de"]["t2i"]["n"] == 100


def test_text_only_when_no_features_is_recorded(tmp_path):
    out = tmp_path / "run"
    path = train({**TINY, "max_steps": 3, "contrastive": "random", "negatives": 2}, DATA, str(out), quiet=True)
    meta = json.load(open(path[:-3] + ".json"))
    assert meta["training"]["text_only"] is True and "text-only" in meta["training"]["images"]
    assert json.load(open(out / "config.json"))["beta"] == 0.0
    assert "text-only model" in (out / "train.log").read_text()
    report = evaluate(Encoder.load(path), DATA, STS, select_images=20)
    assert not report["uses_images"] and "text-only" in report["image_sentence_note"]
    assert report["sts"]["sts2015-images"]["n"] == 15 and report["translation_retrieval"]["en->de"]["n"] == 30


def _state(run):
    return torch.load(os.path.join(run, "checkpoint.pt"), weights_only=True)


def test_resume_after_interruption_continues_at_same_step(tmp_path):
    cfg = {**TINY, "sources": ["task1"], "max_epochs": 5, "contrastive": "random", "negatives": 2}
    train({**cfg, "max_steps": 10}, DATA, str(tmp_path / "a"), quiet=True)
    train({**cfg, "max_steps": 6}, DATA, str(tmp_path / "b"), quiet=True)   # "killed" at step 6 (mid epoch 2)
    first = json.loads(_state(tmp_path / "b")["state"])
    assert (first["step"], first["epoch"], first["batch"]) == (6, 1, 2)
    train({**cfg, "max_steps": 10}, DATA, str(tmp_path / "b"), quiet=True)  # resumes
    a, b = _state(tmp_path / "a"), _state(tmp_path / "b")
    assert json.loads(a["state"])["step"] == json.loads(b["state"])["step"] == 10
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    assert "resumed from" in (tmp_path / "b" / "train.log").read_text()


def ticking(seconds):
    """A fake clock that moves `seconds` forward at every reading."""
    counter = itertools.count(0, seconds)
    return lambda: float(next(counter))


def test_time_budget_is_spent_in_whole_epochs(tmp_path):
    # the budget reads the clock at the start and before and after every epoch: with a minute per
    # reading, epoch 1 runs 1-2 min, epoch 2 runs 3-4 min; before epoch 3, 5 min used + 1 expected > 5
    cfg = {**TINY, "sources": ["task1"], "max_epochs": 10, "patience": 100, "contrastive": "sum", "max_minutes": 5}
    run = tmp_path / "run"
    train(cfg, DATA, str(run), quiet=True, clock=ticking(60))
    state = json.loads(_state(run)["state"])
    assert state["status"] == "stopped: time budget" and state["epoch_seconds"] == [60.0, 60.0]
    assert (state["epoch"], state["batch"], state["step"]) == (2, 0, 8)  # 64 tuples, batches of 16
    assert json.load(open(run / "model.json"))["training"]["final_status"] == "stopped: time budget"
    # a resume gets its own budget, but the mean includes the earlier epochs: 1 min used + 1 > 1.5
    train({**cfg, "max_minutes": 1.5}, DATA, str(run), quiet=True, clock=ticking(60))
    assert json.loads(_state(run)["state"])["step"] == 8
    # 3 minutes: epoch 3 runs 1-2 min; then 3 used + 1 expected > 3
    train({**cfg, "max_minutes": 3}, DATA, str(run), quiet=True, clock=ticking(60))
    state = json.loads(_state(run)["state"])
    assert (state["epoch"], state["step"], state["epoch_seconds"]) == (3, 12, [60.0, 60.0, 60.0])
    assert "time budget: 3.0 of 3 minutes used, another epoch is expected to take 1.0" in (run / "train.log").read_text()
    with pytest.raises(InputError, match="config key max_minutes must be a number > 0, got 0"):
        train({**cfg, "max_minutes": 0}, DATA, str(tmp_path / "zero"), quiet=True)


def test_ddp_two_processes_match_single_process(tmp_path):
    cfg = {**TINY, "sources": ["task2", "task1"], "dropout": 0.0, "contrastive": "max", "max_steps": 4,
           "validate": False, "comparable_per_image": 1, "batch_size": 18}
    single = str(tmp_path / "single")
    train(cfg, DATA, single, quiet=True)
    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps(cfg))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "rerank", "embed", "train", "--config", str(cfg_path), "--data-dir", DATA, "--out", str(tmp_path / "ddp")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=HANG_SECONDS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = _state(single), _state(tmp_path / "ddp")
    assert json.loads(b["state"])["step"] == 4
    for k in a["model"]:
        torch.testing.assert_close(b["model"][k], a["model"][k], atol=2e-5, rtol=1e-4)
    meta = json.load(open(tmp_path / "ddp" / "model.json"))
    assert meta["training"]["world_size"] == 2


def test_feature_file_checks(tmp_path):
    p = features(tmp_path / "f.npy", 10, dim=7)
    assert load_features(p, 10, 7).shape == (10, 7)
    with pytest.raises(InputError, match="10 feature rows, but the image list has 64 lines"):
        load_features(p, 64)
    with pytest.raises(InputError, match="feature dimension 7, but the model expects 2048"):
        load_features(p, 10, 2048)
    np.savez(tmp_path / "g.npz", features=np.zeros((3, 4), np.float32))
    assert load_features(str(tmp_path / "g.npz"), 3).shape == (3, 4)
    with pytest.raises(InputError, match="not found"):
        load_features(str(tmp_path / "none.npy"), 3)
    with pytest.raises(InputError, match="has 64 lines"):
        train({**TINY, "image_features": {"train": p}}, DATA, str(tmp_path / "r"), quiet=True)


def test_bad_config_and_language(tmp_path):
    with pytest.raises(InputError, match="unknown config keys: hiden_dim"):
        train({"hiden_dim": 3}, DATA, str(tmp_path / "x"))
    with pytest.raises(InputError, match="only en and de"):
        train({**TINY, "languages": ["en", "fr"]}, DATA, str(tmp_path / "y"), quiet=True)
    with pytest.raises(InputError, match=r"languages \['en', 'xx'\]: each must be one of en, de, fr, cs"):
        train({**TINY, "languages": ["en", "xx"], "sources": ["task1"]}, DATA, str(tmp_path / "z"), quiet=True)


def test_more_languages_than_task2_has(tmp_path):
    """K = 3 (en, de, fr) with task2: its tuples hold only en and de, task1's all three; the
    in-batch InfoNCE loss leaves the missing French out and still learns every pair."""
    from rerank.embeddings.data import PoolOptions, build_pools, load_translated

    pools, _ = build_pools(DATA, "train", ["en", "de", "fr"], ["task1", "task2"], options=PoolOptions(min_freq=1))
    n = len(load_translated(DATA, "train", ["en"])["en"])
    langs = [tuple(sorted(c)) for c in pools.unit_cands]
    assert langs.count(("de", "en", "fr")) == n and langs.count(("de", "en")) == len(langs) - n > 0
    cfg = {**TINY, "languages": ["en", "de", "fr"], "dropout": 0.0, "init_std": 0.1, "lr": 0.01,
           "contrastive": "infonce", "temperature": 0.1, "max_epochs": 24, "patience": 1000, "validate": False,
           "comparable_per_image": 1}
    torch.manual_seed(0)
    enc = Encoder.load(train(cfg, DATA, str(tmp_path / "run"), quiet=True))
    cap = load_translated(DATA, "train", ["en", "de", "fr"])
    v = {lang: enc.encode(cap[lang], lang) for lang in cap}
    for a, b in (("en", "fr"), ("de", "fr"), ("en", "de")):
        assert (paired_ranks(v[a], v[b]) == 1).mean() > 0.9
    with pytest.raises(InputError, match="task2 has no fr captions"):
        train({**cfg, "contrastive": "random", "negatives": 2}, DATA, str(tmp_path / "r"), quiet=True)
    report = evaluate(enc, DATA, select_images=20)
    n_val = len(load_translated(DATA, "val", ["en"])["en"])
    assert set(report["translation_retrieval_val"]) == {f"{a}->{b}" for a in "en de fr".split()
                                                        for b in "en de fr".split() if a != b}
    assert report["translation_retrieval_val"]["fr->de"]["n"] == n_val
