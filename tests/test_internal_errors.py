"""Bad input and bugs stay apart. Each loader of a user's file turns the exceptions a bad file
raises (named, not `Exception`) into an InputError naming the file, with the loader's exception
kept as its cause; any other exception out of the same call is a bug and propagates as itself.
The command line prints a bug's traceback and one line that says it is one, exit status 1 (never
2, which means bad input), under torchrun on the failing rank, and once, by rank 0, for another
rank's failure."""

from __future__ import annotations

import base64
import json
import sys

import pytest
import torch

from rerank import distributed, plugins
from rerank.cli import main
from rerank.device import load_tensors
from rerank.errors import InputError
from rerank.metrics import comet
from rerank.nmt import backends
from rerank.nmt.checkpoint import read_vocab
from rerank.plugins import PluginError

pytestmark = pytest.mark.neural

NBEST = "0 ||| ein hund ||| nmt= -1 ||| -1\n"
INTERNAL = "internal error (a bug in mlmme-rerank or a plug-in, not bad input)"


class Bug(Exception):
    """An exception no loader expects: what a bug in our code raises."""


def raise_bug(*args, **kwargs):
    raise Bug("a bug in the loader")


def refused_with_cause(load, cause: type[BaseException]) -> InputError:
    with pytest.raises(InputError) as refused:
        load()
    assert isinstance(refused.value.__cause__, cause), repr(refused.value.__cause__)
    return refused.value


def test_a_bad_torch_file_is_bad_input_with_the_cause_kept(tmp_path):
    good = tmp_path / "good.pt"
    torch.save({"w": torch.ones(2)}, good)
    (tmp_path / "cut.pt").write_bytes(good.read_bytes()[:100])
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "text.pt").write_text("this is not a model\n")
    assert "damaged or truncated" in str(refused_with_cause(lambda: load_tensors(str(tmp_path / "cut.pt")),
                                                            RuntimeError))
    assert "empty file" in str(refused_with_cause(lambda: load_tensors(str(tmp_path / "empty.pt")), EOFError))
    refused_with_cause(lambda: load_tensors(str(tmp_path / "text.pt")), Exception)
    refused_with_cause(lambda: comet.check_weights_only(str(tmp_path / "cut.pt")), RuntimeError)


def test_a_bug_in_torch_load_is_no_bad_input(tmp_path, monkeypatch):
    torch.save({"w": torch.ones(2)}, tmp_path / "good.pt")
    monkeypatch.setattr(torch, "load", raise_bug)
    for load in (load_tensors, comet.check_weights_only):
        with pytest.raises(Bug):
            load(str(tmp_path / "good.pt"))


def test_a_bad_hparams_yaml_is_bad_input_with_the_cause_kept(tmp_path):
    import yaml

    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "model.ckpt").write_bytes(b"")
    (tmp_path / "hparams.yaml").write_text("class_identifier: [unclosed\n")
    refused_with_cause(lambda: comet.model_kind(str(tmp_path)), yaml.YAMLError)


def test_a_bad_vocabulary_is_bad_input_with_the_cause_kept(tmp_path):
    garbage = {"sentencepiece": "bpe", "model": base64.b64encode(b"no SentencePiece model").decode("ascii")}
    for name, data, cause in (("garbage.json", garbage, ValueError),
                              ("empty.json", {**garbage, "model": ""}, ValueError),
                              ("padding.json", {**garbage, "model": "abc"}, ValueError),
                              ("keys.json", {"model": 3}, ValueError),
                              ("specials.json", ["a", "b"], ValueError)):
        (tmp_path / name).write_text(json.dumps(data))
        error = refused_with_cause(lambda name=name: read_vocab(str(tmp_path / name)), cause)
        assert str(error).startswith(f"{tmp_path / name}: not a vocabulary")
    assert isinstance(refused_with_cause(lambda: read_vocab(str(tmp_path / "garbage.json")), ValueError)
                      .__cause__.__cause__, RuntimeError)   # SentencePiece's own error, kept under the ValueError
    (tmp_path / "cut.json").write_text('["<pad>", ')
    refused_with_cause(lambda: read_vocab(str(tmp_path / "cut.json")), json.JSONDecodeError)


def test_a_bug_while_reading_a_vocabulary_is_no_bad_input(tmp_path, monkeypatch):
    from rerank.nmt import checkpoint

    (tmp_path / "vocab.json").write_text(json.dumps(["<pad>", "<unk>", "<s>", "</s>"]))
    monkeypatch.setattr(checkpoint, "vocab_from_data", raise_bug)
    with pytest.raises(Bug):
        read_vocab(str(tmp_path / "vocab.json"))


@pytest.fixture
def bad_model_dir(tmp_path):
    """A model directory whose config.json is no JSON (and no tokenizer.json to fall back on)."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_bytes(b"garbage \xff")
    return tmp_path / "model"


def test_a_bad_tokenizer_or_sentence_encoder_directory_is_bad_input_with_the_cause_kept(bad_model_dir):
    from rerank.embeddings.sentence_encoders import load_sentence_encoder

    assert "cannot load the model's tokenizer" in str(refused_with_cause(
        lambda: backends.load_tokenizer(str(bad_model_dir)), OSError))
    assert "cannot load the sentence encoder" in str(refused_with_cause(
        lambda: load_sentence_encoder(str(bad_model_dir), "cpu"), OSError))


def test_a_bug_while_loading_a_tokenizer_or_sentence_encoder_is_no_bad_input(bad_model_dir, monkeypatch):
    import sentence_transformers
    import transformers

    from rerank.embeddings.sentence_encoders import load_sentence_encoder

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", raise_bug)
    with pytest.raises(Bug):
        backends.load_tokenizer(str(bad_model_dir))
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", raise_bug)
    with pytest.raises(Bug):
        load_sentence_encoder(str(bad_model_dir), "cpu")


@pytest.fixture
def entry_points(monkeypatch):
    """Install fake plug-ins of rerank.tuners: entry_points(("name", "module:object"), ...)."""
    from importlib.metadata import EntryPoint

    def install(*entries):
        monkeypatch.setattr(plugins, "entry_points",
                            lambda group=None: [EntryPoint(n, v, group) for n, v in entries] if group == "rerank.tuners"
                            else [])
        plugins.load.cache_clear()

    yield install
    plugins.load.cache_clear()


def test_a_plugin_that_is_not_there_names_itself_with_the_cause_kept(entry_points):
    entry_points(("gone", "no_such_module_here:Tuner"))
    error = refused_with_cause(lambda: plugins.load("rerank.tuners"), ModuleNotFoundError)
    assert isinstance(error, PluginError) and "cannot load plug-in 'gone' (no_such_module_here:Tuner)" in str(error)
    entry_points(("typo", "rerank.cli:NoSuchTuner"))
    refused_with_cause(lambda: plugins.load("rerank.tuners"), AttributeError)


def test_a_plugin_whose_import_fails_otherwise_is_its_bug(entry_points, tmp_path, monkeypatch):
    (tmp_path / "buggy_rerank_plugin.py").write_text("class Tuner:\n    pass\n\n\n1 / 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "buggy_rerank_plugin", raising=False)
    entry_points(("buggy", "buggy_rerank_plugin:Tuner"))
    with pytest.raises(ZeroDivisionError):
        plugins.load("rerank.tuners")


def internal_error(argv: list[str], capsys, what: str) -> str:
    """Run a command that meets a bug: exit status 1, the traceback, then one line that says so."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback (most recent call last)" in err, err
    assert lines[-1].startswith(f"rerank {argv[0]}: {INTERNAL}: {what}") and "please report it" in lines[-1], err
    assert "error:" not in err, err
    return err


def test_a_bug_in_a_command_is_its_traceback_and_one_line_exit_1(tmp_path, monkeypatch, capsys):
    from rerank import summary as info

    (tmp_path / "in.nbest").write_text(NBEST)
    assert main(["info", str(tmp_path / "in.nbest")]) == 0
    capsys.readouterr()
    monkeypatch.setattr(info, "summarize", raise_bug)
    err = internal_error(["info", str(tmp_path / "in.nbest")], capsys, "Bug: a bug in the loader")
    assert "in raise_bug" in err   # the traceback reaches the raising frame

    def missing_module(*args, **kwargs):   # no module of an extra: a bug, not a missing install
        raise ModuleNotFoundError("No module named 'rerank.no_such_module'", name="rerank.no_such_module")

    monkeypatch.setattr(info, "summarize", missing_module)
    internal_error(["info", str(tmp_path / "in.nbest")], capsys, "ModuleNotFoundError: No module named")


def test_a_bug_in_a_model_loader_is_exit_1_never_2(tmp_path, monkeypatch, capsys):
    """The shipped embedding model, loaded through torch.load (--mlmme-backend torch) or the numpy
    encoder's reader (the default): a bug there is no bad model file."""
    from pathlib import Path

    from rerank.embeddings import numpy_encoder

    model = Path(__file__).resolve().parent.parent / "rerank" / "data" / "models" / "mlmme-small.pt"
    (tmp_path / "in.nbest").write_text(NBEST)
    (tmp_path / "src.en").write_text("a dog\n")
    monkeypatch.setattr(torch, "load", raise_bug)
    monkeypatch.setattr(numpy_encoder, "read_state_dict", raise_bug)
    for backend in ("torch", "auto"):
        internal_error(["features", str(tmp_path / "in.nbest"), "--src", str(tmp_path / "src.en"), "-m", str(model),
                        "--mlmme-backend", backend, "--quiet", "-o", str(tmp_path / "out.nbest")], capsys,
                       "Bug: a bug in the loader")
        assert not (tmp_path / "out.nbest").exists()


def test_another_ranks_bug_is_said_once_by_rank_0_exit_1(tmp_path, monkeypatch, capsys):
    """What a rank sees when another rank failed with a bug at an exchange (rerank.distributed):
    rank 0 says it in one line (the traceback is on the failing rank's stderr), the others nothing;
    every rank exits 1."""
    from rerank import summary as info

    (tmp_path / "in.nbest").write_text(NBEST)

    def peer_failed(*args, **kwargs):
        failure = distributed.PeerFailed("rank 1 failed: Bug: a bug in the loader")
        setattr(failure, distributed._SHARED, True)
        raise failure

    monkeypatch.setattr(info, "summarize", peer_failed)
    for rank, said in (("0", True), ("1", False)):
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", rank)
        assert main(["info", str(tmp_path / "in.nbest")]) == 1
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert err.splitlines() == ([f"rerank info: {INTERNAL}: rank 1 failed: Bug: a bug in the loader; please report "
                                     "it with the traceback on that rank's stderr"] if said else []), err
