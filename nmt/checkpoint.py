"""Reading run directories (NMT and LM) with every broken file an InputError naming it: config
and vocabulary JSON, checkpoints (torch.load with weights_only=True, rerank.device) and the
match between them (vocabulary sizes, state_dict keys and shapes); checkpoints written atomically.
"""

from __future__ import annotations

import json
import os

from rerank.nmt.model import AttentionNMT, ModelConfig
from rerank.nmt.vocab import vocab_from_data
from rerank.device import load_tensors, load_weights
from rerank.errors import InputError
from rerank.io import atomic_write


def read_json(path: str, what: str = "config"):
    """The JSON value of a file; InputError for a missing, unreadable or non-JSON file."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError as exc:
        raise InputError(f"{what} file not found", path) from exc
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror}", path) from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"the {what} is not UTF-8 text", path) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"the {what} is not JSON: {exc.msg}", path, exc.lineno) from exc


def read_vocab(path: str, size: int | None = None):
    """A vocabulary file (word list or SentencePiece model), checked against the model's size."""
    data = read_json(path, "vocabulary")
    if isinstance(data, list) and not all(isinstance(t, str) for t in data):
        raise InputError("not a vocabulary: the word list holds non-strings", path)
    if isinstance(data, list) and len(set(data)) != len(data):
        raise InputError("not a vocabulary: the word list repeats entries", path)
    try:
        vocab = vocab_from_data(data)
    except ValueError as exc:   # vocab_from_data's one error for data that is no vocabulary
        raise InputError(f"not a vocabulary ({type(exc).__name__}: {exc})", path) from exc
    if size is not None and len(vocab) != size:
        raise InputError(f"the vocabulary has {len(vocab)} entries, the model was built with {size}: "
                         "it belongs to another model", path)
    return vocab


def save_tensors(obj, path: str) -> None:
    """torch.save through a temporary file renamed into place: an interruption leaves the old file."""
    import torch

    with atomic_write(path, "wb") as f:
        torch.save(obj, f)


def _model_config(config, path: str) -> ModelConfig:
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise InputError("not an NMT run config: no \"model\" object", path)
    train = config.get("train")
    if not isinstance(train, dict) or not all(isinstance(train.get(k), str) for k in ("src_lang", "tgt_lang")):
        raise InputError("not an NMT run config: no \"train\" object with src_lang and tgt_lang", path)
    try:
        return ModelConfig.from_dict(config["model"])
    except TypeError as exc:
        raise InputError(f"not an NMT run config: its \"model\" object {exc}", path) from exc


def load_model(run_dir: str, which: str = "best", device="cpu"):
    """(model, src_vocab, tgt_vocab, config dict) from a run directory of `rerank nmt train`."""
    config_path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(config_path):
        raise InputError("not a run directory of `rerank nmt train` (no config.json)", run_dir)
    config = read_json(config_path)
    mcfg = _model_config(config, config_path)
    try:
        model = AttentionNMT(mcfg)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputError(f"not an NMT run config: {exc}", config_path) from exc
    src_vocab = read_vocab(os.path.join(run_dir, "vocab.src.json"), mcfg.src_vocab)
    tgt_vocab = read_vocab(os.path.join(run_dir, "vocab.tgt.json"), mcfg.tgt_vocab)
    path = os.path.join(run_dir, f"{which}.pt")
    state = load_tensors(path, "checkpoint")
    if which == "last" or (isinstance(state, dict) and "model" in state):
        if not isinstance(state, dict) or "model" not in state:
            raise InputError("not a training checkpoint (no \"model\" entry)", path)
        state = state["model"]
    load_weights(model, state, path, "the model of config.json")
    return model.to(device).eval(), src_vocab, tgt_vocab, config
