"""One writer per output (rerank.io.output_lock): while another process holds the lock of `tune -o
w.json`, a second `rerank tune -o w.json` refuses in one line naming it (exit 2, nothing written),
or with --wait finishes once the holder lets go; a lock left by a killed process is taken over.
The processes are real and concurrent; the holder is released through a pipe, and the waiter is
known to wait by its blocked lock in /proc/locks, so nothing depends on timing."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rerank
from rerank.errors import InputError
from rerank.io import lock_path, output_lock
from tests.cli_helpers import HANG_SECONDS, run
from tests.test_interrupt import MOSES, ROOT

HOLDER = """
import sys
from rerank.io import output_lock
with output_lock([sys.argv[1]]):
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture
def work(tmp_path):
    (tmp_path / "in.nbest").write_text(MOSES)
    (tmp_path / "ref").write_text("a b c\nd e\n")
    return tmp_path


@pytest.fixture
def holder(work):
    """A process holding the lock of work/w.json until its standard input gets a line."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(work / "w.json")], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"held\n"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=HANG_SECONDS)
        proc.stdin.close()
        proc.stdout.close()


def release(proc) -> None:
    proc.stdin.write(b"go\n")
    proc.stdin.flush()
    assert proc.wait(timeout=HANG_SECONDS) == 0


def tune_args(work, *more):
    return ["tune", work / "in.nbest", "-r", work / "ref", "-o", work / "w.json", "--runs", "3", "--epochs", "2",
            "--quiet", *more]


def outputs(work: Path) -> list[str]:
    return sorted(p.name for p in work.iterdir() if p.name.startswith(("w.", ".w.", ".rerank-tmp")))


def test_a_second_writer_refuses_in_one_line_naming_the_holder(work, holder, capsys):
    code, out, err = run(tune_args(work), capsys)
    assert code == 2 and out == ""
    assert err == (f"rerank tune: error: {work / 'w.json'}: being written by another rerank process "
                   f"(pid {holder.pid}: -c {work / 'w.json'}) (--wait waits until it ends)\n")
    assert outputs(work) == [".w.json.lock"]   # the holder's, nothing of ours
    release(holder)
    assert outputs(work) == []                 # the holder removed its lock file
    code, out, err = run(tune_args(work), capsys)
    assert code == 0 and outputs(work) == ["w.json", "w.run1.json", "w.run2.json", "w.run3.json"]


def test_the_library_says_the_keyword(work, holder):
    with pytest.raises(InputError) as caught:
        rerank.tune(str(work / "in.nbest"), str(work / "ref"), runs=2, epochs=2, output=str(work / "w.json"))
    assert caught.value.option == "wait" and "(wait waits until it ends)" in caught.value.problem
    assert f"pid {holder.pid}:" in caught.value.problem


def waiting_for_a_lock(pid: int) -> bool:
    """Whether process `pid` is blocked waiting for an flock (a `->` line of /proc/locks)."""
    lines = Path("/proc/locks").read_text().splitlines()
    return any("->" in line and "FLOCK" in line and line.split()[5] == str(pid) for line in lines)


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux's /proc/locks to see a blocked lock")
def test_with_wait_the_second_writer_finishes_after_the_holder(work, holder):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    waiter = subprocess.Popen([sys.executable, "-m", "rerank", *map(str, tune_args(work, "--wait"))], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + HANG_SECONDS
        while not waiting_for_a_lock(waiter.pid):
            assert waiter.poll() is None, waiter.communicate()
            assert time.monotonic() < deadline, "the waiter never waited for the lock"
            time.sleep(0.05)
        assert outputs(work) == [".w.json.lock"]   # it waits before writing anything
        release(holder)
        out, err = waiter.communicate(timeout=HANG_SECONDS)
    finally:
        waiter.kill()
        waiter.wait(timeout=HANG_SECONDS)
    assert waiter.returncode == 0, err
    assert outputs(work) == ["w.json", "w.run1.json", "w.run2.json", "w.run3.json"]
    runs = [json.loads((work / f"w.run{k}.json").read_text())["meta"]["command"] for k in (1, 2, 3)]
    assert all("--wait" in command for command in runs)   # every run file from the one invocation


def test_a_lock_left_by_a_killed_process_is_taken_over(work, holder, capsys):
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=HANG_SECONDS)
    assert outputs(work) == [".w.json.lock"]   # left behind, but nobody holds it
    code, _, err = run(tune_args(work), capsys)
    assert code == 0, err
    assert outputs(work) == ["w.json", "w.run1.json", "w.run2.json", "w.run3.json"]


def test_one_process_may_nest_locks_of_one_output(work):
    target = str(work / "x")
    with output_lock([target, "-", None]):
        with output_lock([target]):
            assert os.path.exists(lock_path(target))
        assert Path(lock_path(target)).read_text().split("\n")[0] == str(os.getpid())
    assert not os.path.exists(lock_path(target))
