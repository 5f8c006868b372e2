"""Word-embedding alignment with a bilingual dictionary, as in AME (Mohammadshahi et al. 2019,
"Aligning multilingual word embeddings for cross-modal retrieval task", seed 004).

- `rcsls_loss`: the RCSLS objective of Joulin et al. (2018), 004 eq. 3, summed with the ranking
  loss as 004 eq. 4 (L_total = L_R + L_A; here L_R + align_weight * L_A, align_weight 1 = the
  paper). Word vectors are l2-normalised (as 004 says), W maps source words towards target words.
- `alignment_ratio`: 004's "alignment ratio" (Tables 1-4, Figure 2). The paper does not write it
  down; its released code (AME-CMR, model.py compute_nn_accuracy) computes, per direction, the
  share of the dictionary's source words whose nearest neighbour (cosine) among all target words,
  after mapping, is one of their dictionary translations: word-translation precision@1 with
  nearest-neighbour retrieval over the dictionary pairs whose words are both in the vocabularies.

Dictionary pairs are read once and turned into word-id pairs of the model's vocabularies
(`dictionary_pairs`); everything else is vectorised torch on those id tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from rerank.errors import InputError
from rerank.io import iter_lines

FIRST_WORD = 2   # ids 0 and 1 are <pad> and <unk> (embeddings.vocab): never neighbours


def read_dictionary(path: str) -> list[tuple[str, str]]:
    """Word pairs of a bilingual dictionary (MUSE format: `source<TAB or space>target` per line,
    lower-cased here as the vocabularies are). Errors name FILE:LINE."""
    pairs = []
    for number, line in iter_lines(path):
        fields = line.split()
        if len(fields) != 2:
            raise InputError(f"expected two words (source and target) separated by a tab or space, found "
                             f"{len(fields)} field(s)", path, number)
        pairs.append((fields[0].lower(), fields[1].lower()))
    if not pairs:
        raise InputError("the dictionary has no word pairs", path)
    return pairs


def dictionary_pairs(entries: list[tuple[str, str]], src_vocab, tgt_vocab) -> np.ndarray:
    """(n, 2) int64 word-id pairs (source id, target id) of the entries whose words are both in the
    vocabularies (unknown words dropped), without repeats, in the dictionary's order."""
    get_s, get_t = src_vocab.index.get, tgt_vocab.index.get
    seen, out = set(), []
    for s, t in entries:
        i, j = get_s(s, 1), get_t(t, 1)
        if i >= FIRST_WORD and j >= FIRST_WORD and (i, j) not in seen:
            seen.add((i, j))
            out.append((i, j))
    return np.asarray(out, dtype=np.int64).reshape(-1, 2)


def _neighbourhood(table: torch.Tensor, limit: int | None) -> torch.Tensor:
    """The normalised word vectors that may be neighbours: ids 2.. (the first `limit` of them,
    the most frequent words, when given)."""
    stop = table.shape[0] if limit is None else min(table.shape[0], FIRST_WORD + limit)
    return F.normalize(table[FIRST_WORD:stop], dim=-1)


def rcsls_loss(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor | None, pairs: torch.Tensor, knn: int = 10,
               neighbours: int | None = None) -> torch.Tensor:
    """RCSLS (Joulin et al. 2018; 004 eq. 3) for dictionary pairs (x_i, y_i):

        L_A = 1/n sum_i [ -2 x_i^T W^T y_i + 1/k sum_{y_j in N_Y(W x_i)} x_i^T W^T y_j
                                           + 1/k sum_{W x_j in N_X(y_i)} x_j^T W^T y_i ]

    x, y: the source and target word-embedding tables (rows = word ids, rows l2-normalised here);
    w: the map W (d x d), None for the identity; pairs: (n, 2) id pairs. N_Y(W x_i) are the k
    target words with the largest x_i^T W^T y_j, N_X(y_i) the k source words with the largest
    x_j^T W^T y_i, both among all words of the vocabulary but <pad>/<unk> (or its `neighbours`
    most frequent ones, as Joulin et al.'s maxneg). The gradient reaches W and both tables."""
    xs = F.normalize(x[pairs[:, 0]], dim=-1)
    yt = F.normalize(y[pairs[:, 1]], dim=-1)
    wx = xs if w is None else xs @ w.t()                      # rows (W x_i)^T
    wty = yt if w is None else yt @ w                         # rows (W^T y_i)^T
    cand_y, cand_x = _neighbourhood(y, neighbours), _neighbourhood(x, neighbours)
    to_y = (wx @ cand_y.t()).topk(min(knn, cand_y.shape[0]), dim=1).values.mean(1)
    to_x = (wty @ cand_x.t()).topk(min(knn, cand_x.shape[0]), dim=1).values.mean(1)
    return (-2 * (wx * yt).sum(-1) + to_y + to_x).mean()


@torch.no_grad()
def project_spectral(w: torch.Tensor) -> None:
    """Clip W's singular values to [0, 1] in place: the projection onto the convex hull of the
    orthogonal matrices that Joulin et al. (2018) apply after every step (004: W is constrained
    to be orthogonal). Without it the loss, linear in W, falls without bound as W grows."""
    u, s, vh = torch.linalg.svd(w)
    w.copy_((u * s.clamp(0.0, 1.0)) @ vh)


@torch.no_grad()
def _nn_accuracy(queries: torch.Tensor, cands: torch.Tensor, query_ids: torch.Tensor, gold: torch.Tensor,
                 n_cand_ids: int, block: int = 1024) -> float:
    """Share of queries whose nearest candidate (dot product of unit rows; ties: the lowest id) is
    gold: `gold` holds codes query_id * n_cand_ids + candidate_id of the correct pairs."""
    hits = 0
    for s in range(0, len(query_ids), block):
        ids = query_ids[s:s + block]
        best = (queries[ids] @ cands.t()).argmax(1) + FIRST_WORD
        hits += int(torch.isin(ids * n_cand_ids + best, gold).sum())
    return hits / max(1, len(query_ids))


@torch.no_grad()
def alignment_ratio(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor | None, pairs: torch.Tensor) -> dict:
    """004's alignment ratio, in percent, both directions, over the dictionary `pairs` (n, 2):

    src->tgt: the share of the distinct source words of the pairs whose nearest target word by
    cosine (W x_s against every target word but <pad>/<unk>) is one of their translations;
    tgt->src: the same for target words y_t against the mapped source words W x. `mean` is their
    average. The source vectors are normalised, mapped and normalised again (as AME's code)."""
    mapped = F.normalize(x.float(), dim=-1)
    if w is not None:
        mapped = F.normalize(mapped @ w.float().t(), dim=-1)
    target = F.normalize(y.float(), dim=-1)
    src, tgt = pairs[:, 0], pairs[:, 1]
    vs, vt = x.shape[0], y.shape[0]
    forward = _nn_accuracy(mapped, target[FIRST_WORD:], torch.unique(src), src * vt + tgt, vt)
    backward = _nn_accuracy(target, mapped[FIRST_WORD:], torch.unique(tgt), tgt * vs + src, vs)
    return {"src->tgt": 100 * forward, "tgt->src": 100 * backward, "mean": 50 * (forward + backward),
            "pairs": int(len(pairs)), "src_words": int(len(torch.unique(src))), "tgt_words": int(len(torch.unique(tgt)))}


@dataclass
class Aligner:
    """The alignment task of one run or evaluation: the language pair, the dictionary's word-id
    pairs (precomputed, on the device) and the loss settings."""

    src: str
    tgt: str
    pairs: torch.Tensor
    path: str
    entries: int
    knn: int = 10
    batch: int | None = 1024
    neighbours: int | None = None

    @classmethod
    def build(cls, path: str, src: str, tgt: str, vocabs: dict, device="cpu", **settings) -> "Aligner":
        """Read the dictionary and keep the pairs of known words; InputError if none is left."""
        entries = read_dictionary(path)
        pairs = dictionary_pairs(entries, vocabs[src], vocabs[tgt])
        if not len(pairs):
            raise InputError(f"none of the {len(entries)} dictionary pairs has both words in the {src} and {tgt} "
                             f"vocabularies (is it a {src}-{tgt} dictionary?)", path)
        return cls(src, tgt, torch.from_numpy(pairs).to(device), path, len(entries), **settings)

    def _tables(self, model):
        return model.embed[self.src].weight, model.embed[self.tgt].weight, model.align_map(self.src, self.tgt)

    def loss(self, model, seed: int, step: int) -> torch.Tensor:
        """RCSLS on `batch` dictionary pairs drawn without replacement, fixed by (seed, step) so that
        a resumed run (and every DDP rank) draws the same ones; all pairs if batch is None."""
        pairs = self.pairs
        if self.batch is not None and self.batch < len(pairs):
            pick = np.random.default_rng([seed, step, 3]).choice(len(pairs), self.batch, replace=False)
            pairs = pairs[torch.from_numpy(pick).to(pairs.device)]
        x, y, w = self._tables(model)
        return rcsls_loss(x, y, w, pairs, self.knn, self.neighbours)

    def project(self, model) -> None:
        """After each optimiser step: keep the learned W in the unit spectral ball."""
        w = model.align_map(self.src, self.tgt)
        if w is not None:
            project_spectral(w)

    def ratio(self, model) -> dict:
        x, y, w = self._tables(model)
        return {"languages": f"{self.src}-{self.tgt}", **alignment_ratio(x.detach(), y.detach(),
                                                                         None if w is None else w.detach(), self.pairs)}

    def describe(self) -> str:
        return (f"alignment {self.src}-{self.tgt}: {len(self.pairs)} dictionary pairs with both words known "
                f"(of {self.entries} in {self.path})")
