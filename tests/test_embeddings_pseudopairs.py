"""Pseudo-pairs (seed 003): nearest source caption per target caption in order, the percentile
filter, the TSV (written and read), training on them from scratch and fine-tuning (--init),
the image mask of the loss, and the refusals."""

import os

import numpy as np
import pytest
import torch

from rerank.embeddings.data import PoolOptions, build_pools
from rerank.embeddings.encoder import Encoder
from rerank.embeddings.losses import mlmme_loss
from rerank.embeddings.pseudopairs import nearest, percentile_filter, pseudo_pairs, read_pseudo_pairs
from rerank.embeddings.train import train
from rerank.errors import InputError
from tests.cli_helpers import run, write

pytestmark = pytest.mark.neural

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "embeddings", "multi30k")
MODEL = os.path.join(os.path.dirname(HERE), "rerank", "data", "models", "mlmme-small.pt")
TINY = {"word_dim": 16, "hidden_dim": 16, "joint_dim": 16, "min_freq": 1, "batch_size": 16, "select_images": 20,
        "checkpoint_minutes": 1e9, "sources": ["task1"], "contrastive": "max", "validate": False}
EN = ["A dog runs on the beach.", "Two men play football on grass.", "A woman rides a red bicycle.",
      "Children swim in a lake."]
DE = ["Zwei Männer spielen Fußball auf dem Rasen.", "Ein Hund läuft am Strand.", "Kinder schwimmen in einem See.",
      "Eine Frau fährt ein rotes Fahrrad.", "Ein Hund rennt über den Strand."]


class FixedEncoder:
    """encode() returns given unit vectors per language, in the order of the sentences given."""

    def __init__(self, vectors):
        self.vectors = vectors

    def encode(self, sentences, lang, *args, **kwargs):
        return np.asarray([self.vectors[lang][s] for s in sentences], dtype=np.float32)


def test_nearest_source_per_target_in_order_with_ties_to_the_first():
    unit = lambda deg: [np.cos(np.radians(deg)), np.sin(np.radians(deg))]  # noqa: E731
    enc = FixedEncoder({"en": {"e0": unit(0), "e1": unit(90), "e2": unit(90)},
                        "de": {"d0": unit(80), "d1": unit(10), "d2": unit(-30), "d3": unit(90)}})
    rows = pseudo_pairs(enc, ["e0", "e1", "e2"], "en", ["d0", "d1", "d2", "d3"], "de")
    assert [(t, s) for t, s, _ in rows] == [("d0", "e1"), ("d1", "e0"), ("d2", "e0"), ("d3", "e1")]  # e1 = e2: first
    cos = np.cos(np.radians([10, 10, 30, 0]))
    np.testing.assert_allclose([x for _, _, x in rows], cos, atol=1e-6)
    kept = pseudo_pairs(enc, ["e0", "e1", "e2"], "en", ["d0", "d1", "d2", "d3"], "de", percentile=50)
    assert [t for t, _, _ in kept] == ["d0", "d1", "d3"]   # median of (.985, .985, .866, 1) = .985: keep >=, in order


def test_percentile_filter():
    sims = np.array([0.3, 0.8, 0.1, 0.5, 0.7, 0.2, 0.6, 0.4])
    # 75th percentile (linear): position 0.75 * 7 = 5.25 between 0.6 and 0.7 -> 0.625: keep the top quarter
    assert percentile_filter(sims, 75).tolist() == [False, True, False, False, True, False, False, False]
    # 25th: position 1.75 between 0.2 and 0.3 -> 0.275: drop the bottom quarter
    assert percentile_filter(sims, 25).sum() == 6 and not percentile_filter(sims, 25)[[2, 5]].any()
    assert percentile_filter(sims, None).all() and percentile_filter(sims, 0).all()
    best, value = nearest(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32)[::-1].copy())
    assert best.tolist() == [2, 1, 0] and value.tolist() == [1, 1, 1]


def test_cli_writes_the_tsv_in_target_order(tmp_path, capsys):
    src, tgt = write(tmp_path, "en.txt", "\n".join(EN) + "\n"), write(tmp_path, "de.txt", "\n".join(DE) + "\n")
    out = tmp_path / "pairs.tsv"
    code, _, err = run(["embed", "pseudopairs", "-m", MODEL, "--src", src, "--src-lang", "en", "--tgt", tgt,
                        "--tgt-lang", "de", "-o", out, "--threads", 1], capsys)
    assert code == 0 and "5 of 5 target captions paired" in err
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r[0] for r in rows] == DE and all(r[1] in EN for r in rows)
    enc = Encoder.load(MODEL)
    sims = enc.encode(DE, "de") @ enc.encode(EN, "en").T
    assert [r[1] for r in rows] == [EN[i] for i in sims.argmax(1)]
    np.testing.assert_allclose([float(r[2]) for r in rows], sims.max(1), atol=1e-6)
    filtered = tmp_path / "top.tsv"
    assert run(["embed", "pseudopairs", "-m", MODEL, "--src", src, "--src-lang", "en", "--tgt", tgt, "--tgt-lang", "de",
                "--filter", "75", "-o", filtered, "--threads", 1], capsys)[0] == 0
    top = [line.split("\t")[0] for line in filtered.read_text(encoding="utf-8").splitlines()]
    cut = np.percentile(sims.max(1).astype(np.float64), 75)
    assert top == [DE[i] for i in range(5) if sims.max(1)[i] >= cut] and len(top) == 2
    assert read_pseudo_pairs(str(out)) == [(r[0], r[1]) for r in rows]


@pytest.mark.parametrize("case,message", [
    ("lang", "language 'fr' is not in the model (it has en, de)"),
    ("tab", "de.txt:2: the caption holds a tab"),
    ("empty", "de.txt:2: empty caption"),
    ("same", "the output is also the input"),
])
def test_cli_refusals(tmp_path, capsys, case, message):
    src = write(tmp_path, "en.txt", "\n".join(EN) + "\n")
    tgt = write(tmp_path, "de.txt", {"tab": "Ein Hund.\nZwei\tMänner.\n", "empty": "Ein Hund.\n\n"}.get(case, DE[0] + "\n"))
    out = {"same": tgt}.get(case, str(tmp_path / "pairs.tsv"))
    argv = ["embed", "pseudopairs", "-m", MODEL, "--src", src, "--src-lang", "en", "--tgt", tgt,
            "--tgt-lang", "fr" if case == "lang" else "de", "-o", out, "--threads", 1]
    code, _, err = run(argv, capsys)
    assert code == 2 and "rerank embed: error: " in err and message in err
    assert not (tmp_path / "pairs.tsv").exists()


def test_filter_is_a_percentile(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        run(["embed", "pseudopairs", "-m", MODEL, "--src", "a", "--src-lang", "en", "--tgt", "b", "--tgt-lang", "de",
             "--filter", "101", "-o", tmp_path / "p.tsv"], capsys)
    assert exc.value.code == 2 and "argument --filter: must be a percentile between 0 and 100, got 101" in \
        capsys.readouterr().err


@pytest.mark.parametrize("text,message", [
    ("a\tb\n", "p.tsv:1: expected 3 tab-separated fields"),
    ("a\tb\t0.5\nc\td\tgood\n", "p.tsv:2: similarity 'good' is not a number"),
    ("a\t \t0.5\n", "p.tsv:1: empty caption"),
    ("a\tb\tnan\n", "p.tsv:1: similarity 'nan' is not finite"),
    ("", "no pseudo-pairs"),
])
def test_bad_pair_files(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        read_pseudo_pairs(write(tmp_path, "p.tsv", text))


def pair_file(tmp_path, n=10):
    rows = [f"{DE[i % 5]}\t{EN[i % 4]}\t0.5\n" for i in range(n)]
    return write(tmp_path, "pairs.tsv", "".join(rows))


def test_pseudo_pairs_are_units_of_their_own_past_the_images(tmp_path):
    rows = read_pseudo_pairs(pair_file(tmp_path))
    pools, vocabs = build_pools(DATA, "train", ["en", "de"], ["task1"], options=PoolOptions(min_freq=1),
                                extra_pairs=[("de", "en", rows)])
    assert len(pools.unit_image) == 64 + 10 and pools.unit_image[64:] == list(range(64, 74))
    assert "fußball" in vocabs["de"].index and "bicycle" in vocabs["en"].index
    unit = pools.unit_cands[64]
    assert pools.sentences["de"][unit["de"][0]].tolist() == vocabs["de"].ids(["zwei", "männer", "spielen", "fußball", "auf",
                                                                               "dem", "rasen", "."])


def test_train_from_scratch_and_fine_tune(tmp_path, capsys):
    base = train({**TINY, "max_steps": 2}, DATA, str(tmp_path / "base"), quiet=True)
    pairs = pair_file(tmp_path)
    cfg = {**TINY, "max_steps": 1, "lr": 1e-12, "init": base,
           "pseudo_pairs": [{"file": pairs, "src_lang": "en", "tgt_lang": "de"}]}
    tuned = train(cfg, DATA, str(tmp_path / "tuned"), quiet=True)
    a, b = Encoder.load(base), Encoder.load(tuned)
    assert a.vocabs["de"].tokens == b.vocabs["de"].tokens   # the init model's vocabulary (pseudo words unknown)
    for k, v in a.model.state_dict().items():
        torch.testing.assert_close(b.model.state_dict()[k], v, atol=1e-6, rtol=0)
    assert "fine-tuning" in (tmp_path / "tuned" / "train.log").read_text()
    scratch = train({**TINY, "max_steps": 1, "pseudo_pairs": cfg["pseudo_pairs"]}, DATA, str(tmp_path / "s"), quiet=True)
    assert "fußball" in Encoder.load(scratch).vocabs["de"].index
    code, _, err = run(["embed", "train", "--data-dir", DATA, "--out", tmp_path / "x", "--languages", "en,fr",
                        "--init", base, "--threads", 1], capsys)
    assert code == 2 and "the model to fine-tune has languages ['en', 'de'], the run ['en', 'fr']" in err


def test_rows_without_image_are_left_out_of_the_image_loss():
    g = torch.Generator().manual_seed(1)
    vec = {k: torch.nn.functional.normalize(torch.randn(6, 4, generator=g), dim=-1) for k in ("image", "en", "de")}
    groups, mask = torch.arange(6), torch.tensor([True, True, False, True, False, True])
    loss, parts = mlmme_loss(vec, ["en", "de"], 0.5, 0.2, "sum", groups=groups, with_image=mask)
    sub = {k: v[mask] for k, v in vec.items()}
    _, mm = mlmme_loss(sub, ["en", "de"], 1.0, 0.2, "sum", groups=groups[mask])
    _, ml = mlmme_loss(vec, ["en", "de"], 0.0, 0.2, "sum", groups=groups)
    assert parts["mm"] == pytest.approx(mm["mm"]) and parts["ml"] == pytest.approx(ml["ml"])
    assert loss.item() == pytest.approx(0.5 * mm["mm"] + 0.5 * ml["ml"], rel=1e-6)
    with pytest.raises(ValueError, match="in-batch"):
        mlmme_loss(vec, ["en", "de"], 0.5, 0.2, "random", {k: v[:, None] for k, v in vec.items()}, groups, mask)


def test_images_with_pseudo_pairs(tmp_path):
    feats = tmp_path / "f.npy"
    np.save(feats, np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32))
    spec = [{"file": pair_file(tmp_path), "src_lang": "en", "tgt_lang": "de"}]
    cfg = {**TINY, "max_steps": 3, "beta": 0.5, "image_features": {"train": str(feats)}, "pseudo_pairs": spec}
    with pytest.raises(InputError, match="pseudo-pairs have no image"):
        train({**cfg, "contrastive": "random"}, DATA, str(tmp_path / "r"), quiet=True)
    assert Encoder.load(train(cfg, DATA, str(tmp_path / "m"), quiet=True)).has_images
