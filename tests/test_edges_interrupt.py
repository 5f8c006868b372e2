"""Ctrl-C in training (`nmt train`, `lm train`, `embed train`): exit 130 with one line and no
traceback, whether it comes in the batch loop or while a checkpoint is written; the previous
checkpoint stays byte-identical and loadable (no temporary file left), and the run resumes."""

import json
import os
import shutil

import pytest
import torch

from rerank.embeddings.encoder import Encoder
from rerank.nmt.checkpoint import load_model
from rerank.nmt.lm import LanguageModel
from rerank.device import load_tensors
from tests.edges_helpers import run, snapshot, train_runs, write_toy_data

pytestmark = [pytest.mark.neural, pytest.mark.faults]

EMBED_DATA = os.path.join(os.path.dirname(__file__), "data", "embeddings", "multi30k")
EMBED_CFG = {"word_dim": 8, "hidden_dim": 8, "joint_dim": 8, "min_freq": 1, "batch_size": 16, "select_images": 20,
             "checkpoint_minutes": 1e9, "sources": ["task1"], "validate": False, "max_epochs": 1}


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    d = tmp_path_factory.mktemp("toy")
    write_toy_data(d)
    train_runs(d)
    (d / "cfg.json").write_text(json.dumps(EMBED_CFG))
    assert run(["embed", "train", "--config", str(d / "cfg.json"), "--data-dir", EMBED_DATA, "--out", str(d / "emb-run"),
                "--threads", "1"]) == 0
    return d


@pytest.fixture
def work(toy, tmp_path):
    shutil.copytree(toy, tmp_path / "w")
    return tmp_path / "w"


def argv(kind: str, w, epochs: int) -> list[str]:
    """Resume the toy run of `kind` for `epochs` epochs in all."""
    if kind == "nmt":
        return ["nmt", "train", "--data-dir", str(w), "--src-lang", "de", "--tgt-lang", "en", "--out", str(w / "nmt"),
                "--preset", "tiny", "--min-freq", "1", "--threads", "1", "--max-epochs", str(epochs)]
    if kind == "lm":
        return ["lm", "train", "--train", str(w / "train.de"), "--val", str(w / "val.de"), "--out", str(w / "lm"),
                "--emb-dim", "8", "--hidden", "8", "--min-freq", "1", "--threads", "1", "--max-epochs", str(epochs)]
    return ["embed", "train", "--config", str(w / "cfg.json"), "--data-dir", EMBED_DATA, "--out", str(w / "emb-run"),
            "--threads", "1", "--max-epochs", str(epochs)]


RUN_DIR = {"nmt": "nmt", "lm": "lm", "embed": "emb-run"}
CHECKPOINT = {"nmt": "last.pt", "lm": "last.pt", "embed": "checkpoint.pt"}
IN_THE_LOOP = {"nmt": "rerank.nmt.train._batch_loss", "lm": "rerank.nmt.lm._epoch", "embed": "rerank.embeddings.train.Trainer.step"}


def ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt


def interrupted_save(real_save):
    """torch.save that writes the start of a training checkpoint (the dict with the optimiser state)
    and is then interrupted; other files go through."""
    def save(obj, f, *args, **kwargs):
        if not (isinstance(obj, dict) and {"optim", "optimizer"} & set(obj)):
            return real_save(obj, f, *args, **kwargs)
        f.write(b"PK\x03\x04 the first bytes of a checkpoint")
        raise KeyboardInterrupt
    return save


def loads(kind: str, w) -> None:
    """The run's checkpoints load as its commands load them."""
    d = w / RUN_DIR[kind]
    if kind == "nmt":
        assert load_model(str(d), "last")[0] is not None and load_model(str(d), "best")[0] is not None
    elif kind == "lm":
        assert LanguageModel.load(str(d), which="last").config.emb_dim == 8
    else:
        assert set(load_tensors(str(d / "checkpoint.pt"))) == {"model", "optimizer", "state"}
        assert Encoder.load(str(d / "model.pt")).dim == 8


@pytest.mark.parametrize("kind", ["nmt", "lm", "embed"])
@pytest.mark.parametrize("where", ["in the batch loop", "while the checkpoint is written"])
def test_ctrl_c_exits_130_and_keeps_the_previous_checkpoint(work, capsys, monkeypatch, kind, where):
    d = work / RUN_DIR[kind]
    before = snapshot(d)
    if where == "in the batch loop":
        monkeypatch.setattr(IN_THE_LOOP[kind], ctrl_c)
    else:
        monkeypatch.setattr(torch, "save", interrupted_save(torch.save))
    assert run(argv(kind, work, 3)) == 130
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"rerank {kind}: interrupted" and "Traceback" not in err
    assert (d / CHECKPOINT[kind]).read_bytes() == before[CHECKPOINT[kind]]
    assert not [p for p in os.listdir(d) if p.endswith(".tmp")]
    loads(kind, work)
    monkeypatch.undo()
    assert run(argv(kind, work, 2)) == 0  # and the run resumes from it
    capsys.readouterr()
    loads(kind, work)
    assert (d / CHECKPOINT[kind]).read_bytes() != before[CHECKPOINT[kind]]


@pytest.mark.parametrize("kind", ["nmt", "lm", "embed"])
def test_a_second_trainer_of_one_run_directory_refuses_naming_the_first(work, kind, capsys):
    """One trainer per run directory (rerank.io.run_dir_lock): while another process holds it, a
    resume refuses in one line naming that process and leaves the directory as it was; once it is
    free the resume runs."""
    from tests.cli_helpers import run as run_captured
    from tests.test_output_lock import holding, release

    directory = work / RUN_DIR[kind]
    before = snapshot(directory)
    with holding(directory) as holder:
        code, out, err = run_captured(argv(kind, work, 2), capsys)
        assert code == 2 and out == "", err
        assert err.splitlines()[-1].endswith(f"{directory}: being written by another rerank process "
                                             f"(pid {holder.pid}: -c {directory}) (--wait waits until it ends)")
        assert len([x for x in err.splitlines() if "error" in x]) == 1
        assert snapshot(directory) == before
        release(holder)
    assert run(argv(kind, work, 2)) == 0
