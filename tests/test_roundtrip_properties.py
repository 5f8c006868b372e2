"""Every writer round-trips, property-based: what each writing command and writer function writes,
the project's own reader reads back with equal content (within what the format holds, said where
a test leaves something out). tests/test_roundtrip.py checks the four format writers on plain
files; this file adds gzip, feature names and group layouts chosen to be awkward, empty lists,
the commands (`convert`, `add-feature`, `features --which mbr`, `apply --nbest-out`), weights and
score files, the n-best cache, the two-pass (streamed) paths, and name collisions.

What each format holds (from rerank/formats and docs/formats.md):
- Moses/Joshua: everything (hypotheses with any character but a line break and `|||`, leading
  and trailing spaces and tabs included; groups; totals); Joshua writes groups of width 1 as
  `name=value` and wider ones as `name= v1 v2`, which the same reader reads.
- plain: hypotheses (no line break, not ending in `\\r`) and flat columns; no totals, no groups.
- fairseq: hypotheses (not ending in `\\r`) and one score: feature `nmt`, else the total.
"""

import gzip
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rerank.errors import InputError
from rerank.io import read_lines
from rerank.formats import ReadReport, format_names, get_format, read_nbest, read_plain, write_nbest
from rerank.nbest import NBestList, feature_name_problem
from rerank.weights import model_scores, read_weights, write_weights
from tests.cli_helpers import run
from tests.test_roundtrip import TEXT, VALUES, assert_identical, nbest_lists

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                             HealthCheck.too_slow])
FEW = settings(SETTINGS, max_examples=25)  # the command-line properties (a few reads and writes each)

NO_PIPES = TEXT.filter(lambda h: "|||" not in h)
NO_CR_END = TEXT.filter(lambda h: not h.endswith("\r"))
# hypotheses made of the characters each format has to get right: separators' neighbours, spaces,
# tabs, byte-order marks, Unicode line/field separators, carriage returns in the middle
PIECES = st.sampled_from([" ", "  ", "\t", "|", "||", "| |", "a", "ü", "中", "🙂", "\ufeff", "\u2028", "\x85",
                          "\x1c", "\x0b", "\x0c", "\r", "\x00", "=", "a=", "=1", "{}", "{0}", "0", "-1", "#"])
TRICKY = st.lists(PIECES, max_size=6).map("".join).filter(lambda h: "|||" not in h)
# feature names from awkward pieces (the validity rule filters what no format can hold)
NAME_PIECES = st.sampled_from(["a", "tm", "_0", "_1", "|", "||", "{", "}", "\ufeff", "ü", "#", ".", "x-1", "LM", "0"])
TRICKY_NAMES = st.lists(NAME_PIECES, min_size=1, max_size=4).map("".join).filter(lambda n: feature_name_problem(n) is None)


def _tmp(factory, name="x"):
    return str(factory.mktemp("rt") / name)


def _lists(hyps=NO_PIPES, names=None, with_scores=True):
    if names is None:
        return nbest_lists(hyps=hyps, with_scores=with_scores)
    return _named_lists(hyps, names, with_scores)


@st.composite
def _named_lists(draw, hyps, names, with_scores):
    """nbest_lists with names from `names` (groups of width 1-3 whose columns do not clash)."""
    base = draw(nbest_lists(hyps=hyps, with_scores=with_scores))
    groups, columns = [], []
    for name in draw(st.lists(names, max_size=4, unique=True)):
        width = draw(st.integers(1, 3))
        made = [name] if width == 1 else [f"{name}_{k}" for k in range(width)]
        if not set(made) & set(columns) and name not in [g for g, _ in groups]:
            groups.append((name, width))
            columns += made
    values = np.array(draw(st.lists(VALUES, min_size=base.n_hyps * len(columns), max_size=base.n_hyps * len(columns))))
    return NBestList(base.offsets, base.hyps, values.reshape(base.n_hyps, len(columns)), columns, groups, base.scores)


WRITERS = format_names(writable=True)  # every format the table can write (tests/test_format_table.py: all of them here)
GROUPED = ("moses", "joshua", "jsonl")  # the formats that keep a group `tm= a b` as one


def _expected(nbest: NBestList, fmt: str) -> NBestList:
    """What `fmt` holds of `nbest` (the test names what it leaves out)."""
    if fmt == "plain":  # no totals, flat columns
        return NBestList(nbest.offsets, nbest.hyps, nbest.features, nbest.feature_names)
    if fmt == "fairseq":  # one score: nmt, else the total, else 0; it is both the feature nmt and the total
        score = (nbest.column("nmt") if "nmt" in nbest.feature_names
                 else nbest.scores if nbest.scores is not None else np.zeros(nbest.n_hyps))
        return NBestList(nbest.offsets, nbest.hyps, score[:, None], ["nmt"], scores=score)
    return nbest


def _read_back(path: str, fmt: str, **options) -> NBestList:
    if fmt == "plain":
        return read_plain(path, ids=path + ".ids", features=path + ".features.tsv")
    return read_nbest(path, fmt, **options)


# --- the format writers: gzip, awkward names and text, empty lists ------------------------------------

@pytest.mark.parametrize("fmt", WRITERS)
@SETTINGS
@given(data=st.data())
def test_every_format_reads_back_gzipped_with_awkward_names_and_text(tmp_path_factory, fmt, data):
    hyps = TRICKY if fmt in ("moses", "joshua") else st.one_of(TRICKY, TEXT).filter(lambda h: not h.endswith("\r"))
    nbest = data.draw(_lists(hyps=hyps, names=TRICKY_NAMES))
    path = _tmp(tmp_path_factory, data.draw(st.sampled_from(["list.gz", "list"])))
    write_nbest(nbest, path, fmt)
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            fh.read()  # really gzip'd
    again = _read_back(path, fmt)
    assert_identical(again, _expected(nbest, fmt), groups=fmt in GROUPED)


@pytest.mark.parametrize("fmt", WRITERS)
@SETTINGS
@given(nbest=nbest_lists(hyps=NO_PIPES.filter(lambda h: not h.endswith("\r"))), data=st.data())
def test_a_sentence_without_hypotheses_is_refused_by_every_writer(tmp_path_factory, fmt, nbest, data):
    """No format holds an empty list (its id would be missing: the readers refuse a gap and cannot
    see a trailing one), so writing one is an error naming it, and nothing is written."""
    at = data.draw(st.integers(0, nbest.n_sentences))
    offsets = np.insert(nbest.offsets, at, nbest.offsets[at])
    holed = NBestList(offsets, nbest.hyps, nbest.features, nbest.feature_names, nbest.groups, nbest.scores)
    folder = tmp_path_factory.mktemp("empty")
    with pytest.raises(InputError, match=f"sentence {at} has no hypotheses"):
        write_nbest(holed, str(folder / "out"), fmt)
    assert os.listdir(folder) == []


# --- the cache and the two-pass reader ------------------------------------------------------------------

@pytest.mark.parametrize("fmt", [name for name in WRITERS if get_format(name).cached])
@SETTINGS
@given(nbest=nbest_lists(hyps=TRICKY.filter(lambda h: not h.endswith("\r"))), gz=st.booleans())
def test_a_cached_read_equals_a_parse(tmp_path_factory, fmt, nbest, gz):
    folder = tmp_path_factory.mktemp("cache")
    path = str(folder / ("list.gz" if gz else "list"))
    write_nbest(nbest if fmt != "fairseq" else _expected(nbest, fmt), path, fmt)
    plain_report = ReadReport()
    parsed = read_nbest(path, cache=False, report=plain_report)
    for _ in range(2):  # the first read writes the entry, the second reads it
        report = ReadReport()
        cached = read_nbest(path, cache=str(folder / "entries"), report=report)
        assert_identical(cached, parsed)
        assert cached.missing == parsed.missing and report.notes == plain_report.notes
    assert len(os.listdir(folder / "entries")) == 1


def _joshua_lines(nbest: NBestList, drop: list[bool]) -> str:
    """Joshua lines that leave out feature k on line i when drop[(i * F + k) % len(drop)]."""
    lines = []
    for i, sentence in enumerate(nbest.sentence_of_hyp):
        pairs = [f"{name}={float(value)!r}" for k, (name, value) in enumerate(zip(nbest.feature_names, nbest.features[i]))
                 if not drop[(i * len(nbest.feature_names) + k) % len(drop)]]
        lines.append(f"{sentence} ||| {nbest.hyps[i]} ||| {' '.join(pairs)} ||| {float(i)!r}\n")
    return "".join(lines)


@FEW
@given(nbest=_lists(hyps=TRICKY), to=st.sampled_from(["moses", "joshua"]), drop=st.lists(st.booleans(), min_size=1,
                                                                                           max_size=5),
       joshua=st.booleans())
def test_convert_streamed_equals_convert_whole(tmp_path_factory, capsys, nbest, to, drop, joshua):
    """`convert` reads a regular Moses/Joshua file in two passes (a few hundred sentences at a time)
    unless the cache is on: both write the same bytes, and what they write reads back as the input."""
    folder = tmp_path_factory.mktemp("stream")
    source = str(folder / "in.nbest")
    if joshua and nbest.feature_names:  # features left out on some lines (read as 0, said in a note)
        with open(source, "w", encoding="utf-8") as out:
            out.write(_joshua_lines(NBestList(nbest.offsets, nbest.hyps, nbest.features, nbest.feature_names),
                                    drop))
    else:
        write_nbest(nbest, source, "moses")
    original = read_nbest(source)
    outputs = []
    for option in ("--no-cache", "--cache"):
        out = str(folder / f"out{option}")
        code, _, err = run(["convert", source, "-o", out, "--to", to, option], capsys)
        assert code == 0, err
        outputs.append(open(out, "rb").read())
        assert_identical(read_nbest(out), original)
    assert outputs[0] == outputs[1]


# --- the commands ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("to", WRITERS)
@FEW
@given(nbest=_lists(hyps=TRICKY.filter(lambda h: not h.endswith("\r"))))
def test_convert_to_every_format_reads_back(tmp_path_factory, capsys, to, nbest):
    folder = tmp_path_factory.mktemp("convert")
    source = str(folder / "in.nbest.gz")
    write_nbest(nbest, source, "moses")
    out = str(folder / "out")
    code, _, err = run(["convert", source, "-o", out, "--to", to], capsys)
    assert code == 0, err
    assert_identical(_read_back(out, to), _expected(nbest, to), groups=to in GROUPED)
    if to == "plain":  # and as a command reads it: the side files found beside it
        assert_identical(read_nbest(out, "plain"), _expected(nbest, to), groups=False)


SCORE_TEXT = st.one_of(VALUES.map(repr), VALUES.map(lambda v: f"{v:.17g}"),
                       st.sampled_from(["+1", " 1e-3 ", "-0", ".5", "1E5", "5.", "\t2\t", "1_0"]))


@FEW
@given(nbest=_lists(hyps=TRICKY), data=st.data())
def test_add_feature_reads_back_with_the_column(tmp_path_factory, capsys, nbest, data):
    """Scores per hypothesis or per sentence, as text (any spelling float() takes) or .npy: the output
    is the input with one more column holding exactly those numbers."""
    folder = tmp_path_factory.mktemp("add")
    source, out = str(folder / "in.nbest"), str(folder / "out.nbest")
    write_nbest(nbest, source)
    per_sentence = data.draw(st.booleans())
    n = nbest.n_sentences if per_sentence else nbest.n_hyps
    texts = data.draw(st.lists(SCORE_TEXT, min_size=n, max_size=n))
    values = np.array([float(t) for t in texts])
    if data.draw(st.booleans()):
        scores = str(folder / "scores.npy")
        np.save(scores, values)
    else:
        scores = str(folder / "scores.txt")
        with open(scores, "w", encoding="utf-8") as fh:
            fh.write("".join(t + "\n" for t in texts))
    name = data.draw(TRICKY_NAMES.filter(lambda x: x not in nbest.feature_names and x not in dict(nbest.groups)))
    code, _, err = run(["add-feature", source, "--name", name, "--scores", scores, "-o", out], capsys)
    assert code == 0, err
    column = np.repeat(values, nbest.sizes) if per_sentence and n != nbest.n_hyps else values
    assert_identical(read_nbest(out), nbest.with_feature(name, column))


@FEW
@given(nbest=_lists(hyps=TRICKY), to=st.sampled_from(["moses", "joshua"]), data=st.data())
def test_apply_nbest_out_reads_back_as_the_list_resorted(tmp_path_factory, capsys, nbest, to, data):
    """The re-sorted list holds every hypothesis with its features, each list sorted by w·f (ties in
    the original order), its total column w·f; the 1-best file is the first of every sorted list."""
    assume(nbest.feature_names)
    # values below 1e300 so that w·f stays finite (an overflow is refused, a test of its own below):
    # assuming it away instead filtered out too many lists for Hypothesis' health check
    nbest = NBestList(nbest.offsets, nbest.hyps, np.clip(nbest.features, -1e300, 1e300), nbest.feature_names,
                      nbest.groups, nbest.scores)
    folder = tmp_path_factory.mktemp("apply")
    source = str(folder / "in.nbest")
    write_nbest(nbest, source)
    weights = dict(zip(nbest.feature_names, data.draw(st.lists(st.floats(-10, 10), min_size=len(nbest.feature_names),
                                                                 max_size=len(nbest.feature_names)))))
    write_weights(str(folder / "w.json"), weights)
    w = np.array([weights[name] for name in nbest.feature_names])
    scores = model_scores(nbest, w)
    for option in ("--no-cache", "--cache"):  # the two-pass path and the whole-list path
        best, out = str(folder / f"best{option}"), str(folder / f"out{option}")
        code, _, err = run(["apply", source, "-w", folder / "w.json", "-o", best, "--nbest-out", out, "--to", to,
                            option], capsys)
        assert code == 0, err
        again = read_nbest(out)
        assert again.feature_names == nbest.feature_names and again.groups == nbest.groups
        assert np.array_equal(again.offsets, nbest.offsets)
        for i in range(nbest.n_sentences):
            rows = range(nbest.offsets[i], nbest.offsets[i + 1])
            order = sorted(rows, key=lambda r: (-scores[r], r))
            part = nbest.sentence(i)
            assert list(again.hyps[part]) == [nbest.hyps[r] for r in order]
            assert np.array_equal(again.features[part], nbest.features[order])
            assert np.array_equal(again.scores[part], scores[order])
        firsts = [again.hyps[int(k)] for k in again.offsets[:-1]]
        # the 1-best file is one line per sentence: a line cannot keep a final \r, nor the first one a
        # leading byte-order mark (left out here: `apply -o` does not refuse them yet)
        if not any(h.endswith("\r") for h in firsts) and not firsts[0].startswith("\ufeff"):
            assert read_lines(best) == firsts


def test_apply_refuses_weights_whose_model_score_overflows(tmp_path, capsys):
    nbest = NBestList(np.array([0, 2]), ["a", "b"], np.array([[1e308, 1e308], [0.0, 0.0]]), ["f", "g"])
    write_nbest(nbest, str(tmp_path / "in.nbest"))
    write_weights(str(tmp_path / "w.json"), {"f": 10.0, "g": 1.0})
    code, _, err = run(["apply", tmp_path / "in.nbest", "-w", tmp_path / "w.json", "-o", tmp_path / "best"], capsys)
    assert code == 2 and "overflow" in err and not (tmp_path / "best").exists()


@FEW
@given(nbest=_lists(hyps=TRICKY).filter(lambda n: "nmt" not in n.feature_names), data=st.data())
def test_features_mbr_reads_back_with_the_column(tmp_path_factory, capsys, nbest, data):
    """`rerank features --which mbr` (no model): the input plus the column mbr; run again, the
    column exists (an error without --replace, the same list with it)."""
    folder = tmp_path_factory.mktemp("mbr")
    values = np.array(data.draw(st.lists(st.floats(-50, 0), min_size=nbest.n_hyps, max_size=nbest.n_hyps)))
    nbest = nbest.with_feature("nmt", values)
    source, out, again = str(folder / "in.nbest"), str(folder / "out.nbest"), str(folder / "again.nbest")
    write_nbest(nbest, source)
    code, _, err = run(["features", source, "--which", "mbr", "-o", out, "--mbr-tokenize", "none"], capsys)
    assert code == 0, err
    featured = read_nbest(out)
    assert featured.feature_names == nbest.feature_names + ["mbr"]
    assert_identical(featured.select_features(nbest.feature_names), nbest, groups=False)
    code, _, err = run(["features", out, "--which", "mbr", "-o", again, "--mbr-tokenize", "none"], capsys)
    assert code == 2 and "already has a feature 'mbr'" in err and "--replace" in err and not os.path.exists(again)
    code, _, err = run(["features", out, "--which", "mbr", "-o", again, "--mbr-tokenize", "none", "--replace"], capsys)
    assert code == 0, err
    assert_identical(read_nbest(again), featured)


# --- name collisions: never a second group of one name ---------------------------------------------------

GROUPED = "0 ||| a b ||| tm= 1 2 lm= 3 ||| 4\n0 ||| c ||| tm= 5 6 lm= 7 ||| 8\n1 ||| d ||| tm= 9 10 lm= 11 ||| 12\n"


@SETTINGS
@given(nbest=_lists(names=st.sampled_from(["tm", "lm", "tm_0", "a", "a_1"])),
       name=st.sampled_from(["tm", "tm_0", "tm_1", "lm", "lm_0", "a", "a_0", "a_1", "new"]), replace=st.booleans())
def test_with_feature_never_writes_a_list_its_reader_refuses(tmp_path_factory, nbest, name, replace):
    """A column of a name the list has is an error (or, with replace, overwritten in place); the name
    of a group of columns (tm of tm_0, tm_1) is always an error; anything added reads back."""
    values = np.arange(nbest.n_hyps, dtype=float) - 0.5
    group_widths = dict(nbest.groups)
    if group_widths.get(name, 1) > 1 or (name in nbest.feature_names and not replace):
        with pytest.raises(InputError, match="feature group|already has a feature"):
            nbest.with_feature(name, values, replace=replace)
        return
    added = nbest.with_feature(name, values, replace=replace)
    if name in nbest.feature_names:  # replaced in place: same columns and groups
        assert added.feature_names == nbest.feature_names and added.groups == nbest.groups
    else:
        assert added.feature_names == nbest.feature_names + [name]
    assert np.array_equal(added.column(name), values)
    path = _tmp(tmp_path_factory)
    for fmt in ("moses", "joshua"):
        write_nbest(added, path, fmt)
        assert_identical(read_nbest(path), added)


@pytest.mark.parametrize("name,replace,status,message", [
    ("tm", False, 2, "names the feature group `tm=` of 2 columns"),
    ("tm", True, 2, "names the feature group `tm=` of 2 columns"),
    ("tm_1", False, 2, "already has a feature 'tm_1'"),
    ("lm", False, 2, "already has a feature 'lm'"),
    ("tm_1", True, 0, None),
    ("lm", True, 0, None),
    ("new", False, 0, None),
])
def test_add_feature_name_collisions(tmp_path, capsys, name, replace, status, message):
    source = tmp_path / "in.nbest"
    source.write_text(GROUPED, encoding="utf-8")
    (tmp_path / "s.txt").write_text("0.5\n-1.5\n")  # per sentence
    out = tmp_path / "out.nbest"
    code, _, err = run(["add-feature", source, "--name", name, "--scores", tmp_path / "s.txt", "-o", out,
                        *(["--replace"] if replace else [])], capsys)
    assert code == status, err
    if status:
        assert message in err and str(source) in err and err.count("\n") == 1 and not out.exists()
        return
    original, again = read_nbest(str(source)), read_nbest(str(out))
    assert np.array_equal(again.column(name), [0.5, 0.5, -1.5])
    expected_names = original.feature_names + ([name] if name not in original.feature_names else [])
    assert again.feature_names == expected_names
    others = [n for n in original.feature_names if n != name]
    assert np.array_equal(again.select_features(others).features, original.select_features(others).features)


def test_add_feature_refuses_one_name_twice(tmp_path, capsys):
    source = tmp_path / "in.nbest"
    source.write_text(GROUPED, encoding="utf-8")
    (tmp_path / "s.txt").write_text("0.5\n-1.5\n")
    code, _, err = run(["add-feature", source, "--name", "x", "--scores", tmp_path / "s.txt", "--name", "x",
                        "--scores", tmp_path / "s.txt", "-o", tmp_path / "out", "--replace"], capsys)
    assert code == 2 and "--name x is given twice" in err and not (tmp_path / "out").exists()


# --- weights ---------------------------------------------------------------------------------------------

@SETTINGS
@given(weights=st.dictionaries(st.one_of(TRICKY_NAMES, st.text(min_size=1).filter(lambda n: feature_name_problem(n) is None)),
                               VALUES, max_size=8),
       meta=st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5), VALUES), max_size=3))
def test_weights_files_read_back(tmp_path_factory, weights, meta):
    """write_weights (what `rerank tune -o` writes) reads back as the same weights, exactly, in order."""
    assume(weights)
    path = _tmp(tmp_path_factory, "w.json")
    write_weights(path, weights, meta)
    again = read_weights(path)
    assert list(again) == list(weights)
    assert all(again[k] == weights[k] and np.signbit(again[k]) == np.signbit(weights[k]) for k in weights)


def test_tuned_weights_files_read_back(tmp_path, capsys):
    weights = tmp_path / "w.json"
    code, _, err = run(["tune", "tests/data/joshua10/nbest.joshua", *[x for k in range(4) for x in
                        ("-r", f"tests/data/joshua10/ref.{k}")], "-o", weights, "--tuner", "mira", "--epochs", "3",
                        "--runs", "2"], capsys)
    assert code == 0, err
    nbest = read_nbest("tests/data/joshua10/nbest.joshua")
    for path in (weights, tmp_path / "w.run1.json", tmp_path / "w.run2.json"):
        again = read_weights(str(path))
        assert list(again) == nbest.feature_names and all(np.isfinite(list(again.values())))
