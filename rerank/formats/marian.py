"""Marian's `--n-best` output: the Moses layout, with Marian's extra fields.

`marian-decoder --n-best` (and pymarian) writes ``id ||| hypothesis ||| F0= -6.43 F1= -3.4 |||
total``, `--beam-size` hypotheses per source, best first: one `Fk=` per model or scorer, each the
sum of its token log-probabilities (EOS included), and the total, (sum of the weighted scores -
word penalty * L) / L**normalize with L = tokens + 1 (`--normalize` 0 by default: the total is the
sum). With `--alignment` it adds an alignment field (hard: `0-0 1-1 ...`; soft: comma-separated
attention weights per target position) and with `--word-scores` a field `WordScores= s1 s2 ...`
(one log-probability per target piece and EOS), both between the hypothesis and the features, in
that order (marian-dev src/translator/output_printer.h; tests/data/producers/README.md). Those
fields are read past: the features are the `Fk=` scores and the total, as in a plain Marian list.
A list without them is a Moses list (read, and streamed in two passes, as one); the two-pass reader
hands a list with them to the whole-list reader.
"""

from __future__ import annotations

import re

from rerank.errors import InputError
from rerank.formats.common import ReadReport
from rerank.formats.moses import moses_fields, read_moses, read_moses_lines
from rerank.formats.record import DETECT_LINES, NBestFormat, Sample
from rerank.io import head_lines, iter_lines
from rerank.nbest import NBestList

_HARD = re.compile(r"^(\d+-\d+(\s+\d+-\d+)*)?$")
_SOFT = re.compile(r"^([\d.eE+-]+(,[\d.eE+-]+)*(\s+[\d.eE+-]+(,[\d.eE+-]+)*)*)?$")
_MARIAN_NAMES = re.compile(r"^\s*(F\d+=\s*\S+\s*)+$")


def _extra_kind(text: str) -> str | None:
    """'alignment', 'word scores' or None for a field between the hypothesis and the features."""
    text = text.strip()
    if text.startswith("WordScores="):
        return "word scores"
    return "alignment" if _HARD.match(text) or (text and _SOFT.match(text)) else None


def detect_marian(sample: Sample) -> bool:
    """A Moses-layout line with Marian's extra fields, or whose features are Marian's `F0=` ... only."""
    fields = moses_fields(sample)
    if fields is None or len(fields) < 4:
        return False
    extras = fields[2:-2]
    if extras:
        return all(_extra_kind(f) is not None for f in extras) and "=" in fields[-2]
    return bool(_MARIAN_NAMES.match(fields[2]))


def _lines(path: str, extras: int):
    """The file's lines with the `extras` fields after the hypothesis taken out."""
    for number, text in iter_lines(path):
        fields = text.split("|||")
        if len(fields) != 4 + extras:
            raise InputError(f"{len(fields)} '|||'-separated fields, but the first line had {4 + extras} (id ||| "
                             f"hypothesis ||| {extras} alignment/word-score field(s) ||| features ||| total)", path, number)
        bad = next((f for f in fields[2:2 + extras] if _extra_kind(f) is None), None)
        if bad is not None:
            raise InputError(f"{bad.strip()[:40]!r} is neither an alignment nor `WordScores=` (Marian's extra fields)",
                             path, number)
        yield number, "|||".join(fields[:2] + fields[2 + extras:])


def read_marian(path: str, *, strict: bool = False, report: ReadReport | None = None) -> NBestList:
    report = report if report is not None else ReadReport()
    first = next((text for _, text in head_lines(path, DETECT_LINES) if text.strip()), "").split("|||")
    extras = max(0, len(first) - 4)
    if not extras:
        return read_moses(path, strict=strict, report=report)
    kinds = sorted({_extra_kind(f) or "?" for f in first[2:2 + extras]})
    nbest = read_moses_lines(path, strict, report, lines=_lines(path, extras))
    report.notes.append(f"Marian n-best with {' and '.join(kinds)}: read past them (not feature columns)")
    return nbest


MARIAN = NBestFormat(
    name="marian", layout="id ||| hypothesis [||| alignment] [||| WordScores= w1 w2 ...] ||| F0= s0 F1= s1 ||| total",
    producers="marian-decoder / pymarian --n-best [--alignment] [--word-scores]", read=read_marian,
    detect=detect_marian, detect_order=40, cached=True, streamed=True)
