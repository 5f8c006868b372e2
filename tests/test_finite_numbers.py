"""One reader of a finite number from text (rerank.options.finite_float): it accepts exactly the
texts float() reads as a finite number, with float's value, and tells a text that is no number
from one that is infinite, NaN or too large. Every reader of numbers from text (the formats'
parse_number, segment-score files, score files) accepts the same texts with the same values."""

from __future__ import annotations

import math
import random

import pytest

from rerank.errors import InputError
from rerank.formats.common import parse_number
from rerank.metrics.external import _number
from rerank.options import NotFinite, finite_float
from rerank.scorefiles import read_scores


def texts() -> list[str]:
    """Numbers in every spelling float() knows, their infinite and NaN forms, overflows and
    near-numbers, plus random strings of number characters."""
    fixed = ["0", "-0", "+1", "1.5", " 2.25 ", ".5", "5.", "1e-3", "1E+3", "1_000", "0x10", "1e400", "-1e400", "inf",
             "-Infinity", "nan", "NaN", "+nan", "", " ", "x", "1,5", "1.2.3", "e3", "--1", "١٢", "1e", "infinit"]
    rng = random.Random(3)
    alphabet = "0123456789+-.eE_ infa"
    return fixed + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(400)]


def float_reading(text: str):
    """What float() makes of `text`: 'none' (no number), 'infinite' (inf, NaN, overflow) or its value."""
    try:
        value = float(text)
    except ValueError:
        return "none"
    return value if math.isfinite(value) else "infinite"


@pytest.mark.parametrize("text", texts())
def test_finite_float_is_float_restricted_to_finite_numbers(text):
    expected = float_reading(text)
    if expected == "none":
        with pytest.raises(ValueError) as raised:
            finite_float(text)
        assert not isinstance(raised.value, NotFinite)
    elif expected == "infinite":
        with pytest.raises(NotFinite):
            finite_float(text)
    else:
        assert finite_float(text) == expected and math.copysign(1, finite_float(text)) == math.copysign(1, expected)


def test_every_reader_of_numbers_accepts_the_same_texts(tmp_path):
    for number, text in enumerate(t for t in texts() if "\n" not in t and t.strip()):
        expected = float_reading(text)
        (tmp_path / "scores.txt").write_text(text + "\n", encoding="utf-8")
        readers = (lambda text=text: parse_number(text, "feature 'f'", "f", 1),
                   lambda text=text: _number(text, "q", "f", 1),
                   lambda: float(read_scores(str(tmp_path / "scores.txt"))[0]))
        for read in readers:
            if isinstance(expected, float):
                assert read() == expected, (number, text)
            else:
                with pytest.raises(InputError):
                    read()
