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
