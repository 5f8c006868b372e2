"""MetricX-23 and MetricX-24 (google-research/metricx) from a user's local checkpoint, offline:
the scorer that the `metricx`/`metricx_qe` features, the `metricx` metric of `rerank
eval`/`report` and the MBR utility share, and the metric and the utility themselves.

A MetricX model is an mT5 encoder-decoder (the public MT5ForRegression) whose decoder runs one
step from token 0 and whose score is that step's logit of one vocabulary token (250089,
<extra_id_10>, in the real vocabulary), clamped to [0, 25]: an error score, lower is better. Here it
is transformers' MT5Model (both transformers 4 and 5 have it) with the one row of the output
projection that the score reads (`lm_head.weight[score_token_id]`), so no (batch x vocabulary)
logits are computed; the scale d_model**-0.5 of tied embeddings is applied as the public
definition applies it.

A checkpoint is a directory: the model's config.json (model_type mt5) and weights
(model.safetensors or pytorch_model.bin, or their sharded index), its tokenizer's files (the mT5
tokenizer that MetricX uses: copy google/mt5-*'s tokenizer beside the weights) and metricx.json,
what the weights alone do not say:

    {"version": 24}                          # MetricX-24: one hybrid model, with and without references
    {"version": 23, "mode": "reference"}     # MetricX-23: a reference-based checkpoint ("qe": the QE one)

with optional `score_token_id` (250089) and `max_input_length` (MetricX's own: 1536 for 24, 1024
for 23). The inputs are MetricX's predict.py's: MetricX-24 "source: S candidate: H reference: R"
(QE: without the reference), MetricX-23 "candidate: H reference: R" (QE: "candidate: H source:
S"), tokenised with truncation to max_input_length and the final EOS removed.

Weights load with weights_only=True (safetensors, or a state_dict through rerank.device), never
downloading (local_files_only). Each distinct model input is scored once, in batches of at most
`batch_tokens` padded tokens, longest first (rerank.score_cache.token_batches), a block at a time
into the score cache (keyed by the model's digest and the input text) and split over ranks under
torchrun (rerank.score_cache.score_in_blocks).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.errors import InputError, needs_neural
from rerank.io import read_json_object
from rerank.metrics.base import SourcedSegments

log = logging.getLogger(__name__)

SETTINGS_FILE = "metricx.json"
VERSIONS = (23, 24)
MODES = ("hybrid", "reference", "qe")
SCORE_TOKEN_ID = 250089            # <extra_id_10> of the mT5 vocabulary, as MT5ForRegression reads it
MAX_INPUT_LENGTH = {23: 1024, 24: 1536}   # MetricX's README
MAX_SCORE = 25.0
BATCH_TOKENS = 4096                # padded input tokens per batch
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "spiece.model")
SCORING = 1                        # in the score cache's namespace: changes when a score would


@dataclass(frozen=True)
class Checkpoint:
    """A MetricX checkpoint directory as metricx.json and its files describe it."""

    path: str
    version: int
    mode: str                 # hybrid (MetricX-24), reference or qe
    score_token_id: int
    max_input_length: int
    weights: str              # the weights file (or the shards' index) under path

    def check_use(self, reference: bool, what: str) -> None:
        """Refuse, in one line, a reference-based use of a QE checkpoint or a QE use of a
        reference-based one (`what`: the feature, metric or utility that asks)."""
        if self.mode != "hybrid" and (self.mode == "reference") != reference:
            need, have = ("reference-based", "QE") if reference else ("QE (reference-free)", "reference-based")
            raise InputError(f"a {have} MetricX-{self.version} checkpoint (mode {self.mode!r} in {SETTINGS_FILE}); "
                             f"{what} needs a {need} one or MetricX-24's hybrid", self.path)

    def text(self, source: str, hypothesis: str, reference: str | None) -> str:
        """The model's input for (source, hypothesis, reference), reference None for QE, as
        MetricX's predict.py writes it for this version."""
        if self.version == 24:
            return f"source: {source} candidate: {hypothesis}" + ("" if reference is None else f" reference: {reference}")
        return f"candidate: {hypothesis} " + (f"source: {source}" if reference is None else f"reference: {reference}")


def _setting(settings: dict, key: str, default: Any, path: str) -> int:
    value = settings.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if key == "max_input_length" else 0):
        raise InputError(f"{key} must be a {'positive' if key == 'max_input_length' else 'non-negative'} integer, got "
                         f"{value!r}", path)
    return value


def read_checkpoint(path: str) -> Checkpoint:
    """The Checkpoint of a MetricX directory, every file it needs checked (nothing loaded):
    metricx.json's version and mode, config.json an mT5 one whose vocabulary holds the score
    token, a weights file and the tokenizer's files. A bad directory is an InputError naming the
    file."""
    if not os.path.isdir(path):
        raise InputError("not a MetricX checkpoint: give its directory (config.json, model.safetensors or "
                         f"pytorch_model.bin, the mT5 tokenizer's files, {SETTINGS_FILE})", path)
    settings_path = os.path.join(path, SETTINGS_FILE)
    if not os.path.isfile(settings_path):
        raise InputError(f"a MetricX checkpoint needs {SETTINGS_FILE} saying its version: {{\"version\": 24}} (hybrid), "
                         "or {\"version\": 23, \"mode\": \"reference\"} (or \"qe\")", path)
    settings = read_json_object(settings_path, "MetricX settings")
    version = settings.get("version")
    if version not in VERSIONS or isinstance(version, bool):
        raise InputError(f"version must be 23 or 24, got {version!r}", settings_path)
    mode = settings.get("mode", "hybrid" if version == 24 else None)
    if mode not in MODES or (version == 23) == (mode == "hybrid"):
        raise InputError(f"mode of MetricX-{version} must be " + ("'reference' or 'qe'" if version == 23 else
                                                                   "'hybrid'") + f", got {mode!r}", settings_path)
    token = _setting(settings, "score_token_id", SCORE_TOKEN_ID, settings_path)
    length = _setting(settings, "max_input_length", MAX_INPUT_LENGTH[version], settings_path)
    config_path = os.path.join(path, "config.json")
    if not os.path.isfile(config_path):
        raise InputError("a MetricX checkpoint needs the model's config.json", path)
    config = read_json_object(config_path, "model settings")
    if config.get("model_type") != "mt5":
        raise InputError(f"model_type must be mt5 (MetricX is an mT5 model), got {config.get('model_type')!r}",
                         config_path)
    vocab = config.get("vocab_size")
    if not isinstance(vocab, int) or not 0 <= token < vocab:
        raise InputError(f"score_token_id {token} is not a token of the vocabulary (vocab_size {vocab!r})", settings_path)
    weights = next((name for name in WEIGHT_FILES if os.path.isfile(os.path.join(path, name))), None)
    if weights is None:
        raise InputError(f"no weights: a MetricX checkpoint needs one of {', '.join(WEIGHT_FILES)}", path)
    if not any(os.path.isfile(os.path.join(path, name)) for name in TOKENIZER_FILES):
        raise InputError(f"no tokenizer: copy the mT5 tokenizer's files ({' or '.join(TOKENIZER_FILES)}, "
                         "tokenizer_config.json) beside the weights", path)
    return Checkpoint(path, version, mode, token, length, weights)


# ---- loading -----------------------------------------------------------------------------------

def _weight_files(ckpt: Checkpoint) -> list[str]:
    """The weights files of a checkpoint: the file, or the shards its index names."""
    first = os.path.join(ckpt.path, ckpt.weights)
    if not ckpt.weights.endswith(".index.json"):
        return [first]
    index = read_json_object(first, "shard index")
    shards = index.get("weight_map")
    if not isinstance(shards, dict) or not shards:
        raise InputError("a shard index needs its weight_map", first)
    files = [os.path.join(ckpt.path, name) for name in dict.fromkeys(map(str, shards.values()))]
    missing = [f for f in files if not os.path.isfile(f)]
    if missing:
        raise InputError("a shard of the index is missing", missing[0])
    return files


def read_state(ckpt: Checkpoint) -> dict:
    """The checkpoint's tensors by name: safetensors files as they are, PyTorch files unpickled
    with weights_only=True (rerank.device.load_tensors); an unreadable file is an InputError."""
    import torch

    from rerank.device import load_tensors

    state: dict = {}
    for name in _weight_files(ckpt):
        if name.endswith(".safetensors"):
            from safetensors import SafetensorError
            from safetensors.torch import load_file

            try:
                part = load_file(name)
            except (SafetensorError, OSError) as exc:
                raise InputError(f"cannot read the weights: {' '.join(str(exc).split())[:200]}", name) from exc
        else:
            part = load_tensors(name, "MetricX weights file")
        if not isinstance(part, dict) or not all(isinstance(v, torch.Tensor) for v in part.values()):
            raise InputError("expected a state_dict (names -> tensors)", name)
        state.update(part)
    return state


class Scorer:
    """A loaded MetricX model: its tokenizer, the mT5 encoder-decoder (transformers' MT5Model) and
    the output row of the score token, on `device`, in float32."""

    def __init__(self, ckpt: Checkpoint, device):
        with needs_neural("a MetricX model"):
            import torch
            from transformers import MT5Config, MT5Model
        from rerank.device import load_tokenizer, one_line
        from rerank.progress import transformers_bars_off

        self.ckpt, self.device = ckpt, device
        with transformers_bars_off():
            self.tokenizer = load_tokenizer(ckpt.path)
            try:
                config = MT5Config.from_pretrained(ckpt.path, local_files_only=True)
            except (OSError, ValueError, TypeError) as exc:
                raise InputError(f"cannot read the MetricX config ({type(exc).__name__}: {one_line(exc)})",
                                 os.path.join(ckpt.path, "config.json")) from exc
        # as config.json says, which MT5ForRegression reads (transformers 5's MT5Config always says tied)
        tied = read_json_object(os.path.join(ckpt.path, "config.json")).get("tie_word_embeddings", True) is not False
        state = read_state(ckpt)
        head = state.pop("lm_head.weight", None)
        if head is None and tied:
            head = state.get("shared.weight")
        if head is None or head.ndim != 2 or head.shape[0] <= ckpt.score_token_id:
            raise InputError("the weights have no output row of the score token (lm_head.weight)", ckpt.path)
        self.row = head[ckpt.score_token_id].detach().to(device=device, dtype=torch.float32).clone()
        self.scale = config.d_model ** -0.5 if tied else 1.0   # as MT5ForRegression
        self.model = self._model(MT5Model, config, state).to(device).eval()
        self.pad = config.pad_token_id if config.pad_token_id is not None else 0

    def _model(self, cls, config, state: dict):
        """MT5Model of `config` with the checkpoint's weights (its embeddings tied to `shared`
        where the checkpoint leaves them out, as transformers ties them). Built on the meta device
        and given the checkpoint's tensors themselves, so that no random initialisation runs and
        the weights are in memory once (an XXL model is 13B parameters)."""
        import torch

        from rerank.device import check_state_dict

        with torch.device("meta"):
            torch_model = cls(config)
        own = torch_model.state_dict()
        for key in own:
            if key not in state and key.endswith("embed_tokens.weight") and "shared.weight" in state:
                state[key] = state["shared.weight"]
        ignored = [k for k in state if k not in own and k.endswith("EncDecAttention.relative_attention_bias.weight")]
        for key in ignored:   # the public checkpoints carry it; MT5 ignores it on load too
            del state[key]
        check_state_dict(own, state, self.ckpt.path, "the MetricX model (mT5)")
        torch_model.load_state_dict(state, assign=True)
        left = [name for name, t in [*torch_model.named_parameters(), *torch_model.named_buffers()] if t.is_meta]
        if left:
            raise RuntimeError(f"MT5Model has tensors that no checkpoint weight filled: {left[:3]}")
        return torch_model.float()

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of every input, truncated to max_input_length, the final EOS removed (predict.py's)."""
        ids = self.tokenizer(list(texts), max_length=self.ckpt.max_input_length, truncation=True)["input_ids"]
        return [list(row[:-1]) for row in ids]

    def score_ids(self, rows: Sequence[Sequence[int]]) -> np.ndarray:
        """The clamped score of each row of token ids, one padded batch."""
        import torch

        longest = max(len(row) for row in rows)
        ids = torch.full((len(rows), longest), self.pad, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for k, row in enumerate(rows):
            ids[k, :len(row)] = torch.as_tensor(row, dtype=torch.long)
            mask[k, :len(row)] = 1
        start = torch.zeros((len(rows), 1), dtype=torch.long, device=self.device)   # the decoder's one step from 0
        with torch.inference_mode():
            out = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                             decoder_input_ids=start, use_cache=False).last_hidden_state[:, 0]
            score = (out * self.scale) @ self.row
        return score.clamp(0.0, MAX_SCORE).double().cpu().numpy()


def cached_scores(path: str, inputs: Sequence[tuple[str, ...]], *, reference: bool, what: str,
                  batch_tokens: int | None = None, device=None, cache: str | None = None,
                  progress: Any = False) -> np.ndarray:
    """MetricX's score of each (source, hypothesis) (`reference` False: QE) or (source,
    hypothesis, reference) of `inputs` under the checkpoint at `path`, each distinct model input
    scored once, in token batches, cached in `cache` (a score-cache file; None: none). The model is
    loaded only when some input is not cached."""
    from rerank.dedup import distinct_index
    from rerank.device import resolve_device
    from rerank.score_cache import lookup, model_digest, open_cache, score_in_blocks, token_batches

    ckpt = read_checkpoint(path)
    ckpt.check_use(reference, what)
    if any(len(row) != (3 if reference else 2) for row in inputs):
        raise ValueError("inputs are (source, hypothesis, reference) triples with reference, else pairs")
    index, texts = distinct_index(ckpt.text(row[0], row[1], row[2] if reference else None) for row in inputs)
    keys = [(text, "") for text in texts]
    values = np.zeros(len(texts))
    store = open_cache(cache)
    try:
        namespace = "" if store is None else model_digest(path) + "\0" + json.dumps(
            {"what": "metricx", "version": ckpt.version, "token": ckpt.score_token_id, "max": ckpt.max_input_length,
             "scoring": SCORING}, sort_keys=True)
        found = lookup(store, namespace, keys, what)
        for i, (value, _) in found.items():
            values[i] = value
        todo = [i for i in range(len(texts)) if i not in found]
        if todo:
            scorer = Scorer(ckpt, resolve_device(device))
            ids = scorer.encode([texts[i] for i in todo])
            lengths = [len(row) for row in ids]
            batches = token_batches(lengths, batch_tokens or BATCH_TOKENS)
            put = None if store is None else (   # each block as it is scored
                lambda items, scores, cache=store: cache.put(namespace, [keys[todo[k]] for k in items], scores,
                                                              np.ones(len(items))))
            values[todo] = score_in_blocks(batches, lambda one: scorer.score_ids([ids[k] for k in one[0]]), put,
                                           progress=progress, desc=what,
                                           weights=[len(b) * max(lengths[k] for k in b) for b in batches])
    finally:
        if store is not None:
            store.close()
    return values[index]


# ---- the metric of rerank eval/report ----------------------------------------------------------

class MetricXMetric(SourcedSegments):
    """Reference-based MetricX as a metric of `rerank eval`/`report`: the model's score of each
    (source, hypothesis, reference), averaged over a sentence's references (those not None); the
    corpus score is the mean over sentences, as MetricX's evaluate.py reports a system. Lower is
    better (an error score in [0, 25]).

    Statistics per sentence: [score, 1] ([0, 0] for a sentence without a reference), so the
    significance tests treat it like any other metric; `prepare_systems` scores the distinct
    triples of every system and run at once."""

    name, display = "metricx", "MetricX"
    higher_is_better = False
    decimals = 4
    scale = "0-25, lower is better (an error score)"
    statistics_doc = "`[score, 1]`: the checkpoint's segment score (mean over the references)"
    score_doc = "the mean of the segment scores (lower is better)"
    options_doc = ("EvalOptions `metricx_model`, `sources`, `metricx_batch_tokens`, `device`, `score_cache` "
                   "(`--metricx-model`, `--src`, ...)")

    def __init__(self, model: str, sources: Sequence[str], batch_tokens: int | None = None, device=None,
                 cache: str | None = None):
        self.model, self.sources = model, list(sources)
        self.batch_tokens, self.device, self.cache = batch_tokens, device, cache
        self.checkpoint = read_checkpoint(model)
        self.checkpoint.check_use(True, "the metricx metric")
        self._scores: dict[tuple[str, str, str], float] = {}

    def score_triples(self, todo: list[tuple[str, str, str]]) -> np.ndarray:
        return cached_scores(self.model, todo, reference=True, what="the metricx metric",
                             batch_tokens=self.batch_tokens, device=self.device, cache=self.cache)

    def signature(self):
        from importlib.metadata import PackageNotFoundError, version

        from rerank.score_cache import model_digest

        try:
            transformers = version("transformers")
        except PackageNotFoundError:
            transformers = "not-installed"
        c = self.checkpoint
        return (f"metricx|model:{os.path.basename(os.path.abspath(c.path))}|sha256:{model_digest(c.path)[:16]}|"
                f"version:{c.version}|mode:{c.mode}|max-length:{c.max_input_length}|mean-over-refs|"
                f"transformers:{transformers}")


# ---- MetricX as an MBR utility (rerank.consensus) ----------------------------------------------

class MBRUtility:
    """Reference-based MetricX as the utility of MBR: U(h_i, h_j) = -MetricX(source, h_i, h_j), the
    list's own hypotheses as pseudo-references (rerank.consensus), minus because MetricX is an
    error (lower is better) and a utility is higher-is-better: the decision minimises the expected
    MetricX. Every distinct (source, candidate, pseudo-reference) is scored once, cached; exact
    only (the model reads the candidate and the reference together: no aggregate reference)."""

    needs_model = True
    needs_sources = True
    no_aggregate = ("the aggregate MBR method needs a utility with an aggregate reference; MetricX reads the "
                    "candidate and the reference together: use the exact method for metricx")

    def __init__(self, path: str, batch_size: int | None = None, device=None, cache: str | None = None,
                 lang: str | None = None):
        self.path, self.batch_tokens, self.device, self.cache = path, batch_size, device, cache
        read_checkpoint(path).check_use(True, "the metricx MBR utility")

    def exact(self, sources: Sequence[str], texts: Sequence[str], group: np.ndarray, I: np.ndarray,
              J: np.ndarray) -> np.ndarray:
        """-MetricX(sources[group[i]], texts[i], texts[j]) of every pair (I, J) of rows, (P,)."""
        triples = [(sources[group[i]], texts[i], texts[j]) for i, j in zip(I.tolist(), J.tolist())]
        return -cached_scores(self.path, triples, reference=True, what="the metricx MBR utility",
                              batch_tokens=self.batch_tokens, device=self.device, cache=self.cache)
