"""Pseudo-pairs for disjoint data (Kadar et al. 2019, "Bootstrapping disjoint datasets for
multilingual multimodal representation learning", seed 003, section 2.2).

With a model trained on both corpora, every caption c^l2 of the target corpus is paired with
its most similar caption c^l1 of the source corpus (cosine of the sentence vectors), giving
pairs <c^l2, c^l1>. Filtering (003, section 2.2): keep the pairs whose similarity is at or above
the P-th percentile (P = 25: "remove bottom 25%", P = 75: "keep top 25%"). The pairs are then an
extra caption-caption training source (embeddings.data.build_pools extra_pairs), from scratch or
fine-tuning the model (`init`).

File format (`rerank embed pseudopairs -o pairs.tsv`): one line per kept target caption, in the
target file's order: target caption TAB source caption TAB cosine (6 decimals), no header.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rerank.errors import InputError
from rerank.io import iter_lines
from rerank.progress import Progress


def read_captions(path: str) -> list[str]:
    """Caption lines for pairing: not empty, no tab (the TSV's separator); errors name FILE:LINE."""
    lines = []
    for number, line in iter_lines(path):
        if not line.strip():
            raise InputError("empty caption", path, number)
        if "\t" in line:
            raise InputError("the caption holds a tab, the separator of the pseudo-pair file", path, number)
        lines.append(line)
    if not lines:
        raise InputError("no captions (the file is empty)", path)
    return lines


@torch.no_grad()
def nearest(queries: np.ndarray, items: np.ndarray, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """For each query row, the index of the item row with the largest dot product (cosine for unit
    rows; ties: the first) and that value."""
    items_t = torch.from_numpy(np.ascontiguousarray(items))
    best, value = np.empty(len(queries), dtype=np.int64), np.empty(len(queries), dtype=np.float32)
    for s in range(0, len(queries), block):
        sims = torch.from_numpy(np.ascontiguousarray(queries[s:s + block])) @ items_t.t()
        v = sims.max(1).values
        first = (sims == v[:, None]).int().argmax(1)      # the first of tied maxima
        best[s:s + block], value[s:s + block] = first.numpy(), v.numpy()
    return best, value


def percentile_filter(similarity: np.ndarray, percentile: float | None) -> np.ndarray:
    """Boolean mask of the pairs kept: similarity >= the `percentile`-th percentile (numpy's linear
    interpolation) of all similarities; everything when percentile is None."""
    if percentile is None:
        return np.ones(len(similarity), dtype=bool)
    return similarity >= np.percentile(similarity.astype(np.float64), percentile)


def pseudo_pairs(encoder, src: list[str], src_lang: str, tgt: list[str], tgt_lang: str, percentile: float | None = None,
                 device: str = "cpu", batch_size: int = 256, progress: Progress = False) -> list[tuple[str, str, float]]:
    """(target caption, its most similar source caption, cosine) for every target caption in order,
    only those kept by `percentile_filter`."""
    vs = encoder.encode(src, src_lang, batch_size, device, progress=progress)
    vt = encoder.encode(tgt, tgt_lang, batch_size, device, progress=progress)
    best, sim = nearest(vt, vs)
    keep = percentile_filter(sim, percentile)
    return [(tgt[i], src[best[i]], float(sim[i])) for i in np.flatnonzero(keep)]


def format_pairs(rows: list[tuple[str, str, float]]) -> str:
    return "".join(f"{t}\t{s}\t{sim:.6f}\n" for t, s, sim in rows)


def read_pseudo_pairs(path: str) -> list[tuple[str, str]]:
    """(target caption, source caption) pairs of a pseudo-pair TSV; errors name FILE:LINE."""
    rows = []
    for number, line in iter_lines(path):
        fields = line.split("\t")
        if len(fields) != 3:
            raise InputError(f"expected 3 tab-separated fields (target caption, source caption, similarity), "
                             f"found {len(fields)}", path, number)
        if not fields[0].strip() or not fields[1].strip():
            raise InputError("empty caption", path, number)
        try:
            sim = float(fields[2])
        except ValueError:
            raise InputError(f"similarity {fields[2]!r} is not a number", path, number) from None
        if not math.isfinite(sim):
            raise InputError(f"similarity {fields[2]!r} is not finite", path, number)
        rows.append((fields[0], fields[1]))
    if not rows:
        raise InputError("no pseudo-pairs (the file is empty)", path)
    return rows


def load_pseudo_sources(specs: list[dict]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """The config's pseudo_pairs entries as build_pools extra_pairs: (tgt_lang, src_lang, rows)."""
    return [(spec["tgt_lang"], spec["src_lang"], read_pseudo_pairs(spec["file"])) for spec in specs]
