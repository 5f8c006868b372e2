"""Model features of the `nmt` component as `rerank features` plug-ins:

- `channel`, `channel_norm`: log p(source | hypothesis) under a reverse translation model, and
  per scored source token;
- `direct`, `direct_norm`: log p(hypothesis | source) under a second forward model (an ensemble
  member, a bigger model), and per scored hypothesis token;
- `r2l`, `r2l_norm`: log p(reversed hypothesis | source) under a right-to-left model (trained on
  targets whose words are reversed), and per token;
- `lm`, `lm_norm`: log p(hypothesis) under a language model, and per token.

Each model flag takes a `rerank nmt train` / `rerank lm train` run, a Hugging Face model
directory (config.json) or a CTranslate2 directory (model.bin); the directory's content decides
(rerank.nmt.backends). Scores are computed once per distinct (sentence, hypothesis) pair, in
length-sorted batches (users' models: filled to a token budget), on the CPU or CUDA, with a
progress bar on a terminal; users' models' scores are cached by model digest and pair
(FeatureContext.cache). Under torchrun the ranks share the tokenising and the batches, whole
batches each, so every score is the one a single process computes (rerank.distributed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rerank.dedup import distinct_index
from rerank.device import resolve_device
from rerank.errors import InputError, needs_neural, require
from rerank.features import Feature, FeatureContext
from rerank.options import PATH, POSITIVE_INT, option

# torch and the models are imported in compute() (nmt/scoring.py, nmt/backends.py), so that
# listing the plug-ins, which every `rerank` command does, stays cheap.

MODEL_FORMS = "a `rerank nmt train` run, a Hugging Face model directory (config.json) or a CTranslate2 directory (model.bin)"


BATCH_TOKENS_HELP = "4,096 on CUDA, 1,024 on the CPU, where smaller batches run faster"


CHANNEL_MODEL = "reverse translation model (target -> source language)"
DIRECT_MODEL = "forward translation model (source -> target language)"
R2L_MODEL = "right-to-left translation model (source -> target language, trained on word-reversed targets)"


def _model_option(model_help: str, feature: str):
    """The `model` field of a translation feature's options (its help names the model it needs)."""
    return option(None, f"{model_help}: {MODEL_FORMS}", check=PATH, metavar="DIR",
                  default_text=f"none, needed for {feature}")


@dataclass(frozen=True)
class ChannelOptions:
    """Options of the channel feature (flags of `rerank features`: --channel-model, --channel-...)."""

    model: str | None = _model_option(CHANNEL_MODEL, "channel")
    batch_size: int = option(64, "pairs per batch for `rerank nmt train` runs", check=POSITIVE_INT)
    batch_tokens: int | None = option(None, "padded tokens per batch for Hugging Face and CTranslate2 models",
                                      check=POSITIVE_INT, default_text=BATCH_TOKENS_HELP)
    src_prefix: str = option("", "text put before every model input, e.g. a Marian target token '>>deu<< '",
                             metavar="TEXT")
    src_lang_code: str | None = option(None, "the model's source language code for NLLB/M2M tokenizers (NLLB "
                                       "'deu_Latn', M2M 'de')", metavar="CODE", default_text="the tokenizer's")
    tgt_lang_code: str | None = option(None, "forced first target token, e.g. NLLB 'eng_Latn', M2M '__en__'",
                                       metavar="CODE", default_text="the model's forced_bos_token_id, if any")


@dataclass(frozen=True)
class DirectOptions(ChannelOptions):
    """Options of the direct feature (--direct-model ...: a forward model, source -> target)."""

    model: str | None = _model_option(DIRECT_MODEL, "direct")


@dataclass(frozen=True)
class R2LOptions(ChannelOptions):
    """Options of the r2l feature (--r2l-model ...: a forward model trained on word-reversed targets)."""

    model: str | None = _model_option(R2L_MODEL, "r2l")


@dataclass(frozen=True)
class LMOptions:
    """Options of the lm feature (flags of `rerank features`: --lm-model, --lm-batch-size, --lm-batch-tokens)."""

    model: str | None = option(None, "language model: a `rerank lm train` run, a Hugging Face causal LM directory "
                               "(config.json) or a CTranslate2 Generator directory (model.bin)", check=PATH,
                               metavar="DIR", default_text="none, needed for lm")
    batch_size: int = option(128, "hypotheses per batch for `rerank lm train` runs", check=POSITIVE_INT)
    batch_tokens: int | None = option(None, "padded tokens per batch for Hugging Face and CTranslate2 models",
                                      check=POSITIVE_INT, default_text=BATCH_TOKENS_HELP)


def reverse_words(text: str) -> str:
    """The words of `text` in reverse order, as a right-to-left model's training targets are made."""
    return " ".join(reversed(text.split()))


class _TranslationFeature(Feature):
    """A translation-model feature: `name` and `name_norm` from (input, output) pairs of the list."""

    name = ""
    model_help = ""
    Options = ChannelOptions
    requires = ("torch",)

    def pairs(self, hyp: str, source: str) -> tuple[str, str]:
        """(model input, model output) of one hypothesis and its source."""
        raise NotImplementedError

    def languages(self, context: FeatureContext) -> tuple[str, str]:
        """(input language, output language) the model must translate between."""
        raise NotImplementedError

    def compute(self, nbest, which, context=None, options=None):
        context = context or FeatureContext()
        options = self.make_options(options)
        what = f"the {self.name} feature"
        require(self.requires, what)
        with needs_neural(what):
            from rerank.nmt.backends import PROJECT, TranslationSettings, model_kind, translation_scores
            from rerank.nmt.scoring import channel_scores, distinct_pairs
        if not options.model:
            raise InputError(f"{self.name} needs a model ({self.model_help}): {MODEL_FORMS}")
        if context.sources is None:
            raise InputError(f"{self.name} needs the source sentences")
        context.use_threads()
        pairs, index = distinct_pairs(nbest)
        inputs, outputs = zip(*(self.pairs(h, context.sources[i]) for i, h in pairs)) if pairs else ((), ())
        device = resolve_device(context.device)
        if model_kind(options.model) == PROJECT:
            check_project_languages(options.model, self.languages(context), self.name)
            scores, lengths = channel_scores(options.model, list(inputs), list(outputs), device, options.batch_size,
                                             context.progress)
        else:
            from rerank.score_cache import open_cache

            settings = TranslationSettings(options.src_prefix, options.src_lang_code, options.tgt_lang_code,
                                           options.batch_tokens)
            cache = open_cache(context.cache)
            try:
                scores, lengths = translation_scores(options.model, inputs, outputs, device, context.threads, settings,
                                                     self.name, context.progress, cache)
            finally:
                if cache is not None:
                    cache.close()
        out = {self.name: scores[index], f"{self.name}_norm": (scores / np.maximum(lengths, 1))[index]}
        return {name: out[name] for name in which}


def check_project_languages(run_dir: str, expected: tuple[str, str], feature: str) -> None:
    """A `rerank nmt train` run must translate between the languages the feature needs."""
    from rerank.nmt.checkpoint import read_json

    import os

    train = read_json(os.path.join(run_dir, "config.json")).get("train", {})
    have = (train.get("src_lang"), train.get("tgt_lang"))
    if have != expected:
        raise InputError(f"{feature} needs a {expected[0]} -> {expected[1]} model; this run translates "
                         f"{have[0]} -> {have[1]}", run_dir)


class ChannelFeature(_TranslationFeature):
    name = "channel"
    columns = ("channel", "channel_norm")
    description = "log p(source | hypothesis) under a reverse translation model (--channel-model), and per source token"
    model_help = CHANNEL_MODEL
    Options = ChannelOptions
    option_prefix = "channel-"

    def pairs(self, hyp, source):
        return hyp, source

    def languages(self, context):
        return context.tgt_lang, context.src_lang


class DirectFeature(_TranslationFeature):
    name = "direct"
    columns = ("direct", "direct_norm")
    description = ("log p(hypothesis | source) under a second forward model (--direct-model), and per hypothesis token")
    model_help = DIRECT_MODEL
    Options = DirectOptions
    option_prefix = "direct-"

    def pairs(self, hyp, source):
        return source, hyp

    def languages(self, context):
        return context.src_lang, context.tgt_lang


class R2LFeature(_TranslationFeature):
    name = "r2l"
    columns = ("r2l", "r2l_norm")
    description = ("log p(hypothesis, words reversed | source) under a right-to-left model (--r2l-model), "
                   "and per token")
    model_help = R2L_MODEL
    Options = R2LOptions
    option_prefix = "r2l-"

    def pairs(self, hyp, source):
        return source, reverse_words(hyp)

    def languages(self, context):
        return context.src_lang, context.tgt_lang


class LMFeature(Feature):
    columns = ("lm", "lm_norm")
    description = "log p(hypothesis) under a language model (--lm-model), and per token"
    Options = LMOptions
    option_prefix = "lm-"
    requires = ("torch",)

    def compute(self, nbest, which, context=None, options=None):
        context = context or FeatureContext()
        options = self.make_options(options)
        require(self.requires, "the lm feature")
        with needs_neural("the lm feature"):
            from rerank.nmt.backends import PROJECT, lm_scores, model_kind
        if not options.model:
            raise InputError("lm needs a language model: a `rerank lm train` run, a Hugging Face causal LM directory "
                             "or a CTranslate2 Generator directory")
        context.use_threads()
        device = resolve_device(context.device)
        if model_kind(options.model) == PROJECT:
            sums, counts = self._project_scores(nbest, options, context, device)
        else:
            from rerank.score_cache import open_cache

            cache = open_cache(context.cache)
            try:
                sums, counts = lm_scores(options.model, nbest.hyps, device, context.threads, options.batch_tokens,
                                         context.progress, cache)
            finally:
                if cache is not None:
                    cache.close()
        out = {"lm": sums, "lm_norm": sums / np.maximum(counts, 1)}
        return {name: out[name] for name in which}

    @staticmethod
    def _project_scores(nbest, options, context, device):
        with needs_neural("the lm feature"):
            from rerank.nmt.lm import LanguageModel
        lm = LanguageModel.load(options.model, device)
        if lm.config.lang != context.tgt_lang:
            raise InputError(f"the language model is for {lm.config.lang!r}, the hypotheses are {context.tgt_lang!r} "
                             "(the target language)", options.model)
        index, distinct = distinct_index(nbest.hyps)
        sums, counts = lm.score(distinct, options.batch_size, context.progress)
        return np.asarray(sums)[index], np.asarray(counts, dtype=np.float64)[index]
