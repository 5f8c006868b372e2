"""Interruption: Ctrl-C in any command exits 130 with one line, no traceback, no output and no
temporary file; a SIGKILLed writer leaves only a recognisable temporary file, which the next
write in that folder removes (never a live process's file, nor another host's)."""

import importlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rerank.io
from rerank.cli import main
from rerank.io import TMP_PREFIX, atomic_write, clean_stale_temps, output_group
from tests.cli_helpers import HANG_SECONDS

pytestmark = pytest.mark.faults

MOSES = "0 ||| a b c ||| nmt= -1 len= 3 ||| -1\n0 ||| a c ||| nmt= -2 len= 2 ||| -2\n1 ||| d e ||| nmt= -1 len= 2 ||| -1\n"
FAIRSEQ = "S-0\tx y\nT-0\ta b\nH-0\t-1\ta b c\nS-1\tz\nT-1\td e\nH-1\t-1\td e\n"
ROOT = Path(__file__).resolve().parent.parent
KILLED_WRITER = """
import os, signal, sys
from rerank.io import atomic_write
with atomic_write(sys.argv[1]) as out:
    for i in range(200000):
        out.write(f"{i % 50} ||| hypothesis {i} ||| nmt= -{i} ||| -{i}\\n")
    out.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(TMP_PREFIX))


@pytest.fixture
def work(tmp_path):
    (tmp_path / "in.nbest").write_text(MOSES)
    (tmp_path / "in.fairseq").write_text(FAIRSEQ)
    (tmp_path / "ref").write_text("a b c\nd e\n")
    (tmp_path / "base").write_text("a c\nd e\n")
    (tmp_path / "w.json").write_text('{"nmt": 1, "len": 0.5}')
    (tmp_path / "scores").write_text("1\n2\n3\n")
    return tmp_path


def test_sigkill_leaves_a_temp_file_the_next_command_removes(work):
    out = work / "out.nbest"
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(out)], cwd=ROOT, capture_output=True,
                          timeout=HANG_SECONDS)
    assert proc.returncode == -signal.SIGKILL
    left = temps(work)
    assert len(left) == 1 and not out.exists()
    assert re.fullmatch(rf"\.rerank-tmp\.\d+\.{rerank.io._HOST}\.out\.nbest\.\w+\.tmp", left[0])
    assert (work / left[0]).stat().st_size > 1_000_000  # it was killed while writing a large output
    assert main(["convert", str(work / "in.nbest"), "-o", str(work / "other.nbest")]) == 0
    assert temps(work) == [] and not out.exists() and (work / "other.nbest").read_text().count("\n") == 3


def test_temp_files_of_running_processes_and_other_hosts_are_kept(work):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = work / f"{TMP_PREFIX}{sleeper.pid}.{rerank.io._HOST}.out.abc.tmp"
        mine = work / f"{TMP_PREFIX}{os.getpid()}.{rerank.io._HOST}.out.def.tmp"
        elsewhere = work / f"{TMP_PREFIX}999999999.another-host.out.ghi.tmp"
        dead = work / f"{TMP_PREFIX}999999999.{rerank.io._HOST}.out.jkl.tmp"
        for path in (live, mine, elsewhere, dead):
            path.write_text("partial")
        assert clean_stale_temps(str(work)) == [str(dead)]
        assert live.exists() and mine.exists() and elsewhere.exists() and not dead.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    with atomic_write(str(work / "x")) as out:  # the sleeper is gone: the next write removes its file
        out.write("x\n")
    assert not live.exists() and mine.exists() and elsewhere.exists()


def test_an_output_group_writes_all_or_nothing(work):
    with pytest.raises(KeyboardInterrupt):
        with output_group():
            with atomic_write(str(work / "a")) as out:
                out.write("a\n")
            assert not (work / "a").exists() and len(temps(work)) == 1
            raise KeyboardInterrupt
    assert not (work / "a").exists() and temps(work) == []
    with output_group():
        for name in ("a", "b"):
            with atomic_write(str(work / name)) as out:
                out.write(name + "\n")
    assert (work / "a").read_text() == "a\n" and (work / "b").read_text() == "b\n" and temps(work) == []


def ctrl_c_after(calls: int):
    """A function raising KeyboardInterrupt at its `calls`-th call (earlier calls return '0')."""
    count = [0]

    def hit(*args, **kwargs):
        count[0] += 1
        if count[0] >= calls:
            raise KeyboardInterrupt
        return "0"
    return hit


def ctrl_c_after_lines(target: str, lines: int):
    """A generator standing for `target` that yields its first `lines` lines, then raises KeyboardInterrupt
    (the n-best writers write a block of lines at a time: Ctrl-C comes in the middle of the output)."""
    module, name = target.rsplit(".", 1)
    original = getattr(importlib.import_module(module), name)

    def lines_then_ctrl_c(*args, **kwargs):
        for i, line in enumerate(original(*args, **kwargs)):
            if i >= lines:
                raise KeyboardInterrupt
            yield line
    return lines_then_ctrl_c


# (command line, where Ctrl-C comes, after how many calls or written lines); {d} is the work folder
CASES = [
    ("info {d}/in.nbest", "rerank.summary.summarize", 1),
    ("convert {d}/in.nbest -o {d}/out --to fairseq", "rerank.formats.read_nbest", 1),
    ("convert {d}/in.nbest -o {d}/out", "rerank.formats.moses.stream.parse_block", 1),  # streamed: the first pass
    ("apply {d}/in.nbest -w {d}/w.json -o {d}/out", "rerank.formats.moses.stream._chunk", 1),  # the second pass
    ("convert {d}/in.nbest -o {d}/out", "rerank.formats.moses.iter_moses_lines", 1),  # streamed: chunks of 2 and 1 lines
    ("convert {d}/in.nbest -o {d}/out --to plain", "rerank.formats.plain.format_value", 3),
    ("convert {d}/in.fairseq -o {d}/out --save-refs {d}/out.ref", "rerank.formats.moses.iter_moses_lines", 1),
    ("apply {d}/in.nbest -w {d}/w.json -o {d}/out --nbest-out {d}/out.nbest", "rerank.formats.moses.iter_moses_lines", 1),
    ("add-feature {d}/in.nbest --name s --scores {d}/scores -o {d}/out", "rerank.formats.moses.iter_moses_lines", 2),
    ("oracle {d}/in.nbest -r {d}/ref -o {d}/out", "rerank.metrics.sacre.sentence_bleu_plus1", 1),
    ("features {d}/in.nbest --which mbr -o {d}/out", "rerank.consensus.MBRFeature.compute", 1),
    ("tune {d}/in.nbest -r {d}/ref -o {d}/out --epochs 2", "rerank.tuning.prepare", 1),
    ("tune {d}/in.nbest -r {d}/ref -o {d}/out --epochs 2", "rerank.weights.json.dump", 1),
    ("eval -r {d}/ref -b {d}/base {d}/in.nbest.1best -o {d}/out.md --metrics bleu --ar 5 --bootstrap 0",
     "rerank.evaluation.ResultTable.render", 1),
    ("eval -r {d}/ref -b {d}/base {d}/in.nbest.1best -o {d}/out.md --metrics bleu --ar 5 --bootstrap 0",
     "rerank.evaljob.json.dump", 1),   # the table's config, written by rerank.Evaluation.save
]


@pytest.mark.parametrize("line,target,calls", CASES, ids=[f"{c[0].split()[0]}-{c[1].split('.')[-1]}" for c in CASES])
def test_ctrl_c_in_a_command_exits_130_with_one_line_and_no_output(work, capsys, monkeypatch, line, target, calls):
    (work / "in.nbest.1best").write_text("a b c\nd e\n")
    before = {p.name: p.read_bytes() for p in work.iterdir()}
    replacement = ctrl_c_after_lines(target, calls) if target.endswith("iter_moses_lines") else ctrl_c_after(calls)
    monkeypatch.setattr(target, replacement)
    argv = line.format(d=work).split()
    assert main(argv) == 130
    err = capsys.readouterr().err.splitlines()  # what the command said before, then one line
    assert err[-1] == f"rerank {argv[0]}: interrupted" and not any("Traceback" in x or "rror" in x for x in err)
    assert {p.name: p.read_bytes() for p in work.iterdir()} == before  # no output, no temp file, inputs unchanged


@pytest.mark.parametrize("target", ["rerank.cli.builtin_command", "argparse.ArgumentParser.parse_args"])
def test_ctrl_c_while_plugins_load_or_arguments_parse(work, capsys, monkeypatch, target):
    monkeypatch.setattr(target, ctrl_c_after(1))
    assert main(["convert", str(work / "in.nbest"), "-o", str(work / "out")]) == 130
    assert capsys.readouterr().err == "rerank: interrupted\n"
    assert not (work / "out").exists() and temps(work) == []


def test_a_real_sigint_exits_130_with_one_line(work):
    """SIGINT to a `rerank convert` reading a pipe (while plug-ins load or the read waits)."""
    code = ("import sys; from rerank.cli import main; print('ready', file=sys.stderr, flush=True); "
            "sys.exit(main(sys.argv[1:]))")
    # SIG_DFL first: a test run started in the background of a non-interactive shell ignores SIGINT,
    # the child would inherit that, and Python installs its KeyboardInterrupt handler only when not
    proc = subprocess.Popen([sys.executable, "-c", code, "convert", "-", "-o", str(work / "out")], cwd=ROOT,
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stderr.readline() == b"ready\n"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=HANG_SECONDS)  # stdin stays open: only the signal ends the read
        err = proc.stderr.read()
    finally:
        proc.kill()
        proc.stdin.close()
    assert proc.returncode == 130
    assert err.decode() in ("rerank: interrupted\n", "rerank convert: interrupted\n")
    assert not (work / "out").exists() and temps(work) == []
