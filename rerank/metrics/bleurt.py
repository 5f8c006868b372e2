"""BLEURT (Sellam et al. 2020; BLEURT-20: Pu et al. 2021) in PyTorch on transformers' RemBertModel:
the `bleurt` metric of `rerank eval`/`report`, feature column and MBR utility (what they share:
rerank.metrics.pair_models).

BLEURT-20 is a RemBERT encoder read with a linear head on its pooled output (the tanh of a dense
layer on the [CLS] state): the input is the pair "[CLS] reference [SEP] candidate [SEP]" (token
types 0 then 1), truncated to `max_length` tokens (longest side first), and the score is
head(pooled output), as the public PyTorch port (lucadiliello/bleurt-pytorch,
BleurtForSequenceClassification) computes it. Higher is better. A sentence with several
references takes their mean, as COMET's metric does.

A model is a directory loaded without running code from it, in one of two layouts:

- this toolkit's checkpoint format:
  - `bleurt_config.json`: {"format": "rerank-bleurt", "max_length": 512, "encoder": {a
    RemBertConfig as a dict}};
  - `model.safetensors` (or `model.pt`, a state_dict read with `torch.load(weights_only=True)`):
    the RemBertModel's weights under `encoder.` and the head's as `head.weight` (1 x hidden) and
    `head.bias`;
  - the tokenizer's files (transformers' AutoTokenizer, offline);
- the PyTorch port's, as its `save_pretrained` writes it (lucadiliello/BLEURT-20 and its
  distilled D3/D6/D12): `config.json` of model_type "bleurt", `model.safetensors` or
  `pytorch_model.bin` (weights only) with BleurtForSequenceClassification's names, and its
  tokenizer: `spm.model` (BleurtSPTokenizer, transformers' DebertaV2Tokenizer over it) or
  `vocab.txt` (BleurtTokenizerFast, a BertTokenizerFast). Its names map onto RemBertModel's
  (`port_state`): `bleurt.` is `encoder.`, the encoder's `embedding_projection` is RemBERT's
  `embedding_hidden_mapping_in` (the identity when the config has no `embedding_size`) and
  `classifier` is `head`. benchmarks/bench_bleurt_port.py compares the two on the port's own
  checkpoints.

`rerank.recipes.tiny_models.build_bleurt` writes one with random weights. Pairs are tokenized
once, sorted by length and batched by padded tokens (MAX_TOKENS), each distinct pair scored once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.errors import InputError, needs_neural
from rerank.metrics.pair_models import (Pair, PairModel, PairModelFeature, PairModelMetric,
                                        PairModelUtility, Store, loading_failed, model_directory, pair_batches)
from rerank.options import PATH, POSITIVE_INT, option
from rerank.progress import transformers_bars_off

CONFIG = "bleurt_config.json"
FORMAT = "rerank-bleurt"
WEIGHTS = ("model.safetensors", "model.pt")
PORT = "bleurt-pytorch"   # the layout of the PyTorch port (lucadiliello/bleurt-pytorch)
PORT_CONFIG = "config.json"
PORT_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
PORT_TOKENIZERS = ("spm.model", "vocab.txt")   # BleurtSPTokenizer's, BleurtTokenizerFast's
# BleurtConfig's defaults, for the fields a config.json leaves out
PORT_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                 "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                 "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
                 "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0}


def read_config(path: str) -> dict:
    """The model's config in this toolkit's form, checked: bleurt_config.json's (its format,
    max_length and encoder config), or the PyTorch port's config.json translated (`port_config`);
    "layout" says which."""
    path = model_directory(path, "bleurt", ())
    file = os.path.join(path, CONFIG)
    if not os.path.isfile(file):
        if os.path.isfile(os.path.join(path, PORT_CONFIG)):
            return port_config(path)
        raise InputError(f"not a model directory for bleurt: {CONFIG} is missing (this toolkit's format), and so is "
                         f"the PyTorch port's {PORT_CONFIG} (docs/models.md)", path)
    try:
        with open(file, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read {CONFIG}: {' '.join(str(exc).split())[:200]}", file) from exc
    if not isinstance(config, dict) or config.get("format") != FORMAT or not isinstance(config.get("encoder"), dict):
        raise InputError(f"not a BLEURT model in this toolkit's format: {CONFIG} needs \"format\": \"{FORMAT}\" and "
                         "an \"encoder\" RemBertConfig (docs/models.md)", file)
    if not (isinstance(config.get("max_length", 512), int) and config.get("max_length", 512) >= 3):
        raise InputError(f"{CONFIG}: max_length must be an integer >= 3, got {config.get('max_length')!r}", file)
    if not any(os.path.isfile(os.path.join(path, name)) for name in WEIGHTS):
        raise InputError(f"a BLEURT model needs its weights, {' or '.join(WEIGHTS)}", path)
    return {**config, "layout": "rerank"}


def port_config(path: str) -> dict:
    """The PyTorch port's config.json (a BleurtConfig) as this toolkit's config: the RemBertConfig
    of the same network (input embeddings of `embedding_size`, else of the hidden width) and
    max_length its position table's size. A config of another model_type, a field of the wrong
    type, or a directory without the port's weights or tokenizer is an InputError."""
    from rerank.io import read_json_object

    file = os.path.join(path, PORT_CONFIG)
    port = read_json_object(file, "a BLEURT config")
    if port.get("model_type") != "bleurt":
        raise InputError(f"not a BLEURT model: {CONFIG} is missing (this toolkit's format), and {PORT_CONFIG} has "
                         f"model_type {port.get('model_type')!r}, not \"bleurt\" (the PyTorch port's)", file)
    fields = {**PORT_DEFAULTS, **{k: port[k] for k in PORT_DEFAULTS if port.get(k) is not None}}
    width = port.get("embedding_size") or fields["hidden_size"]
    sizes = [k for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                         "max_position_embeddings", "type_vocab_size")
             if not (isinstance(fields[k], int) and not isinstance(fields[k], bool) and fields[k] >= 1)]
    if sizes or not (isinstance(width, int) and width >= 1) or not isinstance(fields["hidden_act"], str):
        bad = sizes[0] if sizes else "embedding_size" if not (isinstance(width, int) and width >= 1) else "hidden_act"
        raise InputError(f"{PORT_CONFIG}: {bad} must be " + ("a string" if bad == "hidden_act" else "a positive integer")
                         + f", got {port.get(bad)!r}", file)
    if fields["max_position_embeddings"] < 3:
        raise InputError(f"{PORT_CONFIG}: max_position_embeddings must be >= 3 (a pair and its three special tokens)",
                         file)
    if not any(os.path.isfile(os.path.join(path, name)) for name in PORT_WEIGHTS):
        raise InputError(f"a BLEURT model needs its weights, {' or '.join(PORT_WEIGHTS)} (the PyTorch port's names)",
                         path)
    if not any(os.path.isfile(os.path.join(path, name)) for name in PORT_TOKENIZERS):
        raise InputError(f"the PyTorch port's BLEURT needs its tokenizer: {' or '.join(PORT_TOKENIZERS)} is missing",
                         path)
    encoder = {**fields, "input_embedding_size": width, "output_embedding_size": width,
               "bos_token_id": port.get("bos_token_id"), "eos_token_id": port.get("eos_token_id")}
    return {"format": FORMAT, "max_length": fields["max_position_embeddings"], "encoder": encoder, "layout": PORT,
            "projection": bool(port.get("embedding_size"))}


def port_state(state: dict, config: dict) -> dict:
    """The port's state_dict (BleurtForSequenceClassification's names) under this toolkit's
    (`encoder.` + RemBertModel's, `head.`). The port's position-id buffer is dropped (RemBERT's
    is made anew); a port without `embedding_size` has no input projection, and RemBERT's is then
    the identity with a zero bias, which leaves every value as it is. Names that map to nothing
    are kept as they are, for build_model to report."""
    import torch

    ours = {}
    for name, tensor in state.items():
        if name in ("bleurt.embeddings.position_ids", "bleurt.embeddings.token_type_ids"):
            continue
        if name.startswith("bleurt.encoder.embedding_projection."):
            name = "encoder.encoder.embedding_hidden_mapping_in." + name.rsplit(".", 1)[1]
        elif name.startswith("bleurt."):
            name = "encoder." + name[len("bleurt."):]
        elif name.startswith("classifier."):
            name = "head." + name[len("classifier."):]
        ours[name] = tensor
    if not config.get("projection", True) and "encoder.encoder.embedding_hidden_mapping_in.weight" not in ours:
        width = int(config["encoder"]["hidden_size"])
        ours["encoder.encoder.embedding_hidden_mapping_in.weight"] = torch.eye(width)
        ours["encoder.encoder.embedding_hidden_mapping_in.bias"] = torch.zeros(width)
    return ours


def read_weights(path: str, config: dict | None = None) -> dict:
    """The state_dict of a model directory in this toolkit's names: the first weights file of its
    layout (safetensors, else a PyTorch file read with weights_only=True), the port's names mapped
    by `port_state`."""
    import pickle

    import torch

    from rerank.device import TORCH_LOAD_ERRORS

    port = config is not None and config.get("layout") == PORT
    names = PORT_WEIGHTS if port else WEIGHTS
    file = next((os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))),
                os.path.join(path, names[0]))
    if file.endswith(".safetensors"):
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state = load_file(file)
        except (OSError, SafetensorError) as exc:
            raise InputError(f"cannot read the BLEURT weights: {' '.join(str(exc).split())[:200]}", file) from exc
    else:
        try:
            state = torch.load(file, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            raise InputError("refused: the weights file pickles objects, not only tensors, and loading it would run "
                             "code from it; save a plain state_dict (or safetensors)", file) from exc
        except TORCH_LOAD_ERRORS as exc:
            raise InputError(f"cannot read the BLEURT weights: {' '.join(str(exc).split())[:200]}", file) from exc
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise InputError("the BLEURT weights file is not a state_dict (names to tensors)", file)
    return port_state(state, config) if port and config is not None else state


def port_tokenizer(path: str):
    """The port's tokenizer as the port builds it, offline: BleurtSPTokenizer is transformers'
    DebertaV2Tokenizer over spm.model (with tokenizer_config.json's settings: do_lower_case,
    split_by_punct, the special tokens), BleurtTokenizerFast a BertTokenizerFast over vocab.txt.
    transformers 5 reads spm.model through protobuf (the hf extra installs it)."""
    import importlib.util

    import transformers

    from rerank.errors import MissingDependency

    if os.path.isfile(os.path.join(path, "spm.model")):
        if int(transformers.__version__.split(".")[0]) >= 5:
            try:
                protobuf = importlib.util.find_spec("google.protobuf")
            except ModuleNotFoundError:   # no google package at all
                protobuf = None
            if protobuf is None:
                raise MissingDependency("protobuf", "the PyTorch port's BLEURT tokenizer (spm.model) under "
                                        "transformers 5")
        cls: Any = transformers.DebertaV2Tokenizer
    else:   # transformers 5's BertTokenizer is the fast one
        cls = getattr(transformers, "BertTokenizerFast", None) or transformers.BertTokenizer
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()   # not "the class of this checkpoint is BleurtSPTokenizer": we know
    try:
        return cls.from_pretrained(path, local_files_only=True)
    finally:
        transformers.logging.set_verbosity(verbosity)


def build_model(config: dict, state: dict | None = None):
    """(RemBertModel with its pooler, head Linear(hidden, 1)) of a bleurt_config.json's contents,
    with the weights of `state` (None: random). With weights the modules are made on the meta
    device and take the state's tensors (no random initialisation, the weights in memory once);
    the position ids, a buffer no state holds, are made anew. Missing or unexpected weights, or
    weights of the wrong shape, are an error (ValueError)."""
    import contextlib

    import torch
    from transformers import RemBertConfig, RemBertModel

    with torch.device("meta") if state is not None else contextlib.nullcontext():
        encoder = RemBertModel(RemBertConfig(**config["encoder"]), add_pooling_layer=True)
        head = torch.nn.Linear(encoder.config.hidden_size, 1)
    if state is not None:
        ours = {f"encoder.{k}": v for k, v in encoder.state_dict().items()}
        ours.update({f"head.{k}": v for k, v in head.state_dict().items()})
        missing = sorted(set(ours) - set(state))
        extra = sorted(set(state) - set(ours))
        if missing or extra:
            raise ValueError(f"the weights do not fit the config: {len(missing)} missing (first: "
                             f"{missing[:1]}), {len(extra)} unexpected (first: {extra[:1]})")
        shapes = [k for k, v in ours.items() if tuple(v.shape) != tuple(state[k].shape)]
        if shapes:
            raise ValueError(f"the weights do not fit the config: {len(shapes)} of another shape (first: {shapes[0]} "
                             f"{tuple(state[shapes[0]].shape)}, the config's {tuple(ours[shapes[0]].shape)})")
        encoder.load_state_dict({k[len("encoder."):]: v for k, v in state.items() if k.startswith("encoder.")},
                                assign=True)
        head.load_state_dict({"weight": state["head.weight"], "bias": state["head.bias"]}, assign=True)
        positions = encoder.embeddings.position_ids
        encoder.embeddings.register_buffer("position_ids", torch.arange(positions.shape[-1]).expand(positions.shape),
                                           persistent=False)
        left = [name for name, tensor in [*encoder.named_parameters(), *encoder.named_buffers()] if tensor.is_meta]
        if left:
            raise ValueError(f"the weights do not fit the config: {left[0]} has no value")
    return encoder.eval(), head.eval()


class BLEURTModel(PairModel):
    """BLEURT of the model directory at `path` (bleurt_config.json, weights, tokenizer)."""

    name, display, reduce, package = "bleurt", "BLEURT", "mean", "transformers"

    def __init__(self, path: str, device=None, batch_size: int | None = None):
        super().__init__(path, device, batch_size)
        self.config = read_config(self.path)
        self.max_length = int(self.config.get("max_length", 512))

    def namespace(self) -> str:
        from rerank.score_cache import model_digest

        return model_digest(self.path) + "\0bleurt"

    def settings(self) -> str:
        return f"max-length:{self.max_length}"

    def record(self) -> dict:
        return {**super().record(), "max_length": self.max_length, "layout": self.config["layout"]}

    def load(self):
        """(tokenizer, encoder, head) on the device, offline."""
        if self._loaded is None:
            with needs_neural("the bleurt metric"):
                from transformers import AutoTokenizer
            try:
                with transformers_bars_off():
                    tokenizer = (port_tokenizer(self.path) if self.config["layout"] == PORT
                                 else AutoTokenizer.from_pretrained(self.path, local_files_only=True))
                    encoder, head = build_model(self.config, read_weights(self.path, self.config))
            except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
                raise loading_failed(self.path, "bleurt", exc) from exc
            self._loaded = (tokenizer, encoder.to(self.device), head.to(self.device))
        return self._loaded

    def inputs(self, pairs: Sequence[Pair]) -> list[dict[str, list[int]]]:
        """The token ids and types of "[CLS] reference [SEP] candidate [SEP]" for each pair."""
        tokenizer, _, _ = self.load()
        encoded = tokenizer([r for _, r in pairs], [h for h, _ in pairs], truncation=True, max_length=self.max_length)
        return [{"input_ids": ids, "token_type_ids": types}
                for ids, types in zip(encoded["input_ids"], encoded["token_type_ids"])]

    def score(self, pairs: Sequence[Pair], store: Store | None) -> np.ndarray:
        """BLEURT of each distinct pair, length-sorted batches of at most MAX_TOKENS padded tokens."""
        import torch

        from rerank.score_cache import score_in_blocks

        tokenizer, encoder, head = self.load()
        rows = self.inputs(pairs)
        batches = pair_batches([len(row["input_ids"]) for row in rows], self.max_rows)
        pad = tokenizer.pad_token_id or 0

        def batch_scores(some: Sequence[Sequence[int]]) -> np.ndarray:
            (batch,) = some
            width = max(len(rows[k]["input_ids"]) for k in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            types = torch.zeros((len(batch), width), dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for i, k in enumerate(batch):
                n = len(rows[k]["input_ids"])
                ids[i, :n], types[i, :n], mask[i, :n] = (torch.tensor(rows[k]["input_ids"]),
                                                         torch.tensor(rows[k]["token_type_ids"]), 1)
            with torch.inference_mode():
                pooled = encoder(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                 token_type_ids=types.to(self.device)).pooler_output
                return head(pooled)[:, 0].double().cpu().numpy()

        weights = [sum(len(rows[k]["input_ids"]) for k in batch) for batch in batches]
        return score_in_blocks(batches, batch_scores, store, weights=weights)


class BLEURTMetric(PairModelMetric):
    """BLEURT as a metric of `rerank eval`/`report` (the mean over a sentence's references)."""

    name, display = "bleurt", "BLEURT"
    scale = "the model's regression scores (BLEURT-20: about 0-1)"
    statistics_doc = "`[score, 1]`: the model's score of (reference, candidate) (mean over the references)"
    score_doc = "the mean of the segment scores"
    options_doc = "EvalOptions `bleurt_model`, `device`, `score_cache` (`--bleurt-model`, ...)"

    @classmethod
    def from_eval(cls, options, cache: str | None) -> BLEURTMetric:
        """The metric of an EvalOptions (its bleurt_model and device)."""
        return cls(BLEURTModel(os.fspath(options.bleurt_model), options.device), cache)


@dataclass(frozen=True)
class BLEURTOptions:
    """Options of the bleurt feature (flags of `rerank features`: --bleurt-model, --bleurt-batch-size)."""

    model: str | None = option(None, "a BLEURT model directory: this toolkit's format (bleurt_config.json, "
                               "model.safetensors, tokenizer) or the PyTorch port's (config.json, weights, spm.model)",
                               check=PATH, metavar="DIR",
                               default_text="none, needed for bleurt")
    batch_size: int = option(64, "pairs per batch (also at most 8,192 padded tokens)", check=POSITIVE_INT)


class BLEURTFeature(PairModelFeature):
    columns = ("bleurt",)
    description = ("BLEURT of each hypothesis against its references (--bleurt-model, -r): a column to tune toward or "
                   "pick oracles by")
    Options = BLEURTOptions
    option_prefix = "bleurt-"

    def make_model(self, options, device) -> PairModel:
        return BLEURTModel(options.model, device, options.batch_size)


class BLEURTUtility(PairModelUtility):
    """BLEURT as the MBR utility."""

    Model = BLEURTModel
    no_aggregate = ("the aggregate MBR method needs a utility with a vector or n-gram form; BLEURT encodes the "
                    "hypothesis and the reference together: use the exact method for bleurt")

