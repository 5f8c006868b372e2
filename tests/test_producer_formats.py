"""The readers of the producers' n-best layouts (marian, sockeye, opennmt/eole, jsonl) on small
hand-made cases: their hypotheses, columns, list sizes and errors. tests/test_producer_outputs.py
reads the real outputs the toolkits wrote."""

import json

import numpy as np
import pytest

from rerank.errors import InputError
from rerank.formats import ReadReport, read_nbest, write_nbest
from tests.cli_helpers import run, write

# --- marian ------------------------------------------------------------------------------------------

PLAIN_MARIAN = ("0 ||| ein Mann ||| F0= -1.5 F1= -2.5 ||| -0.75\n0 ||| Mann ||| F0= -2 F1= -3 ||| -1\n"
                "1 ||| ja ||| F0= -0.5 F1= -1 ||| -0.5\n")


def _with_fields(text: str, *fields_of_line) -> str:
    lines = []
    for line, extra in zip(text.splitlines(), fields_of_line):
        parts = line.split(" ||| ")
        lines.append(" ||| ".join(parts[:2] + extra + parts[2:]))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("extras", [
    [["0-0 1-1"], ["0-0"], ["0-0"]],                                                  # --alignment hard
    [["0,0.9,0.1 1,0.2,0.8"], ["0.5,0.5"], ["1"]],                                     # --alignment soft
    [["WordScores= -0.5 -1 -0.1"], ["WordScores= -1 -1"], ["WordScores= -0.3 -0.2"]],  # --word-scores
    [["0-0 1-1", "WordScores= -0.5 -1 -0.1"], ["0-0", "WordScores= -1 -1"], ["0-0", "WordScores= -0.3 -0.2"]],
])
def test_marian_extra_fields_are_read_past(tmp_path, extras):
    plain = read_nbest(write(tmp_path, "plain", PLAIN_MARIAN))
    path = write(tmp_path, "extra", _with_fields(PLAIN_MARIAN, *extras))
    report = ReadReport()
    nbest = read_nbest(path, report=report)
    assert report.format == "marian" and "read past them" in " ".join(report.notes)
    assert list(nbest.hyps) == list(plain.hyps) and nbest.feature_names == ["F0", "F1"] == plain.feature_names
    assert np.array_equal(nbest.features, plain.features) and np.array_equal(nbest.scores, plain.scores)


def test_a_plain_marian_list_reads_as_moses(tmp_path):
    path = write(tmp_path, "m", PLAIN_MARIAN)
    assert read_nbest(path).features.tolist() == read_nbest(path, "moses").features.tolist()
    marian, moses = read_nbest(path), read_nbest(path, "moses")
    assert list(marian.hyps) == list(moses.hyps) and np.array_equal(marian.offsets, moses.offsets)
    assert marian.feature_names == moses.feature_names and marian.groups == moses.groups
    assert (marian.scores is None and moses.scores is None) or np.array_equal(marian.scores, moses.scores)


def test_a_bad_marian_file_is_one_line_on_stderr(tmp_path, capsys):
    text = "0 ||| a b ||| 0-0 1-1 ||| F0= -1.5 ||| -1.5\n0 ||| a c ||| x y ||| F0= -2.5 ||| -2.5\n"
    code, _, err = run(["info", write(tmp_path, "m", text)], capsys)
    assert code == 2 and err.count("\n") == 1 and "neither an alignment nor `WordScores=`" in err


def test_marian_fields_that_change_between_lines_are_errors(tmp_path):
    text = _with_fields(PLAIN_MARIAN, ["0-0"], [], ["0-0"])
    with pytest.raises(InputError, match=r":2: 4 '\|\|\|'-separated fields, but the first line had 5"):
        read_nbest(write(tmp_path, "m", text))


# --- sockeye ---------------------------------------------------------------------------------------------

def _sockeye(objects) -> str:
    return "".join(json.dumps(o) + "\n" for o in objects)


SOCKEYE = [{"sentence_id": 1, "translation": "a man", "score": 0.4, "translations": ["a man", "man", "a"],
            "scores": [[0.4], [0.9], [1.3]]},
           {"sentence_id": 2, "translation": "yes", "score": 0.1, "translations": ["yes", "ja"], "scores": [[0.1], [2.0]],
            "my_key": "x"}]


def test_sockeye_costs_are_a_column_that_says_its_direction(tmp_path, capsys):
    path = write(tmp_path, "s.json", _sockeye(SOCKEYE))
    report = ReadReport()
    nbest = read_nbest(path, report=report)
    assert report.format == "sockeye" and nbest.sizes.tolist() == [3, 2]
    assert list(nbest.hyps) == ["a man", "man", "a", "yes", "ja"] and nbest.feature_names == ["cost"]
    assert nbest.column("cost").tolist() == [0.4, 0.9, 1.3, 0.1, 2.0] and nbest.scores is None
    assert "lower is better" in report.columns["cost"]
    assert any("my_key" in note for note in report.notes)  # --json-input's keys: said, not read
    code, out, _ = run(["info", path], capsys)
    assert code == 0 and "lower is better" in out


def test_sockeye_factor_scores_are_further_columns(tmp_path):
    objects = [{"sentence_id": 1, "translations": ["a", "b"], "scores": [[0.4, 1.0], [0.9, 2.0]]}]
    report = ReadReport()
    nbest = read_nbest(write(tmp_path, "s", _sockeye(objects)), report=report)
    assert nbest.feature_names == ["cost", "cost_1"] and nbest.features.tolist() == [[0.4, 1.0], [0.9, 2.0]]
    assert "lower is better" in report.columns["cost"] and "factor 1" in report.columns["cost_1"]


def test_sockeye_one_best_output_reads_too(tmp_path):
    objects = [{"sentence_id": 1, "translation": "a", "score": 0.5}, {"sentence_id": 2, "translation": "b", "score": 0.7}]
    nbest = read_nbest(write(tmp_path, "s", _sockeye(objects)))
    assert list(nbest.hyps) == ["a", "b"] and nbest.column("cost").tolist() == [0.5, 0.7]


@pytest.mark.parametrize("bad, problem", [
    ({"sentence_id": 3, "translations": ["a"], "scores": [[1]]}, "sentence_id 3 where 2 comes next"),
    ({"sentence_id": 2, "translations": ["a", "b"], "scores": [[1]]}, "2 translations but 1 scores"),
    ({"sentence_id": 2, "translations": ["a"], "scores": [["x"]]}, "not a finite number"),
    ({"sentence_id": 2, "translations": ["a"], "scores": [[1, 2]]}, "2 values here but 1 on line 1"),
    ({"sentence_id": "2", "translations": ["a"], "scores": [[1]]}, "sentence_id \"2\" is not an integer"),
    ({"sentence_id": 2, "translations": ["a"], "scores": {"a": 1}}, "`scores` is .* not a list"),
    ({"sentence_id": 2, "translations": ["\ud800"], "scores": [[1]]}, "not valid Unicode"),
])
def test_sockeye_errors_name_the_line(tmp_path, bad, problem):
    with pytest.raises(InputError, match=":2: .*" + problem):
        read_nbest(write(tmp_path, "s", _sockeye([SOCKEYE[0] | {"scores": [[0.4], [0.9], [1.3]]}, bad])), "sockeye")


# --- opennmt / eole --------------------------------------------------------------------------------------

def test_opennmt_size_from_the_option_or_the_sources(tmp_path, capsys):
    path = write(tmp_path, "o", "a man\t-0.5\nman\t-0.9\nyes\t-0.1\nja\t-2.5\n")
    src = write(tmp_path, "src", "ein Mann\nja\n")
    by_size, by_src = read_nbest(path, nbest_size=2), read_nbest(path, src=src)
    for nbest in (by_size, by_src):
        assert nbest.sizes.tolist() == [2, 2] and list(nbest.hyps) == ["a man", "man", "yes", "ja"]
        assert nbest.feature_names == ["score"] and nbest.column("score").tolist() == [-0.5, -0.9, -0.1, -2.5]
    code, _, err = run(["info", path], capsys)
    assert code == 2 and "does not say its list size" in err and "--nbest-size N or --src FILE" in err
    code, _, err = run(["info", path, "--nbest-size", "3"], capsys)
    assert code == 2 and "4 lines are not a whole number of lists of 3" in err
    code, out, _ = run(["info", path, "--src", src], capsys)
    assert code == 0 and "format:      opennmt (detected)" in out


def test_eole_score_and_estimator_are_two_columns(tmp_path):
    nbest = read_nbest(write(tmp_path, "o", "a b\t-0.5\t0.9\nc\t-0.7\t0.1\n"), nbest_size=2)
    assert list(nbest.hyps) == ["a b", "c"] and nbest.feature_names == ["score", "estim"]
    assert nbest.features.tolist() == [[-0.5, 0.9], [-0.7, 0.1]]


def test_opennmt_lines_without_their_score_are_errors(tmp_path):
    with pytest.raises(InputError, match=r":2: 0 tab-separated score\(s\) here but 1 on line 1"):
        read_nbest(write(tmp_path, "o", "a\t-0.5\nb\n"), "opennmt", nbest_size=2)
    with pytest.raises(InputError, match=r":2: 2 tab-separated score\(s\) here but 1 on line 1"):
        read_nbest(write(tmp_path, "o", "a\t-0.5\nb\t-2\t0.3\n"), "opennmt", nbest_size=2)
    with pytest.raises(InputError, match=r":1: tabs that are not tab-separated scores"):
        read_nbest(write(tmp_path, "o", "0\tthe house\t-1.2\n0\tthe home\t-1.5\n"), "opennmt", nbest_size=2)


@pytest.mark.parametrize("text", ["0\tthe house\t-1.2\n0\tthe home\t-1.5\n",   # id<TAB>hyp<TAB>score: not OpenNMT
                                  "a\t-1_0\nb\t-2\n"])                         # Python's float() takes 1_0, a file does not
def test_tab_layouts_that_are_not_opennmt_are_not_claimed(tmp_path, capsys, text):
    code, _, err = run(["info", write(tmp_path, "t", text), "--nbest-size", "2"], capsys)
    assert code == 2 and "cannot tell the n-best format" in err


def test_bare_opennmt_lines_take_their_size_from_the_sources(tmp_path, capsys):
    path = write(tmp_path, "o", "a man\nman\nyes\nja\n")
    code, out, err = run(["info", path, "--src", write(tmp_path, "src", "ein Mann\nja\n")], capsys)
    assert code == 0 and "format:      opennmt (detected)" in out and "list size:   min 2" in out, err


def test_opennmt_round_trip_through_convert(tmp_path, capsys):
    path = write(tmp_path, "o", "a man\t-0.5\nman\t-0.9\n")
    out = tmp_path / "o.jsonl"
    code, _, err = run(["convert", path, "--nbest-size", "2", "--to", "jsonl", "-o", out], capsys)
    assert code == 0, err
    again = read_nbest(str(out))
    assert list(again.hyps) == ["a man", "man"] and again.column("score").tolist() == [-0.5, -0.9]


# --- jsonl -------------------------------------------------------------------------------------------------

def test_jsonl_keeps_groups_totals_and_any_text(tmp_path):
    objects = [{"id": 0, "hyp": "a ||| b\tc\r", "features": {"tm": [-1.5, 2.0], "lm": -7.25}, "total": -3.1},
               {"id": 0, "hyp": "", "features": {"tm": [0.0, -0.0], "lm": 1e300}, "total": 0.0},
               {"id": 1, "hyp": "\u2028x", "features": {"tm": [1.0, 2.0], "lm": 0.1}, "total": 1.0}]
    path = write(tmp_path, "j", "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects))
    nbest = read_nbest(path)
    assert nbest.groups == [("tm", 2), ("lm", 1)] and nbest.feature_names == ["tm_0", "tm_1", "lm"]
    assert list(nbest.hyps) == [o["hyp"] for o in objects] and nbest.scores.tolist() == [-3.1, 0.0, 1.0]
    write_nbest(nbest, str(tmp_path / "again"), "jsonl")
    assert (tmp_path / "again").read_text(encoding="utf-8") == (tmp_path / "j").read_text(encoding="utf-8")


@pytest.mark.parametrize("line, problem", [
    ('{"id": 1, "hyp": "a", "features": {}}', "sentence ids must start at 0"),
    ('{"id": 0, "hyp": 3, "features": {}}', "`hyp` is 3, not a string"),
    ('{"id": 0, "hyp": "a", "features": {"f": "x"}}', "feature 'f' is \"x\", not a finite number"),
    ('{"id": 0, "hyp": "a", "features": {"f": []}}', "feature 'f' has no value"),
    ('[1, 2]', "not a JSON object"),
])
def test_jsonl_errors_name_the_line(tmp_path, line, problem):
    with pytest.raises(InputError, match=":1: " + problem):
        read_nbest(write(tmp_path, "j", line + "\n"), "jsonl")
