"""The summary of an n-best list (`rerank info`): counts, list sizes, per-feature ranges and
problems, computed over the arrays (`summarize`), and of an n-best file (`summarize_file`, with what
the read noticed)."""

from __future__ import annotations

import os

import numpy as np

from rerank.dedup import distinct_bytes
from rerank.formats import ReadReport
from rerank.nbest import NBestList, StringColumn
from rerank.nbestfile import NBestFile
from rerank.progress import Progress


def summarize_file(source: NBestFile | str | os.PathLike, progress: Progress = False) -> dict:
    """`summarize` of the list of an n-best file (an empty list too), with the read's report: the
    format (and whether it was detected), the text's post-processing, and the read's hints."""
    nbest, report = NBestFile.of(source).read_with_report(progress, allow_empty=True)
    return summarize(nbest, report)


def summarize(nbest: NBestList, report: ReadReport | None = None) -> dict:
    """Counts, list sizes, per-feature min/mean/max and problems, computed over the arrays; with the
    read's `report`, the format (and whether it was detected), what each column means where the
    format says it, the post-processing applied, and hints for text that looks segmented or escaped."""
    sizes = nbest.sizes
    blank = blank_rows(nbest.hyps)
    duplicates = count_repeats(nbest.hyps, nbest.offsets)
    features = {}
    for name, stats in zip(nbest.feature_names, column_stats(nbest.features)):
        features[name] = {**stats, "missing": int(nbest.missing.get(name, 0))}
    problems = [] if nbest.n_hyps else ["no hypotheses: the n-best list is empty"]
    if nbest.n_hyps and (sizes == 1).all() and not nbest.feature_names and nbest.scores is None:
        problems.append("no n-best structure: one hypothesis per sentence and no features or scores (a plain text "
                        "file, such as references or a 1-best? see docs/formats.md)")
    if len(blank):
        problems.append(f"{len(blank)} empty hypotheses: {where(nbest, blank)}")
    if duplicates:
        problems.append(f"{duplicates} hypotheses repeat an earlier string of the same list")
    for name, count in nbest.missing.items():
        problems.append(f"feature {name!r} missing on {count} hypotheses (filled with 0)")
    if len(sizes) and sizes.min() < sizes.max():
        short = int((sizes < sizes.max()).sum())
        problems.append(f"{short} sentences have fewer than {int(sizes.max())} hypotheses")
    constant = [n for n, f in features.items() if f["min"] == f["max"]]
    if constant and nbest.n_hyps > 1:
        problems.append(f"constant features (cannot affect ranking): {', '.join(constant)}")
    read = {}
    if report is not None:
        problems += report.hints
        if report.detected is not None and report.detected_lines == 1:
            problems.append(f"format {report.detected} guessed from the file's only line (giving the format sets it)")
        for name, meaning in report.columns.items():
            if name in features:
                features[name]["meaning"] = meaning
        read = {"format": report.format, "detected": report.detected is not None, "text": report.text}
    return {**read,
        "sentences": nbest.n_sentences,
        "hypotheses": nbest.n_hyps,
        "list_size": {"min": int(sizes.min()), "mean": float(sizes.mean()), "max": int(sizes.max())} if len(sizes) else None,
        "has_total_score": nbest.scores is not None,
        "features": features,
        "problems": problems,
    }


def column_stats(features: np.ndarray) -> list[dict]:
    """min, mean and max of every column (None without rows), the numbers `features[:, k].min()`,
    `.mean()` and `.max()` give. Columns are copied out a few at a time, a block of rows at once,
    and reduced contiguously (the mean is numpy's pairwise sum over the whole column either way)
    at a fraction of the memory traffic of reducing strided columns."""
    n, width = features.shape
    if not n:
        return [{"min": None, "mean": None, "max": None} for _ in range(width)]
    step, rows, stats = max(1, (1 << 23) // n), 1 << 12, []  # 64 MB of copies (one column if longer)
    for first in range(0, width, step):
        block = np.empty((min(step, width - first), n))
        for row in range(0, n, rows):
            block[:, row:row + rows] = features[row:row + rows, first:first + step].T
        for k, column in enumerate(block, start=first):
            low, high = column.min(), column.max()
            if (low == 0 or high == 0) and len(np.unique(np.signbit(column[column == 0]))) > 1:
                low, high = features[:, k].min(), features[:, k].max()  # which zero, -0.0 or 0.0, as before
            stats.append({"min": float(low), "mean": float(column.mean()), "max": float(high)})
    return stats


# first bytes of the UTF-8 encodings of every character str.isspace() accepts (tested)
_SPACE_LEAD = np.zeros(256, dtype=bool)
_SPACE_LEAD[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 0xC2, 0xE1, 0xE2, 0xE3]] = True


def blank_rows(hyps: StringColumn) -> np.ndarray:
    """The rows (ascending) of the strings that are empty or white space only (`not h.strip()`):
    only those whose first byte may begin a white-space character are decoded."""
    buffer, offsets = hyps.raw()
    starts, ends = offsets[:-1], offsets[1:]
    filled = ends > starts
    first = np.frombuffer(buffer, dtype=np.uint8)[starts[filled]] if filled.any() else np.zeros(0, np.uint8)
    maybe = np.flatnonzero(filled)[_SPACE_LEAD[first]]
    blank = ~filled
    blank[[row for row in maybe.tolist() if not hyps[row].strip()]] = True
    return np.flatnonzero(blank)


def count_blank(hyps: StringColumn) -> int:
    """How many strings are empty or white space only (`blank_rows`)."""
    return len(blank_rows(hyps))


SHOWN = 5  # rows a problem names before "and N more"


def where(nbest: NBestList, rows: np.ndarray) -> str:
    """The first SHOWN `rows` as "sentence S hypothesis H" (S from 0, as the n-best ids; H from 1,
    the position in its list), then how many more."""
    sentences = np.searchsorted(nbest.offsets, rows[:SHOWN], side="right") - 1
    named = [f"sentence {s} hypothesis {r - nbest.offsets[s] + 1}" for s, r in zip(sentences.tolist(), rows[:SHOWN].tolist())]
    more = f" and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
    return ", ".join(named) + more


def count_repeats(hyps: StringColumn, offsets: np.ndarray) -> int:
    """How many strings equal an earlier string of their own segment (CSR `offsets`): the strings
    less the distinct (segment, string) pairs, compared by their bytes in the buffer (rerank.dedup)."""
    if len(hyps) < 2:
        return 0
    buffer, string_offsets = hyps.raw()
    segment = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    return len(hyps) - len(distinct_bytes(buffer, string_offsets[:-1], np.diff(string_offsets), salt=segment)[1])
