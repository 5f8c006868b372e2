"""Sentence tokenisation for the embedding models: sacremoses (Moses rules) plus lower-casing.

The same function is used to build vocabularies, to train and to encode, so raw sentences
(e.g. MT hypotheses) can be passed straight to `Encoder.encode`.
"""

from __future__ import annotations

from functools import lru_cache

from sacremoses import MosesTokenizer

from rerank.embeddings.config import LANGUAGES  # noqa: E402 (the tokeniser languages)


@lru_cache(maxsize=None)
def _moses(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


def check_language(lang: str, known=LANGUAGES) -> str:
    """Return `lang` if it is one of `known`, else raise ValueError naming the choices."""
    if lang not in known:
        raise ValueError(f"unknown language {lang!r}: expected one of {', '.join(known)}")
    return lang


def tokenize(sentence: str, lang: str) -> list[str]:
    """Lower-cased Moses tokens of `sentence` (no HTML escaping of & < > etc.)."""
    check_language(lang)
    return _moses(lang).tokenize(sentence.lower(), escape=False, aggressive_dash_splits=False)
