"""`torchrun --nproc_per_node N -m rerank features` (rerank.distributed): the ranks split the model
features' work and rank 0 writes what one process writes, byte for byte (s_s under the shipped
model; users' models: a Hugging Face translation model, a CTranslate2 LM and a
sentence-transformers encoder, with a score cache the ranks share); bad input on every rank, or on
one rank alone, stops every rank with exit status 2 and one error line, nothing written, no hang;
one process (no torchrun, or WORLD_SIZE=1) is what it was. Two real ranks, gloo, one thread each,
on the first sentences of a shipped list."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rerank import api, cli, distributed
from rerank.cli import main
from rerank.errors import InputError
from rerank.io import read_lines
from rerank.score_cache import ScoreCache
from tests.cli_helpers import HANG_SECONDS

pytestmark = pytest.mark.neural

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "rerank" / "data" / "multi30k"
MODEL = str(REPO / "rerank" / "data" / "models" / "mlmme-small.pt")
ERROR = "rerank features: error:"


@pytest.fixture(scope="module")
def lists(tmp_path_factory):
    """The first 30 and 12 sentences of the shipped optimised val 20-best list, with their sources."""
    d = tmp_path_factory.mktemp("lists")
    whole = api.read_nbest(str(DATA / "optimised.val.20best.gz"))
    sources = read_lines(str(DATA / "val.en.gz"))
    for n in (30, 12):
        api.write_nbest(whole.select_sentences(range(n)), str(d / f"val{n}.nbest"))
        (d / f"val{n}.en").write_text("\n".join(sources[:n]) + "\n", encoding="utf-8")
    return d


def environment(**extra) -> dict:
    """The ranks' environment: one thread, offline, and Python's fault handler, so that a rank that
    aborts in native code leaves its Python stack in the test's failure message."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONFAULTHANDLER": "1",
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}


def torchrun(args: list[str], nproc: int = 2, cwd=None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               "-m", "rerank", *args]
    return subprocess.run(command, env=environment(), cwd=cwd, capture_output=True, text=True, timeout=HANG_SECONDS)


def launch_ranks(args: list[str], cwds: list[Path]) -> list[subprocess.CompletedProcess]:
    """The ranks torchrun would start, with its variables set by hand, each in its own folder (as on
    two nodes), so that each rank's exit status is seen."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-m", "rerank", *args], cwd=cwd, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE,
                              env=environment(WORLD_SIZE=str(len(cwds)), RANK=str(rank), LOCAL_RANK=str(rank),
                                              MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)))
             for rank, cwd in enumerate(cwds)]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=HANG_SECONDS)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if ERROR in line]


def test_two_ranks_write_the_bytes_of_one_process_for_s_s(lists, tmp_path):
    args = ["features", str(lists / "val30.nbest"), "--src", str(lists / "val30.en"), "--which", "s_s", "-m", MODEL,
            "--quiet", "-o"]
    assert main(args + [str(tmp_path / "one.nbest")]) == 0
    run = torchrun(args + [str(tmp_path / "two.nbest")])
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "two.nbest").read_bytes() == (tmp_path / "one.nbest").read_bytes()
    assert run.stderr.count("is a text-only model") == 1   # notes from rank 0 alone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.nbest", "two.nbest"]


def test_two_ranks_write_the_bytes_of_one_process_for_users_models(lists, tiny, tmp_path):
    """channel: a Hugging Face Marian model; lm: a CTranslate2 GPT-2; sim: a sentence-transformers
    encoder. The ranks fill one score cache: every distinct pair once, and a re-run from it gives
    the same bytes."""
    nbest, sources = lists / "val12.nbest", lists / "val12.en"
    args = ["features", str(nbest), "--src", str(sources), "--which", "channel,channel_norm,lm,sim", "--replace",
            "--channel-model", tiny["marian"], "--lm-model", tiny["gpt2_ct2"], "--sim-model", tiny["st"],
            "--channel-batch-tokens", "512", "--quiet"]
    assert main(args + ["--no-score-cache", "-o", str(tmp_path / "one.nbest")]) == 0
    cache = str(tmp_path / "scores.sqlite")
    run = torchrun(args + ["--score-cache", cache, "-o", str(tmp_path / "two.nbest")])
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "two.nbest").read_bytes() == (tmp_path / "one.nbest").read_bytes()
    listed, text = api.read_nbest(str(nbest)), read_lines(str(sources))
    pairs = set(zip((text[i] for i in listed.sentence_of_hyp.tolist()), listed.hyps))
    assert len(ScoreCache(cache)) == 2 * len(pairs) + len(set(listed.hyps))   # channel and sim pairs, lm texts
    assert main(args + ["--score-cache", cache, "-o", str(tmp_path / "again.nbest")]) == 0
    assert (tmp_path / "again.nbest").read_bytes() == (tmp_path / "one.nbest").read_bytes()


def test_bad_input_stops_both_ranks_with_one_error_line_and_writes_nothing(lists, tmp_path):
    """29 source lines for 30 sentences: every rank finds it; rank 0 says it once and exits 2 (torchrun
    itself then exits 1 with its failure report)."""
    (tmp_path / "short.en").write_text("\n".join(read_lines(str(lists / "val30.en"))[:29]) + "\n", encoding="utf-8")
    run = torchrun(["features", str(lists / "val30.nbest"), "--src", str(tmp_path / "short.en"), "--which", "s_s",
                    "-m", MODEL, "--quiet", "-o", str(tmp_path / "out.nbest")])
    assert run.returncode != 0
    assert error_lines(run.stdout + run.stderr) == [f"{ERROR} {tmp_path / 'short.en'}: 29 source lines for 30 n-best "
                                                    f"sentences in {lists / 'val30.nbest'}"]
    assert "exitcode  : 2" in run.stderr
    assert not (tmp_path / "out.nbest").exists()


def test_a_failure_on_one_rank_alone_stops_every_rank_with_exit_status_2(lists, tmp_path):
    """The sources are missing where rank 1 runs (a node without the file): rank 0, already at its
    work, learns it at its next exchange; both exit 2, one error line, nothing written, no hang."""
    cwds = [tmp_path / "node0", tmp_path / "node1"]
    for cwd in cwds:
        cwd.mkdir()
    (cwds[0] / "src.en").write_bytes((lists / "val30.en").read_bytes())
    ranks = launch_ranks(["features", str(lists / "val30.nbest"), "--src", "src.en", "--which", "s_s", "-m", MODEL,
                          "--quiet", "-o", str(tmp_path / "out.nbest")], cwds)
    assert [rank.returncode for rank in ranks] == [2, 2], ranks[0].stderr + ranks[1].stderr
    assert error_lines(ranks[0].stderr) == [f"{ERROR} src.en: cannot open: No such file or directory"]
    assert ranks[0].stderr.strip() == error_lines(ranks[0].stderr)[0] and ranks[1].stderr == ""
    assert not (tmp_path / "out.nbest").exists()


def test_world_size_1_is_one_process_as_before(lists, tmp_path, monkeypatch):
    args = ["features", str(lists / "val12.nbest"), "--src", str(lists / "val12.en"), "--which", "s_s", "-m", MODEL,
            "--quiet", "-o"]
    assert main(args + [str(tmp_path / "plain.nbest")]) == 0
    for name, value in (("WORLD_SIZE", "1"), ("RANK", "0"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1"),
                        ("MASTER_PORT", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda *a, **k: pytest.fail("a process group started"))
    assert main(args + [str(tmp_path / "world1.nbest")]) == 0
    assert (tmp_path / "world1.nbest").read_bytes() == (tmp_path / "plain.nbest").read_bytes()
    assert not torch.distributed.is_initialized() and not distributed.active()
    with distributed.ranks():
        assert distributed.map_parts(lambda a, b: (a, b), 7) == [(0, 7)]
        assert distributed.on_main(lambda: "x") == "x" and distributed.checked(lambda: 3) == 3


@pytest.mark.parametrize("size", [1, 2, 3, 8])
def test_parts_are_contiguous_cover_every_unit_and_share_the_weight(size):
    weights = [5, 1, 1, 9, 2, 2, 7, 3, 3, 1, 4]
    cuts = distributed.bounds(len(weights), size, weights)
    assert cuts[0] == 0 and cuts[-1] == len(weights) and cuts == sorted(cuts) and len(cuts) == size + 1
    share = sum(weights) / size
    for lo, hi in zip(cuts, cuts[1:]):   # a part is off its share by less than the heaviest unit
        assert abs(sum(weights[lo:hi]) - share) < max(weights)
    assert distributed.bounds(10, 3) == [0, 3, 6, 10] and distributed.bounds(0, 2, []) == [0, 0, 0]


def test_cuda_is_each_ranks_own_gpu_and_the_timeout_is_checked(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert distributed.local_device("cuda") == "cuda"   # one process: as given
    monkeypatch.setattr(distributed, "_active", True)
    assert [distributed.local_device(d) for d in ("cuda", "cuda:0", "cpu")] == ["cuda:1", "cuda:0", "cpu"]
    monkeypatch.setenv(distributed.TIMEOUT_ENV, "90")
    assert distributed.timeout_seconds() == 90
    for bad in ("0", "-3", "soon", "inf"):
        monkeypatch.setenv(distributed.TIMEOUT_ENV, bad)
        with pytest.raises(InputError, match="must be a number of seconds > 0"):
            distributed.timeout_seconds()


def test_a_rank_exits_without_the_interpreters_teardown_and_one_process_as_usual(monkeypatch, capsys):
    """exit_process: one process raises SystemExit (atexit handlers and finalisers run); a process that
    joined a group flushes its streams and leaves through os._exit with the same status."""
    with pytest.raises(SystemExit) as raised:
        cli.exit_process(2)
    assert raised.value.code == 2
    left = []
    monkeypatch.setattr(distributed, "_joined", True)
    monkeypatch.setattr(cli.os, "_exit", left.append)
    monkeypatch.setattr(cli.logging, "shutdown", lambda: left.append("logs flushed"))
    print("written before the exit", end="")
    cli.exit_process(3)
    assert left == ["logs flushed", 3] and capsys.readouterr().out == "written before the exit"
