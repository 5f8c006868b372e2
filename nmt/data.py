"""Reading parallel text, encoding it with vocabularies, and length-sorted batching."""

from __future__ import annotations

import os
import logging
import random

import torch

from rerank.nmt.vocab import EOS_ID, PAD_ID, SubwordVocab, Tokenizer, Vocab
from rerank.errors import InputError
from rerank.io import read_lines

log = logging.getLogger(__name__)


def split_paths(data_dir: str, split: str, src_lang: str, tgt_lang: str) -> tuple[str, str]:
    """<data_dir>/<split>.<lang>[.gz] for the two languages (the .gz file if it exists)."""
    out = []
    for lang in (src_lang, tgt_lang):
        path = os.path.join(data_dir, f"{split}.{lang}")
        out.append(path + ".gz" if os.path.exists(path + ".gz") else path)
    return out[0], out[1]


def read_parallel(src_path: str, tgt_path: str) -> tuple[list[str], list[str]]:
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise InputError(f"{len(src)} source lines but {len(tgt)} target lines in {tgt_path}", src_path)
    return src, tgt


def encode_source(lines: list[str], tok: Tokenizer, vocab: Vocab | SubwordVocab, max_len: int, path: str = "<input>",
                  warn=True) -> list[list[int]]:
    """Token ids + </s> per line. Documented behaviour for odd input (never a dropped line):
    an empty line is encoded as </s> alone; a line longer than `max_len` tokens is cut to
    `max_len` tokens; unknown words/characters become <unk>. Warnings are logged (this module's logger)."""
    out = []
    for number, line in enumerate(lines, start=1):
        toks = tok.tokenize(line)
        if warn and not toks:
            log.warning(f"warning: {path}:{number}: empty source line, translated from </s> alone")
        if len(toks) > max_len:
            if warn:
                log.warning(f"warning: {path}:{number}: {len(toks)} tokens, cut to the first {max_len}")
            toks = toks[:max_len]
        out.append(vocab.encode(toks) + [EOS_ID])
    return out


def pad(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    out = torch.full((len(seqs), int(lengths.max())), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out, lengths


def length_batches(lengths: list[int], batch_size: int, shuffle: bool, rng: random.Random | None = None) -> list[list[int]]:
    """Indices grouped into batches of similar length (stable sort); batch order shuffled if asked."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    if shuffle:
        assert rng is not None, "shuffle needs rng"
        # sort within noisy length buckets so batches differ between epochs
        noisy = {i: lengths[i] + rng.random() * 2 for i in order}
        order = sorted(order, key=lambda i: noisy[i])
    batches = [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
    if shuffle:
        assert rng is not None
        rng.shuffle(batches)
    return batches
