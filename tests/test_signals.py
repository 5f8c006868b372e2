"""SIGTERM and SIGHUP are handled like Ctrl-C: one line (`rerank CMD: terminated (SIGTERM)`), exit
143 (SIGHUP: 129), no output, no temporary file, inputs unchanged; the handlers Python had are back
after the command, and a signal the process ignores (nohup's SIGHUP) stays ignored. The signal is
sent by the process to itself from a patched step, which is deterministic; one test sends it from
outside to a real `rerank` process blocked mid-write."""

import signal
import subprocess
import sys

import pytest

from rerank.cli import main
from tests.cli_helpers import HANG_SECONDS
from tests.test_interrupt import MOSES, ROOT, temps

pytestmark = pytest.mark.faults

SIGNALS = [(signal.SIGTERM, 143), (signal.SIGHUP, 129)]


@pytest.fixture
def work(tmp_path):
    (tmp_path / "in.nbest").write_text(MOSES)
    (tmp_path / "ref").write_text("a b c\nd e\n")
    (tmp_path / "base").write_text("a c\nd e\n")
    (tmp_path / "w.json").write_text('{"nmt": 1, "len": 0.5}')
    return tmp_path


def signal_after(signum: int, calls: int):
    """A function sending `signum` to this process at its `calls`-th call (earlier calls return '0')."""
    import os

    count = [0]

    def hit(*args, **kwargs):
        count[0] += 1
        if count[0] >= calls:
            os.kill(os.getpid(), signum)
        return "0"
    return hit


def signal_after_lines(target: str, lines: int, signum: int):
    """`target` (a line generator) yielding its first `lines` lines, then sending `signum` to this process."""
    import importlib
    import os

    module, name = target.rsplit(".", 1)
    original = getattr(importlib.import_module(module), name)

    def lines_then_signal(*args, **kwargs):
        for i, line in enumerate(original(*args, **kwargs)):
            if i >= lines:
                os.kill(os.getpid(), signum)
            yield line
    return lines_then_signal


CASES = [
    ("convert {d}/in.nbest -o {d}/out", "rerank.formats.moses.iter_moses_lines", 1),   # mid-write of the output
    ("apply {d}/in.nbest -w {d}/w.json -o {d}/out --nbest-out {d}/out.nbest", "rerank.formats.moses.iter_moses_lines", 1),
    ("features {d}/in.nbest --which mbr -o {d}/out", "rerank.consensus.MBRFeature.compute", 1),
    ("tune {d}/in.nbest -r {d}/ref -o {d}/out --epochs 2", "rerank.weights.json.dump", 1),
    ("eval -r {d}/ref -b {d}/base {d}/in.nbest.1best -o {d}/out.md --metrics bleu --ar 5 --bootstrap 0",
     "rerank.evaljob.json.dump", 1),
]


@pytest.mark.parametrize("signum,status", SIGNALS, ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("line,target,calls", CASES, ids=[f"{c[0].split()[0]}-{c[1].split('.')[-1]}" for c in CASES])
def test_a_signal_mid_command_exits_128_plus_its_number_with_one_line_and_no_output(
        work, capsys, monkeypatch, line, target, calls, signum, status):
    (work / "in.nbest.1best").write_text("a b c\nd e\n")
    before = {p.name: p.read_bytes() for p in work.iterdir()}
    handlers = {s: signal.getsignal(s) for s, _ in SIGNALS}
    if target.endswith("iter_moses_lines"):
        monkeypatch.setattr(target, signal_after_lines(target, calls, signum))
    else:
        monkeypatch.setattr(target, signal_after(signum, calls))
    argv = line.format(d=work).split()
    assert main(argv) == status
    err = capsys.readouterr().err.splitlines()  # what the command said before, then one line
    assert err[-1] == f"rerank {argv[0]}: terminated ({signal.Signals(signum).name})"
    assert not any("Traceback" in x or "rror" in x for x in err)
    assert {p.name: p.read_bytes() for p in work.iterdir()} == before  # no output, no temp file, inputs unchanged
    assert {s: signal.getsignal(s) for s, _ in SIGNALS} == handlers    # the handlers are put back


def test_an_ignored_sighup_stays_ignored(work, capsys):
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)   # as under nohup
    try:
        assert main(["convert", str(work / "in.nbest"), "-o", str(work / "out")]) == 0
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert (work / "out").read_text().count("\n") == 3


# A real `rerank convert` (console script's run(): the process's exit status) that has written part
# of its output and waits on its standard input, until the test sends the signal
BLOCKED_WRITER = """
import sys
import rerank.formats.moses as moses
original = moses.iter_moses_lines

def lines_then_wait(*args, **kwargs):
    for i, line in enumerate(original(*args, **kwargs)):
        if i == 1:
            print("ready", file=sys.stderr, flush=True)
            sys.stdin.read()   # blocks: only the signal ends it
        yield line

moses.iter_moses_lines = lines_then_wait
sys.argv = ["rerank", *sys.argv[1:]]
from rerank.cli import run
run()
"""


@pytest.mark.parametrize("signum,status", SIGNALS, ids=["SIGTERM", "SIGHUP"])
def test_a_signal_from_outside_ends_a_real_process_cleanly(work, signum, status):
    proc = subprocess.Popen([sys.executable, "-c", BLOCKED_WRITER, "convert", str(work / "in.nbest"),
                             "-o", str(work / "out")], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s, _ in SIGNALS])
    try:
        assert proc.stderr.readline() == b"ready\n"
        assert len(temps(work)) == 1   # the output is being written
        proc.send_signal(signum)
        proc.wait(timeout=HANG_SECONDS)
        err = proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == status
    assert err == f"rerank convert: terminated ({signal.Signals(signum).name})\n"
    assert not (work / "out").exists() and temps(work) == []
