"""fairseq-generate / fairseq-interactive output: ``S-i``/``T-i``/``H-i``/``D-i`` lines.

Lines are tab-separated and sentence ids come in any order; the H/D score becomes the
feature `nmt`, T- lines (references) and S- lines (sources) are kept in the ReadReport.
P-, W-, A- and log lines are ignored.
"""

from __future__ import annotations

import re

import numpy as np

from rerank.errors import InputError
from rerank.formats.common import ReadReport, format_value, parse_number
from rerank.formats.record import NBestFormat, ReadOption, Sample
from rerank.io import atomic_write, iter_lines
from rerank.nbest import NBestList, StringColumnBuilder

FAIRSEQ_LINE = re.compile(r"^([A-Z])-(\d+)\t")
_KINDS = "STHDP"  # the lines that make a file fairseq output (W- and A- lines come with them)

# kind -> sentence id -> [(line number, tab-separated fields after the tag), ...]
_Lines = dict[str, dict[int, list[tuple[int, list[str]]]]]


def _collect_lines(path: str, report: ReadReport) -> _Lines:
    """S/T/H/D lines by kind and sentence id; S and T may appear once per id."""
    by_kind: _Lines = {k: {} for k in "STHD"}
    for number, text in iter_lines(path):
        match = FAIRSEQ_LINE.match(text)
        if not match or match.group(1) not in "STHD":
            report.ignored_lines += 1
            continue
        kind, idx = match.group(1), int(match.group(2))
        parts = text.split("\t")
        entries = by_kind[kind].setdefault(idx, [])
        if kind in "ST" and entries:
            raise InputError(f"{kind}-{idx} appears twice (first on line {entries[0][0]})", path, number)
        if kind in "HD" and len(parts) < 2:
            raise InputError(f"{kind}-{idx} line needs `{kind}-{idx}<TAB>score<TAB>hypothesis`", path, number)
        entries.append((number, parts[1:]))
    return by_kind


def read_fairseq(path: str, field: str = "auto", report: ReadReport | None = None) -> NBestList:
    """fairseq-generate / fairseq-interactive output; the H/D score becomes feature `nmt`.

    field: "H" (tokenised hypotheses), "D" (detokenised) or "auto" (D when present).
    """
    report = report if report is not None else ReadReport()
    by_kind = _collect_lines(path, report)
    if field == "auto":
        field = "D" if by_kind["D"] else "H"
    chosen = by_kind[field]
    if not chosen and by_kind["H" if field == "D" else "D"]:
        raise InputError(f"no {field}-lines (fairseq hypotheses) found", path)
    n = max(set(chosen) | set(by_kind["S"]) | set(by_kind["T"]), default=-1) + 1
    for idx in range(n):
        if idx not in chosen:
            where = f" (S-{idx} is on line {by_kind['S'][idx][0][0]})" if idx in by_kind["S"] else ""
            raise InputError(f"sentence {idx} has no {field}-line hypotheses{where}; ids run 0..{n - 1}", path)
    hyps = StringColumnBuilder()
    sizes, scores = [], []
    for idx in range(n):
        entries = chosen[idx]
        sizes.append(len(entries))
        for number, parts in entries:
            scores.append(parse_number(parts[0], f"{field}-{idx} score", path, number))
            hyps.append("\t".join(parts[1:]))  # the hypothesis may hold tabs
    if by_kind["T"]:
        report.fairseq_refs = ["\t".join(by_kind["T"][i][0][1]) if i in by_kind["T"] else None for i in range(n)]
    if by_kind["S"]:
        report.fairseq_sources = ["\t".join(by_kind["S"][i][0][1]) if i in by_kind["S"] else None for i in range(n)]
    if report.ignored_lines:
        report.notes.append(f"{report.ignored_lines} lines are not S/T/H/D lines (ignored: P-, W-, A- and log lines)")
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    values = np.array(scores, dtype=np.float64)
    return NBestList(offsets, hyps.build(), values[:, None], ["nmt"], scores=values.copy())


def write_fairseq(nbest: NBestList, path: str, first_id: int = 0) -> list[str]:
    """H- lines (`H-id<TAB>score<TAB>hyp`), the score from feature `nmt` or the total; returns [path]."""
    row = nbest.hyps.first_ending_with_cr()
    if row is not None:
        raise InputError(f"hypothesis {row} ends in a carriage return, which a line cannot keep", path)
    with atomic_write(path) as out:
        score_col = nbest.feature_names.index("nmt") if "nmt" in nbest.feature_names else None
        sent = nbest.sentence_of_hyp + first_id
        for row, hyp in enumerate(nbest.hyps):
            score = nbest.features[row, score_col] if score_col is not None else (nbest.scores[row] if nbest.scores is not None else 0.0)
            out.write(f"H-{sent[row]}\t{format_value(score)}\t{hyp}\n")
    return [path]


def detect_fairseq(sample: Sample) -> bool | str:
    """An S-/T-/H-/D-/P- line among the first lines, after log lines at most (a first line in
    another n-best layout, `|||`, is not fairseq output)."""
    for k, (_, text) in enumerate(sample.lines):
        match = FAIRSEQ_LINE.match(text)
        if match and match.group(1) in _KINDS:
            return f"read as fairseq output: skipped {k} log line(s) before the first S-/T-/H-/D-/P- line" if k else True
        if k == 0 and "|||" in text:
            return False
    return False


def fairseq_losses(nbest: NBestList) -> list[str]:
    notes = []
    dropped = [n for n in nbest.feature_names if n != "nmt"]
    if dropped:
        notes.append(f"fairseq lines hold one score (feature nmt, else the total): features {', '.join(dropped)} are not written")
    if "nmt" in nbest.feature_names and nbest.scores is not None and not np.array_equal(nbest.scores, nbest.column("nmt")):
        notes.append("fairseq lines hold one score: the total scores are not written (the H-line score is feature nmt)")
    if "nmt" not in nbest.feature_names and nbest.scores is None:
        notes.append("no feature nmt and no total score: every H-line score is 0")
    return notes


def _read(path: str, *, strict: bool = False, report: ReadReport | None = None, fairseq_field: str | None = None) -> NBestList:
    return read_fairseq(path, field=fairseq_field or "auto", report=report)


FAIRSEQ = NBestFormat(
    name="fairseq", layout="S-i / T-i / H-i / D-i lines, tab-separated (`H-i<TAB>score<TAB>hypothesis`), ids in any order",
    producers="fairseq-generate, fairseq-interactive", read=_read, write=write_fairseq, detect=detect_fairseq,
    detect_order=10, cached=True, losses=fairseq_losses,
    options=(ReadOption("fairseq_field", "--fairseq-field", "fairseq lines to read hypotheses from: H (tokenised), D "
                        "(detokenised), auto = D if present (default: auto)", choices=("auto", "H", "D")),))
