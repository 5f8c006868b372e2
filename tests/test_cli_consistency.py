"""One command line: the n-best positional (with --nbest as an alias), every option's default in
its help, progress bars only on a terminal and without --quiet."""

import argparse
import os
import sys
from pathlib import Path

import pytest

from rerank.cli import build_parser, main
from rerank.cliargs import show_progress

DATA = Path(__file__).parent / "data" / "joshua10"
JOSHUA = str(DATA / "nbest.joshua")
REFS = [x for k in range(4) for x in ("-r", str(DATA / f"ref.{k}"))]
COMMANDS = ("apply", "oracle", "add-feature", "features", "tune", "eval")
SHARED_GROUPS = ("n-best input",)   # rerank.commands._common's options


def subparsers():
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_shows_its_default(command):
    parser = subparsers()[command]
    own = [a for g in parser._action_groups
           if g.title not in SHARED_GROUPS and (g.title in ("options", "positional arguments", "metric", "output",
                                                            "METEOR", "significance"))
           for a in g._group_actions]
    missing = [a.option_strings[-1] for a in own
               if a.option_strings and not a.required and a.nargs != 0 and a.help != argparse.SUPPRESS
               and "default" not in (a.help or "") and "alias" not in (a.help or "")]
    assert missing == []


def _options_without_default(parser, name):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub, p in a.choices.items():
                yield from _options_without_default(p, f"{name} {sub}")
        elif (a.option_strings and not a.required and a.nargs != 0 and a.help != argparse.SUPPRESS
              and a.dest != "help" and "default" not in (a.help or "") and "alias" not in (a.help or "")):
            yield f"{name} {a.option_strings[-1]}"


def test_every_option_of_every_command_and_plugin_shows_its_default():
    """All commands, their verbs, the shared n-best options and the plug-ins' option groups."""
    assert list(_options_without_default(build_parser(), "rerank")) == []


@pytest.mark.parametrize("command", ("tune", "features"))
def test_nbest_positional_or_alias_exactly_once(tmp_path, capsys, command):
    argv = [command, "-o", str(tmp_path / "out")] + (REFS if command == "tune" else ["--which", "s_s"])
    assert main(argv) == 2
    assert f"rerank {command}: error: give the input n-best file (positional or --nbest)" in capsys.readouterr().err
    assert main([*argv, JOSHUA, "--nbest", JOSHUA]) == 2
    assert "give the n-best file once (positional or --nbest)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_tune_takes_the_nbest_positionally_or_through_the_alias(tmp_path, capsys):
    outputs = []
    for nbest in ([JOSHUA], ["--nbest", JOSHUA]):
        out = tmp_path / f"w{len(outputs)}.json"
        assert main(["tune", *nbest, *REFS, "--epochs", "2", "--sentences", "0-4", "-o", str(out), "--quiet"]) == 0
        outputs.append(out.read_text().split('"command"')[0])
    assert outputs[0] == outputs[1]


class FakeTerminal:
    def __init__(self, tty):
        self.tty, self.text = tty, []

    def isatty(self):
        return self.tty

    def write(self, text):
        self.text.append(text)

    def flush(self):
        pass


@pytest.mark.parametrize("tty,quiet,shown", [(True, False, True), (True, True, False), (False, False, False)])
def test_progress_bars_only_on_a_terminal_and_without_quiet(tmp_path, monkeypatch, tty, quiet, shown):
    stderr = FakeTerminal(tty)
    monkeypatch.setattr(sys, "stderr", stderr)
    assert show_progress(argparse.Namespace(quiet=quiet)) is shown
    argv = ["oracle", JOSHUA, *REFS, "-o", str(tmp_path / "oracle.txt")] + (["--quiet"] if quiet else [])
    assert main(argv) == 0
    assert ("BLEU statistics" in "".join(stderr.text)) is shown


@pytest.mark.parametrize("command", ["info", "convert", "apply"])
@pytest.mark.parametrize("tty,quiet,shown", [(True, False, True), (True, True, False), (False, False, False)])
def test_reading_shows_a_bar_on_a_terminal(tmp_path, monkeypatch, command, tty, quiet, shown):
    """Reading a large list takes seconds: info, convert and apply show the lines read."""
    stderr = FakeTerminal(tty)
    monkeypatch.setattr(sys, "stderr", stderr)
    (tmp_path / "w.json").write_text('{"lm_0": 1}')
    extra = {"info": [], "convert": ["-o", str(tmp_path / "o")],
             "apply": ["-w", str(tmp_path / "w.json"), "-o", str(tmp_path / "o")]}[command]
    assert main([command, JOSHUA, *extra] + (["--quiet"] if quiet else [])) == 0
    assert ("reading " + os.path.basename(JOSHUA) in "".join(stderr.text)) is shown


@pytest.mark.parametrize("argv,message", [
    (["tune", JOSHUA, *REFS, "--runs", "0"], "argument --runs: must be a positive integer, got 0"),
    (["tune", JOSHUA, *REFS, "--runs", "-2"], "argument --runs: must be a positive integer, got -2"),
    (["tune", JOSHUA, *REFS, "--runs", "two"], "argument --runs: 'two' is not an integer"),
    (["tune", JOSHUA, *REFS, "--seed", "-1"], "argument --seed: must be 0 or more, got -1"),
    (["eval", *REFS[:2], "-b", JOSHUA, "--ar", "0"], "argument --ar: must be a positive integer, got 0"),
    (["eval", *REFS[:2], "-b", JOSHUA, "--bootstrap", "-5"], "argument --bootstrap: must be 0 or more, got -5"),
    (["eval", *REFS[:2], "-b", JOSHUA, "--alpha", "1.5"], "argument --alpha: must be between 0 and 1 (exclusive), got 1.5"),
    (["eval", *REFS[:2], "-b", JOSHUA, "--alpha", "nan"], "argument --alpha: must be between 0 and 1"),
    (["eval", *REFS[:2], "-b", JOSHUA, "--seed", "-3"], "argument --seed: must be 0 or more, got -3"),
    (["features", JOSHUA, "--which", "s_s", "--id-offset", "-1"], "argument --id-offset: must be 0 or more, got -1"),
    (["features", JOSHUA, "--which", "mbr", "--threads", "0"], "argument --threads: must be a positive integer, got 0"),
    (["features", JOSHUA, "--which", "mbr", "--mbr-temperature", "0"], "argument --mbr-temperature: must be a positive"),
    (["tune", JOSHUA, *REFS, "--epochs", "0"], "argument --epochs: must be a positive integer, got 0"),
    (["tune", JOSHUA, *REFS, "--C", "-0.1"], "argument --C: must be a positive finite number, got -0.1"),
    (["tune", JOSHUA, *REFS, "--decay", "1.5"], "argument --decay: must be between 0 and 1, got 1.5"),
    (["tune", JOSHUA, *REFS, "--restarts", "0"], "argument --restarts: must be a positive integer, got 0"),
    (["tune", JOSHUA, *REFS, "--random-directions", "-1"], "argument --random-directions: must be 0 or more, got -1"),
    (["tune", JOSHUA, *REFS, "--pro-samples", "0"], "argument --pro-samples: must be a positive integer, got 0"),
    (["tune", JOSHUA, *REFS, "--pro-threshold", "-1"], "argument --pro-threshold: must be a finite number >= 0, got -1"),
    (["tune", JOSHUA, *REFS, "--pro-C", "inf"], "argument --pro-C: must be a positive finite number, got inf"),
])
def test_non_positive_sizes_are_refused(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        main([*argv, "-o", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"rerank {argv[0]}: error: {message}" in err, err
    assert list(tmp_path.iterdir()) == []


def test_bootstrap_of_one_is_refused(tmp_path, capsys):
    assert main(["eval", *REFS[:2], "-b", str(DATA / "ref.1"), "--bootstrap", "1", "-o", str(tmp_path / "r.md")]) == 2
    assert "rerank eval: error: --bootstrap must be 0 (no s_sel or intervals) or at least 2, got 1" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_number_types():
    from rerank.cliargs import positive_float

    assert positive_float("0.5") == 0.5
    for bad in ("0", "-1", "inf", "nan", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            positive_float(bad)


def test_a_library_error_about_an_option_names_its_flag_only_where_the_option_stands():
    """InputError.option: the command line says the flag where the message names the option (its
    start, or opening a parenthesis), never inside a quoted name or another word."""
    from rerank.cli import _with_flag, build_parser
    from rerank.errors import InputError

    parser = build_parser()
    args = parser.parse_args(["features", "x.nbest", "--which", "mbr", "-o", "y"])
    clash = InputError("the n-best already has a feature 'replace' (replace overwrites it)", "x.nbest", option="replace")
    assert _with_flag(clash, parser, args) == "x.nbest: the n-best already has a feature 'replace' (--replace overwrites it)"
    args = parser.parse_args(["eval", "-r", "r", "-b", "b"])
    assert _with_flag(InputError("bootstrap must be 0 or at least 2", option="bootstrap"), parser, args) == \
        "--bootstrap must be 0 or at least 2"
    assert _with_flag(InputError("bootstraps are many", option="bootstrap"), parser, args) == "bootstraps are many"
    assert _with_flag(InputError("no such option here", option="nope"), parser, args) == "no such option here"
