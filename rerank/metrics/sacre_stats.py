"""Per-segment sufficient statistics from sacrebleu: the one module that calls its private methods.

sacrebleu's public API scores a corpus (`corpus_score`) or one sentence (`sentence_score`); it
has no call that returns the statistics of every segment, which the significance tests (one row
per sentence) sum over and over. chrF reads its own here (BLEU's are the toolkit's own arrays,
rerank.metrics.bleu.hypothesis_stats, and TER's rerank.metrics.ter's, both checked against these
and `sentence_score`; hypothesis_stats uses `clear_tokenizer_cache` below). Scoring each segment with the public `sentence_score`
gives the same numbers but re-reads the references every time. So the private methods are used
here, behind this adapter: pyproject.toml bounds sacrebleu above (< 2.7) and
tests/test_metrics_sacre.py checks these statistics against `corpus_score` / `sentence_score`, so
an upgrade that changes the private methods fails loudly there instead of changing scores.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sacrebleu.metrics.base import Metric as SacreMetric


class _DropTokenizedPeriodWarning(logging.Filter):
    """sacrebleu warns about "lines that end in a tokenized period" on every statistics call; the
    commands report tokenisation themselves. Installed only for the duration of our own calls, so
    sacrebleu's other messages, and its warnings to other code in the process, stay as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not ("tokenized period" in text or "forgot to detokenize" in text
                    or "suppress this message with the `force` parameter" in text)


def corpus_segment_stats(metric: SacreMetric, hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> list[list]:
    """Statistics of hyps[i] against refs[k][i] for every segment i (BLEU, chrF or TER objects)."""
    logger, quiet = logging.getLogger("sacrebleu"), _DropTokenizedPeriodWarning()
    logger.addFilter(quiet)
    try:
        return metric._extract_corpus_statistics(list(hyps), [list(stream) for stream in refs])
    finally:
        logger.removeFilter(quiet)


def clear_tokenizer_cache(metric: SacreMetric) -> None:
    """Empty the lru_caches of the metric's tokeniser and of the tokenisers it holds (sacrebleu keeps
    up to 65,536 tokenised lines per tokeniser class for the life of the process)."""
    tokenizer = getattr(metric, "tokenizer", None)
    for obj in [tokenizer, *getattr(tokenizer, "__dict__", {}).values()]:
        call: Any = getattr(type(obj), "__call__", None)  # noqa: B004 - the method, for its lru_cache
        if hasattr(call, "cache_clear"):
            call.cache_clear()
