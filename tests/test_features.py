"""`rerank features`: embedding similarities as n-best columns, sharding, image path."""

from pathlib import Path

import numpy as np
import pytest
import torch

from rerank.embeddings.encoder import Encoder, save_model
from rerank.embeddings.model import MLMME, ModelConfig
from rerank.embeddings.tokenize import tokenize
from rerank.embeddings.vocab import Vocab
from rerank.cli import main
from rerank.formats import read_nbest

pytestmark = pytest.mark.neural

SOURCES = ["two men are walking .", "a dog runs on the grass .", "a girl is reading a book ."]
NBEST = """\
0 ||| zwei männer gehen . ||| nmt= -1.5 ||| -1.5
0 ||| zwei männer laufen . ||| nmt= -2.0 ||| -2.0
0 ||| zwei männer gehen . ||| nmt= -2.5 ||| -2.5
1 ||| ein hund rennt auf dem gras . ||| nmt= -1.0 ||| -1.0
1 |||  ||| nmt= -9.0 ||| -9.0
2 ||| ein mädchen liest ein buch . ||| nmt= -0.5 ||| -0.5
2 ||| ein mädchen liest . ||| nmt= -0.7 ||| -0.7
"""


def make_model(path: Path, image_dim: int = 0, seed: int = 0) -> str:
    torch.manual_seed(seed)
    hyps = [line.split(" ||| ")[1] for line in NBEST.splitlines()]
    vocabs = {"en": Vocab.build(tokenize(s, "en") for s in SOURCES), "de": Vocab.build(tokenize(h, "de") for h in hyps)}
    cfg = ModelConfig(languages=["en", "de"], vocab_sizes={k: len(v) for k, v in vocabs.items()},
                      word_dim=8, hidden_dim=12, joint_dim=6, image_dim=image_dim)
    model = MLMME(cfg)
    with torch.no_grad():  # spread the weights so the similarities differ visibly
        for p in model.parameters():
            p.normal_(0, 0.5)
    save_model(str(path), model, vocabs, {"note": "test model"})
    return str(path)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "in.nbest").write_text(NBEST)
    (tmp_path / "src.en").write_text("\n".join(SOURCES) + "\n")
    return tmp_path


def test_s_s_equals_encoder_dot_products(files):
    model = make_model(files / "m.pt")
    out = files / "out.nbest"
    code = main(["features", "--nbest", str(files / "in.nbest"), "-m", model, "--src", str(files / "src.en"), "-o", str(out)])
    assert code == 0
    result = read_nbest(str(out))
    assert result.feature_names == ["nmt", "s_s"]
    encoder = Encoder.load(model)
    src = encoder.encode(SOURCES, "en")
    hyps = list(result.hyps)
    hyp_vecs = encoder.encode(hyps, "de", empty="zero")
    expected = np.einsum("ij,ij->i", hyp_vecs, src[result.sentence_of_hyp])
    assert np.allclose(result.column("s_s"), expected, atol=1e-6)
    assert result.column("s_s")[0] == result.column("s_s")[2]  # the repeated string
    assert result.column("s_s")[4] == 0.0  # the empty hypothesis
    assert len(set(np.round(result.column("s_s"), 6))) >= 5
    assert np.array_equal(result.column("nmt"), read_nbest(str(files / "in.nbest")).column("nmt"))


def test_shards_concatenate_to_the_whole(files):
    model = make_model(files / "m.pt")
    args = ["features", "--nbest", str(files / "in.nbest"), "-m", model, "--src", str(files / "src.en")]
    assert main(args + ["-o", str(files / "all.nbest")]) == 0
    # 3 sentences: shard 1/2 holds sentence 0, shard 2/2 sentences 1 and 2; each shard encodes
    # other strings together than the whole run does, and must still give the same bytes
    for i, first in ((1, 0), (2, 1)):
        assert main(args + ["--shard", f"{i}/2", "--id-offset", str(first), "-o", str(files / f"part{i}.nbest")]) == 0
    whole = (files / "all.nbest").read_bytes()
    assert (files / "part1.nbest").read_bytes() + (files / "part2.nbest").read_bytes() == whole
    assert whole.count(b"\n") == 7 and b"s_s= " in whole


def test_shard_without_id_offset_is_a_list_of_its_own(files):
    model = make_model(files / "m.pt")
    args = ["features", "--nbest", str(files / "in.nbest"), "-m", model, "--src", str(files / "src.en")]
    assert main(args + ["-o", str(files / "all.nbest")]) == 0
    assert main(args + ["--shard", "2/2", "-o", str(files / "own.nbest")]) == 0
    lines = (files / "own.nbest").read_text().splitlines()
    assert [line.split(" ||| ")[0] for line in lines] == ["0", "0", "1", "1"]
    own, whole = read_nbest(str(files / "own.nbest")), read_nbest(str(files / "all.nbest"))
    assert own.n_sentences == 2 and list(own.offsets) == [0, 2, 4]
    assert list(own.hyps) == list(whole.hyps)[3:]
    assert np.array_equal(own.column("s_s"), whole.column("s_s")[3:])


def test_two_models_with_prefixes_and_image_features(files):
    text_model = make_model(files / "text.pt", seed=1)
    image_model = make_model(files / "img.pt", image_dim=5, seed=2)
    rng = np.random.default_rng(0)
    images = rng.normal(size=(3, 5)).astype(np.float32)
    np.save(files / "img.npy", images)
    out = files / "out.nbest"
    code = main(["features", "--nbest", str(files / "in.nbest"), "-m", text_model, "--prefix", "vse_",
                 "-m", image_model, "--prefix", "mlmme_", "--src", str(files / "src.en"), "--images", str(files / "img.npy"),
                 "--which", "s_s,s_i,s_i_src", "-o", str(out)])
    assert code == 2  # the text-only model cannot give s_i
    code = main(["features", "--nbest", str(files / "in.nbest"), "-m", image_model, "--prefix", "mlmme_",
                 "--src", str(files / "src.en"), "--images", str(files / "img.npy"), "--which", "s_s,s_i,s_i_src", "-o", str(out)])
    assert code == 0
    result = read_nbest(str(out))
    assert result.feature_names == ["nmt", "mlmme_s_s", "mlmme_s_i", "mlmme_s_i_src"]
    encoder = Encoder.load(image_model)
    img = encoder.encode_images(images)
    src = encoder.encode(SOURCES, "en")
    hyp = encoder.encode(list(result.hyps), "de", empty="zero")
    sent = result.sentence_of_hyp
    assert np.allclose(result.column("mlmme_s_i"), np.einsum("ij,ij->i", hyp, img[sent]), atol=1e-6)
    assert np.allclose(result.column("mlmme_s_i_src"), np.einsum("ij,ij->i", src, img)[sent], atol=1e-6)


def test_bad_requests(files, capsys):
    model = make_model(files / "m.pt")
    base = ["features", "--nbest", str(files / "in.nbest"), "-m", model, "-o", str(files / "o.nbest")]
    assert main(base) == 2
    assert "s_s and s_i_src need the source sentences" in capsys.readouterr().err
    (files / "short.en").write_text("one line\n")
    assert main(base + ["--src", str(files / "short.en")]) == 2
    assert "short.en: 1 source lines for 3 n-best sentences" in capsys.readouterr().err
    assert main(base + ["--src", str(files / "src.en"), "--tgt-lang", "fr"]) == 2
    assert "the model encodes en, de, not 'fr'" in capsys.readouterr().err
    assert main(base + ["--src", str(files / "src.en"), "--shard", "3/2"]) == 2
    assert "--shard 3/2" in capsys.readouterr().err
    np.save(files / "img.npy", np.zeros((2, 5), np.float32))
    assert main(base + ["--src", str(files / "src.en"), "--images", str(files / "img.npy")]) == 2
    assert "2 feature rows, but the image list has 3 lines" in capsys.readouterr().err
    assert not (files / "o.nbest").exists()


def test_threads_flag_reaches_torch_and_leaves_the_values(files):
    """--threads is torch's thread count while s_s runs on the torch encoder (it was ignored, and
    torch's default of one spinning thread per core made the feature slow beside other jobs); the
    values do not depend on it (the numpy encoder's threads: tests/test_embeddings_numpy.py)."""
    model = make_model(files / "m.pt")
    before = torch.get_num_threads()
    outputs = []
    try:
        for threads in (2, 1):
            torch.set_num_threads(3 - threads)
            out = files / f"out{threads}.nbest"
            assert main(["features", str(files / "in.nbest"), "-m", model, "--src", str(files / "src.en"),
                         "--threads", str(threads), "--mlmme-backend", "torch", "-o", str(out)]) == 0
            assert torch.get_num_threads() == threads
            outputs.append(out.read_bytes())
    finally:
        torch.set_num_threads(before)
    assert outputs[0] == outputs[1]
