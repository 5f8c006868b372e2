"""The two parsers of rerank.formats.moses: the bulk parser gives the line parser's list on every
well-formed list it takes, and hands a file over to the line parser only on NeedsLineReader (a
bug inside it propagates, it never shows as a slower read)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rerank.errors import InputError
from rerank.formats import ReadReport, read_nbest
from rerank.formats.moses import NeedsLineReader, read_moses, read_moses_lines, scan_moses
from rerank.formats.moses import fast, stream

NUMBER = st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
                   st.integers(-10 ** 6, 10 ** 6).map(str), st.sampled_from(["-0.000", "1e5", "+3", ".5"]))
WORD = st.text(alphabet=st.sampled_from(list("abz=äß€@▁&;")), min_size=1, max_size=6)


@st.composite
def nbest_text(draw) -> tuple[str, bool]:
    """(the lines of a Moses or Joshua list, whether its ids skip a sentence). Joshua lines may leave
    features out and reorder them; hypotheses may be empty; the total and a trailing field optional."""
    joshua = draw(st.booleans())
    names = draw(st.lists(st.sampled_from(["lm", "tm", "w", "nmt_norm", "OOVPenalty"]), min_size=1, max_size=4, unique=True))
    widths = [1 if joshua else draw(st.integers(1, 3)) for _ in names]
    fields = draw(st.integers(3, 5))
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=8))
    gap = draw(st.booleans()) and len(sizes) > 1
    lines = []
    for sent, size in enumerate(sizes):
        if gap and sent == len(sizes) - 1:
            sent += 1  # a sentence without hypotheses before the last
        for _ in range(size):
            pairs = list(zip(names, [[draw(NUMBER) for _ in range(w)] for w in widths]))
            if joshua and draw(st.booleans()):
                pairs = draw(st.permutations(pairs))[:draw(st.integers(1, len(pairs)))]
            feats = " ".join(f"{n}={v[0]}" if joshua else f"{n}= {' '.join(v)}" for n, v in pairs)
            hyp = " ".join(draw(st.lists(WORD, max_size=4)))
            lines.append(" ||| ".join([str(sent), hyp, feats] + [draw(NUMBER) for _ in range(fields - 3)]))
    return "\n".join(lines) + "\n", gap


def write(tmp_path, text: str, gz: bool) -> str:
    path = tmp_path / ("list.nbest.gz" if gz else "list.nbest")
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)


def assert_same(a, b) -> None:
    """Every part of two lists: offsets, hypotheses, features, names, groups, totals, missing counts."""
    np.testing.assert_array_equal(a.offsets, b.offsets)
    assert list(a.hyps) == list(b.hyps)
    assert a.features.dtype == b.features.dtype and a.features.shape == b.features.shape
    np.testing.assert_array_equal(a.features, b.features)
    assert a.feature_names == b.feature_names and a.groups == b.groups and a.missing == b.missing
    assert (a.scores is None) == (b.scores is None)
    if a.scores is not None:
        np.testing.assert_array_equal(a.scores, b.scores)


def outcome(fn, path, **kwargs):
    report = ReadReport()
    try:
        return fn(path, report=report, **kwargs), report.notes
    except InputError as exc:
        return "InputError", str(exc)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(case=nbest_text(), gz=st.booleans(), strict=st.booleans())
def test_the_bulk_and_the_line_parser_give_the_same_list(tmp_path, case, gz, strict):
    """A well-formed list is the bulk parser's (it does not hand it over) and equals the line
    parser's; ids that skip a sentence and, with `strict`, a missing feature go to the line
    parser, and `read_moses` then fails as it does."""
    text, gap = case
    path = write(tmp_path, text, gz)
    slow, slow_notes = outcome(read_moses_lines, path, strict=strict)
    got, notes = outcome(read_moses, path, strict=strict)
    if gap or (strict and slow == "InputError"):
        assert slow == "InputError" and (got, notes) == (slow, slow_notes)
        with pytest.raises(NeedsLineReader):
            fast.parse_file(path, strict)
        return
    bulk, extra = fast.parse_file(path, strict)
    assert_same(bulk, slow)
    assert_same(got, slow)
    assert notes == slow_notes and extra == (bulk.n_hyps if text.split("\n")[0].count("|||") > 3 else 0)
    if slow.missing:
        assert any("missing on" in note for note in notes)


def test_hypothesis_less_ids_and_missing_features_are_named(tmp_path):
    """The line parser names a sentence without hypotheses; a Joshua feature left out is counted."""
    path = write(tmp_path, "0 ||| a ||| x= 1\n2 ||| b ||| x= 2\n", gz=True)
    with pytest.raises(InputError, match="sentence 1 has no hypotheses"):
        read_moses(path)
    path = write(tmp_path, "0 ||| a ||| x=1 y=2\n0 ||| b ||| x=3\n1 ||| c ||| y=4\n", gz=False)
    report = ReadReport()
    nbest = read_moses(path, report=report)
    assert_same(nbest, fast.parse_file(path)[0])
    assert nbest.missing == {"x": 1, "y": 1} and nbest.features.tolist() == [[1, 2], [3, 0], [0, 4]]


class Bug(RuntimeError):
    """What a mistake inside the bulk parser raises."""


def _raise(*_args, **_kwargs):
    raise Bug("a bug in the bulk parser")


@pytest.mark.parametrize("target", ["parse_block", "parse_features_fast", "check_runs", "check_names", "_feature_block"])
def test_a_bug_in_the_bulk_parser_propagates(tmp_path, monkeypatch, target):
    """An exception other than NeedsLineReader inside the bulk parser fails the read: it is not taken
    for input to read line by line (which would only make the read slower)."""
    path = write(tmp_path, "0 ||| a b ||| lm= 1 2 tm= 3\n0 ||| c ||| lm= 4 5 tm= 6\n", gz=False)
    monkeypatch.setattr(fast, target, _raise)
    if hasattr(stream, target):  # the two-pass reader's own reference to it
        monkeypatch.setattr(stream, target, _raise)
    with pytest.raises(Bug):
        read_moses(path)
    with pytest.raises(Bug):
        read_nbest(path, cache=False)
    if target != "check_runs":  # the two-pass reader checks the ids block by block
        with pytest.raises(Bug):
            scan_moses(path)


def test_a_failing_stream_propagates_unless_it_is_a_read_error(tmp_path, monkeypatch):
    """Reading the file: only I/O and gzip errors go to the line parser (which names the line);
    anything else the stream raises fails the read."""
    path = write(tmp_path, "0 ||| a ||| x= 1\n" * 5, gz=True)
    opened = fast.open_binary

    def failing(error):
        def open_binary(name):
            raw, stream = opened(name)
            stream.read = lambda *_: (_ for _ in ()).throw(error)
            return raw, stream
        return open_binary

    monkeypatch.setattr(fast, "open_binary", failing(Bug("not a read error")))
    with pytest.raises(Bug):
        read_moses(path)
    monkeypatch.setattr(fast, "open_binary", failing(EOFError("truncated")))
    assert fast.read_moses_fast(path) is None
    assert_same(read_moses(path), read_moses_lines(path))


@pytest.mark.parametrize("digits", [19, 5000])
def test_an_id_too_long_for_an_integer_is_an_input_error_on_every_path(tmp_path, digits):
    """Python's int() refuses over 4300 digits with a ValueError and int64 holds 18: both readers
    say which line, instead of failing with a traceback; the two-pass scan hands the file over."""
    path = tmp_path / "big.nbest"
    path.write_text("0 ||| a ||| f=1 ||| 0\n" + "1" * digits + " ||| b ||| f=1 ||| 0\n")
    assert scan_moses(str(path)) is None
    for read in (read_moses, read_moses_lines, read_nbest):
        with pytest.raises(InputError, match=f"big.nbest:2: sentence id .* is too large \\({digits} digits\\)"):
            read(str(path))
