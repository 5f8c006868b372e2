"""AME word alignment (seed 004): the RCSLS loss (Joulin et al. 2018) by hand and against a
loop over its definition, the alignment ratio on a constructed case, the dictionary reader,
training with --align-loss (ratio logged, W kept in the unit spectral ball, resume exact),
`embed eval --dictionary`, c2c over all caption pairs, and the refusals."""

import json
import math
import os

import numpy as np
import pytest
import torch

from rerank.embeddings.align import Aligner, alignment_ratio, dictionary_pairs, rcsls_loss, read_dictionary
from rerank.embeddings.config import resolve_config
from rerank.embeddings.data import PoolOptions, build_pools
from rerank.embeddings.encoder import Encoder
from rerank.embeddings.train import train
from rerank.embeddings.vocab import Vocab
from rerank.errors import InputError
from tests.cli_helpers import run, write

pytestmark = pytest.mark.neural

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "embeddings", "multi30k")
MUSE = os.path.join(HERE, "data", "embeddings", "muse-en-de.slice.txt")
TINY = {"word_dim": 16, "hidden_dim": 16, "joint_dim": 16, "min_freq": 1, "batch_size": 16, "select_images": 20,
        "checkpoint_minutes": 1e9, "sources": ["task1"], "contrastive": "max"}
PAD = [[0.0, 0.0], [0.0, 0.0]]   # rows 0, 1: <pad>, <unk> (never neighbours)


def toy():
    """Source words a=(1,0), b=(0,1), c=(1,1)/sqrt2; target words A=(1,0), B=(0,1), C=(-1,0)."""
    r = 1 / math.sqrt(2)
    x = torch.tensor(PAD + [[1.0, 0.0], [0.0, 1.0], [r, r]])
    y = torch.tensor(PAD + [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    return x, y, torch.tensor([[2, 2], [3, 3]])   # pairs (a, A), (b, B)


def test_rcsls_by_hand_on_three_words():
    x, y, pairs = toy()
    # k = 1: -2 * 1 + (nearest target of a: A, 1) + (nearest source of A: a, 1) = 0, alike for (b, B)
    assert rcsls_loss(x, y, None, pairs, knn=1).item() == pytest.approx(0.0, abs=1e-7)
    # k = 2: (a, A): targets of a score A 1, B 0, C -1 -> mean of top 2 = 0.5; sources of A score
    # a 1, b 0, c 1/sqrt2 -> (1 + 1/sqrt2) / 2; the same for (b, B) by symmetry
    by_hand = -2 + 0.5 + (1 + 1 / math.sqrt(2)) / 2
    assert rcsls_loss(x, y, None, pairs, knn=2).item() == pytest.approx(by_hand, abs=1e-6)
    # the rows are normalised: scaling the tables changes nothing
    assert rcsls_loss(3 * x, 0.5 * y, None, pairs, knn=2).item() == pytest.approx(by_hand, abs=1e-6)
    # W = rotation by +90 degrees, k = 1: W a = (0, 1), W b = (-1, 0), W c = (-r, r).
    # (a, A): -2 (W a).A = 0; best target of W a: B, 1; best (W x_j).A: W a, 0 -> 1
    # (b, B): -2 (W b).B = 0; best target of W b: C, 1; best (W x_j).B: W a, 1 -> 2; mean 1.5
    rot = torch.tensor([[0.0, -1.0], [1.0, 0.0]])
    assert rcsls_loss(x, y, rot, pairs, knn=1).item() == pytest.approx(1.5, abs=1e-6)
    # neighbours=1: only the first word (a / A) may be a neighbour, so k is cut to 1
    only_first = rcsls_loss(x, y, None, pairs, knn=5, neighbours=1).item()
    # (a, A): -2 + A.a + a.A = 0; (b, B): -2 + b.A (0) + a.B (0) = -2 -> mean -1
    assert only_first == pytest.approx(-1.0, abs=1e-6)


def rcsls_loop(x, y, w, pairs, k):
    """004 eq. 3 written as loops over its sums."""
    xn = [v / np.linalg.norm(v) for v in x[2:]]
    yn = [v / np.linalg.norm(v) for v in y[2:]]
    total = 0.0
    for i, j in pairs:
        xi, yi = x[i] / np.linalg.norm(x[i]), y[j] / np.linalg.norm(y[j])
        score_t = sorted((xi @ w.T @ yj for yj in yn), reverse=True)[:k]
        score_s = sorted((xj @ w.T @ yi for xj in xn), reverse=True)[:k]
        total += -2 * xi @ w.T @ yi + sum(score_t) / k + sum(score_s) / k
    return total / len(pairs)


def test_rcsls_matches_its_definition_and_trains_w_and_both_tables():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 5, generator=g, requires_grad=True)
    y = torch.randn(9, 5, generator=g, requires_grad=True)
    w = torch.randn(5, 5, generator=g, requires_grad=True)
    pairs = torch.tensor([[2, 3], [4, 4], [7, 2], [11, 8]])
    loss = rcsls_loss(x, y, w, pairs, knn=3)
    expected = rcsls_loop(x.detach().double().numpy(), y.detach().double().numpy(), w.detach().double().numpy(),
                          pairs.tolist(), 3)
    assert loss.item() == pytest.approx(expected, abs=1e-5)
    loss.backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in (x, y, w))
    assert x.grad[:2].abs().sum() == 0 and y.grad[:2].abs().sum() == 0   # <pad>, <unk> untouched


def constructed():
    """Source a, b, c; target A, B, C; dictionary a-A, b-B, c-C, c-B."""
    x, y = torch.zeros(5, 3), torch.zeros(5, 3)
    x[2:] = torch.tensor([[1.0, 0.1, 0.0], [0.0, 0.2, 1.0], [0.0, 0.1, 1.0]])
    y[2:] = torch.eye(3)
    return x, y, torch.tensor([[2, 2], [3, 3], [4, 4], [4, 3]])


def test_alignment_ratio_on_a_constructed_case():
    x, y, pairs = constructed()
    r = alignment_ratio(x, y, None, pairs)
    # a -> A right; b -> C but b means B: wrong; c -> C right (c: C or B). Back: A -> a, B -> b, C -> c: all right
    assert r["src->tgt"] == pytest.approx(200 / 3) and r["tgt->src"] == pytest.approx(100.0)
    assert r["mean"] == pytest.approx(250 / 3) and (r["pairs"], r["src_words"], r["tgt_words"]) == (4, 3, 3)
    swap = torch.tensor([[1.0, 0, 0], [0, 0, 1], [0, 1, 0]])   # W exchanges the 2nd and 3rd dimensions
    r = alignment_ratio(x, y, swap, pairs)
    # W a -> A, W b -> B, W c -> B (c-B is in the dictionary): all right. Back: A -> a, B -> c (c-B: right),
    # C -> b (b-C is not): 2 of 3
    assert r["src->tgt"] == pytest.approx(100.0) and r["tgt->src"] == pytest.approx(200 / 3)


def test_dictionary_reader_and_pairs(tmp_path):
    path = write(tmp_path, "d.txt", "The\tdie\nthe der\ndog\tHund\ndog\thund\ncat\tkatze\n")
    entries = read_dictionary(path)
    assert entries[0] == ("the", "die") and entries[1] == ("the", "der")
    src, tgt = Vocab(["the", "dog"]), Vocab(["die", "hund"])
    assert dictionary_pairs(entries, src, tgt).tolist() == [[2, 2], [3, 3]]   # unknown words and repeats dropped
    with pytest.raises(InputError, match=r"d3.txt:2: expected two words"):
        read_dictionary(write(tmp_path, "d3.txt", "a\tb\na b c\n"))
    with pytest.raises(InputError, match="no word pairs"):
        read_dictionary(write(tmp_path, "e.txt", ""))
    with pytest.raises(InputError, match=r"x.txt: none of the 1 dictionary pairs has both words in the en and de"):
        Aligner.build(write(tmp_path, "x.txt", "zebra\tkuh\n"), "en", "de", {"en": src, "de": tgt})


def test_c2c_all_pairs_gives_25_tuples_per_image():
    pools, _ = build_pools(DATA, "train", ["en", "de"], ["task2"], options=PoolOptions(comparable_pairs="all", limit=3))
    assert len(pools.unit_image) == 75 and pools.unit_image[:25] == [0] * 25
    first = {(u["en"][0], u["de"][0]) for u in pools.unit_cands[:25]}
    assert len(first) == 25   # every English caption of image 0 with every German one
    index, _ = build_pools(DATA, "train", ["en", "de"], ["task2"], options=PoolOptions(limit=3))
    assert len(index.unit_image) == 15
    assert resolve_config({"comparable_pairs": "all"})["comparable_pairs"] == "all"


@pytest.fixture(scope="module")
def aligned(tmp_path_factory):
    out = tmp_path_factory.mktemp("align") / "run"
    torch.manual_seed(0)
    cfg = {**TINY, "max_epochs": 2, "lr": 0.01, "dropout": 0.0, "init_std": 0.1, "align_loss": "rcsls",
           "dictionary": MUSE, "align_batch": 64}
    return train(cfg, DATA, str(out), quiet=True), out


def test_training_with_alignment_logs_the_ratio_and_keeps_w_in_the_unit_ball(aligned):
    path, out = aligned
    log = (out / "train.log").read_text()
    # task1 train slice: 223 of the 501 pairs have both words in its vocabularies
    assert "alignment en-de: 223 dictionary pairs with both words known (of 501" in log
    history = json.load(open(path[:-3] + ".json"))["training"]["history"]
    ratios = [h["alignment_ratio"]["mean"] for h in history]
    first = float(log.split("alignment ratio at step 0: ")[1].split("mean ")[1].split()[0])
    assert len(ratios) == 2 and ratios[-1] > first + 20   # the dictionary pairs come together
    state = torch.load(path, weights_only=True)
    assert torch.linalg.svdvals(state["align.en_de"]).max() <= 1 + 1e-5
    enc = Encoder.load(path)
    assert enc.model.cfg.align_pairs == [["en", "de"]]


def test_eval_reports_the_alignment_ratio(aligned, tmp_path, capsys):
    path, _ = aligned
    code, out, _ = run(["embed", "eval", "--model", path, "--dictionary", MUSE, "--out", tmp_path / "r", "--threads", 1],
                       capsys)
    assert code == 0 and "Word alignment ratio" in out and "learned W" in out
    report = json.load(open(tmp_path / "r.json"))["alignment"]
    enc = Encoder.load(path)
    again = Aligner.build(MUSE, "en", "de", enc.vocabs).ratio(enc.model)
    assert report["mean"] == pytest.approx(again["mean"]) and report["pairs"] == 223


def test_alignment_resume_continues_exactly(tmp_path):
    cfg = {**TINY, "max_epochs": 3, "align_loss": "rcsls", "dictionary": MUSE, "align_batch": 32, "validate": False}
    train({**cfg, "max_steps": 6}, DATA, str(tmp_path / "a"), quiet=True)
    train({**cfg, "max_steps": 3}, DATA, str(tmp_path / "b"), quiet=True)
    train({**cfg, "max_steps": 6}, DATA, str(tmp_path / "b"), quiet=True)
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_identity_map_has_no_w(tmp_path):
    cfg = {**TINY, "max_steps": 2, "align_loss": "rcsls", "dictionary": MUSE, "align_map": "identity", "validate": False}
    path = train(cfg, DATA, str(tmp_path / "r"), quiet=True)
    assert not any(k.startswith("align.") for k in torch.load(path, weights_only=True))


@pytest.mark.parametrize("extra,message", [
    ([], "align_loss rcsls needs a bilingual dictionary"),
    (["--dictionary", "/nonexistent/muse.txt"], "/nonexistent/muse.txt: "),
])
def test_train_refusals(tmp_path, capsys, extra, message):
    code, _, err = run(["embed", "train", "--data-dir", DATA, "--out", tmp_path / "r", "--preset", "tiny",
                        "--align-loss", "rcsls", *extra, "--threads", 1], capsys)
    assert code == 2 and "rerank embed: error: " in err and message in err
    assert not (tmp_path / "r" / "model.pt").exists()


def test_align_weight_must_be_a_number_at_least_0(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        run(["embed", "train", "--data-dir", DATA, "--out", tmp_path / "r", "--align-loss", "rcsls", "--dictionary", MUSE,
             "--align-weight", "-1"], capsys)
    assert exc.value.code == 2 and "argument --align-weight: must be a finite number >= 0, got -1" in capsys.readouterr().err


def test_eval_refuses_a_dictionary_of_other_languages(aligned, tmp_path, capsys):
    path, _ = aligned
    bad = write(tmp_path, "fr.txt", "chien\tperro\n")
    code, _, err = run(["embed", "eval", "--model", path, "--dictionary", bad, "--out", tmp_path / "r"], capsys)
    assert code == 2 and "none of the 1 dictionary pairs" in err and not (tmp_path / "r.json").exists()
