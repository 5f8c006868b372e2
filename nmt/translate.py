"""Translate files with a trained model: Moses n-best lists, 1-best text, and evaluation helpers
(1-best BLEU/TER, the sentence-BLEU+1 oracle of an n-best list)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import sacrebleu

from rerank.nmt.beam import beam_search, greedy
from rerank.nmt.data import encode_source, length_batches, pad
from rerank.nmt.vocab import Tokenizer
from rerank.progress import Progress, track

log = logging.getLogger(__name__)

FEATURE_NAMES = ["nmt", "nmt_norm", "len"]


@dataclass(frozen=True)
class Search:
    """How `decode` and `translate` search: the beam size (1: greedy search), the n-best size (None:
    the beam size), sentences per batch, the length normalisation exponent `alpha` (score =
    logprob / length^alpha; 0: none), the longest target (`max_len_ratio` x source length +
    `max_len_extra` tokens) and the source tokens kept (`max_src_len`, a longer line is cut)."""

    beam: int = 20
    nbest: int | None = None
    batch_size: int = 32
    alpha: float = 1.0
    max_len_ratio: float = 2.0
    max_len_extra: int = 5
    max_src_len: int = 200


def decode(model, src_vocab, lines: list[str], src_lang: str, search: Search = Search(), *, device: str = "cpu",
           path: str = "<input>", progress: Progress = False) -> list[list]:
    """The finished hypotheses (rerank.nmt.beam.Hypothesis, best first) of every input line, in
    order: beam search in batches of similar lengths (greedy search for beam 1), as `search` says."""
    s = search
    ids = encode_source(lines, Tokenizer(src_lang), src_vocab, s.max_src_len, path=path)
    results: list = [None] * len(ids)
    batches = length_batches([len(x) for x in ids], s.batch_size, shuffle=False)
    tables = model.step_tables()
    for batch in track(batches, progress, f"beam {s.beam}", unit="batch"):
        src, src_len = pad([ids[i] for i in batch])
        src, src_len = src.to(device), src_len.to(device)
        if s.beam == 1:
            found = [[h] for h in greedy(model, src, src_len, s.max_len_ratio, s.max_len_extra, s.alpha, tables)]
        else:
            found = beam_search(model, src, src_len, s.beam, s.beam, s.max_len_ratio, s.max_len_extra, s.alpha, tables)
        for i, hyps in zip(batch, found):
            results[i] = hyps
    return results


def translate(model, src_vocab, tgt_vocab, lines: list[str], src_lang: str, tgt_lang: str, search: Search = Search(),
              *, device: str = "cpu", path: str = "<input>", progress: Progress = True):
    """For every input line (in order, none dropped), a list of (detokenised hypothesis, features
    [nmt, nmt_norm, len], total) sorted by total = nmt_norm (alpha > 0) or nmt (alpha = 0), searched
    as `search` says.

    Hypotheses whose detokenised text repeats a better one are removed, so a sentence can get
    fewer than `search.nbest` entries only if fewer distinct finished hypotheses exist (a warning says so).
    """
    nbest, alpha = search.beam if search.nbest is None else search.nbest, search.alpha
    tgt_tok = Tokenizer(tgt_lang)
    found = decode(model, src_vocab, lines, src_lang, search, device=device, path=path, progress=progress)
    results = []
    for i, hyps in enumerate(found):
        seen, entries = set(), []
        for h in hyps:
            words = tgt_vocab.decode(h.tokens)
            text = tgt_tok.detokenize(words)
            if text in seen:
                continue
            seen.add(text)
            # 4 decimals keep the shipped files small; the order by total is unchanged
            feats = np.round(np.array([h.logprob, h.norm, float(len(words))]), 4)
            entries.append((text, feats, float(feats[1] if alpha > 0 else feats[0])))
            if len(entries) == nbest:
                break
        if len(entries) < nbest:
            log.warning(f"warning: {path}:{i + 1}: only {len(entries)} distinct hypotheses (asked for {nbest})")
        results.append(entries)
    return results


def write_nbest(results, path: str) -> None:
    """Moses n-best: `id ||| hyp ||| nmt= x nmt_norm= y len= n ||| total`, ids 0-based."""
    from rerank.formats import write_nbest as rerank_write
    from rerank.nbest import NBestList

    nb = NBestList.from_lists([[e[0] for e in r] for r in results], [np.stack([e[1] for e in r]) for r in results],
                              FEATURE_NAMES, [np.array([e[2] for e in r]) for r in results])
    rerank_write(nb, path, fmt="moses")


def write_1best(results, path: str) -> None:
    from rerank.io import atomic_write
    with atomic_write(path) as f:
        for entries in results:
            f.write((entries[0][0] if entries else "") + "\n")


def bleu_ter(hyps: list[str], refs: list[str]) -> dict:
    """Corpus BLEU and TER, sacrebleu's numbers (TER through the toolkit's TER, rerank.metrics.ter)."""
    from rerank.metrics import make_metric

    return {"bleu": sacrebleu.corpus_bleu(hyps, [refs]).score, "ter": make_metric("ter").corpus_score(hyps, [refs])}


def oracle_bleu(nbest_hyps: list[list[str]], refs: list[str]) -> float:
    """Corpus BLEU of each list's sentence-BLEU+1 best hypothesis: the pick `rerank oracle` makes."""
    from rerank.nbest import NBestList
    from rerank.oracles import oracle

    lists = NBestList.from_lists(nbest_hyps, [np.zeros((len(h), 0)) for h in nbest_hyps], [])
    return oracle(lists, [refs]).score


def translate_file(run_dir: str, input_path: str, nbest_out: str, beam: int, nbest: int | None = None,
                   device: str = "cpu", checkpoint: str = "best", batch_size: int = 32, progress: Progress = True):
    """Translate a source file with a trained run directory and write its Moses n-best list."""
    from rerank.nmt.train import load_model
    from rerank.device import resolve_device
    from rerank.io import read_lines

    device = resolve_device(device)
    model, src_vocab, tgt_vocab, config = load_model(run_dir, checkpoint, device)
    results = translate(model, src_vocab, tgt_vocab, read_lines(input_path), config["train"]["src_lang"],
                        config["train"]["tgt_lang"], Search(beam=beam, nbest=nbest, batch_size=batch_size),
                        device=device, path=input_path, progress=progress)
    write_nbest(results, nbest_out)
    return results
