"""Backretrieval (Fain et al. 2021, "Backretrieval: an image-pivoted evaluation metric for
cross-lingual text representations without parallel corpora", seed 002).

- `backretrieval_ranks` (002 section 2, steps 1-4): for each source text T_S^q, the most similar
  target text T_T* (cosine of the sentence vectors), its image I_T*, and the rank of the query's
  own image I_S^q among all source images sorted by image similarity g(I_T*, I_S) (cosine of the
  image features, as the paper's g). BkR = Recall@K of these ranks (the paper uses K = 10).
- `paired_ranks` gives the ground-truth cross-lingual retrieval XLR (002 section 3): with
  parallel texts (line i of source and target are translations), the rank of target i among all
  targets for source i; XLR = Recall@K.
- `corr` (002 section 3, the baseline CORR): Spearman's rank correlation between the text cosine
  distances and the image cosine distances of the source-target pairs (i, j).

Ranks count the items scoring strictly higher, plus one (ties in favour of the gold item, as
embeddings.evaluate.paired_ranks). Everything runs in blocks of rows (torch), so no N x N
matrix is held beyond one block, except for CORR's sample of pairs.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

BLOCK = 1024


def _unit(a: np.ndarray) -> torch.Tensor:
    return F.normalize(torch.from_numpy(np.asarray(a, dtype=np.float32)), dim=-1)


@torch.no_grad()
def nearest_index(queries: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
    """For each query row, the item row with the largest dot product (ties: the first)."""
    out = torch.empty(len(queries), dtype=torch.long)
    for s in range(0, len(queries), BLOCK):
        sims = queries[s:s + BLOCK] @ items.t()
        out[s:s + BLOCK] = (sims == sims.max(1, keepdim=True).values).int().argmax(1)
    return out


@torch.no_grad()
def gold_ranks(queries: torch.Tensor, items: torch.Tensor, gold: torch.Tensor) -> np.ndarray:
    """1-based rank of items[gold[i]] for queries[i] among all items (dot products)."""
    ranks = np.empty(len(queries), dtype=np.int64)
    for s in range(0, len(queries), BLOCK):
        sims = queries[s:s + BLOCK] @ items.t()
        g = sims.gather(1, gold[s:s + BLOCK, None])
        ranks[s:s + BLOCK] = ((sims > g).sum(1) + 1).numpy()
    return ranks


def backretrieval_ranks(src_text: np.ndarray, tgt_text: np.ndarray, src_images: np.ndarray,
                        tgt_images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rank of each source text's own image, index of its retrieved target text): 002 steps 1-4.
    Text vectors and image features are compared by cosine (rows normalised here)."""
    st, tt = _unit(src_text), _unit(tgt_text)
    si, ti = _unit(src_images), _unit(tgt_images)
    retrieved = nearest_index(st, tt)                              # step 2: T_T*
    ranks = gold_ranks(ti[retrieved], si, torch.arange(len(st)))   # steps 3-4: I_T* against every I_S
    return ranks, retrieved.numpy()


def paired_ranks(src_text: np.ndarray, tgt_text: np.ndarray) -> np.ndarray:
    """XLR ranks: the rank of target i for source i (parallel texts), cosine."""
    return gold_ranks(_unit(src_text), _unit(tgt_text), torch.arange(len(src_text)))


def recalls(ranks: np.ndarray, ks: list[int]) -> dict:
    """{"r@k": percent of ranks <= k}."""
    return {f"r@{k}": float(100 * np.mean(ranks <= k)) for k in ks}


def average_ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks of a 1-d tensor, tied values sharing the mean of their ranks (as
    scipy.stats.rankdata 'average')."""
    ordered, order = torch.sort(values, stable=True)
    _, inverse, counts = torch.unique_consecutive(ordered, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    mean_rank = ends - (counts.double() - 1) / 2
    ranks = torch.empty_like(ends[inverse])
    ranks[order] = mean_rank[inverse]
    return ranks


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman's rho: Pearson's r of the average ranks (float64)."""
    ra, rb = average_ranks(a.double()), average_ranks(b.double())
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = torch.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / denom) if denom > 0 else float("nan")


@torch.no_grad()
def corr(src_text: np.ndarray, tgt_text: np.ndarray, src_images: np.ndarray, tgt_images: np.ndarray,
         max_pairs: int = 1_000_000, seed: int = 0) -> dict:
    """002's CORR: Spearman between text distances 1 - cos(f(T_S^i), f(T_T^j)) and image distances
    1 - cos(I_S^i, I_T^j) over all source-target pairs (i, j), or over `max_pairs` of them drawn
    uniformly (with a fixed seed) when there are more."""
    n, m = len(src_text), len(tgt_text)
    st, tt, si, ti = _unit(src_text), _unit(tgt_text), _unit(src_images), _unit(tgt_images)
    if n * m <= max_pairs:
        text = (1 - st @ tt.t()).reshape(-1)
        image = (1 - si @ ti.t()).reshape(-1)
        used = n * m
    else:
        flat = torch.from_numpy(np.random.default_rng(seed).choice(n * m, size=max_pairs, replace=False))
        text, image = torch.empty(max_pairs), torch.empty(max_pairs)
        for s in range(0, max_pairs, 16 * BLOCK):   # pairs in chunks: no (pairs x dim) copy of the vectors
            i, j = flat[s:s + 16 * BLOCK] // m, flat[s:s + 16 * BLOCK] % m
            text[s:s + 16 * BLOCK] = 1 - (st[i] * tt[j]).sum(1)
            image[s:s + 16 * BLOCK] = 1 - (si[i] * ti[j]).sum(1)
        used = max_pairs
    return {"spearman": spearman(text, image), "pairs": int(used), "all_pairs": used == n * m}
