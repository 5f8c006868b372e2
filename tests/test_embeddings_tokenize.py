"""The embedding tokeniser gives sacremoses' tokens exactly: its own copy of the steps, with the
same expressions compiled lazily and skipped where they cannot match, and the faster
nonbreaking-prefix step."""

import gzip
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacremoses import MosesTokenizer

from rerank.embeddings.tokenize import _classes, _Moses, as_ranges, compact_patterns, patterns, tokenize
from rerank.formats import read_nbest

pytestmark = pytest.mark.neural

LANGS = ("en", "de", "fr", "cs")
DATA = Path(__file__).parent / "data"
SHIPPED = Path(__file__).parent.parent / "rerank" / "data" / "multi30k" / "optimised.test_2016.50best.gz"


@lru_cache(maxsize=None)
def moses(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


def reference(text: str, lang: str) -> list[str]:
    return moses(lang).tokenize(text, escape=False, aggressive_dash_splits=False)


def words(lang: str):
    """Words that reach every branch: nonbreaking and numeric-only prefixes with their period,
    abbreviations with inner periods, numbers, lower- and upper-case starts, odd characters."""
    prefixes = [p + "." for p in moses(lang).NONBREAKING_PREFIXES[:40] + moses(lang).NUMERIC_ONLY_PREFIXES]
    plain = ["ein", "Hund", "dog", "Zwei", "über", "Éte", "12", "3.5", "5,300", "e.g.", "z.B.", "U.S.A.", "a.", "X.",
             "end.", "1.", "3.5.", "1.2.", "-.-.", ".", "..", "...", "'s", "l'homme", "-", "—", "(", ")", "\"", "#", "ß", "ČR", "č.",
             "DOTMULTI", "DOTDOTMULTI.", "a..b", "x.'", "'.", ".'", "5,3", "a,b", ",", "'", "it's", "\t", "\x07", "a\x1fb"]
    return st.lists(st.sampled_from(prefixes + plain) | st.text(alphabet="aZ.0 ,'é\u0915\u094d", min_size=1, max_size=5),
                    max_size=12)


@lru_cache(maxsize=None)
def fast(lang: str) -> _Moses:
    return _Moses(lang)


@pytest.mark.parametrize("lang", LANGS)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_generated_text_tokenises_as_sacremoses(lang, data):
    text = " ".join(data.draw(words(lang)))
    assert fast(lang).tokenize(text, escape=False, aggressive_dash_splits=False) == reference(text, lang)


@pytest.mark.parametrize("lang", ["en", "de"])
def test_real_captions_tokenise_as_sacremoses(lang):
    paths = sorted((DATA / "embeddings" / "multi30k").rglob(f"*.{lang}*"))
    assert paths
    lines = []
    for path in paths:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            lines += [line.rstrip("\n") for line in f]
    assert len(lines) > 100
    for line in lines:
        assert tokenize(line, lang) == reference(line.lower(), lang), line


def test_shipped_hypotheses_tokenise_as_sacremoses():
    """MT output (the shipped German 50-best): the strings the s_s feature tokenises."""
    hyps = list(dict.fromkeys(read_nbest(str(SHIPPED)).hyps))[:3000]
    for hyp in hyps:
        assert tokenize(hyp, "de") == reference(hyp.lower(), "de"), hyp


@pytest.mark.parametrize("lang", (*LANGS, "it", "xx"))
def test_the_expressions_and_classes_are_sacremoses_own(lang):
    """The same pattern strings as MosesTokenizer's attributes, the same character classes and
    nonbreaking prefixes: the tokens agree on any text, not just on the texts tested."""
    mine, theirs = patterns(lang), moses(lang)
    apostrophes = {"en": theirs.ENGLISH_SPECIFIC_APOSTROPHE, "fr": theirs.FR_IT_SPECIFIC_APOSTROPHE,
                   "it": theirs.FR_IT_SPECIFIC_APOSTROPHE}.get(lang, [theirs.NON_SPECIFIC_APOSTROPHE])
    assert [mine[f"APOSTROPHE_{i + 1}"] for i in range(len(apostrophes))] == [(p.pattern, r) for p, r in apostrophes]
    assert not any(f"APOSTROPHE_{len(apostrophes) + 1}" == k for k in mine)
    for name in ("DEDUPLICATE_SPACE", "ASCII_JUNK", "PAD_NOT_ISALNUM", "COMMA_SEPARATE_1", "COMMA_SEPARATE_2",
                 "COMMA_SEPARATE_3", "TRAILING_DOT_APOSTROPHE"):
        pattern, replacement = getattr(theirs, name)
        assert mine[name] == (pattern.pattern, replacement), name
    assert mine["MULTIDOT_RUN"][0] == theirs.MULTIDOT_RUN.pattern
    assert mine["MULTIDOT_MARKER"][0] == theirs.MULTIDOT_MARKER.pattern
    for name in ("IsN", "IsAlnum", "IsSc", "IsSo", "IsAlpha", "IsLower"):
        assert getattr(_classes(), name) == getattr(theirs, name), name
    assert _classes().prefixes(lang) == theirs.NONBREAKING_PREFIXES


@pytest.mark.parametrize("text", ["a... b", "wait..", "x.'", "he said 'no.'", "5,300 and a,b", "DOTMULTI. x",
                                  "Mr. Smith", "No. 5", "No. five", "U.S.A. is", "end.", " \t a  b \x07c ", ""])
@pytest.mark.parametrize("lang", (*LANGS, "it"))
def test_the_skipped_steps_change_nothing(text, lang):
    assert fast(lang).tokenize(text) == reference(text, lang)


EVERY_CODE_POINT = "".join(map(chr, range(0x110000)))


@pytest.mark.parametrize("name", ["IsN", "IsAlnum", "IsAlpha", "IsLower", "IsSo"])
def test_a_class_as_ranges_matches_the_same_code_points(name):
    chars = getattr(_classes(), name)
    for body in (chars, "^" + chars):
        ranges = as_ranges(chars) if body == chars else "^" + as_ranges(chars)
        assert re.findall(f"[{ranges}]", EVERY_CODE_POINT) == re.findall(f"[{body}]", EVERY_CODE_POINT)
    assert as_ranges("a-z") == "a-z"  # a class with a special character stays as it is


@pytest.mark.parametrize("lang", LANGS)
def test_the_compact_patterns_differ_only_in_their_classes(lang):
    c, compact = _classes(), compact_patterns(lang)
    for name, (pattern, replacement) in patterns(lang).items():
        for cls in (c.IsAlpha, c.IsAlnum, c.IsN):
            pattern = pattern.replace(cls, as_ranges(cls))
        assert compact[name] == (pattern, replacement), name


def test_tokenising_does_not_import_sacremoses():
    """The data modules are read from their files; the package (every tokenizer's expressions) is not imported."""
    code = ("import sys\nfrom rerank.embeddings.tokenize import tokenize\nassert tokenize('Ein Hund.', 'de') == "
            "['ein', 'hund', '.']\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'sacremoses'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
