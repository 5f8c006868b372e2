"""`rerank generate` and `rerank.generate` (issue 48): sampling is right by its frequencies, the
`nmt` column is each backend's own forced scoring, beam search is each backend's own beam, the
same seed gives the same bytes however the job is cut, MBR's counts posterior is the Monte Carlo
estimate, and bad input is one line with nothing written.

The models have random weights and are built here from configs: a GRU NMT with a dozen-token
vocabulary (its sequence probabilities can be enumerated), a Marian with its CTranslate2
conversion (rerank.recipes.tiny_models)."""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest
import torch

import rerank
from rerank.nmt.model import AttentionNMT, ModelConfig
from rerank.nmt.sampling import Warp, sample, warp
from rerank.nmt.vocab import BOS_ID, EOS_ID, SPECIALS
from tests.cli_helpers import run, torchrun, write

pytestmark = pytest.mark.neural

WORDS = "a b c d e f g h".split()   # with the four specials: a vocabulary of 12
SOURCES = ["a b c", "d e", "f", "g h a b", "c c d", "e"]
ERROR = "rerank generate: error:"


def build_nmt(out, seed: int = 0, scale: float = 6.0) -> str:
    """A `rerank nmt train`-style run directory with random weights (output layer scaled so that
    the next-token distributions are peaked enough for the warpers to cut)."""
    os.makedirs(out, exist_ok=True)
    vocab = SPECIALS + WORDS
    cfg = ModelConfig(src_vocab=len(vocab), tgt_vocab=len(vocab), emb_dim=8, enc_hidden=8, dec_hidden=8, att_dim=8,
                      readout_dim=8, dropout=0.0)
    torch.manual_seed(seed)
    model = AttentionNMT(cfg)
    with torch.no_grad():
        model.out.weight.mul_(scale)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"model": json.loads(cfg.to_json()), "train": {"src_lang": "en", "tgt_lang": "de"}}, f)
    for side in ("src", "tgt"):
        with open(os.path.join(out, f"vocab.{side}.json"), "w") as f:
            json.dump(vocab, f)
    torch.save(model.state_dict(), os.path.join(out, "best.pt"))
    return str(out)


@pytest.fixture(scope="module")
def nmt(tmp_path_factory):
    return build_nmt(tmp_path_factory.mktemp("nmt12"))


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    """A tiny Marian (transformers) and its CTranslate2 conversion: {"hf": DIR, "ct2": DIR}."""
    from rerank.recipes import tiny_models

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    d = tmp_path_factory.mktemp("marian")
    tokenizer = tiny_models.train_tokenizer(tiny_models.read_text(tiny_models.DEFAULT_TEXT)[:2000], vocab_size=300)
    hf = tiny_models.build_marian(str(d / "hf"), tokenizer, seed=1)
    return {"hf": hf, "ct2": tiny_models.convert_ct2(hf, str(d / "ct2"))}


@pytest.fixture
def sources(tmp_path):
    return write(tmp_path, "src.txt", "\n".join(SOURCES) + "\n")


# ---- the draws: exact frequencies on an enumerable model ------------------------------------------

def reference_warp(logp: np.ndarray, s: Warp) -> np.ndarray:
    """The distribution drawn from, by the definitions (written apart from rerank.nmt.sampling):
    tempered softmax, then the k most probable, the smallest most-probable set of mass >= p, the
    tokens of probability >= epsilon (the most probable always), each renormalised."""
    p = np.exp(logp / s.temperature - np.max(logp / s.temperature))
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    keep = np.ones_like(p, dtype=bool)
    if s.top_k is not None:
        keep[order[s.top_k:]] = False
    p = np.where(keep, p, 0.0) / np.where(keep, p, 0.0).sum()
    if s.top_p is not None:
        upto = np.cumsum(p[order])   # mass of the token and the more probable ones
        keep = np.zeros_like(keep)
        keep[order[upto - p[order] < s.top_p]] = True
        p = np.where(keep, p, 0.0) / np.where(keep, p, 0.0).sum()
    if s.epsilon is not None:
        keep = (p >= s.epsilon) | (np.arange(len(p)) == order[0])
        p = np.where(keep, p, 0.0) / np.where(keep, p, 0.0).sum()
    return p


def exact_distribution(model, src_ids: list[int], limit: int, s: Warp) -> dict[tuple[int, ...], float]:
    """Every token sequence (without </s>) of at most `limit` tokens with </s>, and its probability
    under the warped model, by teacher forcing each prefix (AttentionNMT.forward, not the step
    tables); at the limit only </s>."""
    src = torch.tensor([src_ids])
    src_len = torch.tensor([len(src_ids)])
    out: dict[tuple[int, ...], float] = {}

    def walk(prefix: tuple[int, ...], prob: float) -> None:
        if len(prefix) == limit - 1:
            out[prefix] = prob
            return
        with torch.no_grad():
            logits = model(src, src_len, torch.tensor([[BOS_ID, *prefix]]))[0, -1]
        p = reference_warp(torch.log_softmax(logits.double(), -1).numpy(), s)
        for token in np.flatnonzero(p > 0):
            if token == EOS_ID:
                out[prefix] = prob * p[token]
            else:
                walk(prefix + (int(token),), prob * p[token])

    walk((), 1.0)
    return out


MODES = {"plain": Warp(), "top-k": Warp(top_k=3), "top-p": Warp(top_p=0.6), "epsilon": Warp(epsilon=0.08),
         "temperature+top-k+top-p": Warp(temperature=0.7, top_k=5, top_p=0.9)}


@pytest.mark.parametrize("mode", list(MODES))
def test_sample_frequencies_match_the_exact_sequence_probabilities(nmt, mode):
    """20,000 seeded draws per sentence of a batch of two: chi-square against the enumerated
    sequence probabilities at alpha = 0.01 (bins of expected count < 5 pooled), and no sequence
    outside the truncated support."""
    from scipy.stats import chisquare

    from rerank.nmt.checkpoint import load_model
    from rerank.nmt.data import pad

    model, *_ = load_model(nmt)
    settings, limit, draws = MODES[mode], 3, 20_000
    batch = [[4, 5, EOS_ID], [9, EOS_ID]]
    src, src_len = pad(batch)
    drawn = sample(model, src, src_len, draws, settings, torch.Generator().manual_seed(7), max_length=limit)
    for ids, sentence in zip(batch, drawn):
        exact = exact_distribution(model, ids, limit, settings)
        assert abs(sum(exact.values()) - 1) < 1e-9
        seen = {}
        for seq in map(tuple, sentence):
            seen[seq] = seen.get(seq, 0) + 1
        assert set(seen) <= set(exact), f"{mode}: drawn outside the support: {set(seen) - set(exact)}"
        keys = sorted(exact, key=lambda k: -exact[k])
        expected = np.array([exact[k] * draws for k in keys])
        observed = np.array([seen.get(k, 0) for k in keys], dtype=float)
        small = expected < 5
        if small.any():
            expected = np.append(expected[~small], expected[small].sum())
            observed = np.append(observed[~small], observed[small].sum())
        assert len(expected) >= 3
        assert chisquare(observed, expected).pvalue > 0.01, (mode, len(expected))


def test_the_warpers_are_transformers_warpers():
    """`warp` cuts the support that transformers' own warpers cut, in their order."""
    from transformers.generation.logits_process import (EpsilonLogitsWarper, TemperatureLogitsWarper,
                                                        TopKLogitsWarper, TopPLogitsWarper)

    logp = torch.log_softmax(torch.randn(64, 12, generator=torch.Generator().manual_seed(0)) * 3, -1)
    for s in [Warp(top_k=4), Warp(top_p=0.8), Warp(epsilon=0.05), Warp(temperature=0.5, top_k=6, top_p=0.7, epsilon=0.02)]:
        ref = logp.clone()
        for warper in ([TemperatureLogitsWarper(s.temperature)] + ([TopKLogitsWarper(s.top_k)] if s.top_k else [])
                       + ([TopPLogitsWarper(s.top_p)] if s.top_p else []) + ([EpsilonLogitsWarper(s.epsilon)] if s.epsilon else [])):
            ref = warper(None, ref)
        ours = warp(logp, s)
        assert torch.equal(torch.isinf(ours), torch.isinf(ref))
        assert torch.allclose(ours.softmax(-1), ref.softmax(-1), atol=1e-6)


FLAT = {"plain": Warp(), "top-k": Warp(top_k=10), "top-p": Warp(top_p=0.5), "epsilon": Warp(epsilon=0.004),
        "temperature+top-k+top-p": Warp(temperature=0.7, top_k=40, top_p=0.9)}   # for a 300-token vocabulary


@pytest.mark.parametrize("backend, mode", [("ct2", "plain"), ("ct2", "top-k"), ("ct2", "temperature+top-k+top-p"),
                                           ("hf", "plain"), ("hf", "top-p"), ("hf", "epsilon")])
def test_ct2_and_hf_first_tokens_are_drawn_from_the_models_warped_distribution(marian, tmp_path, backend, mode):
    """20,000 draws of a candidate's first token (ct2: max_length 1; hf: 2, whose last is the forced
    EOS) against the model's own first-step distribution (transformers' logits, `<pad>` banned as in
    generation), warped by the reference definitions: chi-square at alpha = 0.01 over the strings the
    tokens read as, and nothing drawn outside the support."""
    from scipy.stats import chisquare
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    settings, draws = FLAT[mode], 20_000
    tok = AutoTokenizer.from_pretrained(marian["hf"])
    model = AutoModelForSeq2SeqLM.from_pretrained(marian["hf"]).eval()
    enc = tok("a man", return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc, decoder_input_ids=torch.tensor([[model.config.decoder_start_token_id]])).logits[0, 0]
    logits[model.config.pad_token_id] = float("-inf")
    p = reference_warp(torch.log_softmax(logits.double(), -1).numpy(), settings)
    expected: dict[str, float] = {}
    for token in np.flatnonzero(p > 0):
        text = tok.decode([int(token)], skip_special_tokens=True).strip()
        expected[text] = expected.get(text, 0.0) + p[token] * draws
    source = write(tmp_path, "one.txt", "a man\n")
    warps = {"temperature": settings.temperature, "top_k": settings.top_k, "top_p": settings.top_p,
             "epsilon": settings.epsilon}
    rerank.generate(source, tmp_path / "d.jsonl", model=marian[backend], backend=backend, n=draws, seed=3,
                    max_length=1 if backend == "ct2" else 2, batch_tokens=10 ** 7, **warps)
    seen: dict[str, float] = {}
    for r in rows(tmp_path / "d.jsonl"):
        seen[r["hyp"].strip()] = seen.get(r["hyp"].strip(), 0) + r["features"]["count"]
    assert sum(seen.values()) == draws and set(seen) <= set(expected), set(seen) - set(expected)
    keys = sorted(expected, key=lambda k: -expected[k])
    e = np.array([expected[k] for k in keys])
    o = np.array([seen.get(k, 0) for k in keys], dtype=float)
    small = e < 5
    if small.any():
        e, o = np.append(e[~small], e[small].sum()), np.append(o[~small], o[small].sum())
    assert len(e) >= 3 and chisquare(o, e * o.sum() / e.sum()).pvalue > 0.01, (backend, mode, len(e))


# ---- the columns: each backend's own scoring ------------------------------------------------------

def rows(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_nmt_column_is_the_project_nmts_forced_scoring_and_count_merges_duplicates(nmt, sources, tmp_path):
    from rerank.nmt.scoring import channel_scores

    out = tmp_path / "s.jsonl"
    done = rerank.generate(sources, out, model=nmt, backend="nmt", n=30, seed=2, max_length=4)
    got = rows(out)
    scores, tokens = channel_scores(nmt, [SOURCES[r["id"]] for r in got], [r["hyp"] for r in got])
    assert np.allclose([r["features"]["nmt"] for r in got], scores, atol=1e-5)
    assert np.allclose([r["features"]["nmt_norm"] for r in got], scores / tokens, atol=1e-5)
    for i in range(len(SOURCES)):
        mine = [r for r in got if r["id"] == i]
        assert sum(r["features"]["count"] for r in mine) == 30
        assert len({r["hyp"] for r in mine}) == len(mine)   # merged
        assert [r["features"]["nmt"] for r in mine] == sorted((r["features"]["nmt"] for r in mine), reverse=True)
    config = json.loads((tmp_path / "s.config.json").read_text())
    assert config["tool"] == "rerank generate" and config["search"] == "sample" and config["n"] == 30
    assert done.rows == len(got)
    kept = tmp_path / "k.jsonl"
    rerank.generate(sources, kept, model=nmt, n=30, seed=2, max_length=4, keep_duplicates=True)
    every = rows(kept)
    assert len(every) == 30 * len(SOURCES) and all(r["features"]["count"] == 1 for r in every)
    for i in range(len(SOURCES)):   # the same draws, merged or not
        merged = {r["hyp"]: r["features"]["count"] for r in got if r["id"] == i}
        drawn: dict[str, float] = {}
        for r in every:
            if r["id"] == i:
                drawn[r["hyp"]] = drawn.get(r["hyp"], 0) + 1
        assert merged == drawn


def test_nmt_beam_is_the_project_nmts_beam(nmt, sources, tmp_path):
    from rerank.nmt.checkpoint import load_model
    from rerank.nmt.translate import Search, translate

    out = tmp_path / "b.jsonl"
    rerank.generate(sources, out, model=nmt, search="beam", n=4)
    model, sv, tv, _ = load_model(nmt)
    beam = translate(model, sv, tv, SOURCES, "en", "de", Search(beam=4, nbest=4), progress=False)
    got = rows(out)
    for i, entries in enumerate(beam):
        assert [r["hyp"] for r in got if r["id"] == i] == [e[0] for e in entries]


def ct2_tokens(model_dir, texts, target=False):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = [tok(text_target=t)["input_ids"][:-1] if target else tok(t)["input_ids"] for t in texts]
    return tok, [tok.convert_ids_to_tokens(i) for i in ids]


@pytest.mark.parametrize("search", ["sample", "beam"])
def test_ct2_columns_are_score_batch_and_its_beam_is_translate_batch(marian, sources, tmp_path, search):
    import ctranslate2

    out = tmp_path / "c.jsonl"
    extra = {"top_k": 20, "top_p": 0.9, "temperature": 0.8} if search == "sample" else {}
    rerank.generate(sources, out, model=marian["ct2"], backend="ct2", search=search, n=4, max_length=6, **extra)
    got = rows(out)
    translator = ctranslate2.Translator(marian["ct2"])
    tok, src_tokens = ct2_tokens(marian["ct2"], [SOURCES[r["id"]] for r in got])
    _, tgt_tokens = ct2_tokens(marian["ct2"], [r["hyp"] for r in got], target=True)
    own = [sum(r.log_probs) for r in translator.score_batch(src_tokens, tgt_tokens)]
    assert np.allclose([r["features"]["nmt"] for r in got], own, atol=1e-4)
    assert np.allclose([r["features"]["nmt_norm"] for r in got],
                       [s / (len(t) + 1) for s, t in zip(own, tgt_tokens)], atol=1e-4)
    if search == "beam":
        _, src = ct2_tokens(marian["ct2"], SOURCES)
        beams = translator.translate_batch(src, beam_size=4, num_hypotheses=4, max_decoding_length=6)
        for i, result in enumerate(beams):
            texts = [tok.decode(tok.convert_tokens_to_ids(h), skip_special_tokens=True) for h in result.hypotheses]
            assert [r["hyp"] for r in got if r["id"] == i] == list(dict.fromkeys(texts))


@pytest.mark.parametrize("search", ["sample", "beam"])
def test_hf_columns_are_the_models_logits_and_its_beam_is_generate(marian, sources, tmp_path, search):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    out = tmp_path / "h.jsonl"
    extra = {"epsilon": 0.02, "top_p": 0.95} if search == "sample" else {}
    rerank.generate(sources, out, model=marian["hf"], backend="hf", search=search, n=4, max_length=6, **extra)
    got = rows(out)
    tok = AutoTokenizer.from_pretrained(marian["hf"])
    model = AutoModelForSeq2SeqLM.from_pretrained(marian["hf"]).eval()
    pad = model.config.pad_token_id
    for r in got:
        enc = tok(SOURCES[r["id"]], return_tensors="pt")
        labels = tok(text_target=r["hyp"], return_tensors="pt")["input_ids"]
        decoder_in = torch.tensor([[model.config.decoder_start_token_id] + labels[0, :-1].tolist()])
        with torch.no_grad():
            logits = model(**enc, decoder_input_ids=decoder_in).logits[0]
        logits[:, pad] = float("-inf")   # Marian's <pad> is banned from generation (bad_words_ids)
        own = torch.log_softmax(logits, -1).gather(1, labels[0].unsqueeze(1)).sum().item()
        assert abs(r["features"]["nmt"] - own) < 1e-4
    if search == "beam":
        for i, text in enumerate(SOURCES):
            enc = tok(text, return_tensors="pt")
            with torch.no_grad():
                beams = model.generate(**enc, num_beams=4, num_return_sequences=4, do_sample=False, max_new_tokens=6)
            texts = tok.batch_decode(beams, skip_special_tokens=True)
            assert [r["hyp"] for r in got if r["id"] == i] == list(dict.fromkeys(texts))


# ---- the bytes: seeds, shards, ranks --------------------------------------------------------------

@pytest.mark.parametrize("backend", ["nmt", "ct2"])
def test_the_same_seed_gives_the_same_bytes_and_shards_cat_to_them(nmt, marian, sources, tmp_path, capsys, backend):
    model = nmt if backend == "nmt" else marian["ct2"]
    common = ["-m", model, "--backend", backend, "-n", 6, "--top-k", 8, "--block", 2, "--batch-tokens", 40,
              "--max-length", 8, "--quiet"]
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        assert run(["generate", sources, "-o", tmp_path / f"{name}.jsonl", "--seed", seed, *common], capsys)[0] == 0
    whole = (tmp_path / "a.jsonl").read_bytes()
    assert whole == (tmp_path / "b.jsonl").read_bytes()
    assert whole != (tmp_path / "c.jsonl").read_bytes()
    parts = b""
    for i, first in ((1, 0), (2, 2), (3, 4)):   # three shards of the three blocks of two sentences
        code, _, err = run(["generate", sources, "-o", tmp_path / f"s{i}.jsonl", "--seed", 3, "--shard", f"{i}/3",
                            "--id-offset", first, *common], capsys)
        assert code == 0 and f"holds sentences {first}..{first + 1}" in err
        parts += (tmp_path / f"s{i}.jsonl").read_bytes()
    assert parts == whole


def test_two_torchrun_ranks_write_the_bytes_of_one_process(nmt, sources, tmp_path, capsys):
    common = ["-m", nmt, "-n", 12, "--epsilon", 0.05, "--block", 2, "--quiet", "--seed", 5]
    assert run(["generate", sources, "-o", tmp_path / "one.jsonl", *common], capsys)[0] == 0
    done = torchrun(["generate", sources, "-o", tmp_path / "two.jsonl", *common])
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()


def test_an_interrupted_run_resumes_from_its_finished_blocks_and_writes_the_same_bytes(nmt, sources, tmp_path,
                                                                                      monkeypatch):
    """One sentence a batch, two sentences a block: the run stops in its third batch (block 2), the
    rerun generates blocks 2 and 3 alone and writes what an uninterrupted run writes."""
    from rerank import generation

    keywords = {"model": nmt, "n": 5, "seed": 9, "block": 2, "top_p": 0.9, "batch_tokens": 10}
    rerank.generate(sources, tmp_path / "whole.jsonl", **keywords)
    real, calls = generation.run_batch, []

    def counted(*args):
        if len(calls) == stop[0]:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(generation, "run_batch", counted)
    out, stop = tmp_path / "out.jsonl", [2]
    with pytest.raises(KeyboardInterrupt):
        rerank.generate(sources, out, **keywords)
    assert not out.exists() and os.listdir(str(out) + ".blocks") == ["block-000000.json"]
    calls.clear()
    stop[0] = -1
    rerank.generate(sources, out, **keywords)
    assert len(calls) == 4
    assert out.read_bytes() == (tmp_path / "whole.jsonl").read_bytes() and not os.path.exists(str(out) + ".blocks")
    calls.clear()
    with pytest.raises(KeyboardInterrupt):   # other settings read nothing back
        stop[0] = 2
        rerank.generate(sources, out, **{**keywords, "seed": 10})
    stop[0] = -1
    calls.clear()
    rerank.generate(sources, out, **keywords)
    assert len(calls) == 6


# ---- MBR over the samples -------------------------------------------------------------------------

def test_counts_posterior_is_the_monte_carlo_estimate_and_the_default_for_sampled_lists(nmt, sources, tmp_path, capsys):
    import sacrebleu

    sampled, every = tmp_path / "s.jsonl", tmp_path / "every.jsonl"
    common = ["-m", nmt, "-n", 16, "--seed", 1, "--max-length", 4, "--quiet"]
    assert run(["generate", sources, "-o", sampled, *common], capsys)[0] == 0
    assert run(["generate", sources, "-o", every, "--keep-duplicates", *common], capsys)[0] == 0
    for posterior in ([], ["--mbr-posterior", "counts"]):
        assert run(["features", sampled, "--which", "mbr", "--mbr-utility", "chrf", *posterior, "-o",
                    tmp_path / "m.jsonl", "--to", "jsonl"], capsys)[0] == 0
        got = rows(tmp_path / "m.jsonl")
        draws = rows(every)
        for r in got:   # 100 x the mean over the 16 draws of chrF(candidate, draw)
            mine = [d["hyp"] for d in draws if d["id"] == r["id"]]
            mc = np.mean([sacrebleu.sentence_chrf(r["hyp"], [d]).score for d in mine])
            assert abs(r["features"]["mbr"] - mc) < 1e-6
    beam = tmp_path / "b.jsonl"
    assert run(["generate", sources, "-o", beam, "-m", nmt, "--search", "beam", "-n", 4, "--quiet"], capsys)[0] == 0
    for posterior, expected in (([], "softmax"), (["--mbr-posterior", "uniform"], "uniform")):
        assert run(["features", beam, "--which", "mbr", "--mbr-utility", "chrf", *posterior, "-o",
                    tmp_path / "bm.jsonl", "--to", "jsonl"], capsys)[0] == 0
        got = rows(tmp_path / "bm.jsonl")
        for i in range(len(SOURCES)):
            mine = [r for r in got if r["id"] == i]
            w = np.exp([r["features"]["nmt"] for r in mine]) if expected == "softmax" else np.ones(len(mine))
            w = w / w.sum()
            for r in mine:
                value = sum(wj * sacrebleu.sentence_chrf(r["hyp"], [o["hyp"]]).score for wj, o in zip(w, mine))
                assert abs(r["features"]["mbr"] - value) < 1e-6


# ---- bad input ------------------------------------------------------------------------------------

def bad_cases(nmt, marian, sources, tmp_path):
    empty_line = write(tmp_path, "gap.txt", "a b\n\nc\n")
    return {
        "unknown backend": (["-m", nmt, "--backend", "fairseq"], "--backend: must be one of"),
        "missing model": (["-m", str(tmp_path / "nowhere")], "no such model directory"),
        "no model": ([], "a model is needed"),
        "n of 0": (["-m", nmt, "-n", "0"], "-n: must be a positive integer"),
        "n below 0": (["-m", nmt, "-n", "-3"], "-n: must be a positive integer"),
        "epsilon of 1": (["-m", nmt, "--epsilon", "1"], "--epsilon: must be between 0 and 1"),
        "epsilon of 0": (["-m", nmt, "--epsilon", "0"], "--epsilon: must be between 0 and 1"),
        "epsilon with beam": (["-m", nmt, "--search", "beam", "--epsilon", "0.1"], "beam search takes none"),
        "epsilon with ct2": (["-m", marian["ct2"], "--backend", "ct2", "--epsilon", "0.1"], "no epsilon"),
        "not a ct2 model": (["-m", nmt, "--backend", "ct2"], "not a CTranslate2 model directory"),
        "empty source line": (["-m", nmt, "--source-file", empty_line], f"{empty_line}:2: empty source line"),
        "bad shard": (["-m", nmt, "--shard", "3/2"], "--shard: must be i/N"),
    }


def test_bad_input_is_one_line_exit_2_and_nothing_written(nmt, marian, sources, tmp_path, capsys):
    for name, (args, words) in bad_cases(nmt, marian, sources, tmp_path).items():
        source = sources
        if "--source-file" in args:
            k = args.index("--source-file")
            source, args = args[k + 1], args[:k] + args[k + 2:]
        out = tmp_path / "out.jsonl"
        try:
            code, _, err = run(["generate", source, "-o", out, *args], capsys)
        except SystemExit as exc:   # argparse's refusals
            code, err = exc.code, capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2, (name, err)
        assert len([line for line in lines if "error" in line]) == 1 and words in err, (name, err)
        assert not out.exists() and not (tmp_path / "out.config.json").exists(), name


def test_the_library_says_the_same_rules_by_keyword(nmt, sources, tmp_path):
    from rerank.errors import InputError

    for keywords, words in (({"n": 0}, "n must be a positive integer"), ({"epsilon": 1.5}, "epsilon must be between"),
                            ({"backend": "nope"}, "backend must be one of"), ({"model": None}, "a model is needed")):
        with pytest.raises(InputError, match=words):
            rerank.generate(sources, tmp_path / "x.jsonl", **{"model": nmt, **keywords})
    assert not (tmp_path / "x.jsonl").exists()


def test_the_list_converts_to_every_format_and_moses_reads_back(nmt, sources, tmp_path, capsys):
    out = tmp_path / "m.nbest"
    assert run(["generate", sources, "-o", out, "-m", nmt, "-n", 5, "--to", "moses", "--quiet"], capsys)[0] == 0
    back = rerank.read_nbest(str(out))
    assert back.n_sentences == len(SOURCES) and back.feature_names[:3] == ["nmt", "nmt_norm", "count"]
    assert (tmp_path / "m.config.json").exists()


def test_every_enumerated_sequence_is_reachable_only_within_the_limit(nmt):
    """The enumeration helper itself: probabilities over all sequences of <= 2 tokens sum to one."""
    from rerank.nmt.checkpoint import load_model

    model, *_ = load_model(nmt)
    exact = exact_distribution(model, [4, EOS_ID], 3, Warp())
    assert len(exact) == 1 + 11 + 121 and all(len(k) <= 2 for k in exact)
    assert all(EOS_ID not in k for k in itertools.chain(exact))
