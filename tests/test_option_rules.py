"""Every option declared once (issue "The API is the only door", item 2): a rule of TuneSettings,
ApplyOptions, OracleOptions or FeatureRun is checked in one place, so the command line and the Python
API refuse a bad value with the same words. The CLI says the flag where the API says the field
(`argument --runs: must be a positive integer, got 0` / `runs must be a positive integer, got 0`),
and a parenthesis naming an option says how to give it (`(refs)` / `(-r REF)`)."""

import re
from pathlib import Path

import pytest

import rerank
from rerank.cli import main
from rerank.errors import InputError

DATA = Path(__file__).parent / "data" / "joshua10"
NBEST = str(DATA / "nbest.joshua")
REF = str(DATA / "ref.0")

# (command line without -o, the same job through the API, what the CLI says for the API's words)
CASES = {
    "tune runs": (["tune", NBEST, "-r", REF, "--runs", "0"], lambda: rerank.tune(NBEST, [REF], runs=0), {}),
    "tune pro samples above the ceiling": (["tune", NBEST, "-r", REF, "--tuner", "pro", "--pro-samples", "1000000000"],
                                           lambda: rerank.tune(NBEST, [REF], tuner="pro",
                                                               tuner_options={"samples": 1_000_000_000}),
                                           {"option 'samples' of ProOptions": ""}),
    "tune epochs above the ceiling": (["tune", NBEST, "-r", REF, "--epochs", "1000000000"],
                                      lambda: rerank.tune(NBEST, [REF], tuner_options={"epochs": 1_000_000_000}),
                                      {"option 'epochs' of KBMiraOptions": ""}),
    "tune seed": (["tune", NBEST, "-r", REF, "--seed", "-1"], lambda: rerank.tune(NBEST, [REF], seed=-1), {}),
    "tune normalize": (["tune", NBEST, "-r", REF, "--normalize", "q"], lambda: rerank.tune(NBEST, [REF], normalize="q"), {}),
    "tune sentences": (["tune", NBEST, "-r", REF, "--sentences", "x"], lambda: rerank.tune(NBEST, [REF], sentences="x"), {}),
    "tune sentence range": (["tune", NBEST, "-r", REF, "--sentences", "5-2"],
                            lambda: rerank.tune(NBEST, [REF], sentences="5-2"), {}),
    "tune metric": (["tune", NBEST, "-r", REF, "--metric", "blue"], lambda: rerank.tune(NBEST, [REF], metric="blue"), {}),
    "tune tokenize": (["tune", NBEST, "-r", REF, "--tokenize", "nosuch"],
                      lambda: rerank.tune(NBEST, [REF], tokenize="nosuch"), {}),
    "tune tuner": (["tune", NBEST, "-r", REF, "--tuner", "nope"], lambda: rerank.tune(NBEST, [REF], tuner="nope"), {}),
    "tune refs": (["tune", NBEST, "--metric", "ter"], lambda: rerank.tune(NBEST, None, metric="ter"),
                  {"(refs)": "(-r REF)"}),
    "tune lower-better": (["tune", NBEST, "--metric", "column:lm_0", "--lower-better", "tm_pt_0"],
                          lambda: rerank.tune(NBEST, None, metric="column:lm_0", lower_better=("tm_pt_0",)),
                          {}),
    "apply metrics": (["apply", NBEST, "-w", REF, "-r", REF, "--metrics", "rouge"],
                      lambda: rerank.ApplyOptions(refs=(REF,), metrics="rouge"), {}),
    "apply tokenize": (["apply", NBEST, "-w", REF, "-r", REF, "--tokenize", "nosuch"],
                       lambda: rerank.ApplyOptions(refs=(REF,), tokenize="nosuch"), {}),
    "apply to": (["apply", NBEST, "-w", REF, "--to", "nosuch"], lambda: rerank.ApplyOptions(to="nosuch"), {}),
    "oracle metric": (["oracle", NBEST, "-r", REF, "--metric", "blue"], lambda: rerank.oracle(NBEST, [REF], metric="blue"), {}),
    "oracle refs": (["oracle", NBEST, "--metric", "ter"], lambda: rerank.oracle(NBEST, None, metric="ter"),
                    {"(refs)": "(-r REF)"}),
    "oracle lower-better": (["oracle", NBEST, "--metric", "column:lm_0", "--lower-better", "tm_pt_0"],
                            lambda: rerank.oracle(NBEST, None, metric="column:lm_0", lower_better="tm_pt_0"),
                            {}),
    "oracle tokenize": (["oracle", NBEST, "-r", REF, "--tokenize", "nosuch"],
                        lambda: rerank.oracle(NBEST, [REF], tokenize="nosuch"), {}),
    "features shard": (["features", NBEST, "--which", "mbr", "--shard", "3/2"],
                       lambda: rerank.FeatureRun(which="mbr", shard="3/2"), {}),
    "features id-offset": (["features", NBEST, "--which", "mbr", "--id-offset", "-1"],
                           lambda: rerank.FeatureRun(which="mbr", id_offset=-1), {}),
    "features threads": (["features", NBEST, "--which", "mbr", "--threads", "0"],
                         lambda: rerank.FeatureRun(which="mbr", threads=0), {}),
    "features which": (["features", NBEST, "--which", "nosuch"],
                       lambda: rerank.add_features_file(NBEST, "/nonexistent/out", which="nosuch"), {}),
}


def cli_error(argv, tmp_path, capsys) -> str:
    """The one error line of `rerank ARGV -o OUT` (argparse's own errors exit 2 too), nothing written."""
    try:
        code = main([*argv, "-o", str(tmp_path / "out")])
    except SystemExit as stop:
        code = stop.code
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not list(tmp_path.iterdir())
    return lines[-1]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cli_and_the_api_say_one_rule_in_the_same_words(name, tmp_path, capsys):
    argv, api_call, said = CASES[name]
    with pytest.raises(InputError) as refused:
        api_call()
    error = refused.value
    words = error.problem
    if error.option and words.startswith(error.option):   # the field's name: the CLI says its flag there
        words = words[len(error.option):]
    for python, flag in said.items():
        words = words.replace(python, flag)
    for name in error.mentions:   # the other options the message names: said as their flags
        words = re.sub(rf"(?<![\w'(])({re.escape(name)})(?![\w'])", "--" + name.replace("_", "-"), words)
    line = cli_error(argv, tmp_path, capsys)
    assert line.startswith(f"rerank {argv[0]}: error: ") and words.strip(" :") in line, (line, error.problem)
    said_alone = line.split(": error: ", 1)[1]
    if error.option and error.problem.startswith(error.option):   # said as the flag where the API says the field
        assert said_alone.startswith(("argument --", "--")) and not said_alone.startswith(error.option), line


def test_a_feature_or_a_file_named_like_an_option_keeps_its_name(tmp_path, capsys):
    """Only the options a message names (InputError.option, .mentions) are said as flags: a feature
    column or a path spelt like a dest (post_process) is the user's own name, left as it is."""
    weights = tmp_path / "w.json"
    weights.write_text('{"lm_0": 1, "post_process": 0.5}')
    assert main(["apply", NBEST, "-w", str(weights), "-o", str(tmp_path / "out.txt")]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "weights for features the n-best lacks: post_process (" in line and "--post-process" not in line
    folder = tmp_path / "d"
    folder.mkdir()
    same = str(folder / "post_process")
    assert main(["apply", NBEST, "-w", str(weights), "-o", same, "--nbest-out", same]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"two outputs are the same file ({same} and {same})" in line and "--post-process" not in line


def test_the_plot_needs_bootstrap_intervals_from_the_cli_and_the_api(tmp_path, capsys):
    """One rule, said before any work on the command line, and by `Evaluation.save(plot=)` for a script."""
    ref, base = str(DATA / "ref.0"), str(DATA / "ref.1")
    assert main(["eval", "-r", ref, "-b", base, "--bootstrap", "0", "--ar", "10", "--plot", str(tmp_path / "p.png"),
                 "-o", str(tmp_path / "t.md")]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    evaluation = rerank.evaluate([ref], base, {}, bootstrap=0, ar=10)
    with pytest.raises(InputError) as refused:
        evaluation.save(tmp_path / "t.md", plot=tmp_path / "p.png")
    assert line.endswith(refused.value.problem.replace("plot shows", "--plot shows").replace("bootstrap >=", "--bootstrap >="))
    assert "--plot shows 95% confidence intervals: it needs --bootstrap >= 2" in line
    assert list(tmp_path.iterdir()) == []
