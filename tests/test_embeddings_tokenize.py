"""The embedding tokeniser's faster nonbreaking-prefix step gives sacremoses' tokens exactly."""

import gzip
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sacremoses import MosesTokenizer

from rerank.embeddings.tokenize import _Moses, tokenize
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
             "end.", "1.", "3.5.", "1.2.", "-.-.", ".", "..", "...", "'s", "l'homme", "-", "—", "(", ")", "\"", "#", "ß", "ČR", "č."]
    return st.lists(st.sampled_from(prefixes + plain) | st.text(alphabet="aZ.0 ,'é", min_size=1, max_size=5),
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
