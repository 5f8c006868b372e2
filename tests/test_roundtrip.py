"""Everything the writers write reads back identically (property-based), and names and values
the formats cannot hold are refused where they enter."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rerank.errors import InputError
from rerank.formats import read_nbest, read_plain, write_nbest
from rerank.nbest import NBestList, feature_name_problem

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                           HealthCheck.too_slow])

# any Unicode but surrogates (not UTF-8) and the newline (no line format holds it)
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\n"), max_size=12)
NAMES = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=8).filter(lambda n: feature_name_problem(n) is None)
VALUES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),  # subnormals, the largest floats, -0.0
    st.sampled_from([5e-324, -2.2250738585072014e-308, 1.7976931348623157e308, 1e-300, 0.1, -0.0]),
)


@st.composite
def nbest_lists(draw, hyps=TEXT, min_sentences=1, with_scores=True):
    """An NBestList with groups of width 1-3 (names that do not clash), values of any size."""
    groups, names = [], []
    for name in draw(st.lists(NAMES, max_size=4, unique=True)):
        width = draw(st.integers(1, 3))
        columns = [name] if width == 1 else [f"{name}_{k}" for k in range(width)]
        if not set(columns) & set(names):
            groups.append((name, width))
            names.extend(columns)
    sizes = draw(st.lists(st.integers(1, 4), min_size=min_sentences, max_size=4))
    n = sum(sizes)
    texts = draw(st.lists(hyps, min_size=n, max_size=n))
    features = np.array(draw(st.lists(VALUES, min_size=n * len(names), max_size=n * len(names))), dtype=np.float64)
    scores = np.array(draw(st.lists(VALUES, min_size=n, max_size=n))) if with_scores and draw(st.booleans()) else None
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return NBestList(offsets, texts, features.reshape(n, len(names)), names, groups, scores)


def assert_identical(again: NBestList, nbest: NBestList, groups: bool = True) -> None:
    assert again == nbest  # offsets, strings, names, exact values, totals
    assert [math.copysign(1, v) for v in again.features.ravel()] == [math.copysign(1, v) for v in nbest.features.ravel()]
    if groups:
        assert again.groups == nbest.groups


@pytest.mark.parametrize("fmt", ["moses", "joshua"])
@SETTINGS
@given(nbest=nbest_lists(hyps=TEXT.filter(lambda h: "|||" not in h)))
def test_moses_and_joshua_read_back_identically(tmp_path, fmt, nbest):
    path = str(tmp_path / f"x.{fmt}")
    write_nbest(nbest, path, fmt)
    assert_identical(read_nbest(path, fmt), nbest)
    assert_identical(read_nbest(path), nbest)  # detected (a Joshua file with groups reads as Moses: the same lines)


@SETTINGS
@given(nbest=nbest_lists(hyps=TEXT.filter(lambda h: not h.endswith("\r")), min_sentences=0, with_scores=False))
def test_plain_reads_back_identically_with_its_side_files(tmp_path, nbest):
    path = str(tmp_path / "hyps.txt")
    write_nbest(nbest, path, "plain")
    again = read_plain(path, ids=path + ".ids", features=path + ".features.tsv")
    assert_identical(again, nbest, groups=False)  # (plain keeps flat columns)
    assert again.feature_names == nbest.feature_names


@SETTINGS
@given(nbest=nbest_lists(hyps=TEXT.filter(lambda h: not h.endswith("\r"))))
def test_fairseq_reads_back_its_one_score(tmp_path, nbest):
    path = str(tmp_path / "gen.out")
    write_nbest(nbest, path, "fairseq")
    again = read_nbest(path)
    assert list(again.hyps) == list(nbest.hyps)  # tabs, |||, any Unicode
    assert np.array_equal(again.offsets, nbest.offsets)
    expected = nbest.column("nmt") if "nmt" in nbest.feature_names else (
        nbest.scores if nbest.scores is not None else np.zeros(nbest.n_hyps))
    assert np.array_equal(again.column("nmt"), expected) and np.array_equal(again.scores, expected)
    if nbest.feature_names in ([], ["nmt"]) and (nbest.scores is None or np.array_equal(nbest.scores, expected)):
        write_nbest(again, str(tmp_path / "again.out"), "fairseq")
        assert_identical(read_nbest(str(tmp_path / "again.out")), again)


@pytest.mark.parametrize("fmt", ["moses", "joshua", "fairseq", "plain"])
def test_empty_list_where_the_format_allows(tmp_path, fmt):
    empty = NBestList(np.zeros(1, np.int64), [], np.zeros((0, 0)), [])
    path = str(tmp_path / "empty")
    write_nbest(empty, path, fmt)
    again = read_nbest(path, fmt)
    assert again.n_sentences == 0 and again.n_hyps == 0
    named = NBestList(np.zeros(1, np.int64), [], np.zeros((0, 2)), ["a", "b"])
    write_nbest(named, path, "plain")
    assert read_plain(path, ids=path + ".ids", features=path + ".features.tsv").feature_names == ["a", "b"]


def test_unicode_empty_and_spaced_hypotheses_by_hand(tmp_path):
    hyps = ["", " lead", "trail ", "\ufeffbom", "tab\there", "x | y || z", "ü ß 中文 🙂", "\r mid \r x", "\x1c\x85\u2028"]
    nbest = NBestList(np.array([0, 4, len(hyps)]), hyps, np.arange(len(hyps), dtype=float)[:, None], ["nmt"])
    for fmt in ("moses", "joshua", "plain", "fairseq"):
        path = str(tmp_path / f"x.{fmt}")
        if fmt == "plain":
            nbest = NBestList(nbest.offsets, ["\ufeffbom first"] + hyps[1:], nbest.features, ["nmt"])
        write_nbest(nbest, path, fmt)
        assert list(read_nbest(path, fmt).hyps) == list(nbest.hyps), fmt


BAD_NAMES = [("", "is empty"), ("1f", "starts with a digit"), ("-f", "starts with a digit or '-'"),
             ("a b", "white space"), ("a\tb", "white space"), ("a\x85b", "white space"), ("a=b", "contains '='"),
             ("a|||b", "contains '\\|\\|\\|'")]


@pytest.mark.parametrize("name,problem", BAD_NAMES)
def test_bad_feature_names_are_refused_where_they_enter(name, problem):
    nbest = NBestList.from_lists([["a", "b"]], [np.zeros((2, 1))], ["ok"])
    with pytest.raises(InputError, match=problem):
        nbest.with_feature(name, np.ones(2))
    with pytest.raises(InputError, match=problem):
        NBestList.from_lists([["a"]], [np.zeros((1, 1))], [name])
    with pytest.raises(InputError, match=problem):
        NBestList(np.array([0, 1]), ["a"], np.zeros((1, 2)), ["ok_0", "ok_1"], [(name, 2)])


def test_names_that_are_valid_even_if_odd():
    for name in ("a|b", "a||", "_1", "x-1", "ü", "#x", "tm_0", "a.b"):
        assert feature_name_problem(name) is None


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_values_and_totals_are_refused(value):
    nbest = NBestList.from_lists([["a", "b"], ["c"]], [np.zeros((2, 1)), np.zeros((1, 1))], ["f"])
    with pytest.raises(InputError, match=rf"feature 'g' is {value} on hypothesis 2 \(sentence 1\): values must be finite"):
        nbest.with_feature("g", np.array([0.0, 1.0, value]))
    with pytest.raises(InputError, match=r"feature 'f' is .* on hypothesis 1 \(sentence 0\)"):
        NBestList.from_lists([["a", "b"]], [np.array([[0.0], [value]])], ["f"])
    with pytest.raises(InputError, match=r"total score is .* on hypothesis 0 \(sentence 0\)"):
        NBestList.from_lists([["a"]], [np.zeros((1, 1))], ["f"], [np.array([value])])


def test_strings_a_format_cannot_hold_are_refused_by_its_writer(tmp_path):
    with pytest.raises(InputError, match="contains a line break"):
        NBestList.from_lists([["a\nb"]], [np.zeros((1, 0))], [])
    pipes = NBestList.from_lists([["ok", "a ||| b"]], [np.zeros((2, 0))], [])
    for fmt in ("moses", "joshua"):
        with pytest.raises(InputError, match=r"hypothesis 1 \('a \|\|\| b'\) contains '\|\|\|'"):
            write_nbest(pipes, str(tmp_path / "x"), fmt)
    write_nbest(pipes, str(tmp_path / "x"), "plain")  # plain and fairseq hold it
    carriage = NBestList.from_lists([["a\r"]], [np.zeros((1, 0))], [])
    for fmt in ("plain", "fairseq"):
        with pytest.raises(InputError, match="hypothesis 0 ends in a carriage return"):
            write_nbest(carriage, str(tmp_path / "y"), fmt)
        assert not (tmp_path / "y").exists()
    write_nbest(carriage, str(tmp_path / "m"), "moses")  # mid-line there: kept
    assert read_nbest(str(tmp_path / "m")).hyps[0] == "a\r"
    with pytest.raises(InputError, match="give a file name, not -"):
        write_nbest(pipes, "-", "plain")
