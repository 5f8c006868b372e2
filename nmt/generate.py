"""The generation backends of `rerank generate` (rerank.generation.Backend, entry-point group
`rerank.generators`): this project's attention NMT (`nmt`), CTranslate2 (`ct2`) and transformers
(`hf`). Each generates by the library's own search and scores the candidates by the library's
own forced decoding, the scorers of the direct and channel features (rerank.nmt.backends,
rerank.nmt.scoring), so the `nmt` column is what those features give the same pair.

- nmt: beam search is rerank.nmt.beam.beam_search with `rerank nmt translate`'s settings (length
  normalisation 1, 2 x source + 5 tokens), sampling rerank.nmt.sampling (every warper); a batch's
  draws come from a torch.Generator seeded with the batch's seed.
- ct2: `Translator.translate_batch` (beam_size N, or beam_size 1 with num_hypotheses N and
  sampling_topk / sampling_topp / sampling_temperature; top-k off is sampling_topk 0, the whole
  vocabulary). CTranslate2 has no logits processor in its Python API and no epsilon cut-off, so
  epsilon is refused before any work (the hf backend samples the same transformers model with it).
  Its random stream belongs to the translator's worker thread and is seeded (set_random_seed) at
  that thread's first draw, so a translator that has drawn is made anew at the next block, with
  the block's seed (a model load per block after the first, which benchmarks/bench_generate.py
  counts in).
- hf: `model.generate` with do_sample, num_return_sequences N, temperature, top_k (0: off; the
  generation config's default of 50 is not used), top_p, epsilon_cutoff, or num_beams N; the
  model's generation config gives the rest (banned tokens, forced first token, maximum length);
  torch's global generator is seeded with the batch's seed before each call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rerank.errors import InputError, needs_neural
from rerank.generation import Backend, GenerateOptions
from rerank.score_cache import token_batches

SCORE_TOKENS = 4096   # the project NMT's padded tokens per forced-scoring batch (inputs + outputs)


def _torch_device(options: GenerateOptions):
    from rerank.device import resolve_device

    return resolve_device(options.device)


class NMTBackend(Backend):
    """This project's attention NMT: a run directory of `rerank nmt train`."""

    name = "nmt"

    def __init__(self, model: str, options: GenerateOptions) -> None:
        super().__init__(model, options)
        with needs_neural("the project's NMT"):
            import torch
        from rerank.nmt.checkpoint import load_model
        from rerank.nmt.vocab import Tokenizer

        self.torch = torch
        torch.set_num_threads(options.threads)
        self.device = _torch_device(options)
        self.net, self.src_vocab, self.tgt_vocab, config = load_model(model, "best", self.device)
        self.src_tok, self.tgt_tok = Tokenizer(config["train"]["src_lang"]), Tokenizer(config["train"]["tgt_lang"])
        self.tables = self.net.step_tables()

    @classmethod
    def refuses(cls, options: GenerateOptions) -> str | None:
        if options.search == "beam" and options.max_length is not None:
            return ("the nmt backend's beam search stops at 2 x source + 5 tokens, as `rerank nmt translate`; "
                    "max_length is for sampling")
        return None

    def _ids(self, texts: Sequence[str], source: bool) -> list[list[int]]:
        from rerank.nmt.lm import encode_lines

        return encode_lines(list(texts), self.src_tok if source else self.tgt_tok,
                            self.src_vocab if source else self.tgt_vocab, 200)

    def lengths(self, sources: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self._ids(sources, True)]

    def _text(self, tokens: list[int]) -> str:
        return self.tgt_tok.detokenize(self.tgt_vocab.decode(tokens))

    def generate(self, sources: Sequence[str], seed: int) -> list[list[str]]:
        from rerank.nmt.beam import beam_search
        from rerank.nmt.data import pad
        from rerank.nmt.sampling import Warp, sample

        o = self.options
        src, src_len = pad(self._ids(sources, True))
        src, src_len = src.to(self.device), src_len.to(self.device)
        if o.search == "beam":
            found = beam_search(self.net, src, src_len, o.n, o.n, tables=self.tables)
            return [[self._text(h.tokens) for h in hyps] for hyps in found]
        generator = self.torch.Generator(device=self.device).manual_seed(seed)
        drawn = sample(self.net, src, src_len, o.n, Warp(o.temperature, o.top_k, o.top_p, o.epsilon), generator,
                       max_length=o.max_length, tables=self.tables)
        return [[self._text(tokens) for tokens in sentence] for sentence in drawn]

    def score(self, sources: Sequence[str], outputs: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        from rerank.nmt.data import pad

        ins, outs = self._ids(sources, True), self._ids(outputs, False)
        values, torch = np.zeros(len(ins)), self.torch
        for batch in token_batches([len(a) + len(b) for a, b in zip(ins, outs)], SCORE_TOKENS):
            src, src_len = pad([ins[i] for i in batch])
            tgt, _ = pad([outs[i] for i in batch])
            with torch.no_grad():
                values[batch] = self.net.score(src.to(self.device), src_len.to(self.device),
                                               tgt.to(self.device)).double().cpu().numpy()
        return values, np.array([len(ids) for ids in outs], dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        return {"torch": self.torch.__version__, "max_length": self.options.max_length or "2 x source + 5",
                "length_normalisation": 1.0 if self.options.search == "beam" else None}


class CT2Backend(Backend):
    """A CTranslate2 Translator directory (model.bin and the tokenizer files beside it)."""

    name = "ct2"
    seeded: int | None

    def __init__(self, model: str, options: GenerateOptions) -> None:
        super().__init__(model, options)
        from rerank.nmt.backends import CT2TranslationScorer, TranslationSettings, default_batch_tokens, model_kind

        if model_kind(model) != "ct2":
            raise InputError("not a CTranslate2 model directory (no model.bin)", model, option="model")
        device = _torch_device(options)
        self.budget = default_batch_tokens(device)   # the direct feature's scoring batches
        self.scorer = CT2TranslationScorer(model, device, options.threads, TranslationSettings())
        import ctranslate2

        cuda = device.type == "cuda"
        self.ct2, self.seeded = ctranslate2, None   # the seed of the translator's stream (None: unseeded)
        self.sampled = False   # whether the translator has drawn (its worker's stream starts at its first draw)
        self.load = {"device": "cuda" if cuda else "cpu", "device_index": device.index or 0 if cuda else 0,
                     "compute_type": "float16" if cuda else "default", "intra_threads": options.threads}

    @classmethod
    def refuses(cls, options: GenerateOptions) -> str | None:
        if options.epsilon is not None:
            return ("the ct2 backend cannot sample with epsilon: CTranslate2's translate_batch has no epsilon "
                    "cut-off and no logits processor (backend hf samples the transformers model with it; so does nmt)")
        return None

    def lengths(self, sources: Sequence[str]) -> list[int]:
        return [len(tokens) for tokens in self.scorer.encode_inputs(sources)]

    def start_block(self, seed: int) -> None:
        """A new translator, its worker thread's random stream seeded with `seed` (see the module doc)."""
        if self.seeded == seed or self.options.search == "beam":
            return
        self.ct2.set_random_seed(seed)
        if self.sampled:   # its worker's stream is running: a new translator, whose worker seeds anew
            self.scorer.model = None   # the old translator's memory is freed before the new one loads
            self.scorer.model = self.ct2.Translator(self.model, **self.load)
        self.seeded, self.sampled = seed, False

    def search_options(self) -> dict[str, Any]:
        """translate_batch's keywords for the job's search."""
        o = self.options
        common: dict[str, Any] = {"max_batch_size": 0, "num_hypotheses": o.n,
                                  "max_decoding_length": o.max_length or 256}
        if o.search == "beam":
            return {**common, "beam_size": o.n}
        return {**common, "beam_size": 1, "sampling_topk": o.top_k or 0, "sampling_topp": o.top_p or 1.0,
                "sampling_temperature": o.temperature}

    def generate(self, sources: Sequence[str], seed: int) -> list[list[str]]:
        tokens = self.scorer.encode_inputs(sources)
        self.sampled = True
        results = self.scorer.model.translate_batch(tokens, **self.search_options())
        tokenizer = self.scorer.tokenizer
        return [[tokenizer.decode(tokenizer.convert_tokens_to_ids(h), skip_special_tokens=True) for h in r.hypotheses]
                for r in results]

    def score(self, sources: Sequence[str], outputs: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        ins, outs = self.scorer.encode_inputs(sources), self.scorer.encode_outputs(outputs)
        values = np.zeros(len(ins))
        for batch in token_batches([len(a) + len(b) + 1 for a, b in zip(ins, outs)], self.budget):
            values[batch] = self.scorer.score_tokens([ins[i] for i in batch], [outs[i] for i in batch])
        return values, np.array([len(tokens) + 1 for tokens in outs], dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        return {"ctranslate2": self.ct2.__version__, "translate_batch": self.search_options()}


class HFBackend(Backend):
    """A transformers encoder-decoder directory (config.json with its model_type, the tokenizer)."""

    name = "hf"

    def __init__(self, model: str, options: GenerateOptions) -> None:
        super().__init__(model, options)
        from rerank.nmt.backends import HFTranslationScorer, TranslationSettings, default_batch_tokens, model_kind

        if model_kind(model) != "hf":
            raise InputError("not a transformers model directory (no config.json naming a model_type)", model,
                             option="model")
        with needs_neural("a Hugging Face translation model"):
            import torch
        self.torch = torch
        torch.set_num_threads(options.threads)
        self.device = _torch_device(options)
        self.budget = default_batch_tokens(self.device)   # the direct feature's scoring batches
        self.scorer = HFTranslationScorer(model, self.device, TranslationSettings())

    def lengths(self, sources: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.scorer.encode_inputs(sources)]

    def generate_options(self) -> dict[str, Any]:
        """generate's keywords for the job's search."""
        o = self.options
        common: dict[str, Any] = {"num_return_sequences": o.n}
        if o.max_length is not None:
            common["max_new_tokens"] = o.max_length
        if o.search == "beam":
            return {**common, "do_sample": False, "num_beams": o.n}
        return {**common, "do_sample": True, "num_beams": 1, "temperature": o.temperature, "top_k": o.top_k or 0,
                "top_p": o.top_p or 1.0, "epsilon_cutoff": o.epsilon or 0.0}

    def generate(self, sources: Sequence[str], seed: int) -> list[list[str]]:
        from rerank.nmt.backends import _mask, _pad

        torch, scorer = self.torch, self.scorer
        ids = scorer.encode_inputs(sources)
        torch.manual_seed(seed)
        with torch.no_grad():
            out = scorer.model.generate(input_ids=_pad(torch, ids, scorer.pad).to(self.device),
                                        attention_mask=_mask(torch, ids).to(self.device), **self.generate_options())
        texts = scorer.tokenizer.batch_decode(out, skip_special_tokens=True)
        n = self.options.n
        return [texts[i * n:(i + 1) * n] for i in range(len(sources))]

    def score(self, sources: Sequence[str], outputs: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        ins, outs = self.scorer.encode_inputs(sources), self.scorer.encode_outputs(outputs)
        values = np.zeros(len(ins))
        for batch in token_batches([len(a) + len(b) for a, b in zip(ins, outs)], self.budget):
            values[batch] = self.scorer.score_ids([ins[i] for i in batch], [outs[i] for i in batch])
        return values, np.array([len(ids) for ids in outs], dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        import transformers

        return {"transformers": transformers.__version__, "generate": self.generate_options()}
