"""The model commands' options and files: devices, sizes and counts that must be positive, empty
inputs, outputs that would overwrite an input, and one command line (preset words, defaults in
every help, --threads everywhere). Every refusal: exit 2, one error line, every file untouched."""

import argparse
import os
from pathlib import Path

import pytest

from rerank.cli import build_parser
from rerank.device import default_threads, resolve_device
from rerank.errors import InputError
from tests.edges_helpers import refused

pytestmark = pytest.mark.neural

EMBED_DATA = os.path.join(os.path.dirname(__file__), "data", "embeddings", "multi30k")




def bases(w) -> dict[str, list[str]]:
    """A complete command line of every command that runs torch (each would write under w)."""
    return {
        "nmt train": ["nmt", "train", "--data-dir", str(w), "--out", str(w / "run")],
        "nmt translate": ["nmt", "translate", "--model", str(w / "nmt"), "--input", str(w / "val.de"),
                          "--nbest-out", str(w / "o.nbest")],
        "lm train": ["lm", "train", "--train", str(w / "train.de"), "--val", str(w / "val.de"), "--out", str(w / "lm2")],
        "lm score": ["lm", "score", "--model", str(w / "lm"), "--input", str(w / "val.de"), "-o", str(w / "o.tsv")],
        "embed train": ["embed", "train", "--data-dir", EMBED_DATA, "--out", str(w / "emb-run")],
        "embed eval": ["embed", "eval", "--model", str(w / "emb.pt"), "--out", str(w / "report")],
        "embed encode": ["embed", "encode", "--model", str(w / "emb.pt"), "--lang", "de", "--input", str(w / "val.de"),
                         "-o", str(w / "v.npy")],
        "embed extract-image-features": ["embed", "extract-image-features", "--images", str(w), "--list",
                                         str(w / "val.de"), "--backbone", "resnet50-pool5", "--weights",
                                         str(w / "emb.pt"), "--output", str(w / "f.npy")],
        "demo": ["demo", "--out", str(w / "demo"), "--sentences", "2"],
        "recipe multi30k": ["recipe", "multi30k", "--data-dir", EMBED_DATA, "--out", str(w / "recipe")],
        "features": ["features", str(w / "in.nbest"), "--src", str(w / "src.en"), "-m", str(w / "emb.pt"),
                     "-o", str(w / "out.nbest")],
    }


@pytest.mark.parametrize("command", list(bases(Path("W"))))
@pytest.mark.parametrize("device", ["gpu0", "CUDA", "cuda:", "cuda:x", "cuda:-1", ""])
def test_an_unknown_device_is_refused_naming_the_accepted_forms(work, capsys, command, device):
    refused(bases(work)[command] + ["--device", device], capsys, work,
            f"device {device!r}: unknown device; use cpu, cuda or cuda:N (N = 0, 1, ...)")


def test_cuda_without_a_gpu_falls_back_to_the_cpu(monkeypatch, caplog):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device in ("cuda", "cuda:0", "cuda:3"):
        caplog.clear()
        assert resolve_device(device) == torch.device("cpu")
        assert [r.getMessage() for r in caplog.records] == [f"CUDA is not available ({device} requested): using the CPU"]
    assert resolve_device(None) == resolve_device("cpu") == resolve_device(torch.device("cpu")) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(InputError, match=r"device cuda:2: this machine has 2 CUDA device\(s\), cuda:0 to cuda:1"):
        resolve_device("cuda:2")


POSITIVE = "must be a positive integer, got"
# (command, option, value, words of the error)
BAD_NUMBERS = [
    *[("nmt train", o, "0", POSITIVE) for o in ("--batch-size", "--min-freq", "--subword-size", "--max-epochs",
                                                 "--patience", "--threads")],
    ("nmt train", "--max-minutes", "0", "must be a positive finite number"),
    ("nmt train", "--max-minutes", "-5", "must be a positive finite number"),
    ("nmt train", "--lr", "0", "must be a positive finite number"),
    ("nmt train", "--dropout", "1", "must be a number in [0, 1)"),
    ("nmt train", "--l2", "-1", "must be a finite number >= 0"),
    ("nmt train", "--seed", "-1", "must be 0 or more"),
    *[("nmt translate", o, "0", POSITIVE) for o in ("--beam", "--nbest", "--max-src-len", "--batch-size", "--threads")],
    ("nmt translate", "--batch-size", "-3", POSITIVE),
    ("nmt translate", "--max-len-ratio", "0", "must be a positive finite number"),
    ("nmt translate", "--alpha", "-1", "must be a finite number >= 0"),
    *[("lm train", o, "0", POSITIVE) for o in ("--emb-dim", "--hidden", "--min-freq", "--subword-size", "--batch-size",
                                                "--max-epochs", "--patience", "--threads")],
    ("lm train", "--max-minutes", "0", "must be a positive finite number"),
    ("lm train", "--lr", "-1", "must be a positive finite number"),
    ("lm train", "--dropout", "1.5", "must be a number in [0, 1)"),
    *[("lm score", o, "0", POSITIVE) for o in ("--batch-size", "--threads")],
    *[("embed train", o, "0", POSITIVE) for o in ("--max-epochs", "--threads")],
    ("embed train", "--max-minutes", "0", "must be a positive finite number"),
    ("embed eval", "--threads", "0", POSITIVE),
    *[("embed encode", o, "0", POSITIVE) for o in ("--batch-size", "--threads")],
    *[("embed extract-image-features", o, "0", POSITIVE) for o in ("--batch-size", "--threads")],
    *[("demo", o, "0", POSITIVE) for o in ("--nbest-size", "--runs", "--epochs", "--ar", "--sentences", "--threads")],
    ("demo", "--bootstrap", "1", "must be 0 (no s_sel or intervals) or at least 2, got 1"),
    *[("recipe multi30k", o, "0", POSITIVE) for o in ("--runs", "--epochs", "--ar", "--nmt-max-epochs",
                                                       "--embed-max-epochs", "--threads")],
    *[("recipe multi30k", o, "0", "must be a positive finite number") for o in ("--nmt-max-minutes",
                                                                              "--embed-max-minutes")],
    ("recipe multi30k", "--nbest", "20,0", "must be a comma-separated list of positive integers, got '20,0'"),
    ("recipe multi30k", "--nbest", "20,x", "must be a comma-separated list of positive integers"),
    ("recipe multi30k", "--betas", "1,1.5", "must be a comma-separated list of numbers in [0, 1]"),
    *[("features", o, "0", POSITIVE) for o in ("--batch-size", "--chunk-sentences", "--channel-batch-size",
                                                "--lm-batch-size")],
]


@pytest.mark.parametrize("command,option,value,words", BAD_NUMBERS)
def test_a_size_or_count_out_of_range_is_refused(work, capsys, command, option, value, words):
    refused(bases(work)[command] + [option, value], capsys, work, f"argument {option}", words)


@pytest.mark.parametrize("key,value,words", [
    ("batch_size", 0, "config key batch_size must be an integer >= 1, got 0"),
    ("batch_size", "16", "config key batch_size must be an integer >= 1, got '16'"),
    ("negatives", -2, "config key negatives must be an integer >= 1, got -2"),
    ("max_steps", 0, "config key max_steps must be an integer >= 1, got 0"),
    ("lr", 0, "config key lr must be a number > 0, got 0"),
    ("dropout", 1, "config key dropout must be a number in [0, 1), got 1"),
    ("checkpoint_minutes", -1, "config key checkpoint_minutes must be a number > 0, got -1"),
    ("beta", True, "config key beta must be a number in [0, 1], got True"),
    ("sources", ["task3"], "config key sources: a list of task1 and/or task2, got ['task3']"),
    ("languages", "en,de", "config key languages must be a JSON list, got 'en,de'"),
    ("image_features", "train.npy", "config key image_features must be a JSON object, got 'train.npy'"),
])
def test_an_embedding_config_value_out_of_range_is_refused(work, capsys, key, value, words):
    import json

    (work / "cfg.json").write_text(json.dumps({key: value}))
    refused(bases(work)["embed train"] + ["--config", str(work / "cfg.json")], capsys, work, words)


@pytest.mark.parametrize("command,words", [
    ("nmt translate", "val.de: no lines to translate (the input is empty)"),
    ("lm score", "val.de: no lines to score (the input is empty)"),
    ("embed encode", "val.de: no lines to encode (the input is empty)"),
])
def test_an_empty_input_is_refused(work, capsys, command, words):
    (work / "val.de").write_bytes(b"")
    refused(bases(work)[command], capsys, work, words)


def test_empty_training_text_is_refused(work, capsys):
    (work / "train.de").write_bytes(b"\n\n")
    refused(bases(work)["lm train"], capsys, work, "train.de: no training sentences")


def _outputs(w) -> list[tuple[str, list[str], str]]:
    """(command, argv, words): an output that is an input, a directory, or in a missing folder."""
    val, link = str(w / "val.de"), str(w / "link.de")
    translate = ["nmt", "translate", "--model", str(w / "nmt"), "--input", val]
    score = ["lm", "score", "--model", str(w / "lm"), "--input", val]
    encode = ["embed", "encode", "--model", str(w / "emb.pt"), "--lang", "de", "--input", val]
    same = "the output is also the input"
    return [
        ("nmt translate", translate + ["--nbest-out", val], same),
        ("nmt translate", translate + ["--output", link], same),
        ("nmt translate", translate + ["--output", "val.de"], same),
        ("nmt translate", translate + ["--output", "./nmt/../sub/../val.de", "--ref", str(w / "train.de")], same),
        ("nmt translate", translate + ["--ref", str(w / "src.en"), "--scores-out", str(w / "src.en")], same),
        ("nmt translate", translate + ["--nbest-out", str(w / "nmt" / "best.pt")], same),
        ("nmt translate", translate + ["--nbest-out", str(w / "o"), "--output", str(w / "o")], "two outputs are the same"),
        ("nmt translate", translate + ["--output", str(w / "nmt")], "is a directory, not a file"),
        ("nmt translate", translate + ["--nbest-out", str(w / "missing" / "o.nbest")], "its folder"),
        ("nmt translate", translate + ["--scores-out", str(w / "s.json")], "--scores-out needs --ref"),
        ("lm score", score + ["-o", val], same),
        ("lm score", score + ["-o", link], same),
        ("lm score", score + ["-o", str(w / "lm" / "vocab.json")], same),
        ("lm score", score + ["-o", str(w / "lm")], "is a directory, not a file"),
        ("lm score", score + ["-o", str(w / "missing" / "o.tsv")], "does not exist"),
        ("embed encode", encode + ["-o", "val.de"], same),
        ("embed encode", encode + ["-o", str(w / "emb.json")], same),
        ("embed encode", encode + ["--output", str(w)], "is a directory, not a file"),
        ("embed encode", encode + ["-o", str(w / "missing" / "v.npy")], "does not exist"),
        ("embed eval", ["embed", "eval", "--model", str(w / "emb.pt"), "--out", str(w / "emb")], same),
        ("nmt train", ["nmt", "train", "--data-dir", str(w), "--out", val], "the run directory is a file"),
        ("lm train", ["lm", "train", "--train", val, "--val", val, "--out", str(w / "val.de" / "run")],
         f"cannot create it: {w / 'val.de'} is a file"),
        ("embed train", ["embed", "train", "--data-dir", EMBED_DATA, "--out", val], "the run directory is a file"),
    ]


@pytest.mark.parametrize("case", range(len(_outputs(Path("W")))))
def test_an_output_that_would_overwrite_an_input_or_cannot_be_written_is_refused(work, capsys, monkeypatch, case):
    os.symlink(work / "val.de", work / "link.de")
    (work / "sub").mkdir()
    monkeypatch.chdir(work)
    _, argv, words = _outputs(work)[case]
    refused(argv, capsys, work, words)


def subparser(*path):
    parser = build_parser()
    for name in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return parser


TORCH_COMMANDS = [c.split() for c in bases(Path("W")) if c != "features"]


@pytest.mark.parametrize("path", TORCH_COMMANDS, ids=" ".join)
def test_every_option_shows_its_default_and_threads_and_device_are_everywhere(path):
    parser = subparser(*path)
    options = {a.option_strings[-1]: a for a in parser._actions if a.option_strings}
    missing = [name for name, a in options.items()
               if not a.required and a.nargs != 0 and a.help != argparse.SUPPRESS and "default" not in (a.help or "")]
    assert missing == []
    assert options["--threads"].default == default_threads() and options["--device"].default == "cpu"
    with pytest.raises(argparse.ArgumentTypeError):
        options["--threads"].type("0")


def test_presets_are_the_same_words_in_embed_and_nmt_and_the_old_spellings_still_work():
    nmt, embed = subparser("nmt", "train"), subparser("embed", "train")
    choices = [next(a for a in p._actions if "--preset" in a.option_strings).choices for p in (nmt, embed)]
    assert choices[0] == choices[1] == ["paper", "cpu", "small", "tiny"]
    for parser, base in ((nmt, ["--out", "x"]), (embed, ["--out", "x", "--data-dir", "d"])):
        assert parser.parse_args(base + ["--size", "small"]).preset == "small"
        assert parser.parse_args(base + ["--preset", "tiny"]).preset == "tiny"


@pytest.mark.parametrize("cores,load,threads", [(2, 0.0, 2), (2, 0.6, 1), (2, 3.3, 1), (8, 1.0, 2), (1, 0.0, 1)])
def test_the_default_thread_count_leaves_busy_cores_alone(monkeypatch, cores, load, threads):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert default_threads() == threads


def test_a_run_directory_in_new_folders_is_created(work):
    from rerank.cli import main

    out = work / "runs" / "de" / "lm"
    assert main(bases(work)["lm train"][:-1] + [str(out), "--emb-dim", "4", "--hidden", "4", "--max-epochs", "1",
                                                 "--threads", "1"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["DONE.json", "best.pt", "config.json", "last.pt", "vocab.json"]
