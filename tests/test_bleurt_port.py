"""BLEURT read from the PyTorch port's own layout (lucadiliello/bleurt-pytorch's save_pretrained:
config.json of model_type "bleurt", BleurtForSequenceClassification's state_dict, spm.model with
BleurtSPTokenizer's tokenizer_config.json), as tiny_models.build_bleurt_port writes it without
the port.

Parity: our scores equal BleurtForSequenceClassification's forward re-stated here in plain torch on
the port's own weight names (embeddings, input projection when the config has embedding_size,
BERT layers, the tanh pooler, the classifier; no transformers class), on the token ids of the
tokenizer libraries themselves ("[CLS] reference [SEP] candidate [SEP]": sentencepiece on
spm.model, as the port's DebertaV2 tokenizer builds them, or a WordPiece vocab.txt, the older
checkpoints'), with and without the input projection, from safetensors and from
pytorch_model.bin. (benchmarks/bench_bleurt_port.py checks the same against the port itself,
which is a peer and not installed here.) Refusals: a config.json of another model, a port
directory without its tokenizer, weights of another head, pickled code, protobuf missing under
transformers 5: one line each."""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import pytest
import torch

from rerank.cli import main
from rerank.errors import InputError
from rerank.io import read_lines
from rerank.metrics import bleurt, pair_models
from rerank.recipes import tiny_models

pytestmark = pytest.mark.neural

os.environ.setdefault("HF_HUB_OFFLINE", "1")
EVAL = os.path.join(os.path.dirname(__file__), "data", "eval")
N = 8
REF = read_lines(os.path.join(EVAL, "ref.en"))[:N]
CAP1 = read_lines(os.path.join(EVAL, "cap1.en"))[:N]
PAIRS = list(zip(CAP1, REF)) + [("", REF[0]), ("Ünïcödé «quotes» — 42!", REF[1])]


@pytest.fixture(scope="module")
def ports(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("bleurt_port")
    lines = tiny_models.read_text(tiny_models.DEFAULT_TEXT)[:2000]
    return {"projection": tiny_models.build_bleurt_port(str(root / "projection"), lines, seed=2),
            "no projection": tiny_models.build_bleurt_port(str(root / "plain"), lines, seed=3, embedding=None,
                                                           weights="pytorch_model.bin"),
            "wordpiece": tiny_models.build_bleurt_port(str(root / "wordpiece"), lines, seed=4, tokenizer="wordpiece")}


def port_weights(path: str) -> dict:
    if os.path.isfile(os.path.join(path, "model.safetensors")):
        from safetensors.torch import load_file

        return load_file(os.path.join(path, "model.safetensors"))
    return torch.load(os.path.join(path, "pytorch_model.bin"), weights_only=True)


def sentencepiece_ids(path: str, hyp: str, ref: str) -> tuple[list[int], list[int]]:
    """The pair's ids and types from the tokenizer library itself: sentencepiece on spm.model, or
    for a WordPiece vocab.txt the tokenizers library's BertWordPieceTokenizer (lower case)."""
    if not os.path.isfile(os.path.join(path, "spm.model")):
        from tokenizers import BertWordPieceTokenizer

        encoded = BertWordPieceTokenizer(os.path.join(path, "vocab.txt"), lowercase=True).encode(ref, hyp)
        return encoded.ids, encoded.type_ids
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(path, "spm.model"))
    cls, sep = sp.piece_to_id("[CLS]"), sp.piece_to_id("[SEP]")
    first, second = [cls, *sp.encode(ref), sep], [*sp.encode(hyp), sep]
    return first + second, [0] * len(first) + [1] * len(second)


def restated_forward(path: str, hyp: str, ref: str) -> float:
    """BleurtForSequenceClassification's forward in plain torch on the port's names, one pair."""
    F = torch.nn.functional
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    w = port_weights(path)
    ids, types = (torch.tensor(x) for x in sentencepiece_ids(path, hyp, ref))

    def linear(x, name):
        return F.linear(x, w[f"bleurt.{name}.weight"], w[f"bleurt.{name}.bias"])

    def norm(x, name):
        return F.layer_norm(x, x.shape[-1:], w[f"bleurt.{name}.weight"], w[f"bleurt.{name}.bias"],
                            config["layer_norm_eps"])

    x = (w["bleurt.embeddings.word_embeddings.weight"][ids] + w["bleurt.embeddings.token_type_embeddings.weight"][types]
         + w["bleurt.embeddings.position_embeddings.weight"][: len(ids)])
    x = norm(x, "embeddings.LayerNorm")
    if config.get("embedding_size"):
        x = linear(x, "encoder.embedding_projection")
    heads = config["num_attention_heads"]
    size = config["hidden_size"] // heads
    for i in range(config["num_hidden_layers"]):
        layer = f"encoder.layer.{i}"
        q, k, v = (linear(x, f"{layer}.attention.self.{n}").view(len(ids), heads, size).transpose(0, 1)
                   for n in ("query", "key", "value"))
        attended = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(size), dim=-1) @ v
        x = norm(linear(attended.transpose(0, 1).reshape(len(ids), -1), f"{layer}.attention.output.dense") + x,
                 f"{layer}.attention.output.LayerNorm")
        x = norm(linear(F.gelu(linear(x, f"{layer}.intermediate.dense")), f"{layer}.output.dense") + x,
                 f"{layer}.output.LayerNorm")
    pooled = torch.tanh(linear(x[0], "pooler.dense"))
    return float(F.linear(pooled, w["classifier.weight"], w["classifier.bias"])[0])


@pytest.mark.parametrize("which", ["projection", "no projection", "wordpiece"])
def test_the_ports_layout_is_read_as_it_is_and_scores_as_the_ports_forward(ports, which):
    path = ports[which]
    model = bleurt.BLEURTModel(path)
    assert model.record()["layout"] == "bleurt-pytorch" and model.max_length == 256
    assert [(row["input_ids"], row["token_type_ids"]) for row in model.inputs(PAIRS)] == \
        [sentencepiece_ids(path, h, r) for h, r in PAIRS]
    ours = pair_models.cached_pair_scores(model, PAIRS, None, "test")
    with torch.no_grad():
        theirs = np.array([restated_forward(path, h, r) for h, r in PAIRS])
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    assert np.std(theirs) > 1e-3   # the inputs give different scores


def test_the_ports_directory_is_a_metric_of_eval(ports, tmp_path, capsys):
    (tmp_path / "hyp.en").write_text("\n".join(CAP1) + "\n", encoding="utf-8")
    (tmp_path / "ref.en").write_text("\n".join(REF) + "\n", encoding="utf-8")
    assert main(["eval", "-r", str(tmp_path / "ref.en"), "-b", str(tmp_path / "hyp.en"), "--metrics", "bleu",
                 "--ar", "100", "--bootstrap", "0", "--no-score-cache", "--quiet", "--bleurt-model",
                 ports["projection"], "--to", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    with torch.no_grad():
        expected = np.mean([restated_forward(ports["projection"], h, r) for h, r in zip(CAP1, REF)])
    assert {r["metric"]: r["score"] for r in out["results"]}["bleurt"] == pytest.approx(expected, abs=1e-5)


def test_what_is_not_the_ports_bleurt_is_refused_in_one_line(ports, tmp_path, monkeypatch):
    def copy(name):
        return shutil.copytree(ports["projection"], str(tmp_path / name))

    other = copy("other")
    config = json.loads(open(os.path.join(other, "config.json"), encoding="utf-8").read())
    with open(os.path.join(other, "config.json"), "w", encoding="utf-8") as f:
        json.dump({**config, "model_type": "bert"}, f)
    with pytest.raises(InputError, match="config.json has model_type 'bert', not \"bleurt\""):
        bleurt.BLEURTModel(other)

    bad_size = copy("bad_size")
    with open(os.path.join(bad_size, "config.json"), "w", encoding="utf-8") as f:
        json.dump({**config, "num_hidden_layers": "two"}, f)
    with pytest.raises(InputError, match="num_hidden_layers must be a positive integer, got 'two'"):
        bleurt.BLEURTModel(bad_size)

    untokenized = copy("untokenized")
    os.remove(os.path.join(untokenized, "spm.model"))
    with pytest.raises(InputError, match="needs its tokenizer: spm.model or vocab.txt is missing"):
        bleurt.BLEURTModel(untokenized)

    masked_lm = copy("masked_lm")   # BleurtForMaskedLM's names: no classifier, an LM head
    from safetensors.torch import load_file, save_file

    state = load_file(os.path.join(masked_lm, "model.safetensors"))
    state = {k: v for k, v in state.items() if not k.startswith("classifier.")}
    state["cls.predictions.bias"] = torch.zeros(4)
    save_file(state, os.path.join(masked_lm, "model.safetensors"))
    with pytest.raises(InputError, match=r"do not fit the config: 2 missing \(first: \['head.bias'\]\), 1 unexpected "
                                         r"\(first: \['cls.predictions.bias'\]\)"):
        pair_models.cached_pair_scores(bleurt.BLEURTModel(masked_lm), [("a", "b")], None, "t")

    pickled = copy("pickled")
    os.remove(os.path.join(pickled, "model.safetensors"))
    torch.save({"classifier.weight": torch.zeros(1, 32), "hook": os.system}, os.path.join(pickled, "pytorch_model.bin"))
    with pytest.raises(InputError, match="refused: the weights file pickles objects"):
        pair_models.cached_pair_scores(bleurt.BLEURTModel(pickled), [("a", "b")], None, "t")

    import importlib.util

    import transformers

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.startswith("google") else
                        real(name, *a))
    monkeypatch.setattr(transformers, "__version__", "5.0.0")
    with pytest.raises(InputError, match=r"needs protobuf, which is not installed: pip install 'mlmme-rerank\[hf\]'"):
        pair_models.cached_pair_scores(bleurt.BLEURTModel(ports["projection"]), [("a", "b")], None, "t")
