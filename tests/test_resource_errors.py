"""A full disk, a quota, a read-only file system: the system's refusal to write is one line naming
the file in the system's words (`rerank CMD: error: PATH: no space left on device`), exit 2,
nothing written and every input unchanged, for every writing command and for standard output. A
score cache that cannot be written is a note: the scores are kept and the output written.

The full disk is the write of one output's temporary file failing with ENOSPC (os.write patched
for that file alone, rerank.io.atomic_write writes through it), standard output is /dev/full, and
the full score cache is SQLite's own SQLITE_FULL (a page limit)."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sqlite3
import subprocess
import sys

import pytest

from rerank.score_cache import ScoreCache
from tests.test_bad_inputs_common import command_line, run, snapshot, write_files

EVAL = "eval -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu --ar 20 --bootstrap 0 --quiet"
TUNE = "tune {in_nbest} -r {ref_txt} --epochs 2 --quiet"
# name -> (command line, the output whose disk is full: its name in the folder[, the file written
# before it that is kept, whole: tune's finished run, which a rerun resumes from, and its weights)]
WRITES = {
    "convert": ("convert {in_nbest} --to joshua -o {d}/out.nbest", "out.nbest"),
    "convert-gz": ("convert {in_nbest} -o {d}/out.nbest.gz", "out.nbest.gz"),
    "convert-plain-ids": ("convert {in_nbest} --to plain -o {d}/out.txt", "out.txt.ids"),
    "add-feature": ("add-feature {in_nbest} --name s --scores {scores_txt} -o {d}/out.nbest", "out.nbest"),
    "features-mbr": ("features {in_nbest} --which mbr -o {d}/out.nbest --quiet", "out.nbest"),
    "tune": (TUNE + " -o {d}/w.json", "w.json"),
    "tune-runs": (TUNE + " -o {d}/w.json --runs 2", "w.run2.json", "w.run1.json"),
    "tune-plot": (TUNE + " -o {d}/w.json --plot {d}/curve.png", "curve.png", "w.json"),
    "apply": ("apply {in_nbest} -w {weights_json} -o {d}/best.txt", "best.txt"),
    "apply-nbest-out": ("apply {in_nbest} -w {weights_json} -o {d}/best.txt --nbest-out {d}/out.nbest", "out.nbest"),
    "oracle": ("oracle {in_nbest} -r {ref_txt} -o {d}/oracle.txt --quiet", "oracle.txt"),
    "eval": (EVAL + " -o {d}/res.md", "res.md"),
    "eval-config": (EVAL + " -o {d}/res.md", "res.config.json"),
    "eval-plot": (EVAL.replace("--bootstrap 0", "--bootstrap 20") + " -o {d}/res.md --plot {d}/d.png", "d.png"),
    "report": ("report -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu --ar 20 --bootstrap 0 -o {d}/r.html "
               "--quiet", "r.html"),
}


def disk_full_for(monkeypatch, folder, name: str, code: int = errno.ENOSPC) -> None:
    """Every write of the temporary file of `folder`/`name` fails with `code`, as on a full disk."""
    real = os.write

    def write(fd, data):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if os.path.dirname(target) == str(folder) and f".{name}." in os.path.basename(target):
            raise OSError(code, os.strerror(code))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


pytestmark = [pytest.mark.faults, pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")]


@pytest.fixture
def work(tmp_path):
    """A folder with a valid file of every kind (tests.test_bad_inputs_common)."""
    return write_files(tmp_path)


@pytest.mark.parametrize("name", WRITES)
def test_a_full_disk_is_one_line_and_nothing_is_written(work, capsys, monkeypatch, name):
    line, victim, *kept = WRITES[name]
    argv = command_line(work, line, {})
    before = snapshot(work)
    disk_full_for(monkeypatch, work, victim)
    code, out, err = run(argv, capsys)
    assert code == 2, err
    *said, error = err.splitlines()   # the error, last and once, after what the command said before
    assert error == f"rerank {argv[0]}: error: {work / victim}: no space left on device", err
    assert "Traceback" not in err and not any("error" in x for x in said), err
    after = snapshot(work)
    for name in kept:   # a whole JSON file
        assert json.loads((work / name).read_text(encoding="utf-8"))["weights"]
        del after[name]
    assert after == before   # no output, no temporary file, every input as it was
    monkeypatch.undo()
    code, _, err = run(argv, capsys)   # with room, the same command writes it
    assert code == 0 and (work / victim).exists(), err


@pytest.mark.parametrize("code", [errno.EDQUOT, errno.EFBIG])
def test_a_quota_or_a_size_limit_is_said_in_the_systems_words(work, capsys, monkeypatch, code):
    argv = command_line(work, WRITES["convert"][0], {})
    before = snapshot(work)
    disk_full_for(monkeypatch, work, "out.nbest", code)
    status, _, err = run(argv, capsys)
    assert status == 2 and err == f"rerank convert: error: {work / 'out.nbest'}: {os.strerror(code).lower()}\n"
    assert snapshot(work) == before


def test_a_bug_while_writing_keeps_its_traceback(work, capsys, monkeypatch):
    """An OSError that is no refusal of the system to write stays a bug (exit 1)."""
    disk_full_for(monkeypatch, work, "out.nbest", errno.EBADF)
    status, _, err = run(command_line(work, WRITES["convert"][0], {}), capsys)
    assert status == 1 and "Traceback" in err and "internal error" in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("line", ["apply {in_nbest} -w {weights_json} -o -", "convert {in_nbest} -o -",
                                  "info {in_nbest}"])
def test_standard_output_on_a_full_device_is_one_line(work, line):
    argv = command_line(work, line, {})
    before = snapshot(work)
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "rerank", *argv], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"rerank {argv[0]}: error: standard output: no space left on device\n"
    assert snapshot(work) == before


def fill_up(cache: ScoreCache) -> int:
    """Make the score cache's disk full: no new page (SQLite's own SQLITE_FULL past a page
    limit) and the free room of its pages taken by filler rows; returns their number."""
    db = cache.db
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    rows = 0
    with contextlib.suppress(sqlite3.Error):   # SQLITE_FULL rolls its whole transaction back: one row each
        while True:
            db.execute("INSERT INTO scores VALUES (?, 0, 0)", (os.urandom(16),))
            db.commit()
            rows += 1
    return rows


def test_a_score_cache_that_cannot_be_written_is_a_note_once(tmp_path, caplog):
    path = str(tmp_path / "scores.sqlite")
    cache = ScoreCache(path)
    fillers = fill_up(cache)
    pairs = [(f"source {k}", "output " * 50 + str(k)) for k in range(500)]
    with caplog.at_level(logging.WARNING, logger="rerank"):
        cache.put("model", pairs, [float(k) for k in range(500)], [1.0] * 500)
        cache.put("model", pairs[:1], [0.0], [1.0])
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and notes[0].startswith(f"note: {path}: cannot write the score cache (database or disk")
    assert len(cache) == fillers and cache.get("model", pairs) == {}
    cache.close()
    roomy = ScoreCache(path)   # the file is intact: with room, it takes the scores
    roomy.put("model", pairs, [float(k) for k in range(500)], [1.0] * 500)
    assert roomy.get("model", pairs[:2]) == {0: (0.0, 1.0), 1: (1.0, 1.0)} and len(roomy) == fillers + 500
    roomy.close()


@pytest.mark.neural
def test_a_feature_with_a_full_score_cache_writes_its_output(tiny, work, capsys, monkeypatch):
    """features --which lm with a score cache that cannot be written: a note, and the scores in
    the output as without a cache."""
    import rerank.score_cache

    real = rerank.score_cache.ScoreCache.__init__

    def full(self, path):
        real(self, path)
        fill_up(self)

    line = "features {in_nbest} --which lm --lm-model " + tiny["gpt2_ct2"] + " --quiet -o {d}/"
    code, _, err = run(command_line(work, line + "plain.nbest", {}), capsys)
    assert code == 0, err
    monkeypatch.setattr(rerank.score_cache.ScoreCache, "__init__", full)
    code, _, err = run(command_line(work, line + "cached.nbest --score-cache {d}/scores.sqlite", {}), capsys)
    assert code == 0, err
    assert "cannot write the score cache" in err and err.startswith("note: ")
    assert (work / "cached.nbest").read_bytes() == (work / "plain.nbest").read_bytes()
