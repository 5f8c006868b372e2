"""The oracle: each n-best list's best hypothesis by a sentence-level score, and the corpus score of
such picks, in one place for every oracle of the toolkit.

- `oracle`: `rerank.oracle` (rerank.api reads the list and calls it) and `rerank oracle`;
- `oracle_scores`: what an oracle ranks and scores with, also the HTML report's oracle curve's
  (rerank.htmlreport.analysis.oracle_curve picks among each list's top k);
- `oracle_rows`: the picks, also the tuners' oracle (`rerank.tuning.TuningData.oracle`), and through
  `oracle` the recipes'.

A metric's sentence-level score is its own (`rerank.metrics.base.Metric.sentence_scores`: BLEU+1
for BLEU, the metric of the sentence alone otherwise), oriented so that higher is better and
divided by 100, as the tuners' sentence-level objective is; a column's is its value (negated with
`lower_better`). The corpus score of picks is the metric's exact one (`Metric.corpus_from_stats`:
sacrebleu's corpus BLEU, the number `rerank eval` gives) or the mean of a column's picked values.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.errors import InputError
from rerank.io import read_references
from rerank.metrics.base import Metric
from rerank.metrics.registry import check_metric_options, column_signature, make_metric, parse_objective
from rerank.nbest import NBestList, segment_argmax
from rerank.options import ANY, check_options, option, wait_option
from rerank.progress import Progress

References = str | os.PathLike | Sequence[str | os.PathLike | Sequence[str]]  # as rerank.read_references takes them


@dataclass
class Oracle:
    """Each list's best hypothesis by a sentence-level score, and the corpus score of the picks.

    `metric` is what picked them, as `oracle(metric=...)` was given it ("bleu", "ter", "column:COMET"),
    `display` its name in print ("BLEU", "TER", "column:COMET"). `score` / `first_score`: the metric's
    corpus value of the picks / of the first hypotheses (sacrebleu's corpus BLEU, TER..., or for a
    column the mean of the picked values over the sentences); `higher_is_better` says which way is
    better (False for TER and a column taken with `lower_better`). `bleu` / `first_bleu` are the
    same numbers, for an oracle by BLEU only."""

    hypotheses: list[str]
    rows: np.ndarray            # row of each pick in the list
    score: float                # corpus score of the picks (the metric's own value: TER, not -TER)
    first_score: float          # corpus score of the first hypotheses
    changed: int                # sentences whose pick is not the first hypothesis
    signature: str
    metric: str = "bleu"
    display: str = "BLEU"
    higher_is_better: bool = True
    decimals: int = 2           # how many decimals `rerank oracle` prints

    @property
    def bleu(self) -> float:
        """Corpus BLEU of the picks (an oracle by BLEU only; else read `score`)."""
        return self._bleu(self.score)

    @property
    def first_bleu(self) -> float:
        """Corpus BLEU of the first hypotheses (an oracle by BLEU only; else read `first_score`)."""
        return self._bleu(self.first_score)

    def _bleu(self, value: float) -> float:
        if self.metric != "bleu":  # the property's own meaning: what `metric` was given, not a metric's behaviour
            raise AttributeError(f"an oracle by {self.display} has no BLEU: read .score and .first_score")
        return value


@dataclass
class OracleScores:
    """What an oracle by a metric ranks with (`oracle_scores`): every hypothesis's sentence-level
    score, oriented so that higher is better, and the metric's corpus score of picked rows. `oracle`
    picks each list's best; the HTML report's oracle curve picks among each list's top k."""

    gain: np.ndarray                         # (n_hyps,) BLEU+1, a metric of the sentence alone (-TER), a column
    corpus: Callable[[np.ndarray], float]    # the metric's own corpus value (TER, not -TER) of rows, one per sentence
    signature: str
    metric: str = "bleu"                     # as given: "bleu", "ter", "column:COMET"
    display: str = "BLEU"
    higher_is_better: bool = True
    decimals: int = 2
    sentence_label: str | None = None        # the gain's name where it is not the metric's own ("BLEU+1")


def oracle_rows(gain: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each list's row with the highest sentence-level `gain`, the earlier one on a tie (every list
    has a hypothesis)."""
    return segment_argmax(gain, offsets)


def lower_better_column(metric: str, lower_better: bool | str | Sequence[str] | None, option: str = "lower_better",
                        metric_option: str = "metric") -> bool:
    """Whether an oracle's column is better when lower: `lower_better` True, or the column's name
    (a command line gives the name: `--lower-better NAME`, which must be the column of `metric`)."""
    if isinstance(lower_better, bool) or lower_better is None:
        return bool(lower_better)
    names = {n.strip() for n in ([lower_better] if isinstance(lower_better, str) else lower_better)
             for n in n.split(",") if n.strip()}
    kind, name = parse_objective(metric, metric_option)
    if names and (kind != "column" or names != {name}):
        raise InputError(f"{option} {','.join(sorted(names))}: not the column of {metric_option} "
                         f"(give {metric_option} column:NAME {option} NAME)", option=option,
                         mentions=(metric_option, option))
    return bool(names)


@dataclass(frozen=True)
class OracleOptions:
    """How `rerank.oracle` picks and scores (see there): `metric` (bleu, chrf, chrf++, ter, meteor, a
    plug-in metric, or `column:NAME`), `lower_better` for a column (True, or the column's name),
    BLEU's `tokenize` and `lowercase` (chrF's too), TER's `ter_case_sensitive`, METEOR's `lang`;
    `wait`: if another process is writing the output, wait until it ends (default: refuse, naming
    it). A value that is wrong whatever the data is refused here."""

    metric: str = option("bleu", "what picks the oracle: bleu, chrf, chrf++, ter, meteor, an installed metric "
                         "plug-in, or column:NAME for the n-best list's column NAME", metavar="METRIC")
    lower_better: Any = option(None, "with --metric column:NAME: lower values of the column NAME are better",
                               check=ANY, metavar="NAME", default_text="higher is better")
    tokenize: str = option("13a", "BLEU tokeniser as sacrebleu -tok, as `rerank tune` and `rerank eval` (none for "
                           "pre-tokenised text)")
    lowercase: bool = option(False, "lowercase before scoring, BLEU and chrF", default_text="case-sensitive")
    ter_case_sensitive: bool = option(False, "case-sensitive TER (sacrebleu's default is insensitive)")
    lang: str = option("en", "target language for METEOR (en, de, fr, es, cs)")
    wait: bool = wait_option()

    def __post_init__(self) -> None:
        check_options(self, as_keywords=True)
        object.__setattr__(self, "lower_better", lower_better_column(self.metric, self.lower_better))
        check_oracle_options(self.metric, self.lower_better, tokenize=self.tokenize, lowercase=self.lowercase)


def check_oracle_options(metric: str, lower_better: bool = False, **options: Any) -> tuple[str, str]:
    """(kind, name) of an oracle's metric (`parse_objective`) after the checks that need neither a
    list nor references: `lower_better` only with a column, and the metric's `options` (make_metric's:
    `check_metric_options`, e.g. BLEU's tokenizer). InputErrors name the option."""
    kind, name = parse_objective(metric)
    if lower_better and kind != "column":
        raise InputError(f"lower_better is for a column:NAME metric; {name} has its own direction", option="lower_better")
    if kind == "metric":
        check_metric_options(name, **options)
    return kind, name


def check_oracle_metric(metric: str, refs: object, lower_better: bool = False, **options: Any) -> tuple[str, str]:
    """`check_oracle_options`, and that a metric (not a column) has its `refs` (not None)."""
    kind, name = check_oracle_options(metric, lower_better, **options)
    if kind == "metric" and refs is None:
        raise InputError(f"metric {name} needs references (refs); only column:NAME needs none", option="metric",
                         mentions=("refs",))
    return kind, name


def oracle_scores(nbest: NBestList, refs: Sequence[Sequence[str]] | None, metric: str = "bleu", *,
                  tokenize: str = "13a", lowercase: bool = False, lower_better: bool = False,
                  progress: Progress = False, scorer: Metric | None = None, **options: Any) -> OracleScores:
    """Each hypothesis's sentence-level score by `metric` and the metric's corpus score of picks, as
    `oracle` takes them (see rerank.api.oracle): `refs` are the reference streams (read; None for a
    column). `scorer`: the Metric object of an oracle by a metric (e.g. the one an evaluation scored
    with, its options and signature), else `make_metric(name, tokenize=..., lowercase=..., **options)`
    (`options`: lang, ter_case_sensitive, meteor_options). InputErrors as `oracle`'s."""
    kind, name = check_oracle_metric(metric, refs, lower_better, tokenize=tokenize, lowercase=lowercase, **options)
    if kind == "column":
        from rerank.tuning import check_objective_column   # (the oracle's parser loads no tuning)

        check_objective_column(nbest, name)
        values = np.asarray(nbest.column(name), dtype=np.float64)
        return OracleScores(-values if lower_better else values, lambda rows: float(np.mean(values[rows])),
                            column_signature(name, lower_better), f"column:{name}", f"column:{name}",
                            not lower_better, 4)
    assert refs is not None  # check_oracle_metric says so
    if scorer is None:
        scorer = make_metric(name, tokenize=tokenize, lowercase=lowercase, **options)
    elif scorer.name != name:
        raise ValueError(f"oracle_scores: the scorer is {scorer.name}, the metric {name}")
    from rerank.tuning import row_stats

    stats = row_stats(scorer, nbest, refs, progress)
    info = scorer.info
    return OracleScores(info.sign * scorer.sentence_scores(stats, fraction=True),
                        lambda rows: scorer.corpus_from_stats(stats[rows].sum(axis=0)), scorer.signature(), name,
                        info.display, info.higher_is_better, info.decimals, scorer.sentence_label)


def oracle(nbest: NBestList, refs: References | None = None, *, metric: str = "bleu", tokenize: str = "13a",
           lowercase: bool = False, lang: str = "en", ter_case_sensitive: bool = False, lower_better: bool = False,
           progress: Progress = False, source: str = "n-best list") -> Oracle:
    """`rerank.oracle` on a list in memory (rerank.api.oracle documents it): each list's best
    hypothesis by `oracle_scores`' gain (`oracle_rows`), the corpus score of the picks and of the
    first hypotheses. `refs` as `rerank.read_references` takes them (read here; not read for a
    column); `source` names the list in messages."""
    kind, _ = check_oracle_metric(metric, refs, lower_better, tokenize=tokenize, lowercase=lowercase)
    empty = np.flatnonzero(nbest.sizes == 0)
    if len(empty):
        raise InputError(f"{len(empty)} sentences have no hypotheses (first: sentence {int(empty[0])}); "
                         "each needs at least one for an oracle", source)
    streams = None
    if kind == "metric":
        assert refs is not None  # check_oracle_metric says so
        streams = read_references(refs, nbest.n_sentences, source)
    scores = oracle_scores(nbest, streams, metric, tokenize=tokenize, lowercase=lowercase, lower_better=lower_better,
                           progress=progress, lang=lang, ter_case_sensitive=ter_case_sensitive)
    first = nbest.offsets[:-1]
    picks = oracle_rows(scores.gain, nbest.offsets)
    return Oracle([nbest.hyps[int(r)] for r in picks], picks, scores.corpus(picks), scores.corpus(first),
                  int(np.sum(picks != first)), scores.signature, scores.metric, scores.display,
                  scores.higher_is_better, scores.decimals)
