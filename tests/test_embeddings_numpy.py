"""The numpy encoder against the torch Encoder: the same vectors within 1e-6 on the shipped model
and on test models of every config embeddings.model allows; the weights reader against torch.load;
the backend choice of load_encoder, the s_s feature and the mlmme MBR utility."""

import dataclasses
import json
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
import torch

from rerank.cli import main
from rerank.consensus import MBROptions, mbr_scores
from rerank.embeddings import numpy_encoder
from rerank.embeddings.encoder import Encoder, save_model
from rerank.embeddings.features import MLMMEMBRUtility
from rerank.embeddings.model import MLMME, ModelConfig
from rerank.embeddings.numpy_encoder import SPEC_KEYS, NumpyEncoder, UnsupportedModel, load_encoder
from rerank.embeddings.tokenize import tokenize
from rerank.embeddings.vocab import SubwordVocab, Vocab
from rerank.embeddings.weights_reader import LegacyFormat, WeightsError, read_state_dict
from rerank.errors import InputError
from rerank.formats import read_nbest
from rerank.io import read_lines
from tests.test_light_core import ROOT

pytestmark = pytest.mark.neural

SHIPPED = ROOT / "rerank" / "data" / "models" / "mlmme-small.pt"
NBEST = ROOT / "rerank" / "data" / "multi30k" / "optimised.test_2016.20best.gz"
SOURCES = ROOT / "rerank" / "data" / "multi30k" / "test_2016_flickr.en.gz"
TEXT = {"en": ["A man rides a bike.", "Two dogs play in the snow!", "A girl, in a red coat, walks.", "Hello",
               "a MAN rides", "a man rides a bike . and then a man rides a bike again , in the snow"],
        "de": ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Ein Mädchen geht.", "Hallo", "ein Mann"],
        "fr": ["Un homme fait du vélo.", "Deux chiens jouent dans la neige.", "Bonjour"],
        "cs": ["Muž jede na kole.", "Dva psi si hrají ve sněhu.", "Ahoj"]}


def build(tmp_path, languages=("en", "de"), word=8, hidden=24, joint=16, image_dim=0, align=(), std=0.3, half=False,
          seed=0, name="m", subword=None):
    """A test model saved by save_model (random weights spread by `std`) and its torch Encoder;
    `subword` (bpe, unigram): SentencePiece vocabularies of 300 pieces learnt on TEXT (the 256
    byte pieces and the pieces the text gives)."""
    if subword:
        vocabs = {lang: SubwordVocab.build([tokenize(s, lang) for s in TEXT[lang]], 300, subword) for lang in languages}
    else:
        vocabs = {lang: Vocab.build(tokenize(s, lang) for s in TEXT[lang]) for lang in languages}
    cfg = ModelConfig(languages=list(languages), vocab_sizes={k: len(v) for k, v in vocabs.items()}, word_dim=word,
                      hidden_dim=hidden, joint_dim=joint, image_dim=image_dim, init_std=std,
                      align_pairs=[list(p) for p in align])
    torch.manual_seed(seed)
    model = MLMME(cfg)
    with torch.no_grad():   # biases too, so that every term of the gates is tested
        for p in model.parameters():
            p.normal_(0, std)
    path = save_model(str(tmp_path / f"{name}.pt"), model, vocabs, {"note": "test model"}, half=half)[0]
    return path, Encoder.load(path)


def sentences(lang, n=120, seed=1):
    """Random sentences over the language's words, sharing prefixes (as n-best lists do), of 1-40 words."""
    words = sorted({w for s in TEXT[lang] for w in tokenize(s, lang)}) + ["unbekannt"]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = out[rng.integers(len(out))].split() if out and rng.random() < 0.5 else []
        keep = base[: rng.integers(0, len(base) + 1)]
        out.append(" ".join(keep + list(rng.choice(words, size=rng.integers(0 if keep else 1, 40 - len(keep))))))
    return out


# every config embeddings.model's ModelConfig allows: languages (K = 1..4), a projection or none,
# images or none, AME word maps (align_pairs), fp16 storage, the presets' shapes at small sizes,
# word or SentencePiece vocabularies
VARIANTS = {
    "projected": {},
    "no projection": {"hidden": 16, "joint": 16},
    "images": {"image_dim": 6},
    "one language": {"languages": ("de",), "hidden": 12, "joint": 12},
    "four languages": {"languages": ("en", "de", "fr", "cs"), "hidden": 20, "joint": 8},
    "ame word maps": {"align": (("en", "de"),)},
    "fp16": {"half": True},
    "tiny preset": {"word": 32, "hidden": 32, "joint": 32, "std": 0.1},
    "wide": {"word": 40, "hidden": 96, "joint": 64, "std": 0.15},
    "bpe pieces": {"subword": "bpe"},
    "unigram pieces, four languages": {"subword": "unigram", "languages": ("en", "de", "fr", "cs")},
    # the other tests' models: tests/test_features.py's (weights N(0, 0.5)), tests/edges_helpers.py's
    "test_features": {"hidden": 12, "joint": 6, "std": 0.5},
    "edges_helpers": {"hidden": 8, "joint": 6, "image_dim": 5, "std": 0.01},
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_numpy_vectors_are_the_torch_vectors(tmp_path, variant):
    path, torch_encoder = build(tmp_path, **VARIANTS[variant])
    fast = NumpyEncoder.load(path)
    assert (fast.languages, fast.dim, fast.has_images, fast.image_dim) == \
        (torch_encoder.languages, torch_encoder.dim, torch_encoder.has_images, torch_encoder.image_dim)
    for lang in fast.languages:
        sents = sentences(lang) + ["", "   "]
        ours = fast.encode(sents, lang, empty="zero")
        theirs = torch_encoder.encode(sents, lang, empty="zero")
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
        assert ours.dtype == np.float32 and np.all(ours[-2:] == 0)
        np.testing.assert_allclose(np.linalg.norm(ours[:-2], axis=1), 1, atol=1e-6)
    if fast.has_images:
        feats = np.random.default_rng(0).normal(size=(300, fast.image_dim)).astype(np.float32)
        np.testing.assert_allclose(fast.encode_images(feats), torch_encoder.encode_images(feats), rtol=0, atol=1e-6)


@pytest.mark.parametrize("model", ["mlmme-bpe.pt", "mlmme-small.pt"])
def test_the_shipped_models_give_the_torch_vectors_on_the_shipped_lists(model):
    nbest = read_nbest(str(NBEST)).select_sentences(range(60))
    sources = read_lines(str(SOURCES))[:60]
    path = SHIPPED.parent / model
    fast, reference = NumpyEncoder.load(str(path)), Encoder.load(str(path))
    for texts, lang in ((list(nbest.hyps), "de"), (sources, "en")):
        np.testing.assert_allclose(fast.encode(texts, lang, empty="zero"), reference.encode(texts, lang, empty="zero"),
                                   rtol=0, atol=1e-6)


def test_without_the_input_table_the_vectors_are_the_same(tmp_path, monkeypatch):
    path, torch_encoder = build(tmp_path)
    sents = sentences("en")
    with_table = NumpyEncoder.load(path).encode(sents, "en")
    monkeypatch.setattr(numpy_encoder, "TABLE_LIMIT_BYTES", 0)
    without = NumpyEncoder.load(path)
    assert without._language("en").table is None
    np.testing.assert_array_equal(without.encode(sents, "en"), with_table)   # the same GEMM shapes: bitwise
    np.testing.assert_allclose(with_table, torch_encoder.encode(sents, "en"), rtol=0, atol=1e-6)


@pytest.mark.parametrize("products", ["as probed", "einsum"])
def test_a_vector_does_not_depend_on_the_other_sentences_nor_on_threads(tmp_path, monkeypatch, products):
    # bitwise, as the torch path: sharded `rerank features` runs rely on it; 600 sentences take
    # several blocks per depth, so two threads share them. "einsum": the products of a BLAS whose
    # rows depend on their place in the block (the probe failing), whatever this machine's BLAS does
    if products == "einsum":
        monkeypatch.setattr(numpy_encoder, "rows_apart", lambda w, threads=1: False)
    path, _ = build(tmp_path, image_dim=6)
    sents = sentences("en", n=600, seed=4)
    full = NumpyEncoder.load(path).encode(sents, "en")
    rng = np.random.default_rng(3)
    for threads in (1, 2):
        enc = NumpyEncoder.load(path, threads=threads)
        np.testing.assert_array_equal(enc.encode(sents, "en", batch_size=7), full)
        for pick in (rng.permutation(600)[:37], rng.permutation(600), np.array([5]), np.arange(64, 330)):
            np.testing.assert_array_equal(enc.encode([sents[i] for i in pick], "en"), full[pick])
    feats = rng.normal(size=(300, 6)).astype(np.float32)
    images = NumpyEncoder.load(path).encode_images(feats)
    np.testing.assert_array_equal(NumpyEncoder.load(path).encode_images(feats[[7, 3]]), images[[7, 3]])


def test_the_probe_tells_a_blas_that_keeps_rows_apart_from_one_that_does_not(monkeypatch):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((24, 72)).astype(np.float32)
    a = rng.standard_normal((numpy_encoder.BLOCK, 24)).astype(np.float32)
    np.testing.assert_allclose(numpy_encoder._gemm(a, w), a @ w, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(numpy_encoder, "_ROWS_APART", {})

    class PlaceDependent(np.ndarray):   # a product whose row i is off by i ulps: rows not apart
        def __rmatmul__(self, other):
            out = np.asarray(other) @ np.asarray(self)
            return out + np.arange(len(out), dtype=np.float32)[:, None] * np.finfo(np.float32).eps

    assert numpy_encoder.rows_apart(w.view(PlaceDependent), threads=2) is False


def test_prefixes_and_repeats_share_states_without_changing_them(tmp_path):
    # a sentence that is a prefix of another, repeated sentences, and one word: each gets the
    # vector it gets alone
    path, torch_encoder = build(tmp_path)
    enc = NumpyEncoder.load(path)
    sents = ["a man rides", "a man rides a bike .", "a man", "a man rides", "a", "hello a man"]
    together = enc.encode(sents, "en")
    alone = np.vstack([enc.encode([s], "en") for s in sents])
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(together[0], together[3])
    np.testing.assert_allclose(together, torch_encoder.encode(sents, "en"), rtol=0, atol=1e-6)


def test_the_numpy_encoder_knows_every_field_of_the_model_config():
    """A new field of ModelConfig (an encoder variant) needs its numpy path, or its refusal, here."""
    assert SPEC_KEYS == {f.name for f in dataclasses.fields(ModelConfig)}


def test_a_variant_it_does_not_run_falls_back_to_torch_or_is_refused(tmp_path):
    path, torch_encoder = build(tmp_path)
    state = torch.load(path, weights_only=True)
    torch.save({**state, "gru.en.weight_ih_l1": torch.zeros(72, 24)}, path)   # as a 2-layer GRU would have
    with pytest.raises(UnsupportedModel, match="does not know the weights gru.en.weight_ih_l1.*pip install"):
        load_encoder(path, "numpy")
    with pytest.raises(InputError, match="unexpected keys"):   # auto: the torch Encoder's verdict on it
        load_encoder(path, "auto")
    path2, _ = build(tmp_path, name="n")
    js = path2[:-3] + ".json"
    meta = json.loads(open(js, encoding="utf-8").read())
    meta["model"]["bidirectional"] = True
    open(js, "w", encoding="utf-8").write(json.dumps(meta))
    with pytest.raises(UnsupportedModel, match="config keys bidirectional"):
        load_encoder(path2, "numpy")
    assert load_encoder(path2, "auto").backend == "torch"
    torch.save(state, path2, _use_new_zipfile_serialization=False)   # the legacy format: torch reads it
    with pytest.raises(LegacyFormat):
        read_state_dict(path2)
    assert load_encoder(path2, "auto").backend == "torch"


def test_load_encoder_backends(tmp_path, caplog):
    path, _ = build(tmp_path)
    assert load_encoder(path).backend == "numpy"
    assert load_encoder(path, "torch").backend == "torch"
    if not torch.cuda.is_available():
        assert load_encoder(path, "auto", device="cuda").backend == "numpy"
        assert "CUDA is not available" in caplog.text
    with pytest.raises(InputError, match="unknown encoder backend 'jax'"):
        load_encoder(path, "jax")
    with pytest.raises(InputError, match="runs on the CPU"):
        NumpyEncoder.load(path).encode(["a man"], "en", device="cuda")


DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool)


def test_the_reader_gives_torch_load_s_arrays(tmp_path):
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 10, generator=g)
    state = OrderedDict()
    for dtype in DTYPES:
        state[f"t.{dtype}"] = (base * 50).to(dtype)
    shared = torch.randn(8, 9, generator=g)
    state.update({"view.t": shared.t(), "view.slice": shared[2:5, 1::3], "view.row": shared[3], "whole": shared,
                  "empty": torch.zeros(0, 4), "scalar": torch.tensor(3.5)})
    for name, obj in (("dict", dict(state)), ("ordered", state), ("module", MLMME(ModelConfig(["en"], {"en": 5},
                                                                                               4, 6, 6)).state_dict())):
        p = tmp_path / f"{name}.pt"
        torch.save(obj, p)
        ours, theirs = read_state_dict(str(p)), torch.load(p, weights_only=True)
        assert list(ours) == list(theirs)
        for key, tensor in theirs.items():
            want = tensor.float().numpy() if tensor.dtype == torch.bfloat16 else tensor.numpy()
            assert ours[key].dtype == want.dtype and ours[key].shape == want.shape, key
            np.testing.assert_array_equal(ours[key], want)
            assert ours[key].flags.c_contiguous and ours[key].flags.writeable


def big_endian_copy(src, dst, itemsizes):
    """The torch file `src` rewritten as a big-endian machine saves it: byteorder "big", every
    storage's elements byte-swapped (`itemsizes`: storage key -> element size)."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as new:
        for info in old.infolist():
            data = old.read(info.filename)
            if info.filename.endswith("/byteorder"):
                data = b"big"
            key = info.filename.rsplit("/", 1)[-1]
            if "/data/" in info.filename and itemsizes[key] > 1:
                data = np.frombuffer(data, dtype=f"<u{itemsizes[key]}").astype(f">u{itemsizes[key]}").tobytes()
            new.writestr(info, data)


def test_the_reader_reads_big_endian_files(tmp_path):
    state = {"a": torch.randn(3, 4), "b": torch.arange(5), "c": torch.randn(2).half(), "d": torch.tensor([True])}
    torch.save(state, tmp_path / "little.pt")
    big_endian_copy(tmp_path / "little.pt", tmp_path / "big.pt", {"0": 4, "1": 8, "2": 2, "3": 1})
    ours, theirs = read_state_dict(str(tmp_path / "big.pt")), torch.load(tmp_path / "big.pt", weights_only=True)
    for key, tensor in state.items():
        np.testing.assert_array_equal(ours[key], tensor.numpy())
        np.testing.assert_array_equal(theirs[key].numpy(), tensor.numpy())   # torch reads the copy alike
        assert ours[key].dtype.isnative


def test_the_s_s_feature_and_the_mbr_utility_give_the_same_values_on_both_backends(tmp_path):
    path, _ = build(tmp_path, languages=("en", "de"))
    hyps = sentences("de", n=40)
    lines = [f"{i // 5} ||| {h} ||| nmt= {-i / 10} ||| {-i / 10}" for i, h in enumerate(hyps)]
    (tmp_path / "in.nbest").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "src.en").write_text("\n".join(sentences("en", n=8)) + "\n", encoding="utf-8")
    columns = {}
    for backend in ("numpy", "torch"):
        out = tmp_path / f"{backend}.nbest"
        assert main(["features", str(tmp_path / "in.nbest"), "--src", str(tmp_path / "src.en"), "-m", path,
                     "--mlmme-backend", backend, "--quiet", "-o", str(out)]) == 0
        columns[backend] = read_nbest(str(out)).column("s_s")
    np.testing.assert_allclose(columns["numpy"], columns["torch"], rtol=0, atol=1e-5)   # the file's decimals
    nbest = read_nbest(str(tmp_path / "in.nbest"))
    mbr = {}
    for backend in ("numpy", "torch"):
        utility = MLMMEMBRUtility(path, lang="de", backend=backend)
        assert utility.encoder.backend == backend
        mbr[backend] = mbr_scores(nbest, nbest.column("nmt"), MBROptions(utility="mlmme"), model=utility)
    np.testing.assert_allclose(mbr["numpy"], mbr["torch"], rtol=0, atol=1e-4)


def test_reader_refusals_name_the_file(tmp_path):
    p = tmp_path / "x.pt"
    torch.save({"a": torch.zeros(2)}, p)
    raw = p.read_bytes()
    p.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(WeightsError, match=f"{p}: cannot read the model weights: a damaged or truncated"):
        read_state_dict(str(p))
    torch.save([torch.zeros(2)], p)
    with pytest.raises(WeightsError, match="expected a state_dict .names -> tensors., found a list"):
        read_state_dict(str(p))
    torch.save({"a": 1}, p)
    with pytest.raises(WeightsError, match="found a dict of other values than tensors"):
        read_state_dict(str(p))
