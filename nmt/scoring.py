"""Scoring behind the `channel` and `lm` features (nmt/features.py): teacher-forced log-probabilities
of sources under a reverse NMT model, distinct (sentence, hypothesis) pairs, torch threads."""

from __future__ import annotations

import numpy as np
import torch

from rerank.nmt.data import length_batches, pad
from rerank.nmt.lm import encode_lines
from rerank.nmt.vocab import Tokenizer
from rerank import distributed
from rerank.dedup import distinct_index
from rerank.progress import Progress, track


def distinct_pairs(nbest) -> tuple[list[tuple[int, str]], np.ndarray]:
    """(distinct (sentence, hypothesis) pairs, index of every row's pair)."""
    index, pairs = distinct_index(zip(nbest.sentence_of_hyp.tolist(), nbest.hyps))
    return pairs, index


@torch.no_grad()
def channel_scores(run_dir: str, inputs: list[str], outputs: list[str], device="cpu", batch_size: int = 64,
                   progress: Progress = False) -> tuple[np.ndarray, np.ndarray]:
    """(log p(output_i | input_i), output tokens incl. </s>) under the `rerank nmt train` model in
    run_dir: the channel feature's log p(source | hypothesis) under a reverse model, and the
    direct and r2l features' log p(hypothesis | source) under a forward one. Under torchrun the
    ranks tokenise a part of the pairs each and score whole batches of the one-process batching
    (rerank.distributed), so the scores are those of one process."""
    from rerank.nmt.checkpoint import load_model

    model, src_vocab, tgt_vocab, config = load_model(run_dir, "best", device)
    train = config["train"]

    def encode(a: int, b: int):
        return (encode_lines(inputs[a:b], Tokenizer(train["src_lang"]), src_vocab, 200),
                encode_lines(outputs[a:b], Tokenizer(train["tgt_lang"]), tgt_vocab, 200))

    parts = distributed.map_parts(encode, len(inputs))
    in_ids = [ids for part in parts for ids in part[0]]
    out_ids = [ids for part in parts for ids in part[1]]
    batches = length_batches([len(h) for h in in_ids], batch_size, shuffle=False)

    def score(a: int, b: int) -> np.ndarray:
        values = []
        for batch in track(batches[a:b], progress, "nmt scores", unit="batch"):
            src, src_len = pad([in_ids[i] for i in batch])
            tgt, _ = pad([out_ids[i] for i in batch])
            values.append(model.score(src.to(device), src_len.to(device), tgt.to(device)).cpu().numpy())
        return np.concatenate(values)

    scores = np.zeros(len(inputs))
    scores[[i for batch in batches for i in batch]] = distributed.concat(
        distributed.map_parts(score, len(batches), padded_sizes(batches, in_ids, out_ids)))
    return scores, np.array([len(s) for s in out_ids], dtype=np.float64)


def padded_sizes(batches: list[list[int]], *id_lists: list[list[int]]) -> list[int]:
    """Padded tokens of every batch (rows x longest row, summed over the id lists): the weights by
    which the ranks share the batches."""
    return [sum(len(batch) * max(len(ids[i]) for i in batch) for ids in id_lists) for batch in batches]
