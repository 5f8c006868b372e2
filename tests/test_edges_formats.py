"""Format edges: fairseq output found past its log lines; bad input that is an error (file,
line, exit 2, nothing written), not a traceback or a silent change; features missing on some
lines said on stderr; what `convert` cannot write said on stderr."""

import re
from pathlib import Path

import numpy as np
import pytest

from rerank.formats import DETECT_LINES, ReadReport, detect_format, read_nbest, write_nbest
from tests.test_formats import FAIRSEQ, JOSHUA
from tests.cli_helpers import run, write

GOOD = "0 ||| a b ||| f= 1 g= 2 ||| 3\n0 ||| a c ||| f= 2 ||| 2\n1 ||| d ||| f= 0 g= 1 ||| 1\n"
LOG = ("2024-05-01 10:00:00 | INFO | fairseq_cli.generate | Namespace(beam=5, nbest=2, path='x.pt')\n"
       "2024-05-01 10:00:01 | INFO | fairseq.data.data_utils | loaded 2 examples from: test.de-en.de\n")


# --- fairseq output that starts with log lines ---------------------------------------------------

def test_fairseq_found_past_log_lines_and_the_skip_is_said(tmp_path, capsys):
    path = write(tmp_path, "gen.out", LOG + "\n" + FAIRSEQ)
    report = ReadReport()
    assert detect_format(path, report) == "fairseq"
    assert report.notes == ["read as fairseq output: skipped 3 log line(s) before the first S-/T-/H-/D-/P- line"]
    code, out, err = run(["convert", path, "-o", "-"], capsys)
    assert code == 0
    assert out.splitlines() == ["0 ||| two men . ||| nmt= -0.5 ||| -0.5", "1 ||| a dog runs . ||| nmt= -0.25 ||| -0.25",
                                "1 ||| a dog is running . ||| nmt= -0.75 ||| -0.75"]
    assert f"note: {path}: read as fairseq output: skipped 3 log line(s)" in err


def test_fairseq_found_by_a_p_line_and_plain_stays_plain(tmp_path):
    assert detect_format(write(tmp_path, "p.out", "log\nP-0\t-0.1 -0.2\nH-0\t-0.3\tx\n")) == "fairseq"
    assert detect_format(write(tmp_path, "plain.txt", "a man rides\nH-0 is no fairseq line without a tab\n")) == "plain"
    assert detect_format(write(tmp_path, "moses", "\n" + GOOD)) == "moses"
    late = write(tmp_path, "late.out", "log\n" * DETECT_LINES + FAIRSEQ)  # beyond where detection looks
    assert detect_format(late) == "plain" and read_nbest(late, "fairseq").n_sentences == 2


# --- bad input: an error naming file and line, exit 2, nothing written ----------------------------

BAD_MOSES = [
    ("-1 ||| a ||| f= 1\n", r"bad:1: sentence id '-1' is negative"),
    ("0 ||| a ||| f= 1\n-1 ||| a ||| f= 1\n", r"bad:2: sentence id '-1' is negative"),
    ("0.5 ||| a ||| f= 1\n", r"bad:1: sentence id '0.5' is not an integer"),
    ("+0 ||| a ||| f= 1\n", r"bad:1: sentence id '\+0' is not a plain decimal integer"),
    ("0 ||| a ||| tm= 1 2 tm_0= 3\n", r"bad:1: feature 'tm_0' clashes with 'tm' of line 1: both make a column 'tm_0'"),
    ("0 ||| a ||| tm_1= 3\n0 ||| b ||| tm= 1 2 tm_1= 4\n", r"bad:2: feature 'tm' clashes with 'tm_1' of line 1"),
    ("0 ||| a ||| f= 1e400 ||| 1\n", r"bad:1: feature 'f': 1e400 is too large for a 64-bit float"),
    ("0 ||| a ||| f=-1e400 ||| 1\n", r"bad:1: feature 'f': -1e400 is too large"),
    ("0 ||| a ||| f= 1 ||| 1e400\n", r"bad:1: total score: 1e400 is too large for a 64-bit float"),
    ("0 ||| a ||| 2x= 1\n", r"bad:1: feature name '2x' starts with a digit or '-'"),
    ("0 ||| a ||| a=b= 1\n", r"bad:1: feature name 'a=b' contains '='"),
]


@pytest.mark.parametrize("text,message", BAD_MOSES)
def test_bad_moses_input_is_an_error(tmp_path, capsys, text, message):
    path = write(tmp_path, "bad", text)
    out = tmp_path / "out.nbest"
    code, _, err = run(["convert", path, "--format", "moses", "-o", out], capsys)
    assert code == 2 and re.search(message, err) and "Traceback" not in err, err
    assert not out.exists() and list(tmp_path.glob(".out*")) == []


def test_huge_values_whose_sum_overflows_are_read(tmp_path):
    nbest = read_nbest(write(tmp_path, "big", "0 ||| a ||| f= 1.7e308 g= 1.7e308 ||| 1.7e308\n"))
    assert nbest.features.tolist() == [[1.7e308, 1.7e308]] and nbest.scores.tolist() == [1.7e308]


BAD_PLAIN = [  # (sizes, ids, features TSV) -> message
    ("2\n0\n", None, None, r"sizes:2: list size 0 is not a positive integer"),
    ("3\n-1\n", None, None, r"sizes:2: list size '-1' is not a positive integer"),
    ("1.5\n0.5\n", None, None, r"sizes:1: list size '1.5' is not a positive integer"),
    (None, "0\n0\n-1\n", None, r"ids:3: sentence id '-1' is not a non-negative integer"),
    (None, "0\n0\n1\n", "f\tf\n1\t2\n3\t4\n5\t6\n", r"features.tsv:1: feature name 'f' appears twice"),
    (None, "0\n0\n1\n", "f\t1g\n1\t2\n3\t4\n5\t6\n", r"features.tsv:1: feature name '1g' starts with a digit"),
    (None, "0\n0\n1\n", "f\n1\n1e400\n2\n", r"features.tsv:3: feature 'f': 1e400 is too large for a 64-bit float"),
]


@pytest.mark.parametrize("sizes,ids,features,message", BAD_PLAIN)
def test_bad_plain_input_is_an_error(tmp_path, capsys, sizes, ids, features, message):
    args = ["convert", write(tmp_path, "hyps", "a\nb\nc\n"), "--format", "plain", "-o", tmp_path / "out"]
    for option, name, text in (("--plain-sizes", "sizes", sizes), ("--plain-ids", "ids", ids),
                               ("--plain-features", "features.tsv", features)):
        if text is not None:
            args += [option, write(tmp_path, name, text)]
    code, _, err = run(args, capsys)
    assert code == 2 and re.search(message, err), err
    assert not (tmp_path / "out").exists()


def test_bad_npy_features_and_names(tmp_path, capsys):
    hyps = write(tmp_path, "hyps", "a\nb\n")
    np.save(tmp_path / "f.npy", np.ones((2, 2)))
    code, _, err = run(["info", hyps, "--format", "plain", "--plain-features", tmp_path / "f.npy", "--feature-names", "a,a"], capsys)
    assert code == 2 and "feature names: feature name 'a' appears twice" in err
    np.save(tmp_path / "s.npy", np.array("x"))
    code, _, err = run(["info", hyps, "--format", "plain", "--plain-features", tmp_path / "s.npy"], capsys)
    assert code == 2 and "s.npy: expected a 1-D or 2-D array of numbers, got <U1 of shape ()" in err


@pytest.mark.parametrize("fmt,text", [("moses", ""), ("plain", ""), ("fairseq", LOG)])
def test_empty_inputs_are_an_error_where_a_command_needs_hypotheses(tmp_path, capsys, fmt, text):
    path = write(tmp_path, "empty", text)
    ref = write(tmp_path, "ref", "a\n")
    for args in (["convert", path, "-o", tmp_path / "out"], ["oracle", path, "-r", ref],
                 ["apply", path, "-w", write(tmp_path, "w.json", "{}"), "-o", tmp_path / "out"]):
        code, _, err = run(args + ["--format", fmt], capsys)
        assert code == 2 and f"rerank {args[0]}: error: {path}: no hypotheses: the n-best list is empty" in err, err
        assert not (tmp_path / "out").exists()
    code, out, _ = run(["info", path, "--format", fmt], capsys)  # info reports it
    assert code == 0 and "hypotheses:  0" in out and "no hypotheses: the n-best list is empty" in out
    code, _, err = run(["info", write(tmp_path, "blank", "\n\n")], capsys)
    assert code == 2 and "blank: empty file: cannot tell its format" in err


def test_empty_list_round_trips_as_plain_and_fails_clearly_as_input(tmp_path):
    empty = read_nbest(write(tmp_path, "e.txt", ""), "plain")
    write_nbest(empty, str(tmp_path / "again.txt"), "plain")
    assert read_nbest(str(tmp_path / "again.txt"), "plain").n_hyps == 0


# --- features missing on some lines ------------------------------------------------------------

MISSING = "feature OOVPenalty missing on 11 of 82 lines, read as 0 (strict reading makes this an error)"


@pytest.mark.parametrize("command", [["info"], ["convert", "-o", "{tmp}/o.nbest"], ["oracle", "-r", "{ref}", "--tokenize", "none"],
                                     ["apply", "-w", "{w}", "-o", "{tmp}/best"],
                                     ["add-feature", "--name", "x", "--scores", "{s}", "-o", "{tmp}/o"]])
def test_every_command_says_which_features_were_missing(tmp_path, capsys, command):
    nbest = read_nbest(JOSHUA)
    fills = {"tmp": tmp_path, "ref": Path(JOSHUA).parent / "ref.0",
             "w": write(tmp_path, "w", "".join(f"{n} 0.5\n" for n in nbest.feature_names)),
             "s": write(tmp_path, "s", "1\n" * nbest.n_sentences)}
    args = [command[0], JOSHUA] + [a.format(**fills) for a in command[1:]]
    code, _, err = run(args, capsys)
    assert code == 0, err
    assert f"note: {JOSHUA}: {MISSING}\n" in err
    code, _, err = run(args + ["--strict"], capsys)
    assert code == 2 and re.search(r"nbest\.joshua:\d+: feature 'OOVPenalty' is missing \(strict reading\)", err)


def test_a_moses_sparse_feature_missing_is_counted_per_feature(tmp_path, capsys):
    path = write(tmp_path, "s.nbest", GOOD + "1 ||| e ||| f= 3 ||| 0\n")
    code, _, err = run(["convert", path, "-o", tmp_path / "o.nbest"], capsys)
    assert code == 0 and err == f"note: {path}: feature g missing on 2 of 4 lines, read as 0 (strict reading makes this an error)\n"
    assert read_nbest(str(tmp_path / "o.nbest")).column("g").tolist() == [2.0, 0.0, 1.0, 0.0]


# --- convert: what the output format cannot hold --------------------------------------------------

def test_convert_to_fairseq_names_the_features_it_drops(tmp_path, capsys):
    src = write(tmp_path, "n.nbest", "0 ||| a ||| nmt= -1 lm= -5 ||| 2\n0 ||| b ||| nmt= -2 lm= -4 ||| 1\n")
    out = tmp_path / "o.out"
    code, _, err = run(["convert", src, "--to", "fairseq", "-o", out], capsys)
    assert code == 0
    assert f"note: {out}: fairseq lines hold one score (feature nmt, else the total): features lm are not written" in err
    assert "the total scores are not written" in err
    assert out.read_text() == "H-0\t-1.0\ta\nH-0\t-2.0\tb\n"
    code, _, err = run(["convert", write(tmp_path, "k.nbest", "0 ||| a ||| nmt= -1 ||| -1\n"), "--to", "fairseq", "-o", out], capsys)
    assert code == 0 and err == ""  # nothing lost


def test_convert_to_plain_reads_back_with_its_side_files(tmp_path, capsys):
    out = tmp_path / "hyps.txt"
    code, _, err = run(["convert", JOSHUA, "--to", "plain", "-o", out], capsys)
    assert code == 0 and f"note: {out}: plain lists have no total score: the totals are not written" in err
    back = tmp_path / "back.nbest"
    code, _, err = run(["convert", out, "-o", back], capsys)  # detected plain; side files found beside it
    assert code == 0
    assert f"plain list: read sentence ids from {out}.ids and features from {out}.features.tsv (found beside it)" in err
    original, again = read_nbest(JOSHUA), read_nbest(str(back))
    assert again.hyps == original.hyps and np.array_equal(again.offsets, original.offsets)
    assert again.feature_names == original.feature_names and np.array_equal(again.features, original.features)
    assert again.scores is None


def test_write_output_keeps_shard_ids_and_says_what_it_drops(tmp_path, capsys):
    from rerank.cliargs import stderr_log
    from rerank.nbestfile import write_nbest_noted
    nbest = read_nbest(write(tmp_path, "n.nbest", GOOD))
    out = tmp_path / "shard.out"
    with stderr_log():   # the library's notes on stderr, as the command line shows them
        assert write_nbest_noted(nbest, str(out), "fairseq", first_id=7) == [str(out)]
    assert out.read_text() == "H-7\t3.0\ta b\nH-7\t2.0\ta c\nH-8\t1.0\td\n"
    assert capsys.readouterr().err == (f"note: {out}: fairseq lines hold one score (feature nmt, else the total): "
                                       "features f, g are not written\n")
