"""The Python API of mlmme-rerank: n-best list to significance table in a few calls.

Every name here is also `rerank.NAME` (imported on first use, so `import rerank` stays fast):

    import rerank
    nbest = rerank.read_nbest("dev.nbest")
    tuned = rerank.tune(nbest, ["dev.ref"], runs=3, epochs=10)
    test = rerank.read_nbest("test.nbest")
    ev = rerank.evaluate(["test.ref"], rerank.first_best(test), {"reranked": rerank.apply(test, tuned.weights)})
    print(ev.to_markdown(), ev.p_value("reranked", "bleu"))

Conventions: `refs` is one reference file path, or a list with one item per reference, each a file
path or a list of strings (one per sentence); an n-best argument is an `NBestList` or a file path;
weights are a mapping {feature name: value} or a weights file path. Bad input raises
`rerank.errors.InputError` (a `ValueError` would name an argument); notes and warnings go to the
`logging` logger `rerank.api`, nothing is printed. See docs/api.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rerank.features import FeatureContext
from rerank.formats.decoders import from_ctranslate2, from_generate
from rerank.htmlreport.build import ReportOptions
from rerank.evaluation import EvalOptions
from rerank.io import atomic_write, output_lock, read_references
from rerank.metrics import make_metric
from rerank.multirun import TuneEvents, TuneResult, TuneRun, TuneSettings
from rerank.nbest import NBestList
from rerank.featuring import FeatureRun, add_features, add_features_file, plan_features
from rerank.generation import GenerateOptions, generate
from rerank.nbestfile import (ApplyOptions, as_weights, NBestFile, apply_file, convert_file, input_paths, nbest_list, reference_files,
                               weight_vector_of)
from rerank.evaljob import Evaluation, Reranked, evaluate, report
from rerank.tunejob import tune
from rerank.scorefiles import join_score_files
from rerank.summary import summarize_file
from rerank.oracles import Oracle, OracleOptions
from rerank.significance import approximate_randomization, paired_bootstrap

if TYPE_CHECKING:
    from rerank.progress import Progress

log = logging.getLogger(__name__)
read_weights = as_weights   # the public name: weights by feature name from a mapping or a weights file

__all__ = ["OracleOptions", "FeatureRun", "add_features_file", "plan_features",
           "NBestList", "NBestFile", "ApplyOptions", "apply_file", "convert_file", "summarize_file", "join_score_files",
           "TuneEvents", "read_nbest", "write_nbest", "add_features", "read_references", "read_weights", "tune",
           "TuneResult", "TuneRun", "TuneSettings", "apply", "first_best", "oracle", "Oracle", "evaluate", "Evaluation",
           "EvalOptions", "Reranked", "ReportOptions", "report", "FeatureContext",
           "approximate_randomization", "paired_bootstrap", "make_metric", "from_ctranslate2", "from_generate",
           "GenerateOptions", "generate"]

PathLike = str | os.PathLike


# ---- n-best lists -------------------------------------------------------------------------------

def read_nbest(path: PathLike, format: str | None = None, *, strict: bool = False, cache: bool | str | None = None,
               post_process: str | None = None, unescape: str | None = None, **options: Any) -> NBestList:
    """Read an n-best list in any format of the table (docs/formats.md: moses, joshua, marian,
    fairseq, sockeye, opennmt, jsonl, plain and plug-ins; gzip'd or not); `format=None` detects it.
    `strict`: a feature missing on some line is an error (default: read as 0, logged).
    `post_process` ('sentencepiece', 'subword_nmt') and `unescape` ('html') undo subword
    segmentation and Moses escaping. `options`, the formats' reading options: plain lists' ids,
    sizes, features, feature_names; fairseq_field; OpenNMT's nbest_size or src."""
    from rerank.formats import ReadReport, read_nbest as read

    path, report = os.fspath(path), ReadReport()
    try:
        return read(path, fmt=format, strict=strict, report=report, cache=cache, post_process=post_process,
                    unescape=unescape, **options)
    finally:
        for note in report.notes:
            log.warning("%s: %s", path, note)


def write_nbest(nbest: NBestList, path: PathLike, format: str | None = None, *, first_id: int = 0) -> list[str]:
    """Write an n-best list atomically (format default: moses); returns the paths written (plain
    writes PATH, PATH.ids and PATH.features.tsv). What the format cannot hold is logged."""
    from rerank.formats import write_losses, write_nbest as write

    path, format = os.fspath(path), format or "moses"
    for note in write_losses(nbest, format):
        log.warning("%s: %s", path, note)
    return write(nbest, path, format, first_id=first_id)


def first_best(nbest: NBestList | PathLike) -> list[str]:
    """The first hypothesis of every list (the decoder's 1-best)."""
    nbest, _ = nbest_list(nbest)
    return [nbest.hyps[int(i)] for i in nbest.offsets[:-1]]


# ---- weights, tuning, reranking --------------------------------------------------------------------

def apply(nbest: NBestList | PathLike, weights: Mapping[str, float] | PathLike) -> list[str]:
    """The 1-best of every list under w·f (ties: the earlier hypothesis), as `rerank apply` writes it.
    A weight for a feature the list lacks is an error; a feature without weight gets 0 (logged)."""
    from rerank.weights import best_rows

    nbest, _ = nbest_list(nbest)
    return [nbest.hyps[int(r)] for r in best_rows(nbest, weight_vector_of(weights, nbest.feature_names))]


def oracle(nbest: NBestList | NBestFile | PathLike, refs: PathLike | Sequence[PathLike | Sequence[str]] | None = None,
           options: OracleOptions | None = None, *, output: PathLike | None = None, progress: Progress = False,
           **keywords: Any) -> Oracle:
    """Each list's best hypothesis by a sentence-level score in the metric's direction (ties: the
    earlier hypothesis), and the corpus score of the picks and of the first hypotheses, as `rerank
    oracle`; `output`: write the picks there, one per sentence (no input may be it; one writer: its
    lock is held from before any input is read, rerank.io.output_lock, `wait`). `options`: an
    OracleOptions; `keywords` replace its fields (metric="ter", lower_better=True).

    `metric`: bleu (the default), chrf, chrf++, ter, meteor, a plug-in metric, or `column:NAME`
    (`rerank.metrics.registry.parse_objective`).
    - bleu: sentence BLEU+1 picks (Lin & Och 2004), sacrebleu's corpus BLEU;
    - chrf, chrf++, ter, meteor: the metric of each hypothesis alone against its references
      (`score_from_stats` of its statistics row), the highest (TER: the lowest); the corpus score is
      the metric of the summed statistics of the picks, as `rerank eval` computes it. `tokenize` is
      BLEU's, `lowercase` BLEU's and chrF's, `lang` METEOR's, `ter_case_sensitive` TER's;
    - `column:NAME`: the list's own column NAME (a COMET score joined with `rerank add-feature`), the
      highest (`lower_better`: the lowest); the corpus score is the mean over the sentences of the
      picked values. It needs no `refs` (given ones are not read); every other metric does.
    An unknown metric or column is an InputError with `option` "metric". The implementation and the
    scores are rerank.oracles' (`oracle`, `oracle_scores`; the report's oracle curve takes them too)."""
    from rerank import oracles
    from rerank.options import with_fields
    from rerank.outputs import check_outputs

    o = with_fields(OracleOptions, options, "oracle option", **keywords)
    kind, _ = oracles.check_oracle_metric(o.metric, refs, o.lower_better, tokenize=o.tokenize, lowercase=o.lowercase)
    if output is not None:
        check_outputs([os.fspath(output)], input_paths(nbest, *(reference_files(refs) if kind == "metric" else [])))
    with output_lock([output], o.wait):
        nbest, source = nbest_list(nbest, None, progress)
        found = oracles.oracle(nbest, refs, metric=o.metric, tokenize=o.tokenize, lowercase=o.lowercase, lang=o.lang,
                               ter_case_sensitive=o.ter_case_sensitive, lower_better=o.lower_better, progress=progress,
                               source=source)
        if output is not None:
            with atomic_write(os.fspath(output)) as out:
                out.writelines(hyp + "\n" for hyp in found.hypotheses)
    return found
