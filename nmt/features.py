"""Model features of the `nmt` component as `rerank features` plug-ins:

- `channel`, `channel_norm`: log p(source | hypothesis) under a reverse NMT model (trained with
  `rerank nmt train` from the target to the source language), and per source token;
- `lm`, `lm_norm`: log p(hypothesis) under a GRU language model (`rerank lm train`), and per token.

Scores are computed once per distinct (sentence, hypothesis) pair (n-best lists repeat strings),
in length-sorted batches, on the CPU or CUDA, with a progress bar on a terminal.
"""

from __future__ import annotations

import numpy as np

from rerank.cliargs import positive_int
from rerank.device import resolve_device
from rerank.errors import InputError
from rerank.features import Feature

# torch and the models are imported in compute() (nmt/scoring.py), so that listing the plug-ins,
# which every `rerank` command does, stays cheap.


class ChannelFeature(Feature):
    columns = ("channel", "channel_norm")
    description = "log p(source | hypothesis) under a reverse NMT model (--channel-model), and per source token"

    def add_arguments(self, group):
        group.add_argument("--channel-model", metavar="DIR", help="reverse NMT run directory (`rerank nmt train` "
                           "from the target to the source language; default: none, needed for channel)")
        group.add_argument("--channel-batch-size", type=positive_int, default=64,
                           help="pairs per batch (default: %(default)s)")

    def compute(self, nbest, which, context):
        args = context.args
        if not args.channel_model:
            raise InputError("channel needs a reverse NMT model (--channel-model DIR)")
        if context.sources is None:
            raise InputError("channel needs the source sentences (--src)")
        from rerank.nmt.scoring import channel_scores, distinct_pairs, set_threads

        set_threads(context)
        pairs, index = distinct_pairs(nbest)
        scores, lengths = channel_scores(args.channel_model, [h for _, h in pairs], [context.sources[i] for i, _ in pairs],
                                         resolve_device(context.device), args.channel_batch_size, context.progress)
        out = {"channel": scores[index], "channel_norm": (scores / lengths)[index]}
        return {name: out[name] for name in which}


class LMFeature(Feature):
    columns = ("lm", "lm_norm")
    description = "log p(hypothesis) under a GRU language model (--lm-model), and per token"

    def add_arguments(self, group):
        group.add_argument("--lm-model", metavar="DIR", help="language model run directory (`rerank lm train`; default: none, needed for lm)")
        group.add_argument("--lm-batch-size", type=positive_int, default=128,
                           help="hypotheses per batch (default: %(default)s)")

    def compute(self, nbest, which, context):
        args = context.args
        if not args.lm_model:
            raise InputError("lm needs a language model (--lm-model DIR)")
        from rerank.nmt.lm import LanguageModel
        from rerank.nmt.scoring import set_threads

        set_threads(context)
        lm = LanguageModel.load(args.lm_model, resolve_device(context.device))
        if lm.config.lang != context.tgt_lang:
            raise InputError(f"the language model is for {lm.config.lang!r}, the hypotheses are {context.tgt_lang!r} "
                             "(--tgt-lang)", args.lm_model)
        distinct: dict[str, int] = {}
        index = np.array([distinct.setdefault(h, len(distinct)) for h in nbest.hyps], dtype=np.int64)
        sums, counts = lm.score(list(distinct), args.lm_batch_size, context.progress)
        sums, counts = np.asarray(sums), np.asarray(counts, dtype=np.float64)
        out = {"lm": sums[index], "lm_norm": (sums / counts)[index]}
        return {name: out[name] for name in which}
