"""Users' own models as features (rerank.nmt.backends, embeddings/sentence_encoders.py): each
column equals the backend's own computation on the same pair, CTranslate2 equals transformers on
the same converted model, and what must not change the scores (batching, duplicates, the cache,
the tokenizer's saving version) does not. The models are tiny, with random weights, built from
configs (rerank.recipes.tiny_models); nothing is downloaded."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch

from rerank import api
from rerank.cli import main
from rerank.errors import InputError, MissingDependency
from rerank.features import FeatureContext
from rerank.io import read_lines
from rerank.nbest import NBestList
from rerank.nmt import backends
from rerank.nmt.backends import TranslationSettings, model_kind, token_batches, translation_scores
from rerank.nmt.features import ChannelFeature, DirectFeature, R2LFeature, reverse_words
from rerank.recipes import tiny_models
from rerank.score_cache import ScoreCache

pytestmark = pytest.mark.neural

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SOURCES = ["A man in a red shirt is riding a bike.", "Two dogs run on the grass.", "A girl is climbing a tree."]
HYPS = [["Ein Mann in einem roten Hemd fährt Fahrrad.", "Ein Mann fährt ein Fahrrad.", "Ein Mann in Rot fährt."],
        ["Zwei Hunde rennen auf dem Gras.", "Zwei Hunde laufen.", "Zwei Hunde rennen auf dem Gras."],
        ["Ein Mädchen klettert auf einen Baum.", "Ein Mädchen klettert."]]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def nbest():
    return NBestList.from_lists(HYPS, [-np.arange(len(h), dtype=float) for h in HYPS], ["nmt"])


def hf_reference(model_dir: str, source: str, target: str, forced: int | None = None) -> tuple[float, int]:
    """(-loss x tokens, tokens) from transformers' own loss on one pair: labels are the tokenizer's
    target ids; a forced first token is fed to the decoder and left out of the labels."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    labels = tok(text_target=target, return_tensors="pt")["input_ids"]
    encoded = tok(source, return_tensors="pt")
    inputs = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    start = model.config.decoder_start_token_id
    lead = [start] + ([forced] if forced is not None else [])
    decoder_in = torch.tensor([lead + labels[0, :-1].tolist()])
    full = torch.tensor([[-100] * (len(lead) - 1) + labels[0].tolist()])
    with torch.no_grad():
        loss = model(**inputs, decoder_input_ids=decoder_in, labels=full).loss
    n = labels.shape[1]
    return -loss.item() * n, n


def test_a_model_directory_is_known_by_what_it_holds(tiny, tmp_path):
    assert model_kind(tiny["marian"]) == backends.HF
    assert model_kind(tiny["marian_ct2"]) == backends.CT2
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps({"model": {}, "train": {}}))
    assert model_kind(str(tmp_path / "run")) == backends.PROJECT
    with pytest.raises(InputError, match="no config.json"):
        model_kind(str(tmp_path))
    with pytest.raises(InputError, match="not a model directory"):
        model_kind(str(tmp_path / "missing"))


def test_seq2seq_scores_are_the_transformers_loss_times_the_tokens(tiny, tmp_path):
    """Without banned tokens (BART), log p(target | source) is transformers' own mean loss x target
    tokens (EOS included)."""
    plain = tiny_models.build_bart(str(tmp_path / "plain"), tiny_models.train_tokenizer(
        tiny_models.read_text(tiny_models.DEFAULT_TEXT)), seed=3)
    targets = [h for hyps in HYPS for h in hyps]
    sources = [SOURCES[i] for i, hyps in enumerate(HYPS) for _ in hyps]
    scores, counts = translation_scores(plain, sources, targets, torch.device("cpu"), 1, TranslationSettings(), "direct")
    for s, t, score, count in zip(sources, targets, scores, counts):
        expected, n = hf_reference(plain, s, t)
        assert count == n
        assert score == pytest.approx(expected, abs=1e-4)


def test_a_forced_first_token_is_fed_but_not_counted(tiny, tmp_path):
    tokenizer = tiny_models.train_tokenizer(tiny_models.read_text(tiny_models.DEFAULT_TEXT))
    forced = tokenizer.convert_tokens_to_ids("▁Ein")
    model = tiny_models.build_bart(str(tmp_path / "forced"), tokenizer, seed=4, forced_bos=forced)
    scores, counts = translation_scores(model, SOURCES[:1], HYPS[0][:1], torch.device("cpu"), 1, TranslationSettings(),
                                        "direct")
    expected, n = hf_reference(model, SOURCES[0], HYPS[0][0], forced=forced)
    assert scores[0] == pytest.approx(expected, abs=1e-4) and counts[0] == n
    by_option = translation_scores(model, SOURCES[:1], HYPS[0][:1], torch.device("cpu"), 1,
                                   TranslationSettings(tgt_lang_code="▁Ein"), "direct")[0]
    assert by_option[0] == pytest.approx(scores[0], abs=1e-6)
    with pytest.raises(InputError, match="not a token of the model's tokenizer"):
        translation_scores(model, SOURCES[:1], HYPS[0][:1], torch.device("cpu"), 1,
                           TranslationSettings(tgt_lang_code="xx_Unknown"), "direct")


def test_marian_pad_is_outside_the_softmax_as_in_decoding(tiny):
    """bad_words_ids=[[<pad>]]: the score is the log-softmax over the other tokens."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny["marian"])
    model = AutoModelForSeq2SeqLM.from_pretrained(tiny["marian"]).eval()
    labels = tok(text_target=HYPS[1][0])["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=tok(SOURCES[1], return_tensors="pt")["input_ids"],
                       decoder_input_ids=torch.tensor([[model.config.decoder_start_token_id] + labels[:-1]])).logits[0]
    keep = [i for i in range(logits.shape[-1]) if i != tok.pad_token_id]
    logp = torch.log_softmax(logits[:, keep], -1)
    expected = sum(logp[t, keep.index(label)].item() for t, label in enumerate(labels))
    scores, _ = translation_scores(tiny["marian"], SOURCES[1:2], HYPS[1][:1], torch.device("cpu"), 1,
                                   TranslationSettings(), "direct")
    assert scores[0] == pytest.approx(expected, abs=1e-4)


def test_ctranslate2_score_batch_equals_transformers_on_the_converted_model(tiny):
    targets = [h for hyps in HYPS for h in hyps]
    sources = [SOURCES[i] for i, hyps in enumerate(HYPS) for _ in hyps]
    for inputs, outputs in ((sources, targets), (targets, sources)):
        hf, hf_n = translation_scores(tiny["marian"], inputs, outputs, torch.device("cpu"), 1, TranslationSettings(), "x")
        ct2, ct2_n = translation_scores(tiny["marian_ct2"], inputs, outputs, torch.device("cpu"), 1,
                                        TranslationSettings(), "x")
        np.testing.assert_allclose(ct2, hf, atol=1e-3)
        np.testing.assert_array_equal(ct2_n, hf_n)


def test_causal_lm_scores_are_the_transformers_loss_and_ctranslate2_agrees(tiny):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny["gpt2"])
    model = AutoModelForCausalLM.from_pretrained(tiny["gpt2"]).eval()
    texts = [h for hyps in HYPS for h in hyps]
    sums, counts = backends.lm_scores(tiny["gpt2"], texts, torch.device("cpu"), 1)
    for text, score, count in zip(texts, sums, counts):
        ids = [tok.bos_token_id] + tok(text)["input_ids"] + [tok.eos_token_id]
        with torch.no_grad():
            loss = model(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
        assert count == len(ids) - 1   # every token after <s>, </s> included
        assert score == pytest.approx(-loss * count, abs=1e-4)
    ct2, ct2_counts = backends.lm_scores(tiny["gpt2_ct2"], texts, torch.device("cpu"), 1)
    np.testing.assert_allclose(ct2, sums, atol=1e-3)
    np.testing.assert_array_equal(ct2_counts, counts)


def test_features_are_the_backend_scores_of_each_rows_pair(tiny, nbest):
    context = FeatureContext(sources=SOURCES)
    rows = list(zip(nbest.sentence_of_hyp.tolist(), nbest.hyps))
    cases = [(ChannelFeature, "channel", [(h, SOURCES[i]) for i, h in rows]),
             (DirectFeature, "direct", [(SOURCES[i], h) for i, h in rows]),
             (R2LFeature, "r2l", [(SOURCES[i], reverse_words(h)) for i, h in rows])]
    for cls, name, pairs in cases:
        out = cls().compute(nbest, [name, f"{name}_norm"], context, cls.Options(model=tiny["marian"]))
        inputs, outputs = zip(*pairs)
        expected, counts = translation_scores(tiny["marian"], inputs, outputs, torch.device("cpu"), 1,
                                              TranslationSettings(), name)
        np.testing.assert_allclose(out[name], expected, rtol=0, atol=1e-6)
        np.testing.assert_allclose(out[f"{name}_norm"], expected / counts, rtol=0, atol=1e-6)
    assert reverse_words("a b  c") == "c b a"


def test_batching_and_duplicates_do_not_change_scores(tiny, nbest, monkeypatch):
    context = FeatureContext(sources=SOURCES)
    wide = ChannelFeature().compute(nbest, ["channel"], context, ChannelFeature.Options(model=tiny["marian"]))
    narrow = ChannelFeature().compute(nbest, ["channel"], context,
                                      ChannelFeature.Options(model=tiny["marian"], batch_tokens=1))
    np.testing.assert_allclose(narrow["channel"], wide["channel"], atol=1e-5)
    assert wide["channel"][3] == wide["channel"][5]   # the repeated hypothesis of sentence 1
    scored = []
    original = backends.HFTranslationScorer.score_ids
    monkeypatch.setattr(backends.HFTranslationScorer, "score_ids",
                        lambda self, i, o: scored.extend(o) or original(self, i, o))
    ChannelFeature().compute(nbest, ["channel"], context, ChannelFeature.Options(model=tiny["marian"]))
    assert len(scored) == len(set(zip(nbest.sentence_of_hyp.tolist(), nbest.hyps))) == nbest.n_hyps - 1


def test_token_batches_are_sorted_and_within_the_budget():
    lengths = [5, 30, 2, 17, 17, 9, 40, 1]
    batches = token_batches(lengths, 40)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat, reverse=True)
    assert all(len(b) * max(lengths[i] for i in b) <= 40 for b in batches)
    assert token_batches([50, 3], 10) == [[0], [1]]   # an item over the budget is a batch of its own


def test_a_rerun_reads_every_score_from_the_cache(tiny, nbest, tmp_path, monkeypatch):
    cache = str(tmp_path / "scores.sqlite")
    context = FeatureContext(sources=SOURCES, cache=cache)
    first = ChannelFeature().compute(nbest, ["channel", "channel_norm"], context,
                                     ChannelFeature.Options(model=tiny["marian_ct2"]))
    assert len(ScoreCache(cache)) == nbest.n_hyps - 1
    monkeypatch.setattr(backends.CT2TranslationScorer, "__init__", lambda *a, **k: pytest.fail("the model was loaded"))
    again = ChannelFeature().compute(nbest, ["channel", "channel_norm"], context,
                                     ChannelFeature.Options(model=tiny["marian_ct2"]))
    for name in first:
        assert np.array_equal(first[name], again[name])   # bit for bit


def test_the_cache_key_is_the_model_digest_and_settings(tiny, nbest, tmp_path):
    copy = shutil.copytree(tiny["marian"], str(tmp_path / "copy"))
    cache = str(tmp_path / "scores.sqlite")
    context = FeatureContext(sources=SOURCES, cache=cache)
    ChannelFeature().compute(nbest, ["channel"], context, ChannelFeature.Options(model=copy))
    n = len(ScoreCache(cache))
    ChannelFeature().compute(nbest, ["channel"], context, ChannelFeature.Options(model=copy, src_prefix=">>en<< "))
    assert len(ScoreCache(cache)) == 2 * n          # another setting: other keys
    tiny_models.build_marian(copy, tiny_models.train_tokenizer(tiny_models.read_text(tiny_models.DEFAULT_TEXT)),
                             seed=9)               # other weights in the same directory
    changed = ChannelFeature().compute(nbest, ["channel"], context, ChannelFeature.Options(model=copy))
    fresh = ChannelFeature().compute(nbest, ["channel"], FeatureContext(sources=SOURCES), ChannelFeature.Options(model=copy))
    assert len(ScoreCache(cache)) == 3 * n
    np.testing.assert_array_equal(changed["channel"], fresh["channel"])


def test_sim_is_the_sentence_transformers_cosine(tiny, nbest):
    from sentence_transformers import SentenceTransformer

    out = api.add_features(nbest, "sim", sources=SOURCES, sim_model=tiny["st"]).column("sim")
    model = SentenceTransformer(tiny["st"], device="cpu")
    left = model.encode([SOURCES[i] for i in nbest.sentence_of_hyp], convert_to_tensor=True)
    right = model.encode(list(nbest.hyps), convert_to_tensor=True)
    expected = model.similarity(left, right).diagonal().numpy()
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_a_tokenizer_the_installed_transformers_cannot_load_falls_back_to_tokenizer_json(tiny, tmp_path):
    """What a tokenizer saved by the other transformers major version looks like to AutoTokenizer:
    a tokenizer_config.json naming a class this version lacks."""
    copy = shutil.copytree(tiny["marian"], str(tmp_path / "skewed"))
    config_path = os.path.join(copy, "tokenizer_config.json")
    config = json.load(open(config_path, encoding="utf-8"))
    config["tokenizer_class"] = "TokenizerFromAnotherMajorVersion"
    json.dump(config, open(config_path, "w", encoding="utf-8"))
    fallback = backends.load_tokenizer(copy)
    original = backends.load_tokenizer(tiny["marian"])
    for text in SOURCES:
        assert fallback(text)["input_ids"] == original(text)["input_ids"]
        assert fallback(text_target=text)["input_ids"] == original(text_target=text)["input_ids"]
    assert fallback.pad_token_id == original.pad_token_id and fallback.eos_token_id == original.eos_token_id


def test_a_missing_backend_is_named_in_one_line_with_its_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sentence_transformers" else real(name, *a))
    from rerank.embeddings.sentence_encoders import SimFeature

    with pytest.raises(MissingDependency) as caught:
        SimFeature().compute(NBestList.from_lists([["x"]], [np.zeros(1)], ["nmt"]), ["sim"], FeatureContext(sources=["y"]),
                             SimFeature.Options(model="m"))
    assert str(caught.value) == ("the sim feature needs sentence_transformers, which is not installed: "
                                 "pip install 'mlmme-rerank[st]'")


def test_the_command_line_scores_tunes_and_evaluates_with_users_models(tiny, tmp_path):
    """features (HF channel, CTranslate2 lm, sim) -> tune (MIRA) -> eval, on a shipped list slice."""
    data = os.path.join(os.path.dirname(api.__file__), "data", "multi30k")
    n = 12
    nb = api.read_nbest(os.path.join(data, "optimised.val.20best.gz")).select_sentences(range(n))
    nb = nb.select_features(["nmt", "nmt_norm", "len"])
    api.write_nbest(nb, str(tmp_path / "val.nbest"))
    (tmp_path / "val.en").write_text("\n".join(read_lines(os.path.join(data, "val.en.gz"))[:n]) + "\n")
    (tmp_path / "val.de").write_text("\n".join(read_lines(os.path.join(data, "val.de.gz"))[:n]) + "\n")
    cache = str(tmp_path / "cache.sqlite")
    args = ["features", str(tmp_path / "val.nbest"), "--src", str(tmp_path / "val.en"), "--which",
            "channel,channel_norm,lm,sim", "--channel-model", tiny["marian"], "--lm-model", tiny["gpt2_ct2"],
            "--sim-model", tiny["st"], "--score-cache", cache, "--quiet", "-o", str(tmp_path / "val.feat")]
    assert main(args) == 0
    featured = api.read_nbest(str(tmp_path / "val.feat"))
    assert featured.feature_names == ["nmt", "nmt_norm", "len", "channel", "channel_norm", "lm", "sim"]
    assert main(["tune", str(tmp_path / "val.feat"), "-r", str(tmp_path / "val.de"), "--epochs", "3", "--quiet",
                 "-o", str(tmp_path / "weights.json")]) == 0
    weights = json.load(open(tmp_path / "weights.json", encoding="utf-8"))
    assert set(weights["weights"]) == set(featured.feature_names)
    assert main(["apply", str(tmp_path / "val.feat"), "-w", str(tmp_path / "weights.json"), "-o",
                 str(tmp_path / "out.de")]) == 0
    assert len(read_lines(str(tmp_path / "out.de"))) == n
    assert main(args[:-1] + [str(tmp_path / "again.feat")]) == 0
    assert open(tmp_path / "again.feat", "rb").read() == open(tmp_path / "val.feat", "rb").read()


def test_bad_model_directories_are_one_clear_error(tiny, tmp_path, capsys):
    (tmp_path / "in.nbest").write_text("0 ||| Ein Hund ||| nmt= -1 ||| -1\n")
    (tmp_path / "src").write_text("A dog\n")
    base = ["features", str(tmp_path / "in.nbest"), "--src", str(tmp_path / "src"), "--no-score-cache", "-o",
            str(tmp_path / "o")]
    assert main(base + ["--which", "channel", "--channel-model", str(tmp_path / "nowhere")]) == 2
    assert "not a model directory" in capsys.readouterr().err
    broken = shutil.copytree(tiny["marian_ct2"], str(tmp_path / "no-tokenizer"))
    os.remove(os.path.join(broken, "tokenizer.json"))
    os.remove(os.path.join(broken, "tokenizer_config.json"))
    assert main(base + ["--which", "channel", "--channel-model", broken]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs the tokenizer files beside model.bin" in err[0]
    assert main(base + ["--which", "lm", "--lm-model", tiny["marian"]]) == 2
    assert "not a Hugging Face causal language model" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
