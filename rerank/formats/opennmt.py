"""OpenNMT-py and eole n-best output: N consecutive lines per source sentence.

`onmt_translate -n_best N` writes the N hypotheses of each source on consecutive lines, best
first, with no source id; `-with_score` adds a tab and the hypothesis' score: its log-probability
(EOS included) divided by the length penalty, by default `-length_penalty avg -alpha 1`, i.e. by
tokens + 2 (the beam's length counts BOS and EOS), and the plain sum with `-length_penalty none`;
higher is better. eole (`eole predict -with_score`) writes a second tab and its estimator's value
on every line (1.0 for a model without an estimator head), and with an estimator it orders each
list by Pareto dominance on (score, estimator), not by score (tests/data/producers/README.md
cites the code and checks the numbers). The file does not say N: it comes from the list size
given (`nbest_size`) or from the line count and the source file (`src`). The score becomes the
column `score`, eole's estimator `estim`.
"""

from __future__ import annotations

import re

import numpy as np

from rerank.errors import InputError, NeedsOption
from rerank.formats.common import ReadReport
from rerank.formats.record import NBestFormat, ReadOption, Sample
from rerank.io import iter_lines, read_lines
from rerank.nbest import NBestList, StringColumnBuilder

COLUMNS = ("score", "estim")
MEANINGS = {"score": "the decoder's log-probability of the hypothesis over its length penalty (default: per token, "
                     "BOS and EOS counted; higher is better)",
            "estim": "eole's estimator head's value for the hypothesis (1.0 without an estimator)"}


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def scored_fields(text: str) -> int:
    """How many tab-separated numbers follow the hypothesis (0: a bare line, 1: `-with_score`, 2: eole's
    score and estimator; -1: tabs that are not that layout). The hypothesis holds no tab."""
    parts = text.split("\t")
    if len(parts) > 3 or not all(_NUMBER.fullmatch(p.strip()) for p in parts[1:]):
        return -1
    return len(parts) - 1


def detect_opennmt(sample: Sample) -> bool:
    """Every first line is `hypothesis<TAB>score` or every one `hypothesis<TAB>score<TAB>estim`, or
    the lines are bare text and the list size or the sources were given."""
    counts = {scored_fields(text) for _, text in sample.lines}
    if counts == {0}:
        return sample.options.get("nbest_size") is not None or bool(sample.options.get("src"))
    return len(counts) == 1 and counts != {-1}


def _list_size(path: str, n_lines: int, nbest_size, src) -> int:
    if nbest_size is not None:
        size = int(nbest_size)
        if size < 1:
            raise InputError(f"the list size must be a positive integer, not {nbest_size}", path)
        if n_lines % size:
            raise InputError(f"{n_lines} lines are not a whole number of lists of {size} (OpenNMT writes N lines per "
                             "source)", path)
        if src:
            n_src = len(read_lines(src))
            if n_src * size != n_lines:
                raise InputError(f"{n_lines} lines for {n_src} sources of {src} are not {size} per source", path)
        return size
    if not src:
        raise NeedsOption("an OpenNMT/eole n-best file does not say its list size: give it, or the source sentences "
                          "(N = lines / sources)", path, options=("nbest_size", "src"))
    n_src = len(read_lines(src))
    if not n_src or n_lines % n_src:
        raise InputError(f"{n_lines} lines are not a whole number of lists for the {n_src} sources of {src}", path)
    return n_lines // n_src


def read_opennmt(path: str, *, strict: bool = False, report: ReadReport | None = None, nbest_size=None,
                 src: str | None = None) -> NBestList:
    """N lines per source: `hypothesis`, `hypothesis<TAB>score` or (eole) `hypothesis<TAB>score<TAB>estim`."""
    hyps = StringColumnBuilder()
    values: list[list[float]] = []
    width: tuple[int, int] | None = None  # (numbers per line, the first line)
    for number, text in iter_lines(path):
        count = scored_fields(text)
        if width is None:
            width = (count, number)
        if count != width[0] or count < 0:
            found = "tabs that are not tab-separated scores" if count < 0 else f"{count} tab-separated score(s)"
            raise InputError(f"{found} here but {max(width[0], 0)} on line {width[1]} (OpenNMT writes `hypothesis`, "
                             "`hypothesis<TAB>score` or eole's `hypothesis<TAB>score<TAB>estim` on every line, the "
                             "hypothesis without tabs)", path, number)
        if count:
            parts = text.split("\t")
            hyps.append(parts[0])
            values.append([float(v) for v in parts[1:]])
        else:
            hyps.append(text)
    column = hyps.build()
    size = _list_size(path, len(column), nbest_size, src)
    n_sentences = len(column) // size
    names = list(COLUMNS[:max(width[0], 0) if width else 0])
    features = np.array(values, dtype=np.float64).reshape(len(column), len(names))
    bad = np.argwhere(~np.isfinite(features))
    if len(bad):
        raise InputError(f"{names[bad[0][1]]} is {features[tuple(bad[0])]} (scores must be finite)", path, int(bad[0][0]) + 1)
    if report is not None:
        report.columns.update({name: MEANINGS[name] for name in names})
    return NBestList(np.arange(n_sentences + 1, dtype=np.int64) * size, column, features, names)


OPENNMT = NBestFormat(
    name="opennmt", layout="N consecutive lines per source: `hypothesis[<TAB>score[<TAB>estim]]` (N from --nbest-size or "
    "--src)", producers="OpenNMT-py (onmt_translate -n_best N [-with_score]), eole (eole predict)",
    read=read_opennmt, detect=detect_opennmt, detect_order=50,
    options=(
        ReadOption("nbest_size", "--nbest-size", "opennmt format: hypotheses per source sentence (the file does not say "
                   "it; default: lines / sources of --src)", metavar="N", type=int),
        ReadOption("src", "--src", "the source sentences, one per line (opennmt format: the list size is lines / "
                   "sources) (default: none)", metavar="FILE", file=True),
    ))
