"""The bulk Moses/Joshua reader gives exactly the line reader's list, or hands the file over to it."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rerank.formats import ReadReport, read_nbest
from rerank.formats.moses import fast as moses_fast
from rerank.formats.moses import read_moses, read_moses_lines
from rerank.formats.moses.fast import read_moses_fast

WORDS = st.text(alphabet=st.sampled_from(list("ab|= xyzäß€\t")), max_size=12)
NUMBERS = st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
                    st.integers(-10 ** 6, 10 ** 6).map(str), st.sampled_from(["-0.000", "1e5", "+3", "1_0", ".5"]))


def same(a, b) -> bool:
    return (a == b and a.groups == b.groups and a.missing == b.missing and a.features.dtype == b.features.dtype
            and a.features.shape == b.features.shape and np.array_equal(a.offsets, b.offsets))


@st.composite
def moses_files(draw):
    """Well-formed Moses or Joshua text: 3 to 5 fields, ids 0, 1, 2, ...; one layout for Moses,
    Joshua lines may leave features out and change their order."""
    joshua = draw(st.booleans())
    names = draw(st.lists(st.sampled_from(["lm", "tm", "w", "nmt_norm", "x1"]), min_size=1, max_size=4, unique=True))
    widths = [1 if joshua else draw(st.integers(1, 3)) for _ in names]
    fields = draw(st.integers(3, 5))
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6))
    lines = []
    for sent, size in enumerate(sizes):
        for _ in range(size):
            values = [[draw(NUMBERS) for _ in range(w)] for w in widths]
            pairs = list(zip(names, values))
            if joshua and draw(st.booleans()):
                pairs = draw(st.permutations(pairs))[:draw(st.integers(1, len(pairs)))]
            feats = " ".join(f"{n}={v[0]}" if joshua else f"{n}= {' '.join(v)}" for n, v in pairs)
            parts = [str(sent), draw(WORDS), feats] + [draw(NUMBERS) for _ in range(fields - 3)]
            lines.append(" ||| ".join(parts))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


def write(tmp_path, text: str, name: str = "n.txt", raw: bytes | None = None) -> str:
    path = tmp_path / name
    data = text.encode("utf-8") if raw is None else raw
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return str(path)


def outcome(fn, path, strict=False):
    report = ReadReport()
    try:
        return fn(path, strict=strict, report=report), report.notes
    except Exception as exc:  # noqa: BLE001 - the outcome includes the error
        return type(exc).__name__, str(exc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(text=moses_files())
def test_fast_equals_lines_on_generated_files(tmp_path, text):
    path = write(tmp_path, text)
    slow, slow_notes = outcome(read_moses_lines, path)
    fast = read_moses_fast(path)
    if isinstance(slow, str):
        assert fast is None
        return
    if fast is not None:  # a well-formed file may still go the line reader's way (e.g. a '|||' in a hypothesis)
        assert same(fast[0], slow)
    got, notes = outcome(read_moses, path)
    assert same(got, slow) and notes == slow_notes
    assert outcome(read_moses, path, strict=True)[1] == outcome(read_moses_lines, path, strict=True)[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(text=moses_files(), cut=st.integers(0, 400), junk=st.sampled_from(
    ["", "\r", "\x00", "|||", " ||| ", "|", "=", "= ", "nan", "1e999", "-", "\n", "\n\n", "x=", "\ufeff", "a=1", " a"]))
def test_corrupted_files_give_the_line_readers_outcome(tmp_path, text, cut, junk):
    cut = min(cut, len(text))
    path = write(tmp_path, text[:cut] + junk + text[cut:])
    slow = outcome(read_moses_lines, path)
    got = outcome(read_moses, path)
    if isinstance(slow[0], str):
        assert got == slow
    else:
        assert same(got[0], slow[0]) and got[1] == slow[1]


@pytest.mark.parametrize("text", [
    "0 ||| a ||| x= 1\n2 ||| b ||| x= 1\n",          # an id gap
    "1 ||| a ||| x= 1\n",                           # does not start at 0
    "0 ||| a ||| x= 1 2\n0 ||| b ||| x= 1\n",       # the width changes
    "0 ||| a ||| x=1\n0 ||| b ||| y=1\n",           # Joshua: the features change
    "0 ||| a ||| x= 1 ||| 2\n0 ||| b ||| x= 1\n",   # the total disappears
    "0 ||| a ||| x= inf\n",
    "0 ||| a ||| 1x= 1\n",
    "0 ||| a ||| x= 1 x_0= 2\n",
    "0 ||| a ||| x= 1 ||| 1 ||| extra\n",
    "0 ||| a ||||| x= 1\n",
    "0 ||| a ||| x= 1\r\n",
    "\ufeff0 ||| a ||| x= 1\n",
    "0 ||| a ||| \n",
    "00 ||| a ||| x= 1\n0 ||| b ||| x= 2\n",
    "0 ||| a ||| x=1 2\n",
    "",
])
def test_edge_files(tmp_path, text):
    for name in ("n.txt", "n.gz"):
        path = write(tmp_path, text, name)
        slow, got = outcome(read_moses_lines, path), outcome(read_moses, path)
        if isinstance(slow[0], str):
            assert got == slow
        else:
            assert same(got[0], slow[0]) and got[1] == slow[1]


def test_not_utf8_and_truncated_gzip(tmp_path):
    good = "0 ||| a ||| x= 1\n" * 10
    for name, raw in (("bad.txt", good.encode() + b"0 ||| \xff ||| x= 1\n"),
                      ("cut.gz", gzip.compress(good.encode())[:-6])):
        path = write(tmp_path, "", name, raw=raw)
        assert read_moses_fast(path) is None
        assert outcome(read_moses, path) == outcome(read_moses_lines, path)


def test_blocks_join_across_boundaries(tmp_path, monkeypatch):
    """Small blocks split lines and sentences anywhere: the list is the same."""
    text = "".join(f"{i // 3} ||| w{i} ä ||| a= {i} 1.5 b= -{i} ||| {i}.25\n" for i in range(200))
    path = write(tmp_path, text)
    monkeypatch.setattr(moses_fast, "BLOCK", 37)
    fast = read_moses_fast(path)
    assert fast is not None and same(fast[0], read_moses_lines(path))


def test_shipped_lists_take_the_fast_path():
    for path in ("rerank/data/multi30k/optimised.val.20best.gz", "rerank/data/examples/joshua-bn-en.10.nbest"):
        fast = read_moses_fast(path)
        assert fast is not None and same(fast[0], read_moses_lines(path))
        assert same(read_nbest(path), fast[0])
    report = ReadReport()
    read_nbest("rerank/data/examples/joshua-bn-en.10.nbest", report=report)
    assert report.notes == ["feature OOVPenalty missing on 11 of 82 lines, read as 0 (strict reading makes this an error)"]


def test_joshua_blocks_with_changing_layouts(tmp_path, monkeypatch):
    """Features left out, reordered and appearing late, across small blocks: the same list and notes."""
    lines = [f"{i // 4} ||| h{i} ||| " + " ".join(f"f{k}={i * k}.5" for k in range(i % 5, 6, 1 + i % 2)) for i in range(120)]
    path = write(tmp_path, "\n".join(lines) + "\n")
    monkeypatch.setattr(moses_fast, "BLOCK", 300)
    assert read_moses_fast(path) is not None
    assert outcome(read_moses, path)[1] == outcome(read_moses_lines, path)[1]
    assert same(outcome(read_moses, path)[0], outcome(read_moses_lines, path)[0])
    assert read_moses_fast(path, strict=True) is None
