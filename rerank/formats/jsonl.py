"""JSON lines of our own: one object per hypothesis, lossless, for scripts.

``{"id": 0, "hyp": "a man rides", "features": {"tm": [-1.5, -2.0], "lm": -7.25}, "total": -3.1}``:
sentence ids run 0, 0, 1, ... without gaps (as in Moses files); a feature is a number, or a list
of numbers for a group of columns (`tm` of `tm= a b`: columns tm_0, tm_1); `total` is optional but
on every line or none. Floats are written as the shortest text that reads back the same, and any
string (tabs, `|||`, line breaks) is JSON-escaped, so every list reads back identically.
"""

from __future__ import annotations

import json
import math

import numpy as np

from rerank.errors import InputError
from rerank.formats.common import ReadReport, append_text, json_object
from rerank.formats.moses import FeatureTable, check_next_id, read_notes
from rerank.formats.record import NBestFormat, Sample
from rerank.io import atomic_write, iter_lines
from rerank.nbest import NBestList, StringColumnBuilder


def _object(text: str, path: str, line: int) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InputError(f"not JSON: {exc}", path, line) from None
    if not isinstance(value, dict):
        raise InputError("not a JSON object (one {\"id\", \"hyp\", \"features\", \"total\"} object per line)", path, line)
    return value


def _number(value, what: str, path: str, line: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{what} is {json.dumps(value)}, not a finite number", path, line)
    return float(value)


def _feature_row(features, path: str, line: int) -> tuple[tuple[str, ...], tuple[int, ...], list[float]]:
    if not isinstance(features, dict):
        raise InputError("`features` is not an object of name: number (or list of numbers)", path, line)
    names: list[str] = []
    widths: list[int] = []
    values: list[float] = []
    for name, value in features.items():
        group = value if isinstance(value, list) else [value]
        if not group:
            raise InputError(f"feature {name!r} has no value", path, line)
        names.append(name)
        widths.append(len(group))
        values.extend(_number(v, f"feature {name!r}", path, line) for v in group)
    return tuple(names), tuple(widths), values


def read_jsonl(path: str, *, strict: bool = False, report: ReadReport | None = None) -> NBestList:
    table = FeatureTable(path)
    hyps = StringColumnBuilder()
    sizes: list[int] = []
    totals: list[float] = []
    first: tuple[bool, int] | None = None
    previous = -1
    for number, text in iter_lines(path):
        if not text.strip():
            raise InputError("empty line (one JSON object per hypothesis)", path, number)
        obj = _object(text, path, number)
        sent_id, hyp = obj.get("id"), obj.get("hyp")
        if isinstance(sent_id, bool) or not isinstance(sent_id, int) or sent_id < 0:
            raise InputError(f"`id` is {json.dumps(sent_id)}, not a non-negative integer", path, number)
        if not isinstance(hyp, str):
            raise InputError(f"`hyp` is {json.dumps(hyp)}, not a string", path, number)
        if sent_id != previous:
            check_next_id(sent_id, previous, path, number)
            sizes.append(0)
            previous = sent_id
        sizes[-1] += 1
        append_text(hyps, hyp, path, number)
        table.add_row(*_feature_row(obj.get("features", {}), path, number), number)
        has_total = obj.get("total") is not None
        if first is None:
            first = (has_total, number)
        elif has_total != first[0]:
            raise InputError(f"{'a' if has_total else 'no'} `total` here but {'one' if first[0] else 'none'} on line "
                             f"{first[1]} (on every line or none)", path, number)
        if has_total:
            totals.append(_number(obj["total"], "`total`", path, number))
    features, names, groups, missing = table.finish(strict)
    if report is not None:
        read_notes(report, missing, len(hyps))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    scores = np.array(totals) if first and first[0] else None
    return NBestList(offsets, hyps.build(), features, names, groups, scores, missing)


def write_jsonl(nbest: NBestList, path: str, first_id: int = 0) -> list[str]:
    """One object per hypothesis (see the module's docstring); returns [path]."""
    starts = np.cumsum([0] + [width for _, width in nbest.groups])
    sentence = (nbest.sentence_of_hyp + first_id).tolist()
    with atomic_write(path) as out:
        for row, hyp in enumerate(nbest.hyps):
            values = nbest.features[row].tolist()
            features = {name: values[a] if width == 1 else values[a:a + width]
                        for (name, width), a in zip(nbest.groups, starts.tolist())}
            obj = {"id": sentence[row], "hyp": hyp, "features": features}
            if nbest.scores is not None:
                obj["total"] = float(nbest.scores[row])
            out.write(json.dumps(obj, ensure_ascii=False) + "\n")
    return [path]


def detect_jsonl(sample: Sample) -> bool:
    obj = json_object(sample.first)
    return obj is not None and "id" in obj and "hyp" in obj


JSONL = NBestFormat(
    name="jsonl", layout='one JSON object per hypothesis: {"id": 0, "hyp": "...", "features": {"tm": [a, b], "lm": c}, '
    '"total": t} (lossless)', producers="rerank convert --to jsonl; scripts", read=read_jsonl, write=write_jsonl,
    detect=detect_jsonl, detect_order=21, cached=True)
