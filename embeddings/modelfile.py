"""The two files of an embedding model, read without torch: where they are, the JSON config and
vocabularies checked, and sentences turned into word ids.

A model is `NAME.pt` (a torch state_dict) and `NAME.json` (format, sizes, vocabularies, training
summary). Both encoders read them through these functions, so a broken file gets the same message
whichever encoder reads it: embeddings.encoder.Encoder (torch) and
embeddings.numpy_encoder.NumpyEncoder (numpy, the weights read by embeddings.weights_reader).
"""

from __future__ import annotations

import json
import os
from typing import Protocol

from rerank.embeddings.tokenize import tokenize
from rerank.embeddings.vocab import AnyVocab, vocab_from_data
from rerank.errors import InputError

FORMAT = "mlmme-rerank-embeddings"


class Sizes(Protocol):
    """What read_vocabs needs of a model config (embeddings.model.ModelConfig, or the numpy
    encoder's ModelSpec)."""

    @property
    def languages(self) -> list[str]: ...

    @property
    def vocab_sizes(self) -> dict[str, int]: ...


def model_paths(path: str) -> tuple[str, str]:
    """(state_dict path, JSON path) for `path` = NAME.pt, NAME.json, NAME, or a directory (model.pt)."""
    if os.path.isdir(path):
        path = os.path.join(path, "model.pt")
    stem = path[:-3] if path.endswith(".pt") else path[:-5] if path.endswith(".json") else path
    return stem + ".pt", stem + ".json"


def locate(path: str) -> tuple[str, str]:
    """model_paths(path), both files there; InputError naming the file for a missing one, and the
    path as given when it is not a model's."""
    path = os.fspath(path)
    if os.path.isfile(path) and not path.endswith((".pt", ".json")):
        raise InputError("not a model of `rerank embed train`: give its NAME.pt (NAME.json beside it), NAME or "
                         "their directory", path)
    pt, js = model_paths(path)
    if not os.path.exists(path) and not os.path.exists(pt):
        raise InputError("model file not found" + (f" (nor {pt})" if pt != path else ""), path)
    for p in (pt, js):
        if not os.path.isfile(p):
            raise InputError("model file not found" if not os.path.isdir(p) else "model file is a directory", p)
    return pt, js


def read_meta(js: str) -> dict:
    """The model's JSON, checked to be an embedding model config with its sizes and vocabularies."""
    try:
        with open(js, encoding="utf-8") as f:
            meta = json.load(f)
    except OSError as exc:
        raise InputError(f"cannot read the model config: {exc.strerror}", js) from None
    except UnicodeDecodeError:
        raise InputError("the model config is not UTF-8 text", js) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"the model config is not JSON: {exc.msg}", js, exc.lineno) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise InputError(f"not an embedding model config (format {found!r}, expected {FORMAT!r})", js)
    missing = [k for k in ("model", "vocab") if not isinstance(meta.get(k), dict)]
    if missing:
        raise InputError(f"the model config has no {' or '.join(repr(k) for k in missing)} object", js)
    return meta


def read_vocabs(meta: dict, cfg: Sizes, js: str) -> dict[str, AnyVocab]:
    """Every language's vocabulary from the JSON, of the size the model was built with."""
    vocabs = {}
    for lang in cfg.languages:
        data = meta["vocab"].get(lang)
        if data is None:
            raise InputError(f"the {lang!r} vocabulary is missing", js)
        try:
            vocabs[lang] = vocab_from_data(data)
        except ValueError as exc:
            raise InputError(f"the {lang!r} vocabulary: {exc}", js) from None
        if len(vocabs[lang]) != cfg.vocab_sizes[lang]:
            raise InputError(f"the {lang!r} vocabulary has {len(vocabs[lang])} entries, the model was built with "
                             f"{cfg.vocab_sizes[lang]}: it does not belong to this model", js)
    return vocabs


def token_ids(vocabs: dict[str, AnyVocab], sentences: list[str], lang: str, empty: str = "error") -> list[list[int]]:
    """Word ids of raw sentences in `lang` (embeddings.tokenize, then the language's vocabulary);
    an unknown language, a sentence that is not a str, or (empty="error") one without tokens is
    an InputError."""
    if lang not in vocabs:
        raise InputError(f"unknown language {lang!r}: this model encodes {', '.join(vocabs)}")
    vocab = vocabs[lang]
    out = []
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise InputError(f"sentence {i + 1} is {type(s).__name__}, not str")
        ids = vocab.ids(tokenize(s, lang))
        if not ids and empty == "error":
            raise InputError(f"sentence {i + 1} is empty (pass empty='zero' to get a zero vector)")
        out.append(ids)
    return out
