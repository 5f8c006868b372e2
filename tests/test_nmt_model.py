"""Attention NMT on a toy copy task: learning, beam search properties, greedy, save/load, resume."""

import itertools
import random

import pytest
import torch

from rerank.nmt.beam import beam_search, greedy
from rerank.nmt.data import pad
from rerank.nmt.train import load_model, make_config, train
from rerank.nmt.vocab import EOS_ID

pytestmark = pytest.mark.neural

WORDS = [f"w{i}" for i in range(12)]


def toy_pairs(n, seed):
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(n)]
    return lines, list(lines)


def toy_config(**kw):
    base = dict(min_freq=1, lr=0.01, batch_size=32, max_epochs=12, patience=100, log_every=10**6, seed=3)
    base.update(kw)
    return make_config("tiny", "weak", **base)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    torch.manual_seed(0)
    out = str(tmp_path_factory.mktemp("copy"))
    state = train(toy_config(), toy_pairs(800, 1), toy_pairs(60, 2), out)
    model, src_vocab, tgt_vocab, _ = load_model(out, "best")
    return out, state, model, src_vocab, tgt_vocab


def encode(vocab, lines):
    return pad([vocab.encode(line.split()) + [EOS_ID] for line in lines])


def test_learns_to_copy(trained):
    _, state, model, src_vocab, tgt_vocab = trained
    lines, _ = toy_pairs(100, 99)
    src, src_len = encode(src_vocab, lines)
    out = [" ".join(tgt_vocab.decode(h.tokens)) for h in greedy(model, src, src_len)]
    exact = sum(o == line for o, line in zip(out, lines)) / len(lines)
    assert exact >= 0.8, (exact, out[:5], lines[:5])
    assert state["best_bleu"] > 70


def test_beam_unique_sorted_and_scores_match_teacher_forcing(trained):
    _, _, model, src_vocab, _ = trained
    lines, _ = toy_pairs(7, 5)
    src, src_len = encode(src_vocab, lines)
    for alpha in (1.0, 0.0):
        found = beam_search(model, src, src_len, beam=6, nbest=4, alpha=alpha)
        assert len(found) == len(lines)
        for i, hyps in enumerate(found):
            assert len(hyps) == 4
            assert len({tuple(h.tokens) for h in hyps}) == 4
            keys = [h.norm if alpha > 0 else h.logprob for h in hyps]
            assert all(a >= b for a, b in zip(keys, keys[1:]))
            for h in hyps:
                assert h.norm == pytest.approx(h.logprob / (len(h.tokens) + 1) ** alpha if alpha else h.logprob)
            tgt, _ = pad([h.tokens + [EOS_ID] for h in hyps])
            rep = src[i: i + 1].expand(len(hyps), -1)
            recomputed = model.score(rep, src_len[i: i + 1].expand(len(hyps)), tgt)
            assert recomputed.tolist() == pytest.approx([h.logprob for h in hyps], abs=1e-4)


def test_beam_one_equals_greedy(trained):
    _, _, model, src_vocab, _ = trained
    lines, _ = toy_pairs(20, 6)
    src, src_len = encode(src_vocab, lines)
    g = greedy(model, src, src_len)
    b = beam_search(model, src, src_len, beam=1)
    for hg, (hb,) in zip(g, b):
        assert hg.tokens == hb.tokens
        assert hg.logprob == pytest.approx(hb.logprob, abs=1e-5)


def test_batch_composition_does_not_change_results(trained):
    _, _, model, src_vocab, _ = trained
    lines, _ = toy_pairs(9, 8)
    src, src_len = encode(src_vocab, lines)
    together = beam_search(model, src, src_len, beam=5)
    alone = beam_search(model, *encode(src_vocab, lines[4:5]), beam=5)[0]
    assert [h.tokens for h in together[4]] == [h.tokens for h in alone]


def test_nbest_larger_than_beam_is_refused(trained):
    _, _, model, src_vocab, _ = trained
    with pytest.raises(ValueError):
        beam_search(model, *encode(src_vocab, ["w1 w2"]), beam=2, nbest=3)


def test_save_load_round_trip(trained, tmp_path):
    out, _, model, src_vocab, _ = trained
    again, v2, _, cfg = load_model(out, "best")
    assert v2.itos == src_vocab.itos and cfg["train"]["flavour"] == "weak"
    src, src_len = encode(src_vocab, ["w3 w1 w4", "w5"])
    tgt = torch.tensor([[5, 6, EOS_ID], [7, EOS_ID, 0]])
    assert torch.equal(model.score(src, src_len, tgt), again.score(src, src_len, tgt))


def test_resume_matches_uninterrupted_run(tmp_path):
    data, val = toy_pairs(200, 11), toy_pairs(20, 12)
    straight = tmp_path / "straight"
    resumed = tmp_path / "resumed"
    train(toy_config(max_epochs=2, dropout=0.3), data, val, str(straight))
    first = train(toy_config(max_epochs=1, dropout=0.3), data, val, str(resumed))
    assert first["epoch"] == 1
    second = train(toy_config(max_epochs=2, dropout=0.3), data, val, str(resumed))
    assert second["epoch"] == 2 and len(second["history"]) == 2
    a = torch.load(straight / "last.pt", weights_only=True)["model"]
    b = torch.load(resumed / "last.pt", weights_only=True)["model"]
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-6), name


@pytest.mark.parametrize("tie", [False, True])
def test_step_tables_give_the_plain_step(tie):
    from rerank.nmt.config import SIZE_PRESETS
    from rerank.nmt.model import AttentionNMT, ModelConfig
    torch.manual_seed(4)
    dims = dict(SIZE_PRESETS["tiny"], readout_dim=SIZE_PRESETS["tiny"]["emb_dim"])
    model = AttentionNMT(ModelConfig(src_vocab=17, tgt_vocab=23, dropout=0.3, tie_embeddings=tie, **dims))
    for p in model.parameters():  # non-zero biases too, so every table column is exercised
        torch.nn.init.normal_(p, std=0.3)
    model.eval()
    src, src_len = pad([[5, 6, 7, EOS_ID], [8, 9, EOS_ID], [4, EOS_ID]])
    enc, state = model.encode(src, src_len)
    prev = torch.tensor([1, 12, 22])
    plain, s_plain = model.step(prev, state, enc)
    fast, s_fast = model.step(prev, state, enc, model.step_tables())
    assert torch.allclose(s_fast, s_plain, atol=1e-5)
    assert torch.allclose(fast, plain, atol=1e-5)
    assert not torch.allclose(plain[0], plain[1])
    model.train()
    with pytest.raises(RuntimeError, match="eval mode"):
        model.step(prev, state, enc, model.step_tables())


def test_learning_rate_decays_after_a_bad_epoch_and_survives_resume(tmp_path):
    # lr 3 is far too high for Adam: validation BLEU falls, so the rate must be halved
    data, val = toy_pairs(96, 13), toy_pairs(12, 14)
    cfg = dict(lr=3.0, batch_size=32, patience=10)
    straight = train(toy_config(max_epochs=3, **cfg), data, val, str(tmp_path / "straight"))
    lrs, bad = [], 0
    for h in straight["history"]:
        lrs.append(h["lr"])
        assert h["lr"] == pytest.approx(3.0 * 0.5 ** bad)
        bad += h["val_bleu_greedy"] <= max([-1.0] + [x["val_bleu_greedy"] for x in straight["history"][: h["epoch"] - 1]])
    assert bad >= 1
    train(toy_config(max_epochs=2, **cfg), data, val, str(tmp_path / "resumed"))
    resumed = train(toy_config(max_epochs=3, **cfg), data, val, str(tmp_path / "resumed"))
    assert [h["lr"] for h in resumed["history"]] == lrs
    a = torch.load(tmp_path / "straight" / "last.pt", weights_only=True)
    b = torch.load(tmp_path / "resumed" / "last.pt", weights_only=True)
    assert a["optim"]["param_groups"][0]["lr"] == b["optim"]["param_groups"][0]["lr"] == pytest.approx(3.0 * 0.5 ** bad)
    for name in a["model"]:
        assert torch.allclose(a["model"][name], b["model"][name], atol=1e-6), name
    with pytest.raises(ValueError, match="lr_decay"):
        toy_config(lr_decay=1.5)


def ticking(seconds):
    """A fake clock that moves `seconds` forward at every reading."""
    counter = itertools.count(0, seconds)
    return lambda: float(next(counter))


def test_time_budget_is_spent_in_whole_epochs(tmp_path):
    # the budget reads the clock at the start and before and after every epoch: with a minute per
    # reading, epoch 1 runs 1-2 min, epoch 2 runs 3-4 min; before epoch 3, 5 min used + 1 expected > 5
    data, val = toy_pairs(96, 13), toy_pairs(12, 14)
    run = tmp_path / "run"
    state = train(toy_config(max_epochs=10, max_minutes=5), data, val, str(run), clock=ticking(60))
    assert state["stopped"] == "time budget" and state["epoch"] == 2
    assert [(h["seconds"], h["batches"]) for h in state["history"]] == [(60.0, 3), (60.0, 3)]
    assert all(h["of_batches"] == 3 for h in state["history"])
    assert "time budget: 5.0 of 5 minutes used, another epoch is expected to take 1.0" in (run / "train.log").read_text()
    # a resume gets its own budget, but the mean includes the earlier epochs: 1 min used at the
    # first check + 1 expected > 1.5, so nothing runs (without them the mean would be 0)
    again = train(toy_config(max_epochs=10, max_minutes=1.5), data, val, str(run), clock=ticking(60))
    assert again["stopped"] == "time budget" and again["epoch"] == 2
    # a fresh run with 6 minutes: epoch 3 (5-6 min) ends exactly at the budget, so it runs
    six = train(toy_config(max_epochs=10, max_minutes=6), data, val, str(tmp_path / "six"), clock=ticking(60))
    assert six["epoch"] == 3 and six["stopped"] == "time budget"
    with pytest.raises(ValueError, match=r"the time budget \(max_minutes\) must be > 0"):
        toy_config(max_minutes=0)
