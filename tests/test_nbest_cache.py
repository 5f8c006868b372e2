"""The binary cache of parsed n-best lists: the same list and notes as a parse, a changed or
corrupt entry or file never used, an unwritable folder harmless, concurrent readers safe."""

from __future__ import annotations

import concurrent.futures
import gzip
import io
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from rerank.formats import ReadReport, cache as nbcache, read_nbest
from tests.cli_helpers import run

DATA = Path(__file__).parent / "data"
JOSHUA = DATA / "joshua10" / "nbest.joshua"  # OOVPenalty missing on some lines: a note and missing counts
MOSES_GZ = Path(__file__).parent.parent / "rerank" / "data" / "multi30k" / "optimised.val.20best.gz"
FAIRSEQ = "S-1\tb c\nT-1\tB C\nH-1\t-0.5\tb c\nD-1\t-0.5\tb c\nS-0\ta\nT-0\tA\nH-0\t-0.2\ta\nD-0\t-0.2\ta\nD-0\t-0.9\ta a\n"


@pytest.fixture(autouse=True)
def no_environment(monkeypatch):
    monkeypatch.delenv("RERANK_CACHE_DIR", raising=False)
    monkeypatch.delenv("RERANK_CACHE_MAX_MB", raising=False)


def identical(a, b) -> bool:
    return (a == b and a.groups == b.groups and a.missing == b.missing and a.feature_names == b.feature_names
            and a.hyps.raw()[0] == b.hyps.raw()[0] and np.array_equal(a.hyps.raw()[1], b.hyps.raw()[1])
            and a.features.dtype == b.features.dtype and a.features.shape == b.features.shape)


def read_twice(path, directory, **options):
    """(parse, report), (first cached read, report), (second cached read, report)."""
    results = []
    for cache in (False, directory, directory):
        report = ReadReport()
        results.append((read_nbest(str(path), report=report, cache=cache, **options), report))
    return results


def entries(directory) -> list[Path]:
    return sorted(Path(directory).glob("*.nbc"))


@pytest.mark.parametrize("kind", ["joshua", "moses.gz", "fairseq", "moses-extra-fields"])
def test_hit_returns_the_parsed_list_and_notes(tmp_path, kind):
    path = {"joshua": JOSHUA, "moses.gz": MOSES_GZ}.get(kind, tmp_path / "list.txt")
    if kind == "fairseq":
        path.write_text("log line\n" + FAIRSEQ)
    if kind == "moses-extra-fields":
        path.write_text("0 ||| a b ||| f= 1 2 ||| 3 ||| x\n0 |||  ||| f= 0 -0.0 ||| 1 ||| y\n1 ||| c ||| f= 5 6 ||| 7 ||| z\n")
    (parsed, want), (first, report1), (second, report2) = read_twice(path, tmp_path / "c")
    assert len(entries(tmp_path / "c")) == 1
    assert identical(parsed, first) and identical(parsed, second)
    assert want == report1 == report2
    assert want.notes or kind == "moses.gz"


def test_a_hit_does_not_parse(tmp_path, monkeypatch):
    want = read_nbest(str(JOSHUA), cache=tmp_path)
    import rerank.formats as formats

    monkeypatch.setattr(formats, "read_moses", lambda *a, **k: pytest.fail("parsed although cached"))
    assert identical(read_nbest(str(JOSHUA), cache=tmp_path), want)


def test_a_changed_file_or_other_options_miss(tmp_path):
    path = tmp_path / "n.txt"
    path.write_text("0 ||| a ||| f= 1 ||| 1\n")
    first = read_nbest(str(path), cache=tmp_path / "c")
    path.write_text("0 ||| a ||| f= 2 ||| 1\n")  # same size, maybe the same mtime: the bytes differ
    second = read_nbest(str(path), cache=tmp_path / "c")
    assert first.features[0, 0] == 1 and second.features[0, 0] == 2
    read_nbest(str(path), cache=tmp_path / "c", strict=True)
    read_nbest(str(path), cache=tmp_path / "c", fmt="joshua")
    assert len(entries(tmp_path / "c")) == 4


@pytest.mark.faults
@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "payload-byte", "header-byte", "other-key", "directory"])
def test_a_corrupt_entry_is_parsed_again_silently(tmp_path, damage):
    read_nbest(str(JOSHUA), cache=tmp_path)
    (entry,) = entries(tmp_path)
    data = bytearray(entry.read_bytes())
    if damage == "truncate":
        data = data[:len(data) - 100]
    elif damage == "garbage":
        data = bytearray(os.urandom(len(data)))
    elif damage == "empty":
        data = bytearray()
    elif damage == "payload-byte":
        data[-200] ^= 0x40
    elif damage == "header-byte":
        data[20] ^= 0x01
    elif damage == "other-key":
        other = tmp_path / "o.txt"
        other.write_text("0 ||| a ||| f= 1 ||| 1\n")
        read_nbest(str(other), cache=tmp_path)
        data = bytearray(next(e for e in entries(tmp_path) if e != entry).read_bytes())
    if damage == "directory":
        entry.unlink()
        entry.mkdir()
    else:
        entry.write_bytes(bytes(data))
    report = ReadReport()
    assert identical(read_nbest(str(JOSHUA), cache=tmp_path, report=report), read_nbest(str(JOSHUA), cache=False))
    assert [n for n in report.notes if "cache" in n] == ([] if damage != "directory" else report.notes[-1:])
    if damage != "directory":  # rewritten whole
        assert nbcache.load_entry(str(entry), entry.stem) is not None


@pytest.mark.faults
def test_an_unwritable_cache_folder_still_reads(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    report = ReadReport()
    nbest = read_nbest(str(JOSHUA), cache=blocker / "cache", report=report)
    assert identical(nbest, read_nbest(str(JOSHUA), cache=False))
    assert any(n.startswith("not cached: cannot write to") for n in report.notes)
    if os.geteuid() != 0:  # root writes anywhere
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o500)
        try:
            assert identical(read_nbest(str(JOSHUA), cache=folder), nbest)
        finally:
            folder.chmod(0o700)


def test_standard_input_plain_lists_and_fifos_are_not_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"0 ||| a ||| f= 1\n")))
    assert read_nbest("-", cache=tmp_path / "c").n_hyps == 1
    plain = tmp_path / "p.txt"
    plain.write_text("a\nb\n")
    (tmp_path / "p.txt.ids").write_text("0\n0\n")
    read_nbest(str(plain), cache=tmp_path / "c")
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        assert nbcache.entry_key(str(fifo), {}) is None  # not opened: that would wait for a writer
    assert nbcache.entry_key(str(tmp_path), {}) is None
    assert not (tmp_path / "c").exists() or entries(tmp_path / "c") == []


def test_bad_input_is_the_same_error_and_nothing_is_cached(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.nbest"
    bad.write_text("0 ||| a ||| f= 1 ||| 1\n2 ||| b ||| f= 1 ||| 1\n")
    monkeypatch.setenv("RERANK_CACHE_DIR", str(tmp_path / "c"))
    code, out, err = run(["info", bad], capsys)
    assert code == 2 and out == "" and err == f"rerank info: error: {bad}:2: sentence id 2 after 0: sentence 1 has no hypotheses\n"
    assert not (tmp_path / "c").exists() or entries(tmp_path / "c" / "nbest") == []


def test_commands_give_the_same_output_cached(tmp_path, capsys, monkeypatch):
    outputs = []
    for cache in (["--no-cache"], ["--cache"], ["--cache"]):
        monkeypatch.setenv("RERANK_CACHE_DIR", str(tmp_path / "c"))
        info = run(["info", JOSHUA, *cache], capsys)
        code, _, err = run(["convert", JOSHUA, "-o", tmp_path / "out.nbest", *cache], capsys)
        outputs.append((info, code, err, (tmp_path / "out.nbest").read_text()))
    assert outputs[0] == outputs[1] == outputs[2] and len(entries(tmp_path / "c" / "nbest")) == 1
    monkeypatch.delenv("RERANK_CACHE_DIR")
    assert run(["info", JOSHUA], capsys) == outputs[0][0]


def test_the_least_recently_used_entries_go_over_the_limit(tmp_path):
    paths = []
    for k in range(3):
        paths.append(tmp_path / f"{k}.txt")
        paths[-1].write_text(f"0 ||| {'a ' * 1000}||| f= {k} ||| 1\n")
        read_nbest(str(paths[-1]), cache=tmp_path / "c")
    files = entries(tmp_path / "c")
    for age, file in enumerate(sorted(files, key=lambda f: f.stat().st_mtime_ns)):
        os.utime(file, ns=(10 ** 9 * (age + 1),) * 2)
    oldest = min(files, key=lambda f: f.stat().st_mtime_ns)
    removed = nbcache.evict(str(tmp_path / "c"), limit_mb=2.5 * files[0].stat().st_size / (1 << 20))
    assert removed == [str(oldest)] and len(entries(tmp_path / "c")) == 2


def _read_in_process(args):
    path, directory = args
    nbest = read_nbest(path, cache=directory)
    return nbest.features.tobytes(), nbest.hyps.raw()[0]


@pytest.mark.faults
def test_concurrent_readers_and_writers(tmp_path):
    path = tmp_path / "big.gz"
    with gzip.open(MOSES_GZ, "rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    want = read_nbest(str(path), cache=False)
    with concurrent.futures.ProcessPoolExecutor(4) as pool:
        results = list(pool.map(_read_in_process, [(str(path), str(tmp_path / "c"))] * 8))
    assert all(r == (want.features.tobytes(), want.hyps.raw()[0]) for r in results)
    (entry,) = entries(tmp_path / "c")
    assert not [p for p in (tmp_path / "c").iterdir() if p.suffix != ".nbc"]  # no temporary file left
    assert identical(nbcache.load_entry(str(entry), entry.stem)[0], want)


def test_one_cache_root_for_every_cache(tmp_path, monkeypatch):
    """RERANK_CACHE_DIR is the root of the n-best cache, the score cache and METEOR's indexes
    (rerank.caches); without it they live under $XDG_CACHE_HOME/mlmme-rerank."""
    from rerank.metrics.meteor.paraphrase import cache_dir as meteor_dir
    from rerank.score_cache import default_cache_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "xdg" / "mlmme-rerank"
    assert nbcache.cache_dir(True) == str(root / "nbest") and nbcache.cache_dir(None) is None
    assert default_cache_path() == str(root / "scores.sqlite") and meteor_dir() == str(root / "meteor")
    monkeypatch.setenv("RERANK_CACHE_DIR", str(tmp_path / "mine"))
    assert nbcache.cache_dir(None) == nbcache.cache_dir(True) == str(tmp_path / "mine" / "nbest")
    assert default_cache_path() == str(tmp_path / "mine" / "scores.sqlite")
    assert meteor_dir() == str(tmp_path / "mine" / "meteor")
    read_nbest(str(JOSHUA))  # on when RERANK_CACHE_DIR is set
    assert len(entries(tmp_path / "mine" / "nbest")) == 1


def test_every_cache_lands_under_rerank_cache_dir(tmp_path, monkeypatch):
    """Written, not only named: an n-best entry, a score and a METEOR index all go under
    $RERANK_CACHE_DIR, and nothing under $XDG_CACHE_HOME or the home folder."""
    import rerank.metrics.meteor.paraphrase as para
    from rerank.score_cache import ScoreCache, default_cache_path

    for name in ("XDG_CACHE_HOME", "HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("RERANK_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setattr(para, "_OPEN", {})
    read_nbest(str(JOSHUA))
    scores = ScoreCache(default_cache_path())
    scores.put("model", [("source", "output")], [-1.5], [2])
    scores.close()
    para.open_index(str(DATA / "eval" / "meteor" / "paraphrase-en.gz"))
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert [p.split("/")[1] for p in written] == ["meteor", "nbest", "scores.sqlite"], written
    assert all(p.startswith("mine/") for p in written), written
