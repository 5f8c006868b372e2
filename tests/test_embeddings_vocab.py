"""Word and SentencePiece vocabularies of the embedding models: what a model's JSON stores reads
back to the same ids, pieces spell the tokens, the pieces come from the training text alone, and
a broken vocabulary is refused with the file named."""

import base64
import json
import os

import pytest

from rerank.embeddings.data import PoolOptions, build_pools, load_translated
from rerank.embeddings.tokenize import tokenize
from rerank.embeddings.vocab import SubwordVocab, Vocab, vocab_from_data
from rerank.errors import InputError

pytestmark = pytest.mark.neural   # sentencepiece is in the neural extra

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "embeddings", "multi30k")


def _tokens(lang="de", split="train"):
    return [tokenize(s, lang) for s in load_translated(DATA, split, [lang])[lang]]


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_pieces_round_trip_through_the_json_and_spell_the_tokens(kind):
    train = _tokens()
    vocab = SubwordVocab.build(train, 600, kind, seed=3)
    again = vocab_from_data(json.loads(json.dumps(vocab.to_data())))
    assert again.tokens == vocab.tokens and vocab.tokens[:2] == ["<pad>", "<unk>"]
    for sent in _tokens(split="val") + train[:20]:
        ids = vocab.ids(sent)
        assert again.ids(sent) == ids
        assert vocab.sp.decode(ids).split() == sent and 1 not in ids   # nothing lost, nothing unknown
    assert SubwordVocab.build(train, 600, kind, seed=3).model_proto == vocab.model_proto   # deterministic
    assert vocab.ids([]) == []


def test_the_training_text_has_no_unknown_pieces_and_words_do():
    pools, vocabs = build_pools(DATA, "train", ["en", "de"], ["task1"], options=PoolOptions(subword="bpe", subword_size=600))
    assert all(len(v) <= 600 for v in vocabs.values())
    assert not any(1 in ids for lang in ("en", "de") for ids in pools.sentences[lang])   # <unk> is id 1
    words, wv = build_pools(DATA, "train", ["en", "de"], ["task1"], options=PoolOptions(min_freq=2))
    assert isinstance(wv["de"], Vocab) and any(1 in ids for ids in words.sentences["de"])


def test_broken_vocabularies_are_refused(tmp_path):
    vocab = SubwordVocab.build(_tokens(), 400, "bpe")
    with pytest.raises(ValueError, match="base64"):
        vocab_from_data({"sentencepiece": "bpe", "model": "not base64!"})
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        vocab_from_data({"sentencepiece": "bpe", "model": base64.b64encode(b"junk").decode()})
    with pytest.raises(ValueError, match="needs \"sentencepiece\""):
        vocab_from_data({"sentencepiece": "wordpiece", "model": vocab.to_data()["model"]})
    with pytest.raises(ValueError, match="repeats words"):
        vocab_from_data(["<pad>", "<unk>", "a", "a"])
    with pytest.raises(ValueError, match="not a list of words"):
        vocab_from_data(7)
    from rerank.embeddings.train import train

    run = tmp_path / "run"
    cfg = {"word_dim": 8, "hidden_dim": 8, "joint_dim": 8, "batch_size": 16, "sources": ["task1"], "subword": "bpe",
           "subword_size": 400, "max_steps": 2, "contrastive": "sum", "validate": False, "checkpoint_minutes": 1e9}
    model = train(cfg, DATA, str(run), quiet=True)
    meta = json.load(open(model[:-3] + ".json"))
    meta["vocab"]["de"] = {"sentencepiece": "bpe", "model": "AAAA"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(meta))
    (tmp_path / "bad.pt").write_bytes(open(model, "rb").read())
    from rerank.embeddings.numpy_encoder import NumpyEncoder

    with pytest.raises(InputError, match=r"bad\.json.*'de' vocabulary: not a SentencePiece model"):
        NumpyEncoder.load(str(tmp_path / "bad.pt"))
    with pytest.raises(InputError, match="config key subword must be one of bpe, unigram or null"):
        train({**cfg, "subword": "wordpiece"}, DATA, str(tmp_path / "x"), quiet=True)
    with pytest.raises(InputError, match="config key subword_size must be an integer >= 300"):
        train({**cfg, "subword_size": 299}, DATA, str(tmp_path / "y"), quiet=True)
    with pytest.raises(InputError, match="SentencePiece cannot learn 300 bpe pieces .config key subword_size.: "
                                         ".*Vocabulary size is smaller than required_chars"):
        SubwordVocab.build([[chr(c)] for c in range(0x4E00, 0x4E00 + 100)], 300)   # 100 characters, 356 pieces
