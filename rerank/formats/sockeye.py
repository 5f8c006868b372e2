"""sockeye `--output-type json` output: one JSON object per source sentence.

With `--nbest-size N` each object holds `translations` (N strings, best first) and `scores` (one
list per translation: its cost, plus one entry per target factor of a factored model); the cost is
-(the sum of the token log-probabilities, EOS included) / ((beta + L)**alpha / (beta + 1)**alpha),
L = tokens + 1, by default alpha 1 and beta 0: the average negative log-probability per token,
lower is better (sockeye/beam_search.py LengthPenalty; tests/data/producers/README.md checks it).
`sentence_id` counts the inputs from 1, keys are sorted (`json.dumps(..., sort_keys=True)`), and
`--json-input` copies the input object's keys (`text`, and any others) into the output. Without
an n-best, `translation` and `score` stand alone. The first value of each list becomes the column
`cost`, further values (a factored model's) `cost_1`, `cost_2`, ...
"""

from __future__ import annotations

import json
import math

import numpy as np

from rerank.errors import InputError
from rerank.formats.common import ReadReport, append_text, json_object
from rerank.formats.record import NBestFormat, Sample
from rerank.io import iter_lines
from rerank.nbest import NBestList, StringColumnBuilder

OWN_KEYS = {"sentence_id", "translation", "translations", "score", "scores", "translations_factors", "factors"}
MEANING = "sockeye's cost of the hypothesis (negative log-probability, length-normalised; lower is better)"


def detect_sockeye(sample: Sample) -> bool:
    first = json_object(sample.first)
    return first is not None and ("translations" in first or ("translation" in first and "sentence_id" in first))


def _costs(value, path: str, line: int) -> list[float]:
    costs = value if isinstance(value, list) else [value]
    if not costs or not all(isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) for c in costs):
        raise InputError(f"a score {json.dumps(value)} is not a finite number or a list of them", path, line)
    return [float(c) for c in costs]


def read_sockeye(path: str, *, strict: bool = False, report: ReadReport | None = None) -> NBestList:
    """One object per line; the hypotheses of `translations` (or `translation`) with their costs."""
    hyps = StringColumnBuilder()
    sizes: list[int] = []
    rows: list[list[float]] = []
    width: tuple[int, int] | None = None
    first_id, copied = None, set()
    for number, text in iter_lines(path):
        obj = json_object(text)
        if obj is None:
            raise InputError("not a JSON object (sockeye's JSON output has one per source)", path, number)
        translations = obj.get("translations", [obj["translation"]] if "translation" in obj else None)
        scores = obj.get("scores", [obj["score"]] if "score" in obj else None)
        if not isinstance(translations, list) or not all(isinstance(t, str) for t in translations):
            raise InputError("no `translations` list of strings (nor a `translation`)", path, number)
        if not isinstance(scores, list):
            raise InputError(f"`scores` is {json.dumps(scores)[:40]}, not a list (one per translation)", path, number)
        if len(scores) != len(translations):
            raise InputError(f"{len(translations)} translations but {'no' if scores is None else len(scores)} scores",
                             path, number)
        sentence_id = obj.get("sentence_id")
        if sentence_id is not None and (isinstance(sentence_id, bool) or not isinstance(sentence_id, int)):
            raise InputError(f"sentence_id {json.dumps(sentence_id)[:40]} is not an integer", path, number)
        if sentence_id is not None:
            expected = len(sizes) + (first_id if first_id is not None else sentence_id)
            first_id = sentence_id if first_id is None else first_id
            if sentence_id != expected:
                raise InputError(f"sentence_id {sentence_id} where {expected} comes next (one object per source, in "
                                 "order)", path, number)
        for translation, score in zip(translations, scores):
            costs = _costs(score, path, number)
            if width is None:
                width = (len(costs), number)
            elif len(costs) != width[0]:
                raise InputError(f"a score with {len(costs)} values here but {width[0]} on line {width[1]}", path, number)
            append_text(hyps, translation, path, number)
            rows.append(costs)
        sizes.append(len(translations))
        copied |= set(obj) - OWN_KEYS
    n = width[0] if width else 1
    names = ["cost", *(f"cost_{k}" for k in range(1, n))]
    if report is not None:
        report.columns.update({name: MEANING if k == 0 else f"sockeye's score {k} of the hypothesis (of its target "
                               f"factor {k})" for k, name in enumerate(names)})
        if copied:
            report.notes.append(f"keys copied from sockeye's JSON input, not read: {', '.join(sorted(copied))}")
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    features = np.array(rows, dtype=np.float64).reshape(len(rows), n)
    return NBestList(offsets, hyps.build(), features, names)


SOCKEYE = NBestFormat(
    name="sockeye", layout='one JSON object per source: {"sentence_id": 1, "translations": [...], "scores": [[cost], ...]}',
    producers="sockeye-translate --output-type json --nbest-size N", read=read_sockeye, detect=detect_sockeye,
    detect_order=20, cached=True)
