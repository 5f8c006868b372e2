"""The fault suite's own cases (marker `faults`; with tests/test_resource_errors.py, test_signals.py,
test_interrupt.py, test_output_lock.py and the others docs/architecture.md's "Guarantees" names):

- a full disk or a read-only file system for real (a small tmpfs in a mount namespace, the disk
  filling mid-write), and a full disk under an old output (it stays as it was);
- standard output on a full device for every command that writes there;
- SIGTERM, SIGINT and SIGHUP mid-write over an old output, in-process and from outside a real
  process whose temporary file holds part of the new output: the old file stays, the temporary file
  and the lock go, exit 143 / 130 / 129;
- kill -9 of `tune --runs 3` in run 2 (while tuning, while its file is written): the rerun reuses
  run 1 and ends with the weights of an uninterrupted run;
- kill -9 while an n-best cache entry is written: the cache reads as before and the next read
  writes the entry;
- every option with a ceiling refuses a larger value in one line before any work, says the ceiling
  in its help, and docs/architecture.md lists it.

Processes are stopped where the test wants them by a patched step that says "ready" and waits on
its standard input (or by the test's own signal), never by a sleep that has to be long enough."""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import rerank.io
from rerank.cli import build_parser, main
from rerank.commands import COMMANDS
from rerank.formats import cache as nbcache, read_nbest
from tests.cli_helpers import HANG_SECONDS
from tests.mira_helpers import NBEST as TUNE_NBEST, REFS as TUNE_REFS
from tests.test_bad_inputs_common import command_line, run, snapshot, write_files
from tests.test_interrupt import MOSES, ROOT, temps
from tests.test_resource_errors import WRITES, disk_full_for
from tests.test_signals import CASES as SIGNAL_CASES, signal_after, signal_after_lines

pytestmark = pytest.mark.faults

STATUS = {signal.SIGTERM: 143, signal.SIGINT: 130, signal.SIGHUP: 129}


def said(signum: int) -> str:
    """What a command says when `signum` ends it (rerank.cli.main)."""
    return "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"


def big_moses(lines: int) -> str:
    """A Moses list of `lines` hypotheses, ten a sentence (its outputs take many writes)."""
    return "".join(f"{i // 10} ||| hypothesis {i} of a longer list ||| nmt= -{i}.5 len= {i % 7} ||| -{i}\n"
                   for i in range(lines))


def kill_9_when_ready(proc, check=None) -> None:
    """SIGKILL `proc` once it says it is ready (after `check()`, what must hold at that moment),
    and close its pipes whatever happens."""
    try:
        until_ready(proc)
        if check is not None:
            check()
    finally:
        proc.kill()
        proc.wait(timeout=HANG_SECONDS)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()


def until_ready(proc: subprocess.Popen) -> str:
    """Read the process's stderr up to its "ready" line (what it said before: notes, warnings);
    fails with what it said if it ended without one."""
    said = []
    for line in proc.stderr:
        if line == b"ready\n":
            return b"".join(said).decode()
        said.append(line)
    pytest.fail(f"ended without getting ready: {b''.join(said).decode()}")


@pytest.fixture
def work(tmp_path):
    """A folder with a valid file of every kind (tests.test_bad_inputs_common)."""
    return write_files(tmp_path)


# ---- a full disk under an old output ------------------------------------------------------------

@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
@pytest.mark.parametrize("name", WRITES)
def test_a_full_disk_keeps_the_old_output(work, capsys, monkeypatch, name):
    """The output of every writing command (test_resource_errors.WRITES) exists already: a full
    disk while the new one is written leaves it byte-identical, and nothing else is written."""
    line, victim, *kept = WRITES[name]
    (work / victim).write_bytes(b"the old output\n")
    argv = command_line(work, line, {})
    before = snapshot(work)
    disk_full_for(monkeypatch, work, victim)
    code, _, err = run(argv, capsys)
    assert code == 2 and err.splitlines()[-1] == f"rerank {argv[0]}: error: {work / victim}: no space left on device"
    after = snapshot(work)
    for done in kept:   # a whole file written before the full one (tune's finished run, its weights)
        assert json.loads((work / done).read_text(encoding="utf-8"))["weights"]
        del after[done]
    assert after == before


# ---- standard output on a full device -----------------------------------------------------------

STDOUT_WRITERS = {
    "features": "features {in_nbest} --which mbr -o - --quiet",
    "add-feature": "add-feature {in_nbest} --name s --scores {scores_txt} -o -",
    "oracle -o -": "oracle {in_nbest} -r {ref_txt} -o - --quiet",
    "oracle": "oracle {in_nbest} -r {ref_txt} --quiet",
    "eval": "eval -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu --ar 20 --bootstrap 0 --quiet",
    "tune -o -": "tune {in_nbest} -r {ref_txt} --epochs 2 --quiet -o -",
    "report -o -": "report -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu --ar 20 --bootstrap 0 -o - --quiet",
    "apply --nbest-out -": "apply {in_nbest} -w {weights_json} -o {d}/best.txt --nbest-out -",   # best.txt: none
    "apply -o - --nbest-out": "apply {in_nbest} -w {weights_json} -o - --nbest-out {d}/out.nbest",
}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("name", STDOUT_WRITERS)
def test_every_command_on_a_full_standard_output_is_one_line(work, name):
    """Beside test_resource_errors' apply, convert and info: one line, exit 2, and no file written
    (apply's other output neither: its outputs are written together or not at all)."""
    argv = command_line(work, STDOUT_WRITERS[name], {})
    before = snapshot(work)
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "rerank", *argv], cwd=ROOT, stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=HANG_SECONDS)
    assert done.returncode == 2, done.stderr
    *before_error, error = done.stderr.splitlines()
    assert error == f"rerank {argv[0]}: error: standard output: no space left on device"
    assert not any("Traceback" in x or "error" in x for x in before_error), done.stderr
    assert snapshot(work) == before


# ---- a real full disk and a read-only file system: a small tmpfs in a mount namespace ------------

# Runs inside `unshare --user --map-root-user --mount` (root of a namespace of its own, which may
# mount): a 1 MB tmpfs on DISK with the old outputs, then filled but for ROOM bytes (or remounted
# read-only); the command ARGV runs there, then again with room. Prints, as JSON, each run's
# status, stderr and the files on the disk (name -> content, the filler left out).
ON_THE_DISK = r"""
import json, os, subprocess, sys
disk, mode, room, argv, old = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", disk], check=True)
for name, text in old.items():
    with open(os.path.join(disk, name), "w") as f:
        f.write(text)
filler = os.path.join(disk, "filler")
if mode == "full":
    fd, written = os.open(filler, os.O_WRONLY | os.O_CREAT), 0
    try:
        while True:
            written += os.write(fd, bytes(1 << 16))
    except OSError:
        pass
    os.ftruncate(fd, max(0, written - room))
    os.close(fd)
else:
    subprocess.run(["mount", "-o", "remount,ro", disk], check=True)

def files():
    return {n: open(os.path.join(disk, n), "rb").read().decode("latin-1") for n in sorted(os.listdir(disk)) if n != "filler"}

done = subprocess.run([sys.executable, "-m", "rerank", *argv], capture_output=True, text=True)
report = {"refused": [done.returncode, done.stderr, files()]}
if mode == "full":
    os.unlink(filler)
else:
    subprocess.run(["mount", "-o", "remount,rw", disk], check=True)
done = subprocess.run([sys.executable, "-m", "rerank", *argv], capture_output=True, text=True)
report["with room"] = [done.returncode, done.stderr, files()]
print(json.dumps(report))
"""


@functools.cache
def namespace_mounts() -> bool:
    """Whether this process can make a mount namespace of its own and mount a tmpfs in it."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || mount -t tmpfs -o size=64k tmpfs /tmp"],
                           capture_output=True, timeout=HANG_SECONDS)
    return probe.returncode == 0


TUNE = "tune {in_nbest} -r {ref_txt} --epochs 2 --quiet"
EVAL = "eval -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu --ar 20 --bootstrap 0 --quiet"
# name -> (mode, room left on the disk, command line with {disk}, the outputs there before)
ON_DISK = {
    "convert, mid-write": ("full", 16384, "convert {d}/big.nbest -o {disk}/out.nbest", ["out.nbest"]),
    "convert to gzip": ("full", 0, "convert {d}/big.nbest -o {disk}/out.nbest.gz", []),
    "apply with --nbest-out": ("full", 0, "apply {in_nbest} -w {weights_json} -o {disk}/best.txt --nbest-out "
                               "{disk}/out.nbest", ["best.txt"]),
    "tune --runs 2": ("full", 0, TUNE + " --runs 2 -o {disk}/w.json", ["w.json"]),
    "eval -o": ("full", 0, EVAL + " -o {disk}/res.md", ["res.md"]),
    "read-only convert": ("read-only", 0, "convert {in_nbest} -o {disk}/out.nbest", ["out.nbest"]),
}


@pytest.mark.skipif(not namespace_mounts(), reason="cannot mount a tmpfs in a mount namespace of our own")
@pytest.mark.parametrize("name", ON_DISK)
def test_a_real_full_or_read_only_disk_is_one_line_and_keeps_the_old_files(tmp_path, name):
    mode, room, line, old = ON_DISK[name]
    (tmp_path / "in").mkdir()
    work = write_files(tmp_path / "in")
    (work / "big.nbest").write_text(big_moses(3000))
    disk = tmp_path / "disk"
    disk.mkdir()
    argv = command_line(work, line, {"disk": str(disk)})
    old_files = {n: f"the old {n}\n" for n in old}
    inputs = snapshot(work)
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", ON_THE_DISK,
                           str(disk), mode, str(room), json.dumps(argv), json.dumps(old_files)], cwd=ROOT,
                          capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    status, err, files = report["refused"]
    assert status == 2, err
    *before_error, error = err.splitlines()   # a full disk in the system's words; a read-only one refused first
    said = "no space left on device" if mode == "full" else r".*\(read-only file system\)"   # the OS's words
    assert re.fullmatch(rf"rerank {argv[0]}: error: {re.escape(str(disk))}/[\w.]+: {said}", error), err
    assert not any("Traceback" in x or "error" in x for x in before_error), err
    assert files == old_files   # the old outputs as they were; no partial output, temporary file or lock
    status, err, files = report["with room"]
    assert status == 0, err
    assert set(files) > set(old_files) or any(files[n] != old_files[n] for n in old_files)
    assert not [n for n in files if n.startswith((rerank.io.TMP_PREFIX, "."))]
    assert snapshot(work) == inputs   # every input untouched


# ---- SIGTERM, SIGINT and SIGHUP over an old output -----------------------------------------------

def outputs_of(argv: list[str]) -> list[str]:
    """The paths a command line writes (after -o, --nbest-out)."""
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-o", "--nbest-out")]


@pytest.fixture
def sigint_raises(monkeypatch):
    """SIGINT raises KeyboardInterrupt here (a test run in the background of a shell may have it ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("signum", STATUS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("line,target,calls", SIGNAL_CASES,
                         ids=[f"{c[0].split()[0]}-{c[1].split('.')[-1]}" for c in SIGNAL_CASES])
def test_a_signal_mid_write_keeps_the_old_output(tmp_path, capsys, monkeypatch, sigint_raises, line, target, calls,
                                                 signum):
    """test_signals' cases with their outputs there already: the signal mid-write leaves them
    byte-identical (no new file either), one line, exit 128 + the signal's number."""
    work = tmp_path
    for name, text in {"in.nbest": MOSES, "ref": "a b c\nd e\n", "base": "a c\nd e\n", "w.json": '{"nmt": 1, "len": 0.5}',
                       "in.nbest.1best": "a b c\nd e\n"}.items():
        (work / name).write_text(text)
    argv = line.format(d=work).split()
    for path in outputs_of(argv):
        Path(path).write_text(f"the old {Path(path).name}\n")
    before = {p.name: p.read_bytes() for p in work.iterdir()}
    replacement = signal_after_lines(target, calls, signum) if target.endswith("iter_moses_lines") \
        else signal_after(signum, calls)
    monkeypatch.setattr(target, replacement)
    assert main(argv) == STATUS[signum]
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"rerank {argv[0]}: {said(signum)}" and not any("Traceback" in x for x in err)
    assert {p.name: p.read_bytes() for p in work.iterdir()} == before


# A real `rerank convert` that has written part of its output to its temporary file and waits on
# its standard input until the test's signal comes.
WRITING = """
import os, sys
import rerank.formats.moses as moses
original, written, wait_at = moses.iter_moses_lines, [0], int(sys.argv[1])

def lines_then_wait(*args, **kwargs):
    for line in original(*args, **kwargs):
        written[0] += 1
        if written[0] == wait_at:
            os.write(2, b"ready\\n")   # past any redirection of sys.stderr (--quiet)
            sys.stdin.read()   # blocks: only the signal ends it
        yield line

moses.iter_moses_lines = lines_then_wait
sys.argv = ["rerank", *sys.argv[2:]]
from rerank.cli import run
run()
"""


@pytest.mark.parametrize("signum", STATUS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("out,lines", [("out.nbest", 3000), ("out.nbest.gz", 20000)])   # gzip: more to fill a block
def test_a_signal_from_outside_mid_write_keeps_the_old_output(tmp_path, signum, out, lines):
    (tmp_path / "in.nbest").write_text(big_moses(lines))
    (tmp_path / out).write_bytes(b"the old output\n")
    before = snapshot(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", WRITING, str(lines * 3 // 4), "convert", str(tmp_path / "in.nbest"), "-o",
                             str(tmp_path / out)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in STATUS])
    try:
        until_ready(proc)
        (partial,) = temps(tmp_path)
        assert (tmp_path / partial).stat().st_size > 0   # part of the new output is on the disk
        proc.send_signal(signum)
        proc.wait(timeout=HANG_SECONDS)
        err = proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait(timeout=HANG_SECONDS)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    assert proc.returncode == STATUS[signum], err
    assert err == f"rerank convert: {said(signum)}\n"
    assert snapshot(tmp_path) == before   # the old output, no temporary file, no lock, the input as it was


# ---- kill -9 during tune --runs, then the rerun ---------------------------------------------------

# `rerank tune` killed in run 2 (argv[1]: "tuning", in its tuner; "writing", half of its file on the
# disk): the step says "ready" and waits on standard input until the test kills the process.
KILLED_TUNE = """
import json, os, sys
import rerank.weights as weights
from rerank.mira.tuners import KBMiraTuner

where, tunes = sys.argv[1], [0]

def wait():
    os.write(2, b"ready\\n")
    sys.stdin.read()

def tune(self, *args, _tune=KBMiraTuner.tune, **kwargs):
    tunes[0] += 1
    if where == "tuning" and tunes[0] == 2:
        wait()
    return _tune(self, *args, **kwargs)

def write_weights(path, w, meta=None, _write=weights.write_weights):
    if where == "writing" and (meta or {}).get("run") == 2:
        from rerank.io import atomic_write
        with atomic_write(path) as out:
            text = json.dumps({"weights": w, "meta": meta})
            out.write(text[:len(text) // 2])
            out.flush()
            wait()
    return _write(path, w, meta)

KBMiraTuner.tune = tune
weights.write_weights = write_weights
import rerank.multirun
rerank.multirun.write_weights = write_weights
sys.argv = ["rerank", *sys.argv[2:]]
from rerank.cli import run
run()
"""


def tune_argv(folder: Path) -> list[str]:
    return ["tune", TUNE_NBEST, *[x for r in TUNE_REFS for x in ("-r", r)], "--sentences", "0-29", "--epochs", "3",
            "--runs", "3", "--quiet", "-o", str(folder / "w.json")]


def weights_of(folder: Path) -> dict:
    """The weights of w.json and of each run file, and the scores of the runs."""
    files = {name: json.loads((folder / name).read_text()) for name in ("w.json", *(f"w.run{k}.json" for k in (1, 2, 3)))}
    return {name: data["weights"] for name, data in files.items()} | {"scores": files["w.json"]["meta"]["tuned_scores"]}


@pytest.mark.parametrize("where", ["tuning", "writing"])
def test_kill_9_in_a_tuning_run_then_the_rerun_ends_as_an_uninterrupted_one(tmp_path, capsys, where):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    whole.mkdir()
    killed.mkdir()
    assert run(tune_argv(whole), capsys)[0] == 0
    proc = subprocess.Popen([sys.executable, "-c", KILLED_TUNE, where, *tune_argv(killed)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kill_9_when_ready(proc)
    left = sorted(p.name for p in killed.iterdir())
    partial = [name for name in left if name.startswith(rerank.io.TMP_PREFIX)]
    assert [n for n in left if not n.startswith(".")] == ["w.run1.json"]   # run 1 whole; no run 2, no w.json
    assert json.loads((killed / "w.run1.json").read_text())["weights"] == weights_of(whole)["w.run1.json"]
    assert len(partial) == (where == "writing") and all(".w.run2.json." in name for name in partial)
    code, out, err = run(tune_argv(killed), capsys)
    assert code == 0, err
    assert f"run 1: reused {killed / 'w.run1.json'}" in out
    assert weights_of(killed) == weights_of(whole)
    assert sorted(p.name for p in killed.iterdir()) == ["w.json", "w.run1.json", "w.run2.json", "w.run3.json"]


# ---- kill -9 while an n-best cache entry is written ----------------------------------------------

# Reads argv[1] with the cache folder argv[2]: the entry's first bytes are written, then it says
# "ready" and waits on standard input until the test kills it.
KILLED_CACHE_WRITE = """
import contextlib, os, sys
import rerank.formats.cache as cache

real = cache.atomic_write

@contextlib.contextmanager
def stalled(*args, **kwargs):
    with real(*args, **kwargs) as out:
        class FirstBytesThenWait:
            def write(self, data):
                out.write(data)
                out.flush()
                os.write(2, b"ready\\n")
                sys.stdin.read()
        yield FirstBytesThenWait()

cache.atomic_write = stalled
from rerank.formats import read_nbest
read_nbest(sys.argv[1], cache=sys.argv[2])
"""


def test_kill_9_while_a_cache_entry_is_written_leaves_a_readable_cache(tmp_path):
    other, listed = tmp_path / "other.nbest", tmp_path / "big.nbest"
    other.write_text(big_moses(40))
    listed.write_text(big_moses(3000))
    folder = tmp_path / "cache"
    read_nbest(str(other), cache=folder)   # an entry there before
    (kept,) = sorted(folder.glob("*" + nbcache.SUFFIX))
    kept_bytes = kept.read_bytes()
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CACHE_WRITE, str(listed), str(folder)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    def first_bytes_written():
        (partial,) = temps(folder)
        assert (folder / partial).stat().st_size > 0   # the entry's first bytes

    kill_9_when_ready(proc, first_bytes_written)
    assert sorted(folder.glob("*" + nbcache.SUFFIX)) == [kept] and kept.read_bytes() == kept_bytes
    want = read_nbest(str(listed), cache=False)
    for path, nbest in ((other, read_nbest(str(other), cache=False)), (listed, want)):
        got = read_nbest(str(path), cache=folder)   # the old entry is read; the killed one parsed again, written
        assert got == nbest and got.features.tobytes() == nbest.features.tobytes()
    assert temps(folder) == []   # the killed writer's file is gone with the next write there
    entries = sorted(folder.glob("*" + nbcache.SUFFIX))
    assert len(entries) == 2 and all(nbcache.load_entry(str(e), e.stem) is not None for e in entries)


# ---- options with a ceiling ----------------------------------------------------------------------

def ceilings() -> dict[tuple[str, str], tuple[argparse.Action, int]]:
    """(command, flag) -> (its action, its ceiling) for every flag of every command (this
    distribution's, subcommands included) whose check has a ceiling (rerank.options.at_most)."""
    found = {}

    def walk(prog: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(f"{prog} {name}", sub)
            check = getattr(action.type, "__self__", None)
            if action.option_strings and getattr(check, "ceiling", None) is not None:
                found[prog.split(" ", 1)[1], max(action.option_strings, key=len)] = (action, check.ceiling)

    for command in COMMANDS:
        walk("rerank", build_parser(command))
    return found


# the rest of a command line for each command that has a ceiling: valid but for the flag
CEILING_LINES = {
    "eval": "eval -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu",
    "report": "report -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu -o {d}/r.html",
    "tune": "tune {in_nbest} -r {ref_txt} -o {d}/w.json",
    "recipe multi30k": "recipe multi30k --data-dir {d} --out {d}/recipe",
    "generate": "generate {ref_txt} -o {d}/g.jsonl -m {d}",
}


def documented_ceilings() -> dict[str, str]:
    """The rows of docs/architecture.md's Guarantees table of ceilings: `COMMAND --FLAG` -> its row."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    guarantees = text.split("\n## Guarantees\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip() for line in guarantees.splitlines() if line.strip().startswith("| `") and "at most" in line]
    return {name: row for row in rows for name in re.findall(r"`([a-z0-9 -]+ --?[a-z0-9-]+)`", row.split(" | ")[0])}


def test_every_ceiling_is_refused_in_one_line_before_any_work_and_documented(work, capsys):
    """Every flag with a ceiling (whatever command declares it): the ceiling allowed, one more
    refused by the parser in one line, nothing written; its help and docs/architecture.md say
    the ceiling, and the doc lists no ceiling that is not there."""
    found = ceilings()
    assert {command for command, _ in found} <= set(CEILING_LINES), "give CEILING_LINES a line for the new command"
    documented = documented_ceilings()
    assert set(documented) == {f"{command} {flag}" for command, flag in found}, (sorted(documented), sorted(found))
    before = snapshot(work)
    for (command, flag), (action, ceiling) in sorted(found.items()):
        assert action.type(str(ceiling)) == ceiling   # the ceiling itself is allowed
        assert f"at most {ceiling:,}" in action.help, (flag, action.help)
        assert f"{ceiling:,}" in documented[f"{command} {flag}"], (command, flag, ceiling)
        argv = command_line(work, CEILING_LINES[command], {}) + [flag, str(ceiling + 1)]
        code, out, err = run(argv, capsys)
        assert code == 2 and out == ""
        assert err == (f"rerank {command}: error: argument {flag}: must be at most {ceiling:,}, got {ceiling + 1} "
                       f"(see rerank {command} --help)\n")
    assert snapshot(work) == before


def test_every_test_the_guarantees_name_exists():
    """docs/architecture.md's Guarantees name, in each item, the test modules and the tests that
    hold it: each test named is defined in one of the modules its item names."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    guarantees = text.split("\n## Guarantees\n", 1)[1].split("\n## ", 1)[0]
    missing = []
    for item in guarantees.split("\n- ")[1:]:
        modules = set(re.findall(r"\b(test_\w+\.py)\b", item))
        sources = "".join((ROOT / "tests" / name).read_text(encoding="utf-8") for name in sorted(modules))
        missing += [f"{name} (in {sorted(modules)})" for name in re.findall(r"`(test_\w+)`", item)
                    if not re.search(rf"^def {name}\(", sources, flags=re.M)]
    assert not missing, missing
