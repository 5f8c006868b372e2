"""The foundation commands (info, convert, add-feature, apply, oracle) and every bad-input case."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from rerank.formats import read_nbest
from tests.cli_helpers import run

DATA = Path(__file__).parent / "data" / "joshua10"
JOSHUA = str(DATA / "nbest.joshua")
REFS = [str(DATA / f"ref.{k}") for k in range(4)]

GOOD = "0 ||| a b ||| f= 1 g= 2 ||| 3\n0 ||| a c ||| f= 2 g= 0 ||| 2\n1 ||| d ||| f= 0 g= 1 ||| 1\n"


def write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


# --- bad input: message names file, line and problem; exit 2; no output left behind ----------

BAD_NBEST = [
    ("0 ||| a ||| f= x ||| 1\n", r"bad\.nbest:1: feature 'f': 'x' is not a number"),
    ("0 ||| a ||| f= 1 ||| 1\n0 ||| a\n", r"bad\.nbest:2: 2 '\|\|\|'-separated fields"),
    ("0 ||| a ||| f= 1 ||| 1\n0 ||| b ||| f= 1\n", r"bad\.nbest:2: 3 '\|\|\|'-separated fields, but line 1 had 4"),
    ("1 ||| a ||| f= 1 ||| 1\n", r"bad\.nbest:1: sentence ids must start at 0"),
    ("0 ||| a ||| f= 1 ||| 1\n1 ||| a ||| f= 1 ||| 1\n0 ||| a ||| f= 1 ||| 1\n",
     r"bad\.nbest:3: sentence id 0 after 1: ids must be non-decreasing"),
    ("0 ||| a ||| f= 1 ||| 1\n2 ||| a ||| f= 1 ||| 1\n", r"bad\.nbest:2: sentence id 2 after 0: sentence 1 has no hypotheses"),
    ("0 ||| a ||| f= nan ||| 1\n", r"bad\.nbest:1: feature 'f' is nan"),
    ("0 ||| a ||| f= 1 ||| 1\n0 ||| a ||| f= inf ||| 1\n", r"bad\.nbest:2: feature 'f' is inf"),
    ("0 ||| a ||| f= 1 f= 2 ||| 1\n", r"bad\.nbest:1: feature 'f' appears twice"),
    ("0 ||| a ||| f=1 f=2 ||| 1\n", r"bad\.nbest:1: feature 'f' appears twice"),
    ("0 ||| a ||| f= 1 ||| one\n", r"bad\.nbest:1: total score: 'one' is not a number"),
    ("x ||| a ||| f= 1 ||| 1\n", r"bad\.nbest:1: sentence id 'x' is not an integer"),
    ("0 ||| a ||| f= 1 2 ||| 1\n0 ||| a ||| f= 1 ||| 1\n", r"bad\.nbest:2: feature 'f' has 1 values here but 2 on line 1"),
    ("", r"bad\.nbest: empty file"),
]


@pytest.mark.parametrize("text,message", BAD_NBEST)
def test_bad_nbest_is_named_and_exits_2(tmp_path, capsys, text, message):
    path = write(tmp_path, "bad.nbest", text)
    out = tmp_path / "out.nbest"
    code, _, err = run(["convert", path, "-o", out], capsys)
    assert code == 2
    assert err.startswith("rerank convert: error: ")
    assert __import__("re").search(message, err), err
    assert not out.exists()
    assert list(tmp_path.glob(".out.nbest*")) == []  # no temp file left behind


def test_non_utf8_bytes(tmp_path, capsys):
    path = write(tmp_path, "bad.nbest", "0 ||| a ||| f= 1 ||| 1\n".encode() + b"0 ||| \xff ||| f= 1 ||| 1\n", "wb")
    code, _, err = run(["info", path], capsys)
    assert code == 2 and "bad.nbest:2: not UTF-8" in err


def test_unreadable_and_broken_gzip(tmp_path, capsys):
    code, _, err = run(["info", tmp_path / "nope.nbest"], capsys)
    assert code == 2 and "nope.nbest: cannot open" in err
    broken = write(tmp_path, "broken.gz", gzip.compress(GOOD.encode())[:20], "wb")
    code, _, err = run(["info", broken, "--format", "moses"], capsys)
    assert code == 2 and "broken.gz:1: cannot read: corrupt or truncated gzip data" in err


def test_fairseq_duplicated_and_missing_ids(tmp_path, capsys):
    dup = write(tmp_path, "dup.out", "S-0\ta\nH-0\t-1\tx\nS-0\tb\n")
    code, _, err = run(["info", dup, "--format", "fairseq"], capsys)
    assert code == 2 and "dup.out:3: S-0 appears twice (first on line 1)" in err
    missing = write(tmp_path, "missing.out", "S-0\ta\nH-0\t-1\tx\nS-2\tc\nH-2\t-1\tz\n")
    code, _, err = run(["info", missing, "--format", "fairseq"], capsys)
    assert code == 2 and "missing.out: sentence 1 has no D-line hypotheses" not in err
    assert "missing.out: sentence 1 has no H-line hypotheses; ids run 0..2" in err


def test_reference_count_must_match(tmp_path, capsys):
    nbest = write(tmp_path, "n.nbest", GOOD)
    ref = write(tmp_path, "ref", "a b\n")
    code, _, err = run(["oracle", nbest, "-r", ref], capsys)
    assert code == 2 and "ref: 1 reference lines for 2 n-best sentences" in err
    ref2 = write(tmp_path, "ref2", "a b\nd\ne\n")
    code, _, err = run(["oracle", nbest, "-r", write(tmp_path, "ref1", "a b\nd\n"), "-r", ref2], capsys)
    assert code == 2 and "ref2: 3 lines but" in err


def test_weights_unknown_is_error_missing_is_warning(tmp_path, capsys):
    nbest = write(tmp_path, "n.nbest", GOOD)
    unknown = write(tmp_path, "w.json", json.dumps({"f": 1.0, "zz": 2.0}))
    code, _, err = run(["apply", nbest, "-w", unknown, "-o", tmp_path / "best"], capsys)
    assert code == 2 and "w.json: weights for features the n-best lacks: zz" in err
    assert not (tmp_path / "best").exists()
    # a weight of 0 for a column the list lacks (left untuned on a dev list that had it) ranks the same
    zero = write(tmp_path, "w0.json", json.dumps({"f": 1.0, "zz": 0.0}))
    only = write(tmp_path, "w1.json", json.dumps({"f": 1.0}))
    code, _, err = run(["apply", nbest, "-w", zero, "-o", tmp_path / "zero"], capsys)
    assert code == 0 and "weight 0 for zz, which the n-best lacks; it changes nothing" in err
    assert run(["apply", nbest, "-w", only, "-o", tmp_path / "only"], capsys)[0] == 0
    assert (tmp_path / "zero").read_bytes() == (tmp_path / "only").read_bytes()
    partial = write(tmp_path, "w2.json", json.dumps({"weights": {"f": 1.0}}))
    code, _, err = run(["apply", nbest, "-w", partial, "-o", tmp_path / "best"], capsys)
    assert code == 0 and "no weight for g; using 0" in err
    assert (tmp_path / "best").read_text() == "a c\nd\n"


def test_empty_hypothesis_is_allowed_and_counted(tmp_path, capsys):
    path = write(tmp_path, "e.nbest", "0 |||  ||| f= 1 ||| 1\n0 ||| a ||| f= 2 ||| 2\n1 ||| b ||| f= 1 ||| 1\n")
    code, out, _ = run(["info", path, "--json"], capsys)
    info = json.loads(out)
    assert code == 0 and info["hypotheses"] == 3 and "1 empty hypotheses: sentence 0 hypothesis 1" in info["problems"]


# --- the commands doing their job ------------------------------------------------------------

def test_info_on_real_file(capsys):
    code, out, _ = run(["info", JOSHUA], capsys)
    assert code == 0
    assert "sentences:   10" in out and "hypotheses:  82" in out
    assert "list size:   min 4  mean 8.20  max 10" in out
    assert "feature 'OOVPenalty' missing on" in out


def test_apply_with_joshua_weights_reproduces_decoder_ranking(tmp_path, capsys):
    # joshua.config weights with OOVPenalty = -100 make w·f equal the decoder's total (README)
    weights = {
        "lm_0": 1.2373676802179452, "tm_pt_0": -2.4497429277910214, "tm_pt_1": 0.7224581556224123,
        "tm_pt_2": -0.31689069155153504, "tm_pt_3": 0.33861043967238036, "tm_pt_4": 0.03553113401320236,
        "tm_pt_5": 0.19138972284064748, "tm_pt_6": 0.3417994095521415, "tm_pt_7": -0.9936312455671283,
        "tm_pt_8": 0.9070737587091975, "tm_pt_9": 0.8202511858619419, "tm_pt_10": 0.2593091306160006,
        "tm_pt_11": 0.25597137004462134, "tm_pt_12": 0.3538894647790496, "tm_pt_13": -0.36212061186692646,
        "tm_pt_14": -0.32923261148678096, "tm_pt_15": 0.5524863522177359, "tm_pt_16": 0.23451595442127693,
        "tm_glue_0": 1, "WordPenalty": -3.6942747832593694, "OOVPenalty": -100.0,
    }
    moses_lines = "\n".join(f"{k}= {v}" for k, v in weights.items())
    wfile = write(tmp_path, "w.moses", moses_lines + "\n")
    code, _, _ = run(["apply", JOSHUA, "-w", wfile, "-o", tmp_path / "best", "--nbest-out", tmp_path / "sorted.nbest"], capsys)
    assert code == 0
    nbest = read_nbest(JOSHUA)
    firsts = [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]
    assert (tmp_path / "best").read_text().splitlines() == firsts
    resorted = read_nbest(str(tmp_path / "sorted.nbest"))
    assert np.allclose(resorted.scores, nbest.scores, atol=0.003)
    assert sorted(resorted.hyps) == sorted(nbest.hyps)


def test_oracle_matches_sacrebleu(tmp_path, capsys):
    out = tmp_path / "oracle.txt"
    code, text, _ = run(["oracle", JOSHUA, *sum([["-r", r] for r in REFS], []), "--tokenize", "none", "-o", out], capsys)
    assert code == 0
    refs = [Path(r).read_text().splitlines() for r in REFS]
    picks = out.read_text().splitlines()
    oracle = sacrebleu.corpus_bleu(picks, refs, tokenize="none").score
    assert f"oracle BLEU           = {oracle:.2f}" in text
    nbest = read_nbest(JOSHUA)
    first = sacrebleu.corpus_bleu([nbest.hyps[int(i)] for i in nbest.offsets[:-1]], refs, tokenize="none").score
    assert f"first-hypothesis BLEU = {first:.2f}" in text
    assert oracle > first
    # every pick comes from its own sentence's list
    for i, pick in enumerate(picks):
        assert pick in nbest.hyps[nbest.sentence(i)]


def test_add_feature_per_hypothesis_and_broadcast(tmp_path, capsys):
    nbest = write(tmp_path, "n.nbest", GOOD)
    per_hyp = write(tmp_path, "s.txt", "0.5\n-1\n2\n")
    per_sent = tmp_path / "t.npy"
    np.save(per_sent, np.array([7.0, 8.0]))
    out = tmp_path / "out.nbest"
    code, _, _ = run(["add-feature", nbest, "--name", "s_s", "--scores", per_hyp, "--name", "s_i", "--scores", per_sent, "-o", out], capsys)
    assert code == 0
    result = read_nbest(str(out))
    assert result.feature_names == ["f", "g", "s_s", "s_i"]
    assert result.column("s_s").tolist() == [0.5, -1.0, 2.0]
    assert result.column("s_i").tolist() == [7.0, 7.0, 8.0]
    wrong = write(tmp_path, "w.txt", "1\n2\n3\n4\n")
    code, _, err = run(["add-feature", nbest, "--name", "x", "--scores", wrong, "-o", tmp_path / "o2"], capsys)
    assert code == 2 and "w.txt: 4 scores, but the n-best has 3 hypotheses and 2 sentences" in err
    bad = write(tmp_path, "b.txt", "1\nabc\n3\n")
    code, _, err = run(["add-feature", nbest, "--name", "x", "--scores", bad, "-o", tmp_path / "o2"], capsys)
    assert code == 2 and "b.txt:2: 'abc' is not a number" in err
    code, _, err = run(["add-feature", nbest, "--name", "f", "--scores", per_hyp, "-o", tmp_path / "o2"], capsys)
    assert code == 2 and "already has a feature 'f'" in err


def test_convert_fairseq_to_moses_with_refs(tmp_path, capsys):
    from tests.test_formats import FAIRSEQ
    src = write(tmp_path, "gen.out", FAIRSEQ)
    code, _, err = run(["convert", src, "--format", "fairseq", "-o", tmp_path / "x.nbest", "--save-refs", tmp_path / "refs"], capsys)
    assert code == 0 and "lines are not S/T/H/D lines" in err
    assert (tmp_path / "refs").read_text() == "two men\na dog runs\n"
    assert (tmp_path / "x.nbest").read_text().splitlines()[1] == "1 ||| a dog runs . ||| nmt= -0.25 ||| -0.25"


def test_console_script_and_module_entry_point(tmp_path):
    exe = Path(sys.executable).parent / "rerank"
    result = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for command in ("info", "convert", "add-feature", "apply", "oracle"):
        assert command in result.stdout
    bad = write(tmp_path, "bad.nbest", "3 ||| a ||| f= 1 ||| 1\n")
    result = subprocess.run([sys.executable, "-m", "rerank", "info", bad], capture_output=True, text=True)
    assert result.returncode == 2 and "bad.nbest:1: sentence ids must start at 0" in result.stderr


def test_an_argument_error_is_one_line(capsys):
    """A bad option value is one line naming the command and the problem, exit 2: no usage block."""
    from rerank.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["tune", "x", "--runs", "0", "-r", "y", "-o", "w.json"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rerank tune: error: argument --runs") and "usage:" not in err


@pytest.mark.parametrize("user", [None, "ACTIVE"])
def test_openmp_waits_passively_unless_the_user_says(tmp_path, user):
    """A torch process started by the command line does not spin-wait beside busy neighbours
    (rerank.device.prefer_passive_openmp), and a policy the user set is kept."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if user:
        env["OMP_WAIT_POLICY"] = user
    probe = ("import os, sys; from rerank.cli import main; "
             "code = main(['info', sys.argv[1]]); print(code, os.environ['OMP_WAIT_POLICY'])")
    done = subprocess.run([sys.executable, "-c", probe, write(tmp_path, "in.nbest", GOOD)], env=env,
                          capture_output=True, text=True, check=True)
    assert done.stdout.split()[-2:] == ["0", user or "PASSIVE"]
