"""The disjoint setting of seed 003 simulated on Multi30k (config keys disjoint_halves and
aligned_images): which captions each image keeps, the tuples and vocabularies built from them,
the two disjoint corpora for pseudo-pairs, the masked loss, and training text-only and with images."""

import numpy as np
import pytest
import torch

from rerank.embeddings.config import resolve_config
from rerank.embeddings.data import (PoolOptions, build_pools, disjoint_captions, epoch_tuples, languages_kept,
                                     load_comparable, load_translated)
from rerank.embeddings.losses import mlmme_loss
from rerank.embeddings.tokenize import tokenize
from rerank.embeddings.train import train
from rerank.errors import InputError

pytestmark = pytest.mark.neural

TINY = {"preset": "tiny", "min_freq": 1, "batch_size": 16, "checkpoint_minutes": 1e9, "contrastive": "max",
        "validate": False, "max_epochs": 1, "disjoint_halves": True}


def test_halves_and_the_aligned_slice():
    assert languages_kept(6, ["en", "de"]) == [("en", "de")] * 6
    assert languages_kept(6, ["en", "de"], True) == [("en",)] * 3 + [("de",)] * 3
    assert languages_kept(7, ["de", "en"], True, 2) == [("de", "en")] * 2 + [("de",)] + [("en",)] * 4
    with pytest.raises(InputError, match="aligned_images: 4 aligned images, but the first half has only 3"):
        languages_kept(6, ["en", "de"], True, 4)


def test_tuples_and_vocabularies_hold_only_the_kept_captions(mini_multi30k):
    pools, vocabs = build_pools(str(mini_multi30k), "train", ["en", "de"], ["task1", "task2"],
                                options=PoolOptions(min_freq=1, comparable_pairs="all", disjoint_halves=True,
                                                    aligned_images=10))
    # task1: one tuple per image; task2 with all pairs: 25 per aligned image, 5 per one-language image
    assert len(pools.unit_image) == 80 + 10 * 25 + 70 * 5
    langs = [tuple(sorted(c)) for c in pools.unit_cands]
    assert langs.count(("de", "en")) == 10 + 250 and langs.count(("en",)) == 30 * 6 and langs.count(("de",)) == 40 * 6
    assert len(pools.sentences["en"]) == 40 * 6 and len(pools.sentences["de"]) == 50 * 6
    _, task1 = build_pools(str(mini_multi30k), "train", ["en", "de"], ["task1"],
                           options=PoolOptions(min_freq=1, disjoint_halves=True, aligned_images=10))
    de1 = load_translated(str(mini_multi30k), "train", ["de"])["de"]
    kept = {w for i in [*range(10), *range(40, 80)] for w in tokenize(de1[i], "de")}
    assert set(task1["de"].tokens) - {"<pad>", "<unk>"} == kept   # the German of images 10-39 is not seen
    imgs, sents = epoch_tuples(pools, 1, 0)
    missing = sents["de"] < 0
    assert missing.sum() == 30 * 6 and (imgs[missing] >= 10).all() and (imgs[missing] < 40).all()
    assert pools.only_complete() == 30 * 6 + 40 * 6 and len(pools.unit_image) == 260


def test_disjoint_corpora_for_pseudo_pairs(mini_multi30k):
    corpora = disjoint_captions(str(mini_multi30k), "train", ["en", "de"], ["task1", "task2"], aligned_images=10)
    assert len(corpora["en"]) == 30 * 6 and len(corpora["de"]) == 40 * 6
    en1 = load_translated(str(mini_multi30k), "train", ["en"])["en"]
    en2 = load_comparable(str(mini_multi30k), "train", ["en"])["en"]
    assert corpora["en"][:6] == [en1[10]] + [col[10] for col in en2]
    assert len(disjoint_captions(str(mini_multi30k), "train", ["en", "de"], ["task2"], limit=20)["de"]) == 10 * 5


@pytest.mark.parametrize("user,message", [
    ({"aligned_images": 5}, "aligned_images needs disjoint_halves: true"),
    ({"disjoint_halves": "yes"}, "disjoint_halves must be true or false"),
    ({"disjoint_halves": True, "languages": ["en", "de", "fr"]}, "disjoint_halves needs exactly two languages"),
    ({"disjoint_halves": True, "aligned_images": -1}, "aligned_images must be an integer >= 0"),
])
def test_config_errors_name_the_key(user, message):
    with pytest.raises(InputError, match=message):
        resolve_config(user)


def test_each_loss_term_uses_the_rows_with_both_sides():
    g = torch.Generator().manual_seed(2)
    vec = {k: torch.nn.functional.normalize(torch.randn(6, 4, generator=g), dim=-1) for k in ("image", "en", "de")}
    groups = torch.arange(6)
    en, de = torch.tensor([1, 1, 1, 0, 0, 1], dtype=torch.bool), torch.tensor([1, 0, 1, 1, 1, 1], dtype=torch.bool)
    loss, parts = mlmme_loss(vec, ["en", "de"], 0.5, 0.2, "sum", groups=groups, present={"en": en, "de": de})
    both = en & de
    _, ml = mlmme_loss({k: v[both] for k, v in vec.items()}, ["en", "de"], 0.0, 0.2, "sum", groups=groups[both])
    _, mm_en = mlmme_loss({k: v[en] for k, v in vec.items()}, ["en"], 1.0, 0.2, "sum", groups=groups[en])
    _, mm_de = mlmme_loss({k: v[de] for k, v in vec.items()}, ["de"], 1.0, 0.2, "sum", groups=groups[de])
    assert parts["ml"] == pytest.approx(ml["ml"]) and parts["mm"] == pytest.approx(mm_en["mm"] + mm_de["mm"])
    assert loss.item() == pytest.approx(0.5 * parts["mm"] + 0.5 * parts["ml"], rel=1e-6)
    with pytest.raises(ValueError, match="in-batch"):
        mlmme_loss(vec, ["en", "de"], 0.0, 0.2, "random", {k: v[:, None] for k, v in vec.items()}, groups,
                   present={"en": en, "de": de})


def test_text_only_training_on_the_halves(mini_multi30k, tmp_path):
    data = str(mini_multi30k)
    train({**TINY, "sources": ["task2"]}, data, str(tmp_path / "halves"), quiet=True)
    log = (tmp_path / "halves" / "train.log").read_text()
    assert "400 tuples with one language (disjoint halves) are left out" in log and "keeps its initialisation" in log
    train({**TINY, "sources": ["task2"], "aligned_images": 8, "max_steps": 2}, data, str(tmp_path / "slice"), quiet=True)
    log = (tmp_path / "slice" / "train.log").read_text()
    assert "40 units" in log and "360 tuples with one language" in log and "initialisation" not in log


def test_with_images_the_halves_train_the_image_loss(mini_multi30k, tmp_path):
    feats = tmp_path / "f.npy"
    np.save(feats, np.random.default_rng(0).normal(size=(80, 8)).astype(np.float32))
    cfg = {**TINY, "sources": ["task1"], "beta": 0.5, "image_features": {"train": str(feats)}, "max_steps": 3}
    with pytest.raises(InputError, match="disjoint halves leave tuples without a language"):
        train({**cfg, "contrastive": "random"}, str(mini_multi30k), str(tmp_path / "r"), quiet=True)
    train(cfg, str(mini_multi30k), str(tmp_path / "m"), quiet=True)
    assert "80 units" in (tmp_path / "m" / "train.log").read_text()
