"""Sentence tokenisation for the embedding models: sacremoses (Moses rules) plus lower-casing.

The same function is used to build vocabularies, to train and to encode, so raw sentences
(e.g. MT hypotheses) can be passed straight to `Encoder.encode`.

Tokenising was most of the time of the s_s feature (150 us a sentence, two thirds of it spent
encoding a 50-best list), and half of that in sacremoses' nonbreaking-prefix step, which runs a
regular expression on every token and looks prefixes up in a list. `_Moses` does that step with
the same rules on the tokens that end with a period only, against sets; the tokens are the
same (tests/test_embeddings_tokenize.py checks them against sacremoses on generated and real text).
"""

from __future__ import annotations

from functools import lru_cache

from sacremoses import MosesTokenizer

from rerank.embeddings.config import LANGUAGES  # the tokeniser languages


class _Moses(MosesTokenizer):
    """sacremoses' tokenizer with its nonbreaking-prefix step computed faster, to the same tokens."""

    def __init__(self, lang: str):
        super().__init__(lang=lang)
        self._prefixes = frozenset(self.NONBREAKING_PREFIXES)
        self._numeric_only = frozenset(self.NUMERIC_ONLY_PREFIXES)
        self._alpha = frozenset(self.IsAlpha)
        self._lower = frozenset(self.IsLower)

    def handles_nonbreaking_prefixes(self, text: str) -> str:
        """MosesTokenizer.handles_nonbreaking_prefixes: a token of two or more characters ending
        with a period (what its `^(\\S+)\\.$` matches on a whitespace-free token) becomes `prefix .`
        unless the prefix has a period and a letter, is a nonbreaking prefix that is not
        numeric-only, or comes before a token starting with a lower-case letter; or is a
        numeric-only prefix before a token starting with a digit."""
        tokens = text.split()
        last = len(tokens) - 1
        for i, token in enumerate(tokens):
            if len(token) < 2 or token[-1] != ".":
                continue
            prefix = token[:-1]
            after = tokens[i + 1] if i < last else ""
            if ("." in prefix and not self._alpha.isdisjoint(prefix)) \
                    or (prefix in self._prefixes and prefix not in self._numeric_only) \
                    or (after and after[0] in self._lower):
                continue
            if prefix in self._numeric_only and after[:1] in _DIGITS:
                continue
            tokens[i] = prefix + " ."
        return " ".join(tokens)


_DIGITS = frozenset("0123456789")


@lru_cache(maxsize=None)
def _moses(lang: str) -> MosesTokenizer:
    return _Moses(lang)


def check_language(lang: str, known=LANGUAGES) -> str:
    """Return `lang` if it is one of `known`, else raise ValueError naming the choices."""
    if lang not in known:
        raise ValueError(f"unknown language {lang!r}: expected one of {', '.join(known)}")
    return lang


def tokenize(sentence: str, lang: str) -> list[str]:
    """Lower-cased Moses tokens of `sentence` (no HTML escaping of & < > etc.)."""
    check_language(lang)
    return _moses(lang).tokenize(sentence.lower(), escape=False, aggressive_dash_splits=False)
