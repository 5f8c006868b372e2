"""Every rule of EvalOptions and ReportOptions is checked in one place with one message: the command
line (`rerank eval`, `rerank report`) and the Python API (`rerank.EvalOptions`, `rerank.evaluate`,
`rerank.report`) refuse each bad value with the same text, but that the command line names the
option by its flag (`--ar`) where the library names its field (`ar`).

A flag's value refused by its argparse type is said `argument --ar: must be ...`, which reads as
`--ar must be ...`; every other refusal is the library's InputError, said with the flags in place
of the fields (rerank.cli._with_flag)."""

import os
import re
from pathlib import Path

import pytest

import rerank
from rerank.cli import build_parser, main
from rerank.errors import InputError

DATA = Path(__file__).parent / "data" / "eval"
REF, CAP1, CAP2 = (str(DATA / name) for name in ("ref.en", "cap1.en", "cap2.en"))
REFS = [REF]


def flags_to_fields(command: str) -> list[tuple[str, str]]:
    """(flag, the field it sets) of every flag of `command`, the longest flags first (so that
    --comet-batch-size is replaced before a shorter flag it starts with)."""
    parser = build_parser(command)
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices[command]
    pairs = [(flag, action.dest) for action in sub._actions for flag in action.option_strings if flag.startswith("--")]
    return sorted(pairs, key=lambda pair: -len(pair[0]))


def cli_message(argv: list[str], capsys) -> str:
    """The command's one error line, as the library would say it: the `rerank CMD: error: ` prefix
    and argparse's ` (see ...)` suffix off, `argument --x: ` read as `--x `, each flag as its field."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith(f"rerank {argv[0]}: error: ")]
    assert code == 2 and len(lines) == 1, (code, lines)
    text = lines[0][len(f"rerank {argv[0]}: error: "):]
    text = re.sub(rf" \(see rerank {argv[0]} --help\)$", "", text)
    text = re.sub(r"^argument (--[\w-]+): ", r"\1 ", text)
    for flag, field in flags_to_fields(argv[0]):
        text = re.sub(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", field, text)
    return text


def api_message(call) -> str:
    with pytest.raises(InputError) as caught:
        call()
    assert "--" not in caught.value.problem, caught.value.problem   # the library names no flag
    return str(caught.value)


def eval_options(**fields):
    return lambda: rerank.EvalOptions(**fields)


def evaluate(**fields):
    return lambda: rerank.evaluate(REFS, (os.path.basename(CAP1), CAP1), [(os.path.basename(CAP2), CAP2)],
                                   ar=10, bootstrap=0, **fields)


# (the flags after `rerank eval -r REF -b CAP1 CAP2 --ar 10 --bootstrap 0`, the same rule's call of the API)
EVAL_RULES = {
    "ar not positive": (["--ar", "0"], eval_options(ar=0)),
    "bootstrap negative": (["--bootstrap", "-5"], eval_options(bootstrap=-5)),
    "bootstrap of one": (["--bootstrap", "1"], eval_options(bootstrap=1)),
    "ar above its ceiling": (["--ar", "1000000000"], eval_options(ar=1_000_000_000)),
    "bootstrap above its ceiling": (["--bootstrap", "100000000"], eval_options(bootstrap=100_000_000)),
    "seed negative": (["--seed", "-3"], eval_options(seed=-3)),
    "alpha above 1": (["--alpha", "1.5"], eval_options(alpha=1.5)),
    "alpha of 0": (["--alpha", "0"], eval_options(alpha=0)),
    "alpha nan": (["--alpha", "nan"], eval_options(alpha=float("nan"))),
    "unknown metric": (["--metrics", "bleu,rouge"], eval_options(metrics=("bleu", "rouge"))),
    "no metric": (["--metrics", ","], eval_options(metrics=())),
    "a metric twice": (["--metrics", "bleu,ter,bleu"], eval_options(metrics=("bleu", "ter", "bleu"))),
    "unknown language": (["--lang", "xx"], eval_options(metrics=("bleu",), lang="xx")),
    "unknown tokenizer": (["--tokenize", "nope"], eval_options(metrics=("bleu",), tokenize="nope")),
    "two randomisation tests": (["--stratified", "--multeval-compat"],
                                eval_options(metrics=("bleu",), stratified=True, multeval_compat=True)),
    "comet without the model": (["--metrics", "bleu,comet"], eval_options(metrics=("bleu", "comet"))),
    "comet without sources": (["--metrics", "bleu", "--comet-model", CAP1],
                              eval_options(metrics=("bleu",), comet_model=CAP1, score_cache=True)),
    "sources without comet": (["--metrics", "bleu", "--src", CAP1], eval_options(metrics=("bleu",), sources=CAP1)),
    "COMET batch without comet": (["--metrics", "bleu", "--comet-batch-size", "4"],
                                  eval_options(metrics=("bleu",), comet_batch_size=4)),
    "device without comet": (["--metrics", "bleu", "--device", "cuda"], eval_options(metrics=("bleu",), device="cuda")),
    "score cache without comet": (["--metrics", "bleu", "--score-cache", CAP1],
                                  eval_options(metrics=("bleu",), score_cache=CAP1)),
    "COMET batch not positive": (["--metrics", "bleu", "--comet-batch-size", "0"],
                                 eval_options(metrics=("bleu",), comet_batch_size=0)),
    "unknown device": (["--metrics", "bleu", "--comet-model", CAP1, "--src", CAP1, "--device", "gpu"],
                       eval_options(metrics=("bleu",), comet_model=CAP1, sources=CAP1, device="gpu", score_cache=True)),
    "segment scores without a file": (["--segment-scores", "comet"], eval_options(segment_scores=["comet"])),
    "segment scores with a bad name": (["--segment-scores", "co,met=x.tsv"], eval_options(segment_scores={"co,met": "x.tsv"})),
    "segment scores of a built-in name": (["--segment-scores", "bleu=x.tsv"], eval_options(segment_scores={"bleu": "x.tsv"})),
    "segment scores named twice": (["--segment-scores", "a=x.tsv", "--segment-scores", "a=y.tsv"],
                                   eval_options(segment_scores=["a=x.tsv", "a=y.tsv"])),
    "lower-better of no segment scores": (["--lower-better", "comet"], eval_options(lower_better=("comet",))),
    "second baseline of no system": (["--metrics", "bleu", "--second-baseline", "nope"],
                                     evaluate(metrics=("bleu",), second_baseline="nope")),
}


@pytest.mark.parametrize("rule", EVAL_RULES)
def test_eval_and_the_api_say_one_message_per_rule(rule, tmp_path, capsys):
    extra, call = EVAL_RULES[rule]
    # the rule's flags come last: a flag given twice takes its last value
    argv = ["eval", "-r", REF, "-b", CAP1, CAP2, "--ar", "10", "--bootstrap", "0", *extra, "-o", str(tmp_path / "t.md")]
    assert cli_message(argv, capsys) == api_message(call)
    assert list(tmp_path.iterdir()) == []


def report(page: dict, nbest: bool = False, **options):
    systems = [(os.path.basename(CAP2), CAP2)]
    if nbest:
        systems.append(("lm", rerank.Reranked(NBEST, {"lm_0": 1.0})))
    return lambda: rerank.report(REFS if not nbest else J_REFS, CAP1 if not nbest else J_BASE, systems, OUT,
                                 rerank.EvalOptions(metrics=("bleu",), ar=10, bootstrap=0, **options),
                                 rerank.ReportOptions(**page))


J_DATA = Path(__file__).parent / "data" / "joshua10"
NBEST, J_REFS, J_BASE = str(J_DATA / "nbest.joshua"), [str(J_DATA / f"ref.{k}") for k in range(4)], str(J_DATA / "ref.0")
OUT = "/nonexistent-folder/never-written.html"

# (the flags after `rerank report -r REF -b CAP1 CAP2 --metrics bleu --ar 10 --bootstrap 0 -o OUT`, the API's call)
REPORT_RULES = {
    "examples not positive": (["--examples", "0"], lambda: rerank.ReportOptions(examples=0)),
    "length buckets not increasing": (["--length-buckets", "5,3"], lambda: rerank.ReportOptions(length_edges=(5, 3))),
    "length buckets below 1": (["--length-buckets", "0,3"], lambda: rerank.ReportOptions(length_edges="0,3")),
    "frequency buckets not integers": (["--freq-buckets", "a"], lambda: rerank.ReportOptions(freq_edges="a")),
    "unknown oracle metric": (["--oracle-metric", "nope"], lambda: rerank.ReportOptions(oracle_metric="nope")),
    "oracle lower-better of no column": (["--oracle-metric", "ter", "--oracle-lower-better", "ter"],
                                         lambda: rerank.ReportOptions(oracle_metric="ter", oracle_lower_better="ter")),
    "sentence metric not scored": (["--sentence-metric", "ter"], report({"sentence_metric": "ter"})),
    "an oracle without n-best lists": (["--oracle-metric", "chrf"], report({"oracle_metric": "chrf"})),
}


@pytest.mark.parametrize("rule", REPORT_RULES)
def test_report_and_the_api_say_one_message_per_rule(rule, tmp_path, capsys):
    extra, call = REPORT_RULES[rule]
    out = tmp_path / "r.html"
    argv = ["report", "-r", REF, "-b", CAP1, CAP2, "--metrics", "bleu", "--ar", "10", "--bootstrap", "0", *extra,
            "-o", str(out)]
    assert cli_message(argv, capsys) == api_message(call)
    assert not out.exists()


def test_the_flags_are_the_fields():
    """eval's flags are generated from EvalOptions, report's from ReportOptions too: each field's flag
    sets that field, with its default (the command line's own, for --metrics) and check."""
    from rerank.options import describe_options

    for command, classes in (("eval", [rerank.EvalOptions]), ("report", [rerank.EvalOptions, rerank.ReportOptions])):
        dests = {flag: dest for flag, dest in flags_to_fields(command)}
        for cls in classes:
            for doc in describe_options(cls):
                for flag in (f for f in doc.flags if f.startswith("--")):
                    assert dests[flag] == doc.name, (command, flag)
    args = build_parser("eval").parse_args(["eval", "-r", REF, "-b", CAP1])
    from rerank.commands._evaluation import eval_options

    options = eval_options(args)
    assert options.metrics == ("bleu", "meteor", "ter") and options.meteor is None
    assert (options.ar, options.bootstrap, options.seed, options.alpha) == (10000, 1000, 12345, 0.05)
    args = build_parser("eval").parse_args(["eval", "-r", REF, "-b", CAP1, "--meteor-modules", "exact,stem",
                                            "--meteor-no-norm", "--src", CAP1, "--comet-model", CAP2])
    options = eval_options(args)
    assert options.meteor == {"modules": ("exact", "stem"), "normalize": False}
    assert options.sources == CAP1 and options.metrics[-1] == "comet" and options.score_cache is True
