"""Broken model files and image feature files: every command that loads them (embed encode/eval,
features -m/--images, nmt translate, the channel and lm features, lm score) stops with exit 2 and
one error line naming the file, writes nothing and leaves every file as it was."""

import collections
import json

import numpy as np
import pytest
import torch

from rerank.nmt.checkpoint import load_model
from rerank.nmt.lm import LanguageModel
from rerank.cli import main
from tests.edges_helpers import refused

pytestmark = pytest.mark.neural

# kind -> (model argument, weights file, config file, vocabulary file) inside a copy of the toy runs
FILES = {
    "embed": ("emb.pt", "emb.pt", "emb.json", "emb.json"),
    "nmt": ("nmt", "nmt/best.pt", "nmt/config.json", "nmt/vocab.tgt.json"),
    "lm": ("lm", "lm/best.pt", "lm/config.json", "lm/vocab.json"),
}




def commands(kind: str, w) -> list[list[str]]:
    """Every command line that loads a model of `kind` (all would write under w/out)."""
    model = str(w / FILES[kind][0])
    feats = ["features", str(w / "in.nbest"), "--src", str(w / "src.en"), "-o", str(w / "out.nbest")]
    if kind == "embed":
        return [["embed", "encode", "--model", model, "--lang", "de", "--input", str(w / "val.de"), "-o", str(w / "v.npy")],
                ["embed", "eval", "--model", model, "--out", str(w / "report")],
                feats + ["-m", model]]
    if kind == "nmt":
        return [["nmt", "translate", "--model", model, "--input", str(w / "val.de"), "--nbest-out", str(w / "o.nbest")],
                feats + ["--which", "channel", "--channel-model", model]]
    return [["lm", "score", "--model", model, "--input", str(w / "val.de"), "-o", str(w / "o.tsv")],
            feats + ["--which", "lm", "--lm-model", model]]


def _edit_state(path, edit):
    state = torch.load(path, weights_only=True)
    edit(state)
    torch.save(state, path)


def _rename_first(state):
    key = next(iter(state))
    state["renamed." + key] = state.pop(key)


def _grow_first_matrix(state):
    key = next(k for k, v in state.items() if v.dim() == 2)
    state[key] = torch.cat([state[key], state[key][:1]])


def _edit_json(path, edit):
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(edit(data)), encoding="utf-8")


def _vocab_plus_one(kind):
    if kind == "embed":
        return lambda meta: {**meta, "vocab": {**meta["vocab"], "de": meta["vocab"]["de"] + ["neu"]}}
    return lambda words: words + ["neu"]


def _vocab_broken(kind):
    if kind == "embed":
        return lambda meta: {**meta, "vocab": {**meta["vocab"], "de": 42}}
    return lambda words: ["<pad>", 1, 2]


def _drop_model_key(data):
    data.pop("model" if "model" in data else "lm")
    return data


class OrderedCounter(collections.Counter):
    """A class torch.load(weights_only=True) must refuse to unpickle."""


# corruption -> (what it does to the files, words the error line holds besides the file name)
CORRUPTIONS = {
    "text file named .pt": (lambda w, f, k: (w / f[1]).write_text("this is not a model\n"),
                            "not a PyTorch file (it starts with b'this')"),
    "truncated .pt": (lambda w, f, k: (w / f[1]).write_bytes((w / f[1]).read_bytes()[:300]),
                      "a damaged or truncated PyTorch file"),
    "empty .pt": (lambda w, f, k: (w / f[1]).write_bytes(b""), "an empty file, not a PyTorch file"),
    "pickled object in the .pt": (lambda w, f, k: torch.save({"x": OrderedCounter()}, w / f[1]),
                                  "weights_only loading refuses"),
    "config not JSON": (lambda w, f, k: (w / f[2]).write_text('{"model": {"src_vocab": '), "not JSON"),
    "config without its keys": (lambda w, f, k: _edit_json(w / f[2], _drop_model_key), "config"),
    "bare tensor": (lambda w, f, k: torch.save(torch.zeros(4, 3), w / f[1]), "found a bare tensor of shape (4, 3)"),
    "state_dict with a renamed key": (lambda w, f, k: _edit_state(w / f[1], _rename_first), "1 missing keys"),
    "state_dict with a wrong shape": (lambda w, f, k: _edit_state(w / f[1], _grow_first_matrix), "has shape"),
    "vocabulary of another size": (lambda w, f, k: _edit_json(w / f[3], _vocab_plus_one(k)), "model was built with"),
    "corrupt vocabulary": (lambda w, f, k: _edit_json(w / f[3], _vocab_broken(k)), "vocabulary"),
}


@pytest.mark.parametrize("kind", FILES)
@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_broken_model_is_refused_naming_its_file(work, capsys, kind, corruption):
    corrupt, words = CORRUPTIONS[corruption]
    files = FILES[kind]
    corrupt(work, files, kind)
    target = {"text file named .pt": 1, "truncated .pt": 1, "empty .pt": 1, "pickled object in the .pt": 1,
              "bare tensor": 1, "state_dict with a renamed key": 1,
              "state_dict with a wrong shape": 1, "vocabulary of another size": 3, "corrupt vocabulary": 3}.get(corruption, 2)
    for argv in commands(kind, work):
        refused(argv, capsys, work, str(work / files[target]) + ":", words)


def test_the_intact_models_load(toy):
    """The fixture's models are sound: the refusals above come from the corruptions alone."""
    assert load_model(str(toy / "nmt"), "last")[3]["train"]["src_lang"] == "de"
    assert LanguageModel.load(str(toy / "lm")).score(["ein hund"])[1] == [3]


def test_a_missing_run_directory_is_named(work, capsys):
    refused(commands("nmt", work)[0][:2] + ["--model", str(work / "none"), "--input", str(work / "val.de")], capsys,
            work, "none: no best.pt in the model directory")
    refused(commands("lm", work)[1][:-1] + [str(work / "none")], capsys, work,
            "none: not a model directory (a `rerank nmt/lm train` run")
    refused(commands("nmt", work)[1][:-1] + [str(work)], capsys, work,
            f"{work}: not a model directory: no config.json")


def _save(path, array, **kw):
    np.save(path, array, **kw)
    return str(path)


def _text(path):
    path.write_text("0.1 0.2\n")
    return str(path)


def _empty(path):
    path.write_bytes(b"")
    return str(path)


def _two_arrays(path):
    np.savez(path.with_suffix(".npz"), a=np.zeros((2, 5)), b=np.zeros((2, 5)))
    return str(path.with_suffix(".npz"))


def _truncated(path):
    np.save(path, np.zeros((2, 5)))
    path.write_bytes(path.read_bytes()[:100])
    return str(path)


# bad image feature file -> (what to write, words of the error)
IMAGES = {
    "strings": (lambda p: _save(p, np.array([["a"] * 5, ["b"] * 5])), "must be numbers, found dtype <U1"),
    "objects": (lambda p: _save(p, np.array([[1, "a"], [2, None]], dtype=object), allow_pickle=True),
                "object arrays are refused"),
    "one-dimensional": (lambda p: _save(p, np.zeros(5, np.float32)), "must be a 2-d array (rows x dims), got shape (5,)"),
    "wrong row count": (lambda p: _save(p, np.zeros((3, 5), np.float32)), "3 feature rows, but the image list has 2"),
    "wrong dimension": (lambda p: _save(p, np.zeros((2, 4), np.float32)), "feature dimension 4, but the model"),
    "not finite": (lambda p: _save(p, np.array([[0.0] * 5, [np.nan] * 5])), "row 2 holds a value that is not a finite"),
    "text file named .npy": (_text, "not a .npy/.npz array file"),
    "truncated": (_truncated, "a damaged or truncated .npy/.npz file"),
    "empty file": (_empty, "an empty file, not a .npy/.npz file"),
    "two arrays in an .npz": (_two_arrays, "expected one array (or one named 'features'), found ['a', 'b']"),
    "complex numbers": (lambda p: _save(p, np.zeros((2, 5), np.complex64)), "must be numbers, found dtype complex64"),
}


@pytest.mark.parametrize("bad", IMAGES)
def test_a_bad_image_feature_file_is_refused(work, capsys, bad):
    make, words = IMAGES[bad]
    path = make(work / "images.npy")
    features = ["features", str(work / "in.nbest"), "--src", str(work / "src.en"), "-m", str(work / "img.pt"),
                "--which", "s_s,s_i", "--images", path, "-o", str(work / "out.nbest")]
    refused(features, capsys, work, f"{path}: ", words)
    if bad != "wrong row count":  # encode takes any number of rows
        encode = ["embed", "encode", "--model", str(work / "img.pt"), "--image-features", path, "-o", str(work / "v.npy")]
        refused(encode, capsys, work, f"{path}: ", words)


def test_good_image_features_encode(work, capsys):
    np.savez(work / "images.npz", np.ones((2, 5), np.float64))  # float64 in an .npz: read as float32
    assert main(["embed", "encode", "--model", str(work / "img.pt"), "--image-features", str(work / "images.npz"),
                 "-o", str(work / "v.npy"), "--threads", "1"]) == 0
    vec = np.load(work / "v.npy")
    assert vec.shape == (2, 6) and np.allclose(np.linalg.norm(vec, axis=1), 1.0, atol=1e-6)
    refused(["embed", "encode", "--model", str(work / "emb.pt"), "--image-features", str(work / "images.npz"),
             "-o", str(work / "w.npy")], capsys, work, "emb.pt: this model was trained without images")
