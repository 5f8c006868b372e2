"""Encoder: tokenisation, vocabulary, fast GRU path vs nn.GRU, save/load, bad input."""

import numpy as np
import pytest
import torch

from rerank.embeddings.encoder import Encoder, save_model
from rerank.embeddings.model import MLMME, ModelConfig
from rerank.embeddings.tokenize import tokenize
from rerank.embeddings.vocab import Vocab
from rerank.errors import InputError

pytestmark = pytest.mark.neural

SENTS = ["A man rides a bike.", "Two dogs play in the snow!", "A girl, in a red coat, walks.", "Hello", "a MAN rides"]
DE = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Ein Mädchen geht.", "Hallo", "ein Mann"]



def make_encoder(image_dim=0, hidden=24, joint=16):
    en = Vocab.build([tokenize(s, "en") for s in SENTS])
    de = Vocab.build([tokenize(s, "de") for s in DE])
    cfg = ModelConfig(languages=["en", "de"], vocab_sizes={"en": len(en), "de": len(de)}, word_dim=8,
                      hidden_dim=hidden, joint_dim=joint, image_dim=image_dim, init_std=0.3)
    torch.manual_seed(0)
    return Encoder(MLMME(cfg), {"en": en, "de": de})


def test_tokenize_lowercases_and_splits_punctuation():
    assert tokenize("A girl, in a RED coat.", "en") == ["a", "girl", ",", "in", "a", "red", "coat", "."]
    assert tokenize("Ein Mädchen & ein Hund", "de") == ["ein", "mädchen", "&", "ein", "hund"]


def test_vocab_frequency_cutoff_and_unknown_words():
    v = Vocab.build([["a", "b", "a"], ["a", "c", "b"]], min_freq=2)
    assert v.tokens == ["<pad>", "<unk>", "a", "b"]
    assert v.ids(["b", "zzz", "a"]) == [3, 1, 2]


def test_fast_encoder_matches_reference_gru():
    enc = make_encoder(hidden=24, joint=16)  # projection 24 -> 16 is used
    vec = enc.encode(SENTS, "en", batch_size=2)
    ids = [enc.vocabs["en"].ids(tokenize(s, "en")) for s in SENTS]
    lengths = torch.tensor([len(x) for x in ids])
    pad = torch.zeros(len(ids), int(lengths.max()), dtype=torch.long)
    for i, x in enumerate(ids):
        pad[i, : len(x)] = torch.tensor(x)
    with torch.no_grad():
        ref = enc.model.eval().encode_text("en", pad, lengths).numpy()
    np.testing.assert_allclose(vec, ref, atol=1e-5)
    assert vec.dtype == np.float32 and np.allclose(np.linalg.norm(vec, axis=1), 1, atol=1e-5)


def test_without_lookup_table_gives_same_vectors(monkeypatch):
    enc = make_encoder()
    full = enc.encode(DE, "de")
    monkeypatch.setattr("rerank.embeddings.encoder.TABLE_LIMIT_BYTES", 0)
    np.testing.assert_allclose(make_encoder().encode(DE, "de"), full, atol=1e-6)


def test_order_and_batch_size_invariance():
    enc = make_encoder()
    a = enc.encode(SENTS, "en", batch_size=1)
    b = enc.encode(SENTS[::-1], "en", batch_size=64)[::-1]
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert not np.allclose(a[0], a[1])


def test_vectors_do_not_depend_on_the_other_sentences():
    # bitwise: a sentence encoded alone, in a subset or in another order gets the same vector
    # (sharded `rerank features` runs rely on it); hidden 24 is not a multiple of the SIMD width
    enc = make_encoder(image_dim=6)
    words = sorted({w for s in SENTS for w in tokenize(s, "en")})
    rng = np.random.default_rng(3)
    sents = [" ".join(rng.choice(words, size=rng.integers(1, 15))) for _ in range(150)]
    full = enc.encode(sents, "en", batch_size=64)
    for pick in (rng.permutation(150)[:37], rng.permutation(150), np.array([5]), np.arange(64, 130)):
        np.testing.assert_array_equal(enc.encode([sents[i] for i in pick], "en", batch_size=64), full[pick])
    feats = rng.normal(size=(40, 6)).astype(np.float32)
    images = enc.encode_images(feats, batch_size=16)
    np.testing.assert_array_equal(enc.encode_images(feats[[7, 3]], batch_size=16), images[[7, 3]])


def test_tanh_rounds_alike_on_vector_and_scalar_paths():
    # the encoder's gates use tanh because of this (torch.sigmoid fails it: its scalar tail rounds
    # differently); element-wise ops on 1-element tensors take the scalar path
    x = torch.from_numpy(np.random.default_rng(0).normal(scale=3.0, size=4096).astype(np.float32))
    alone = torch.cat([torch.tanh(v) for v in x.split(1)])
    assert torch.equal(torch.tanh(x), alone)


def test_save_load_identical_vectors(tmp_path):
    enc = make_encoder(image_dim=6)
    path = save_model(str(tmp_path / "m.pt"), enc.model, enc.vocabs, {"training": {"text_only": False}})[0]
    back = Encoder.load(path)
    assert back.languages == ["en", "de"] and back.has_images and back.dim == 16
    np.testing.assert_array_equal(back.encode(SENTS, "en"), enc.encode(SENTS, "en"))
    feats = np.random.default_rng(0).normal(size=(3, 6)).astype(np.float32)
    np.testing.assert_array_equal(back.encode_images(feats), enc.encode_images(feats))
    save_model(str(tmp_path / "h.pt"), enc.model, enc.vocabs, {}, half=True)
    h = Encoder.load(str(tmp_path / "h"))  # stem without extension works too
    assert h.model.embed["en"].weight.dtype == torch.float32
    np.testing.assert_allclose(h.encode(SENTS, "en"), enc.encode(SENTS, "en"), atol=2e-2)
    assert (tmp_path / "h.pt").stat().st_size < (tmp_path / "m.pt").stat().st_size


def test_bad_input_errors(tmp_path):
    enc = make_encoder()
    with pytest.raises(InputError, match="unknown language 'fr'.*en, de"):
        enc.encode(["bonjour"], "fr")
    with pytest.raises(InputError, match="sentence 2 is empty"):
        enc.encode(["a man", "  "], "en")
    vec = enc.encode(["a man", ""], "en", empty="zero")
    assert np.all(vec[1] == 0) and np.linalg.norm(vec[0]) == pytest.approx(1, abs=1e-5)
    with pytest.raises(InputError, match="text-only"):
        enc.encode_images(np.zeros((2, 6)))
    img = make_encoder(image_dim=6)
    with pytest.raises(InputError, match=r"expects \(N, 6\)"):
        img.encode_images(np.zeros((2, 5)))
    with pytest.raises(InputError, match="model file not found"):
        Encoder.load(str(tmp_path / "missing.pt"))


def test_cuda_request_falls_back_to_cpu(caplog):
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    vec = make_encoder().encode(SENTS[:2], "en", device="cuda")
    assert vec.shape == (2, 16)
    assert "CUDA is not available" in caplog.text
