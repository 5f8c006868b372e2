"""`rerank convert` and `rerank apply` stream a regular Moses/Joshua file in two passes: the same
bytes, notes and errors as the whole-list path, in bounded memory."""

from __future__ import annotations

import gzip
import json
import os
import random

import numpy as np
import pytest

from rerank.nbestfile import NBestFile
from rerank.errors import InputError
from rerank.formats.moses import fast as moses_fast
from rerank.formats.moses.stream import iter_moses_chunks, scan_moses
from rerank.weights import window_scores
from tests.cli_helpers import run

LAYOUT = NBestFile.layout   # the two-pass path's scan, before a test's spy replaces it


def _number(rng: random.Random) -> str:
    return repr(rng.choice([rng.uniform(-50, 5), rng.randint(-9, 9), rng.uniform(-1, 1) * 1e-7]))


def _joshua(rng: random.Random, n_sent: int, late_at: int, total: bool = True, extra: bool = False) -> list[str]:
    """Joshua lines: features left out here and there, shuffled on some lines, `late` from line `late_at`, blank hyps."""
    lines, names = [], [f"f{i}" for i in range(6)]
    for sent in range(n_sent):
        for _ in range(rng.randint(1, 12)):
            feats = [n for n in names if rng.random() > 0.05] or ["f0"]
            if len(lines) >= late_at:
                feats.append("late")
            if rng.random() < 0.05:
                rng.shuffle(feats)
            hyp = "" if rng.random() < 0.1 else " ".join(rng.choice(["a", "ç", "x", "q=1"]) for _ in range(rng.randint(1, 4)))
            parts = [str(sent), hyp, " ".join(f"{n}={_number(rng)}" for n in feats)]
            parts += [_number(rng)] if total else []
            parts += ["extra"] if extra else []
            lines.append(" ||| ".join(parts))
    return lines


def _moses(rng: random.Random, n_sent: int, late_at: int, total: bool = True, words=("w",)) -> list[str]:
    """Moses lines with groups of several values; a group `late` from line `late_at`."""
    lines = []
    for sent in range(n_sent):
        for _ in range(rng.randint(1, 15)):
            groups = [("lm", 1), ("tm", 4), ("d", 3)] + ([("late", 2)] if len(lines) >= late_at else [])
            feats = " ".join(f"{g}= " + " ".join(_number(rng) for _ in range(w)) for g, w in groups)
            hyp = "" if rng.random() < 0.05 else "".join(rng.choice(words) + " " for _ in range(rng.randint(0, 3))) + "end"
            lines.append(" ||| ".join([str(sent), hyp, feats] + ([_number(rng)] if total else [])))
    return lines


LISTS = {
    "joshua_late.nbest": lambda rng: _joshua(rng, 60, 300),
    "joshua_nototal.nbest.gz": lambda rng: _joshua(rng, 40, 100, total=False),
    "joshua_extra.nbest": lambda rng: _joshua(rng, 30, 10 ** 9, extra=True),
    "moses_late.nbest": lambda rng: _moses(rng, 50, 250),
    "moses_nototal.nbest": lambda rng: _moses(rng, 40, 10 ** 9, total=False),
    # segmented and escaped text, rare: the two-pass path's notes name them as the whole read's do
    "moses_pieces.nbest.gz": lambda rng: _moses(rng, 40, 10 ** 9, words=("w",) * 60 + ("wa@@", "\u2581w", "&apos;s")),
}


def _write_list(tmp_path, name: str) -> str:
    data = ("\n".join(LISTS[name](random.Random(name)) + [""])).encode("utf-8")
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return str(path)


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 1 KB and w·f windows of 8 rows: sentences and windows cross many block boundaries."""
    monkeypatch.setattr(moses_fast, "BLOCK", 1024)
    monkeypatch.setattr("rerank.weights.SCORE_ROWS", 8)
    monkeypatch.setenv("RERANK_CACHE_DIR", "")


def _outcome(argv, tmp_path, capsys, monkeypatch, streamed: bool):
    """(status, stdout, stderr, output files) of `rerank ARGV`, streamed or read whole."""
    out = tmp_path / ("streamed" if streamed else "whole")
    out.mkdir()
    used = []
    scan = LAYOUT

    def spy(*args, **kwargs):
        layout = scan(*args, **kwargs) if streamed else None
        used.append(layout is not None)
        return layout

    monkeypatch.setattr(NBestFile, "layout", spy)
    try:
        code, stdout, stderr = run([a.replace("OUT", str(out)) for a in argv], capsys)
    except InputError as exc:
        code, stdout, stderr = str(exc), "", capsys.readouterr().err
    files = {p: (out / p).read_bytes() for p in sorted(os.listdir(out))}
    return (code, stdout, stderr.replace(str(out), "OUT"), files), any(used)


def _same(argv, tmp_path, capsys, monkeypatch, expect_streamed: bool = True):
    streamed, used = _outcome(argv, tmp_path, capsys, monkeypatch, True)
    whole, _ = _outcome(argv, tmp_path, capsys, monkeypatch, False)
    assert streamed == whole
    assert used == expect_streamed
    return streamed


@pytest.mark.parametrize("name", sorted(LISTS))
@pytest.mark.parametrize("to", ["moses", "joshua"])
def test_convert_streams_the_same_bytes(tmp_path, capsys, monkeypatch, name, to):
    path = _write_list(tmp_path, name)
    code, _, stderr, files = _same(["convert", path, "-o", "OUT/out.nbest", "--to", to], tmp_path, capsys, monkeypatch)
    assert code == 0 and files["out.nbest"]
    if "late" in name:
        assert "feature late" in stderr and "missing on" in stderr


@pytest.mark.parametrize("name", sorted(LISTS))
def test_apply_streams_the_same_bytes(tmp_path, capsys, monkeypatch, name):
    path = _write_list(tmp_path, name)
    names = ["f0", "f3", "late"] if name.startswith("joshua") else ["lm", "tm_2", "d_0", "late_1"]
    weights = tmp_path / "w.json"
    weights.write_text(json.dumps({n: 0.5 - k for k, n in enumerate(names) if "late" not in n or "late" in name}))
    argv = ["apply", path, "-w", str(weights), "-o", "OUT/best.txt", "--nbest-out", "OUT/nb.nbest", "--to", "joshua"]
    code, _, _, files = _same(argv, tmp_path, capsys, monkeypatch)
    assert code == 0 and set(files) == {"best.txt", "nb.nbest"}
    (tmp_path / "stdout").mkdir()
    code, stdout, _, files = _same(argv[:4] + ["-o", "-"], tmp_path / "stdout", capsys, monkeypatch)
    assert code == 0 and stdout and not files


@pytest.mark.parametrize("argv", [
    ["convert", "LIST", "-o", "OUT/out", "--strict"],  # a feature first seen late: the line reader names the line
    ["convert", "LIST", "-o", "OUT/out", "--to", "fairseq"],
    ["convert", "LIST", "-o", "OUT/out", "--to", "plain"],
    ["apply", "LIST", "-w", "W", "-o", "-", "--nbest-out", "-"],
])
def test_what_does_not_stream_is_read_whole(tmp_path, capsys, monkeypatch, argv):
    path = _write_list(tmp_path, "joshua_late.nbest")
    (tmp_path / "w.json").write_text(json.dumps({"f0": 1.0}))
    argv = [{"LIST": path, "W": str(tmp_path / "w.json")}.get(a, a) for a in argv]
    code, _, stderr, files = _same(argv, tmp_path, capsys, monkeypatch, expect_streamed=False)
    if "--strict" in argv:
        assert code == 2 and "is missing (strict reading)" in stderr and not files


def test_bad_line_deep_in_the_file_is_the_same_error(tmp_path, capsys, monkeypatch):
    lines = _moses(random.Random(3), 40, 10 ** 9)
    lines[200] = lines[200].replace("lm= ", "lm= inf ")
    path = tmp_path / "bad.nbest"
    path.write_text("\n".join(lines) + "\n")
    code, _, stderr, files = _same(["convert", str(path), "-o", "OUT/out"], tmp_path, capsys, monkeypatch, expect_streamed=False)
    assert code == 2 and ":201:" in stderr and not files


def test_chunks_hold_whole_sentences_in_order(tmp_path):
    path = _write_list(tmp_path, "joshua_late.nbest")
    layout = scan_moses(path)
    chunks = list(iter_moses_chunks(path, layout))
    assert len(chunks) > 10
    assert [first for first, _ in chunks] == list(np.cumsum([0] + [c.n_sentences for _, c in chunks[:-1]]))
    assert sum(c.n_hyps for _, c in chunks) == layout["n_hyps"] and chunks[-1][0] + chunks[-1][1].n_sentences == layout["n_sentences"]


def test_a_file_changed_between_the_passes_is_an_error(tmp_path):
    path = _write_list(tmp_path, "moses_late.nbest")
    layout = scan_moses(path)
    with open(path, "a") as f:
        f.write("999 ||| x ||| new= 1 ||| 0\n")
    with pytest.raises(InputError, match="changed while it was read"):
        list(iter_moses_chunks(path, layout))


def test_window_scores_are_the_rows_products():
    rng = np.random.default_rng(0)
    features, w = rng.standard_normal((37, 5)), rng.standard_normal(5)
    assert np.allclose(window_scores(features, w), features @ w)
    assert window_scores(np.zeros((0, 5)), w).shape == (0,)
