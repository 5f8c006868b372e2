"""Users' own models behind the `channel`, `direct`, `r2l` and `lm` features.

A model is a local directory, and what it holds says what it is (`model_kind`):
- `model.bin`: a CTranslate2 model (a Translator for a translation model, a Generator for a
  language model), with the tokenizer files the converter copies (`--copy_files`);
- `config.json` naming a `model_type`: a Hugging Face `transformers` model and its tokenizer;
- `config.json` of `rerank nmt train` / `rerank lm train`: this project's GRU models.

Scores are teacher-forced log-probabilities summed over the model's own target tokens, with the
end-of-sentence token counted as the model counts it:
- translation models score `log p(output | input)` over the tokens the tokenizer makes of the
  output as a target and exactly one EOS after them, the one generation ends on (the model's
  `eos_token_id`), whether or not the tokenizer appends it: CTranslate2's `score_batch` always
  scores it, as fairseq and Marian do, so both forms of a model give one score; a forced first
  token (NLLB/M2M target-language code, from the model's generation config or `tgt_lang_code`)
  is fed but not counted, since decoding forces it; tokens the model's generation config bans
  (Marian's `<pad>`) are outside the softmax, as in decoding and in the CTranslate2 conversion;
- causal LMs score every token after BOS, with EOS appended when the tokenizer does not add it,
  so that a sentence that stops early pays for stopping.

`_norm` columns divide by the number of scored tokens. Each distinct (input, output) pair is
scored once; batches are sorted by length and filled to a token budget (CTranslate2 is given
the same batches, one `score_batch` call each, so a score depends on its batch alone and the
torchrun ranks, which score whole batches each, give the one-process scores: rerank.distributed);
on CUDA the HF models run in bf16/fp16, CTranslate2 in float16. Finished pairs go to a cache
keyed by the model's digest and the pair (rerank/score_cache.py), a block of batches at a time as
they are scored, so a re-run costs nothing and an interrupted one scores only what was left.

transformers, tokenizers and ctranslate2 are imported inside, so the core imports without them.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rerank import distributed
from rerank.dedup import distinct_index
from rerank.device import load_tokenizer
from rerank.device import one_line as _one_line
from rerank.errors import InputError, needs_neural
from rerank.io import read_json_object
from rerank.progress import Progress, transformers_bars_off
from rerank.score_cache import lookup, model_digest, score_in_blocks, token_batches

log = logging.getLogger(__name__)

PROJECT, HF, CT2 = "project", "hf", "ct2"
# in the score cache's key of translation scores: 2 since the target's EOS is scored whatever the
# tokenizer appends (before, transformers models whose tokenizer adds no EOS were scored without it)
TRANSLATION_SCORING = 2


@dataclass(frozen=True)
class TranslationSettings:
    """How a translation model is fed (each None: taken from the model and its tokenizer)."""

    src_prefix: str = ""               # text before every input (Marian multi-target models: ">>deu<< ")
    src_lang_code: str | None = None   # tokenizer's source language (NLLB/M2M: "eng_Latn", "en")
    tgt_lang_code: str | None = None   # forced first target token (NLLB/M2M: "deu_Latn", "__de__")
    batch_tokens: int | None = None    # padded tokens per batch (inputs + outputs); None: default_batch_tokens


def model_kind(path: str) -> str:
    """PROJECT, HF or CT2 for a model directory; InputError naming the path otherwise."""
    if not os.path.isdir(path):
        raise InputError("not a model directory (a `rerank nmt/lm train` run, a Hugging Face model directory "
                         "with config.json, or a CTranslate2 directory with model.bin)", path)
    if os.path.isfile(os.path.join(path, "model.bin")):
        return CT2
    config_path = os.path.join(path, "config.json")
    if not os.path.isfile(config_path):
        raise InputError("not a model directory: no config.json (a `rerank nmt/lm train` run or a Hugging Face "
                         "model) and no model.bin (a CTranslate2 model)", path)
    config = read_json_object(config_path, "model settings")
    return HF if ("model_type" in config or "architectures" in config) else PROJECT


def default_batch_tokens(device) -> int:
    """Padded tokens per batch when none is given: 4,096 on CUDA; 1,024 on the CPU, where a batch's
    logits (tokens x vocabulary) stay nearer the cache: a seventh faster than 4,096 for a Marian
    model with 8,000 pieces on one thread (benchmarks/bench_models.py --budgets)."""
    return 4096 if str(getattr(device, "type", device)).startswith("cuda") else 1024


def _target_log_probs(torch, logits, targets) -> np.ndarray:
    """Per row, the sum of log p(target) over its targets (>= 0; -1 pads): the log-softmax taken at
    the targets alone, logit - logsumexp, with no (tokens x vocabulary) output."""
    picked = logits.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return (picked * (targets >= 0)).sum(1).double().cpu().numpy()


def _hf_device_dtype(device):
    import torch

    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


class HFTranslationScorer:
    """log p(output | input) under a `transformers` encoder-decoder model."""

    def __init__(self, path: str, device, settings: TranslationSettings):
        with needs_neural("a Hugging Face translation model"):
            import torch
            from transformers import AutoModelForSeq2SeqLM
        self.torch, self.device, self.settings = torch, device, settings
        self.tokenizer = load_tokenizer(path)
        try:
            self.model = AutoModelForSeq2SeqLM.from_pretrained(path, local_files_only=True,
                                                               dtype=_hf_device_dtype(device)).to(device).eval()
        except (OSError, ValueError, KeyError) as exc:
            raise InputError(f"not a Hugging Face encoder-decoder model: {_one_line(exc)}", path) from exc
        config, generation = self.model.config, getattr(self.model, "generation_config", None)
        self.start = config.decoder_start_token_id
        if self.start is None and generation is not None:
            self.start = generation.decoder_start_token_id
        if self.start is None:
            raise InputError("the model's config names no decoder_start_token_id", path)
        self.forced = _forced_bos(self.tokenizer, config, generation, settings.tgt_lang_code, path)
        self.eos, self.eos_ids = _translation_eos(self.tokenizer, config, generation, path)
        self.special = frozenset(self.tokenizer.all_special_ids)
        self.banned = _banned_tokens(path, config, generation)
        self.pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        if settings.src_lang_code:
            if not hasattr(self.tokenizer, "src_lang"):
                raise InputError(f"source language code {settings.src_lang_code!r} given, but the tokenizer "
                                 "has no source language (it is not an NLLB/M2M-style tokenizer)", path)
            self.tokenizer.src_lang = settings.src_lang_code
        if settings.tgt_lang_code and hasattr(self.tokenizer, "tgt_lang"):
            self.tokenizer.tgt_lang = settings.tgt_lang_code

    def encode_inputs(self, texts: Sequence[str]) -> list[list[int]]:
        prefix = self.settings.src_prefix
        return [self.tokenizer(prefix + t)["input_ids"] for t in texts]

    def encode_outputs(self, texts: Sequence[str]) -> list[list[int]]:
        """Target token ids as the model emits them, ending in one EOS whether or not the tokenizer
        appends it, without a forced first token."""
        ids = [self.tokenizer(text_target=t)["input_ids"] for t in texts]
        if self.forced is not None and _tokenizer_prefixes(self.tokenizer, self.forced):
            ids = [s[1:] for s in ids]
        return [_before_eos(s, self.eos_ids, self.special) + [self.eos] for s in ids]

    def score_ids(self, inputs: list[list[int]], outputs: list[list[int]]) -> np.ndarray:
        """Summed log-probabilities of one batch of (input ids, output ids)."""
        torch = self.torch
        lead = [self.start] + ([self.forced] if self.forced is not None else [])
        decoder_in = [lead + out[:-1] for out in outputs]
        src = _pad(torch, inputs, self.pad)
        dec = _pad(torch, decoder_in, self.pad)
        tgt = _pad(torch, [[-1] * (len(lead) - 1) + out for out in outputs], -1)
        with torch.no_grad():
            logits = self.model(input_ids=src.to(self.device), attention_mask=(_mask(torch, inputs)).to(self.device),
                                decoder_input_ids=dec.to(self.device),
                                decoder_attention_mask=_mask(torch, decoder_in).to(self.device)).logits.float()
            if self.banned:
                logits[..., self.banned] = float("-inf")
            return _target_log_probs(torch, logits, tgt.to(self.device))


class HFCausalLMScorer:
    """log p(text) under a `transformers` causal LM: every token after BOS, EOS counted."""

    def __init__(self, path: str, device):
        with needs_neural("a Hugging Face language model"):
            import torch
            from transformers import AutoModelForCausalLM
        self.torch, self.device = torch, device
        if _raw_config(path).get("is_encoder_decoder"):
            raise InputError("not a Hugging Face causal language model: an encoder-decoder (translation) model; "
                             "lm needs a decoder-only LM such as GPT-2 or Llama", path)
        self.tokenizer = load_tokenizer(path)
        try:
            self.model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True,
                                                              dtype=_hf_device_dtype(device)).to(device).eval()
        except (OSError, ValueError, KeyError) as exc:
            raise InputError(f"not a Hugging Face causal language model: {_one_line(exc)}", path) from exc
        self.bos, self.eos = lm_boundaries(self.tokenizer, self.model.config, path)
        self.pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return [lm_ids(self.tokenizer, t, self.bos, self.eos) for t in texts]

    def score_ids(self, ids: list[list[int]]) -> np.ndarray:
        torch = self.torch
        batch = _pad(torch, ids, self.pad)
        with torch.no_grad():
            logits = self.model(input_ids=batch.to(self.device), attention_mask=_mask(torch, ids).to(self.device)).logits
            logits = logits[:, :-1].float()
            target = _pad(torch, [s[1:] for s in ids], -1).to(self.device)
            return _target_log_probs(torch, logits, target)


def lm_boundaries(tokenizer, config, path: str) -> tuple[int, int | None]:
    """(BOS id every text starts from, EOS id appended or None): the tokenizer's, else the config's;
    GPT-2-style models use their one <|endoftext|> for both."""
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else getattr(config, "bos_token_id", None)
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else getattr(config, "eos_token_id", None)
    if isinstance(eos, list):
        eos = eos[0]
    if bos is None:
        bos = eos
    if bos is None:
        raise InputError("the language model names no BOS or EOS token, so the first token of a text cannot be "
                         "scored", path)
    return bos, eos


def lm_ids(tokenizer, text: str, bos: int, eos: int | None) -> list[int]:
    ids = tokenizer(text, add_special_tokens=True)["input_ids"]
    if not ids or ids[0] != bos:
        ids = [bos] + ids
    if eos is not None and ids[-1] != eos or len(ids) == 1:
        ids = ids + [eos if eos is not None else bos]
    return ids


def _forced_bos(tokenizer, config, generation, code: str | None, path: str) -> int | None:
    if code:
        token_id = tokenizer.convert_tokens_to_ids(code)
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise InputError(f"target language code {code!r} is not a token of the model's tokenizer", path)
        return token_id
    for source in (generation, config):
        forced = getattr(source, "forced_bos_token_id", None) if source is not None else None
        if forced is not None:
            return forced
    return None


def _translation_eos(tokenizer, config, generation, path: str) -> tuple[int, frozenset[int]]:
    """(the EOS id a target ends with, every id that ends generation): the generation config's
    eos_token_id, else config.json's, else the tokenizer's. Of several, the tokenizer's EOS if it
    is one of them, else the first."""
    for source in (generation, config, tokenizer):
        ids = getattr(source, "eos_token_id", None) if source is not None else None
        if ids is not None:
            break
    if ids is None:
        raise InputError("neither the model nor its tokenizer names an EOS token, so the end of a target cannot "
                         "be scored", path)
    ids = [int(i) for i in ids] if isinstance(ids, (list, tuple)) else [int(ids)]
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id in ids else ids[0]
    return eos, frozenset(ids)


def _before_eos(ids: list[int], eos_ids: frozenset[int], special: frozenset[int]) -> list[int]:
    """A target's ids without the EOS the tokenizer ends it with, if it does, and without the
    special tokens it puts after that EOS (mBART's target language code), which decoding, ended
    by the EOS, never emits."""
    end = len(ids)
    while end and ids[end - 1] in special and ids[end - 1] not in eos_ids:
        end -= 1
    return ids[:end - 1] if end and ids[end - 1] in eos_ids else ids


def _tokenizer_prefixes(tokenizer, token_id: int) -> bool:
    """Whether the tokenizer puts `token_id` before every target (NLLB/M2M tokenizers add the target
    language code themselves); then it is the forced token, not a word of the text."""
    return tokenizer(text_target="")["input_ids"][:1] == [token_id]


def _banned_tokens(path: str, config, generation) -> list[int]:
    """Tokens outside the model's softmax: single-token bad_words_ids of the generation config or
    config.json, and a Marian model's `<pad>`, which the conversion from Marian adds to the
    vocabulary and decoding never emits (the CTranslate2 converter drops it for the same reason)."""
    sources = [getattr(generation, "bad_words_ids", None), getattr(config, "bad_words_ids", None),
               _raw_config(path).get("bad_words_ids")]
    banned = [entry[0] for source in sources for entry in (source or [])
              if isinstance(entry, list) and len(entry) == 1]
    if getattr(config, "model_type", None) == "marian" and config.pad_token_id is not None:
        banned.append(config.pad_token_id)
    return sorted(set(banned))


def _pad(torch, rows: list[list[int]], value: int):
    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long)


def _mask(torch, rows: list[list[int]]):
    width = max(len(r) for r in rows)
    return torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=torch.long)


class CT2TranslationScorer:
    """log p(output | input) under a CTranslate2 Translator (`score_batch`), tokenised by the
    model's own tokenizer copied next to model.bin."""

    def __init__(self, path: str, device, threads: int | None, settings: TranslationSettings):
        with needs_neural("a CTranslate2 model"):
            import ctranslate2
        self.settings = settings
        self.tokenizer = load_tokenizer(path)
        cuda = device.type == "cuda"
        try:
            self.model = ctranslate2.Translator(path, device="cuda" if cuda else "cpu",
                                                device_index=device.index or 0 if cuda else 0,
                                                compute_type="float16" if cuda else "default",
                                                intra_threads=threads or 0)
        except (RuntimeError, ValueError) as exc:
            raise InputError(f"not a CTranslate2 translation model: {_one_line(exc)}", path) from exc
        config = _raw_config(path)
        self.eos = config.get("eos_token", self.tokenizer.eos_token)
        eos_id = self.tokenizer.convert_tokens_to_ids(self.eos) if self.eos is not None else None
        self.eos_ids = frozenset([eos_id] if eos_id is not None else [])
        self.special = frozenset(self.tokenizer.all_special_ids)
        self.forced = None
        if settings.tgt_lang_code:
            self.forced = settings.tgt_lang_code
        if settings.src_lang_code and hasattr(self.tokenizer, "src_lang"):
            self.tokenizer.src_lang = settings.src_lang_code
        if settings.tgt_lang_code and hasattr(self.tokenizer, "tgt_lang"):
            self.tokenizer.tgt_lang = settings.tgt_lang_code

    def encode_inputs(self, texts: Sequence[str]) -> list[list[str]]:
        prefix = self.settings.src_prefix
        return [self.tokenizer.convert_ids_to_tokens(self.tokenizer(prefix + t)["input_ids"]) for t in texts]

    def encode_outputs(self, texts: Sequence[str]) -> list[list[str]]:
        """Target tokens without EOS (score_batch appends the model's EOS whether or not the
        tokenizer adds one) and without a forced first token."""
        rows = []
        strip = self.forced is not None and _tokenizer_prefixes(self.tokenizer,
                                                                self.tokenizer.convert_tokens_to_ids(self.forced))
        for t in texts:
            ids = self.tokenizer(text_target=t)["input_ids"]
            if strip:
                ids = ids[1:]
            rows.append(self.tokenizer.convert_ids_to_tokens(_before_eos(ids, self.eos_ids, self.special)))
        return rows

    def score_tokens(self, inputs, outputs) -> np.ndarray:
        """Summed log-probabilities of one batch, scored as one batch (the caller's token budget)."""
        lead = [self.forced] if self.forced is not None else []
        results = self.model.score_batch(inputs, [lead + out for out in outputs], max_batch_size=0)
        return np.array([sum(r.log_probs[len(lead):]) for r in results], dtype=np.float64)


class CT2LMScorer:
    """log p(text) under a CTranslate2 Generator (`score_batch`): every token after BOS, EOS counted."""

    def __init__(self, path: str, device, threads: int | None):
        with needs_neural("a CTranslate2 model"):
            import ctranslate2
        self.tokenizer = load_tokenizer(path)
        cuda = device.type == "cuda"
        try:
            self.model = ctranslate2.Generator(path, device="cuda" if cuda else "cpu",
                                               compute_type="float16" if cuda else "default", intra_threads=threads or 0)
        except (RuntimeError, ValueError) as exc:
            raise InputError(f"not a CTranslate2 language model: {_one_line(exc)}", path) from exc
        self.bos, self.eos = lm_boundaries(self.tokenizer, None, path)

    def encode(self, texts: Sequence[str]) -> list[list[str]]:
        return [self.tokenizer.convert_ids_to_tokens(lm_ids(self.tokenizer, t, self.bos, self.eos)) for t in texts]

    def score_tokens(self, tokens) -> np.ndarray:
        """Summed log-probabilities of one batch, scored as one batch (the caller's token budget)."""
        results = self.model.score_batch(tokens, max_batch_size=0)
        return np.array([sum(r.log_probs) for r in results], dtype=np.float64)


def _raw_config(path: str) -> dict:
    """The directory's config.json as a dict ({} if unreadable: the loaders say what is wrong)."""
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        return config if isinstance(config, dict) else {}
    except (OSError, json.JSONDecodeError):
        return {}


def translation_scores(path: str, inputs: Sequence[str], outputs: Sequence[str], device, threads: int | None,
                       settings: TranslationSettings, what: str, progress: Progress = False,
                       cache=None) -> tuple[np.ndarray, np.ndarray]:
    """(log p(output_i | input_i), scored output tokens) for a HF or CTranslate2 model directory,
    each distinct pair once, cached by model digest and pair."""
    kind = model_kind(path)
    if kind == PROJECT:
        raise InputError("a `rerank nmt train` run is scored by rerank.nmt.scoring, not this backend", path)
    def scorer():
        return HFTranslationScorer(path, device, settings) if kind == HF else \
            CT2TranslationScorer(path, device, threads, settings)

    tag = json.dumps({"what": what, "settings": settings.__dict__ | {"batch_tokens": None},
                      "scoring": TRANSLATION_SCORING}, sort_keys=True)
    return _cached_pairs(scorer, kind, path, tag, list(inputs), list(outputs),
                         settings.batch_tokens or default_batch_tokens(device), progress, cache, what)


def lm_scores(path: str, texts: Sequence[str], device, threads: int | None, batch_tokens: int | None = None,
              progress: Progress = False, cache=None) -> tuple[np.ndarray, np.ndarray]:
    """(log p(text_i), scored tokens) under a HF or CTranslate2 causal LM, each distinct text once."""
    kind = model_kind(path)
    if kind == PROJECT:
        raise InputError("a `rerank lm train` run is scored by rerank.nmt.lm, not this backend", path)
    def scorer():
        return HFCausalLMScorer(path, device) if kind == HF else CT2LMScorer(path, device, threads)

    return _cached_pairs(scorer, kind, path, json.dumps({"what": "lm"}), [""] * len(texts), list(texts),
                         batch_tokens or default_batch_tokens(device), progress, cache, "lm")


def _cached_pairs(make_scorer: Callable, kind: str, path: str, tag: str, inputs: list[str], outputs: list[str], budget: int,
                  progress, cache, what: str) -> tuple[np.ndarray, np.ndarray]:
    index, pairs = distinct_index(zip(inputs, outputs))
    sums, counts = np.zeros(len(pairs)), np.zeros(len(pairs))
    namespace = model_digest(path) + "\0" + tag if cache is not None else ""
    found = lookup(cache, namespace, pairs, what)
    todo = [i for i in range(len(pairs)) if i not in found]
    for i, (value, count) in found.items():
        sums[i], counts[i] = value, count
    if todo:  # the model is loaded only when something is left to score
        with transformers_bars_off():
            scorer = make_scorer()
        lm = isinstance(scorer, (HFCausalLMScorer, CT2LMScorer))
        out_ids, in_ids = _encode_pairs(scorer, lm, [pairs[i] for i in todo])
        lengths = [len(o) + (len(in_ids[k]) if in_ids is not None else 0) for k, o in enumerate(out_ids)]
        batches = token_batches(lengths, budget)
        n_scored = np.array([len(o) - (1 if lm and kind == HF else 0) for o in out_ids], dtype=np.float64)
        if lm and kind == CT2:
            n_scored -= 1
        if not lm and kind == CT2:
            n_scored += 1   # CTranslate2 output tokens exclude the EOS it scores

        def score(one: Sequence[Sequence[int]]) -> np.ndarray:
            outs = [out_ids[k] for k in one[0]]
            if kind == CT2:
                return scorer.score_tokens(outs) if lm else scorer.score_tokens([in_ids[k] for k in one[0]], outs)
            return scorer.score_ids(outs) if lm else scorer.score_ids([in_ids[k] for k in one[0]], outs)

        def store(items: list[int], values: np.ndarray) -> None:
            cache.put(namespace, [pairs[todo[k]] for k in items], values, n_scored[items])

        # a block of whole batches at a time, each written to the cache as it finishes; under
        # torchrun each rank scores whole batches, so a pair's batch is the one-process batch
        scored = score_in_blocks(batches, score, store if cache is not None else None, progress=progress, desc=what,
                                 weights=[len(batch) * max(lengths[k] for k in batch) for batch in batches])
        sums[todo], counts[todo] = scored, n_scored
    return sums[index], counts[index]


def _encode_pairs(scorer, lm: bool, pairs: list[tuple[str, str]]) -> tuple[list, list | None]:
    """(output token ids or tokens, input ones or None for an LM) of every pair; under torchrun each
    rank tokenises a part."""
    def encode(a: int, b: int):
        outputs = [pair[1] for pair in pairs[a:b]]
        if lm:
            return scorer.encode(outputs), None
        return scorer.encode_outputs(outputs), scorer.encode_inputs([pair[0] for pair in pairs[a:b]])

    parts = distributed.map_parts(encode, len(pairs))
    out_ids = [ids for part in parts for ids in part[0]]
    return out_ids, None if lm else [ids for part in parts for ids in part[1]]
