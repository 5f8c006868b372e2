"""Smaller things a new user hit (issue 46 item 8), each checked where it is behaviour."""

import argparse

from rerank.cli import build_parser


def help_of(command: str, flag: str) -> str:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return next(a.help for a in sub._actions if flag in a.option_strings)


def test_tune_no_shuffle_help_says_what_the_flag_gives():
    # --no-shuffle turns the switch off: its line says what off is (the file's order)
    text = help_of("tune", "--no-shuffle")
    assert "(off)" in text and "file" in text.split("(off)")[0].rsplit("(on)", 1)[-1]


def test_eval_writes_the_config_json_the_docs_name(tmp_path):
    import re
    from pathlib import Path

    from rerank.cli import main

    data = Path(__file__).parent / "data" / "eval"
    doc = (Path(__file__).parent.parent / "docs" / "evaluation.md").read_text(encoding="utf-8")
    table, config = re.search(r"`-o (\S+)` writes\s+`(\S+)`", doc).groups()
    assert main(["eval", "-r", str(data / "ref.en"), "-b", str(data / "cap1.en"), str(data / "cap2.en"),
                 "--metrics", "bleu", "--ar", "10", "--bootstrap", "0", "-o", str(tmp_path / table)]) in (0, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([table, config])


def test_a_directory_given_as_a_system_is_said_to_be_one(tmp_path, capsys):
    from pathlib import Path

    from rerank.cli import main

    data = Path(__file__).parent / "data" / "eval"
    folder = tmp_path / "outputs"
    folder.mkdir()
    for systems in ([str(data / "cap1.en"), str(folder)], [str(folder), str(data / "cap1.en")]):
        code = main(["eval", "-r", str(data / "ref.en"), "-b", *systems, "-o", str(tmp_path / "t.md")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and f"{folder}: is a directory" in err[0], err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs"]


def test_the_report_never_prints_a_signed_zero():
    from hypothesis import given
    from hypothesis import strategies as st

    from rerank.htmlreport.page import signed, signed_text

    @given(st.floats(-1e6, 1e6, allow_nan=False), st.integers(0, 4))
    def check(value, decimals):
        text = signed_text(value, decimals)
        assert float(text) == float(f"{value:.{decimals}f}")          # the value, rounded as before
        zero = f"{0:.{decimals}f}"
        assert text == zero if float(text) == 0 else text[0] == ("+" if value > 0 else "-")
        assert f">{text}<" in signed(value, decimals)

    check()
    assert signed_text(-0.001) == signed_text(0.004) == signed_text(-0.0) == "0.00"
