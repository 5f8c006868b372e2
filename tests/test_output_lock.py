"""One writer per output (rerank.io.output_lock): while another process holds the lock of `tune -o
w.json`, a second `rerank tune -o w.json` refuses in one line naming it (exit 2, nothing written),
or with --wait finishes once the holder lets go; a lock left by a killed process is taken over.
Every other writing command (apply, convert, add-feature, features, eval, report, oracle) does
the same on its whole output family, and so do their library calls, which name the keyword
`wait`. The processes are real and concurrent (a holder of the lock, or a real `rerank convert`
stopped mid-read); the holder is released through a pipe, and the waiter is known to wait by its
blocked lock in /proc/locks, so nothing depends on timing."""

import contextlib
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

pytestmark = pytest.mark.faults

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


@contextlib.contextmanager
def holding(path: Path):
    """A process holding the lock of `path` until its standard input gets a line."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"held\n"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=HANG_SECONDS)
        proc.stdin.close()
        proc.stdout.close()


@pytest.fixture
def holder(work):
    """A process holding the lock of work/w.json until its standard input gets a line."""
    with holding(work / "w.json") as proc:
        yield proc


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


@contextlib.contextmanager
def blocked_waiter(args):
    """A real `rerank ARGS` process, yielded once it is blocked waiting for an output's lock."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    waiter = subprocess.Popen([sys.executable, "-m", "rerank", *map(str, args)], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + HANG_SECONDS
        while not waiting_for_a_lock(waiter.pid):
            assert waiter.poll() is None, waiter.communicate()
            assert time.monotonic() < deadline, "the waiter never waited for the lock"
            time.sleep(0.05)
        yield waiter
    finally:
        waiter.kill()
        waiter.wait(timeout=HANG_SECONDS)


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux's /proc/locks to see a blocked lock")
def test_with_wait_the_second_writer_finishes_after_the_holder(work, holder):
    with blocked_waiter(tune_args(work, "--wait")) as waiter:
        assert outputs(work) == [".w.json.lock"]   # it waits before writing anything
        release(holder)
        out, err = waiter.communicate(timeout=HANG_SECONDS)
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


# ---- every other writing command: (its arguments, the files it writes) with every output under work/ ----

FIRST = "written by the first process\n"   # what the holder's output family holds while it writes


def door(work: Path, command: str, *more) -> tuple[list, list[str]]:
    """(the arguments of `rerank COMMAND` writing into `work`, the names of the files it writes)."""
    nbest, ref = work / "in.nbest", work / "ref"
    significance = ["-r", ref, "-b", work / "base", work / "sys", "--metrics", "bleu", "--ar", "10", "--quiet"]
    doors = {
        "apply": (["apply", nbest, "-w", work / "weights.json", "-o", work / "out", "--nbest-out", work / "out.nbest",
                   "--quiet"], ["out", "out.nbest"]),
        "convert": (["convert", nbest, "-o", work / "out", "--to", "plain", "--quiet"],
                    ["out", "out.ids", "out.features.tsv"]),
        "add-feature": (["add-feature", nbest, "--name", "x", "--scores", work / "scores", "-o", work / "out"], ["out"]),
        "features": (["features", nbest, "--which", "mbr", "-o", work / "out", "--quiet"], ["out"]),
        "oracle": (["oracle", nbest, "-r", ref, "-o", work / "out", "--quiet"], ["out"]),
        "eval": (["eval", *significance, "--bootstrap", "2", "-o", work / "out.md", "--plot", work / "out.png"],
                 ["out.md", "out.config.json", "out.png"]),
        "report": (["report", *significance, "--bootstrap", "0", "-o", work / "out.html"], ["out.html"]),
    }
    args, written = doors[command]
    return [*args, *more], written


DOORS = ["apply", "convert", "add-feature", "features", "oracle", "eval", "report"]
# (command, the output whose lock another process holds): the first of each family, and eval's plot
HELD = [*((command, None) for command in DOORS), ("eval", "out.png"), ("eval", "out.config.json")]


@pytest.fixture
def inputs(work):
    (work / "weights.json").write_text('{"nmt": 1.0, "len": 0.5}')
    (work / "scores").write_text("0.5\n0.25\n1\n")
    (work / "base").write_text("a c\nd\n")
    (work / "sys").write_text("a b c\nd e\n")
    return work


def folder(work: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in work.iterdir()}


@pytest.mark.parametrize("command,held", HELD, ids=[f"{c}-{h}" if h else c for c, h in HELD])
def test_every_writing_command_refuses_a_held_output_in_one_line(inputs, command, held, capsys):
    args, written = door(inputs, command)
    for name in written:   # the first writer's files, which the refusal leaves as they are
        (inputs / name).write_text(FIRST)
    target = inputs / (held or written[0])
    with holding(target) as proc:
        before = folder(inputs)
        code, out, err = run(args, capsys)
        assert code == 2 and out == ""
        assert err == (f"rerank {command}: error: {target}: being written by another rerank process "
                       f"(pid {proc.pid}: -c {target}) (--wait waits until it ends)\n")
        assert folder(inputs) == before   # nothing written, no lock file of ours left, the first's files intact


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux's /proc/locks to see a blocked lock")
@pytest.mark.parametrize("command", DOORS)
def test_with_wait_every_writing_command_writes_after_the_holder(inputs, command):
    args, written = door(inputs, command, "--wait")
    for name in written:
        (inputs / name).write_text(FIRST)
    with holding(inputs / written[0]) as proc:
        before = folder(inputs)
        with blocked_waiter(args) as waiter:
            waiting = folder(inputs)   # nothing written but the locks it holds already (of outputs sorted first)
            assert {k: v for k, v in waiting.items() if k in before or not k.endswith(".lock")} == before
            release(proc)
            out, err = waiter.communicate(timeout=HANG_SECONDS)
    assert waiter.returncode == 0, err
    after = folder(inputs)
    assert all(after[name] != FIRST.encode() and after[name] for name in written)   # the waiter's, whole
    assert set(after) == set(before) - {f".{written[0]}.lock"}   # every lock released


# A real `rerank convert` stopped in the middle of reading its input (holding its output's lock)
# until its standard input is closed
STOPPED_CONVERT = """
import sys
import rerank.formats.moses as moses
original = moses.iter_moses_lines

def lines_then_wait(*args, **kwargs):
    for i, line in enumerate(original(*args, **kwargs)):
        if i == 1:
            print("reading", file=sys.stderr, flush=True)
            sys.stdin.read()
        yield line

moses.iter_moses_lines = lines_then_wait
sys.argv = ["rerank", *sys.argv[1:]]
from rerank.cli import run
run()
"""


def test_two_real_converts_of_one_output(work, capsys):
    args = ["convert", str(work / "in.nbest"), "-o", str(work / "out")]
    first = subprocess.Popen([sys.executable, "-c", STOPPED_CONVERT, *args], cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert first.stderr.readline() == b"reading\n"
        code, out, err = run(args, capsys)
        first.stdin.close()   # the first reads on
        assert first.wait(timeout=HANG_SECONDS) == 0, first.stderr.read()
    finally:
        first.kill()
        first.wait(timeout=HANG_SECONDS)
        first.stdout.close()
        first.stderr.close()
    assert code == 2 and out == ""
    assert err == (f"rerank convert: error: {work / 'out'}: being written by another rerank process "
                   f"(pid {first.pid}: rerank {' '.join(args)}) (--wait waits until it ends)\n")
    rerank.convert_file(work / "in.nbest", work / "alone")
    assert (work / "out").read_bytes() == (work / "alone").read_bytes()   # the first's output, whole
    assert not (work / ".out.lock").exists()


LIBRARY_DOORS = {
    "apply_file": lambda w: rerank.apply_file(w / "in.nbest", w / "weights.json", w / "out"),
    "convert_file": lambda w: rerank.convert_file(w / "in.nbest", w / "out"),
    "join_score_files": lambda w: rerank.join_score_files(w / "in.nbest", [("x", w / "scores")], w / "out"),
    "add_features_file": lambda w: rerank.add_features_file(w / "in.nbest", w / "out", which=["mbr"]),
    "oracle": lambda w: rerank.oracle(w / "in.nbest", w / "ref", output=w / "out"),
    "evaluate": lambda w: rerank.evaluate(w / "ref", w / "base", {"sys": w / "sys"}, ar=10, bootstrap=0,
                                          outputs=[w / "out"]),
    "report": lambda w: rerank.report(w / "ref", w / "base", {"sys": w / "sys"}, w / "out",
                                      rerank.EvalOptions(metrics=("bleu",), ar=10, bootstrap=0)),
}


@pytest.mark.parametrize("name", LIBRARY_DOORS)
def test_every_library_door_says_the_keyword(inputs, name):
    with holding(inputs / "out") as proc:
        with pytest.raises(InputError) as caught:
            LIBRARY_DOORS[name](inputs)
    assert caught.value.option == "wait" and "(wait waits until it ends)" in caught.value.problem
    assert f"pid {proc.pid}:" in caught.value.problem


def test_an_evaluation_holds_its_outputs_until_it_saves_them(inputs):
    """`evaluate(outputs=)` locks the files before reading anything; `save` writes them and lets go."""
    table = inputs / "t.md"
    ev = rerank.evaluate(inputs / "ref", inputs / "base", {"sys": inputs / "sys"}, ar=10, bootstrap=0,
                         outputs=rerank.Evaluation.saved_files(table))
    holders = {Path(lock_path(p)).read_text().split("\n")[0] for p in (table, inputs / "t.config.json")}
    assert holders == {str(os.getpid())}
    assert ev.save(table) == [str(table), str(inputs / "t.config.json")]
    assert not os.path.exists(lock_path(table)) and not os.path.exists(lock_path(inputs / "t.config.json"))


@pytest.mark.parametrize("wait", [1, "yes", None])
def test_wait_is_true_or_false(inputs, wait):
    with pytest.raises(InputError) as caught:
        rerank.convert_file(inputs / "in.nbest", inputs / "out", wait=wait)
    assert caught.value.option == "wait" and not (inputs / "out").exists()
