"""N-best lists from decoders' results in memory: CTranslate2 and Hugging Face transformers.

    results = translator.translate_batch(batch, beam_size=N, num_hypotheses=N, return_scores=True)
    nbest = from_ctranslate2(results, tokenizer.convert_tokens_to_string)

    output = model.generate(**inputs, num_beams=N, num_return_sequences=N,
                            output_scores=True, return_dict_in_generate=True)
    nbest = from_generate(output, tokenizer, N)

Each returns an NBestList with one feature column, the decoder's own score (`score_name`), in
the decoder's order (best first), and no total score. The result objects are taken duck-typed:
this core module imports neither torch, transformers nor ctranslate2.

What each score is, checked in the libraries' sources (tests/test_decoder_results.py checks the
numbers), is in each function's docstring. Sources: CTranslate2 src/decoding.cc
(finalize_hypothesis_score: `score /= std::pow(length, length_penalty)`; LogSoftMax after
disable_tokens), include/ctranslate2/decoding.h (include_eos_in_hypotheses = true),
src/models/sequence_to_sequence.cc (the end token removed after decoding), CHANGELOG v3.0.0
(normalize_scores removed, PR OpenNMT/CTranslate2#968); transformers/generation/utils.py,
GenerationMixin._beam_search (log_softmax, then logits_processor) and _update_finished_beams
(`topk_log_probs / ((cur_len + 1 - decoder_prompt_len) ** length_penalty)`; before 4.36, PR
huggingface/transformers#27351, the length counted the decoder start token and the prompt too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from numbers import Integral

import numpy as np

from rerank.errors import InputError
from rerank.nbest import NBestList

__all__ = ["from_ctranslate2", "from_generate"]


def _joined(tokens: Sequence[str]) -> str:
    return " ".join(tokens)


def from_ctranslate2(results: Iterable, detokenize: Callable[[list[str]], str] | None = None, *,
                     score_name: str = "score") -> NBestList:
    """The n-best list of CTranslate2 `translate_batch` results, one list per source.

    `results`: what `translator.translate_batch(batch, beam_size=N, num_hypotheses=N,
    return_scores=True)` returns, a `ctranslate2.TranslationResult` per source (an
    `AsyncTranslationResult` of asynchronous=True is waited for); each has `.hypotheses`, lists
    of tokens best first, and `.scores`. `detokenize(tokens) -> str` makes a hypothesis's text
    (default: the tokens joined by spaces; for a Hugging Face tokenizer,
    `tokenizer.convert_tokens_to_string`; for SentencePiece, `sp.decode`).

    The column `score_name` holds CTranslate2's score unchanged: the summed log-probabilities of
    the hypothesis's tokens and of its end token, divided by length ** length_penalty, where the
    length counts the end token (len(tokens) + 1, or len(tokens) with return_end_token=True; the
    step count for a hypothesis cut by max_decoding_length). With the default length_penalty=1 it is the average log-probability
    per token; with length_penalty=0 the sum. The log-softmax leaves out the tokens decoding
    disables at a step (the end token before min_decoding_length, 1 by default). The same holds
    under random sampling (sampling_topk != 1): the log-probabilities are the model's, before
    temperature. A coverage_penalty is added on top. With min_decoding_length=0 and none of the
    options that disable tokens, score * length ** length_penalty is the sum of `score_batch`'s
    log_probs over the same tokens. A result without scores (return_scores=False, the default) is
    an InputError.
    """
    detokenize = detokenize or _joined
    hyps: list[list[str]] = []
    scores: list[np.ndarray] = []
    for i, result in enumerate(results):
        if not hasattr(result, "hypotheses") and callable(getattr(result, "result", None)):
            result = result.result()  # AsyncTranslationResult
        hypotheses, values = getattr(result, "hypotheses", None), getattr(result, "scores", None)
        if hypotheses is None or values is None:
            raise InputError(f"result {i} is a {type(result).__name__}, not a ctranslate2.TranslationResult "
                             "(with .hypotheses and .scores)")
        if len(values) == 0 and len(hypotheses):
            raise InputError(f"result {i} has no scores: decode with return_scores=True "
                             "(translator.translate_batch(..., return_scores=True))")
        if len(values) != len(hypotheses):
            raise InputError(f"result {i} has {len(hypotheses)} hypotheses and {len(values)} scores")
        texts = [detokenize(list(tokens)) for tokens in hypotheses]
        bad = next((t for t in texts if not isinstance(t, str)), None)
        if bad is not None:
            raise InputError(f"detokenize returned a {type(bad).__name__}, not a str, for result {i}")
        hyps.append(texts)
        scores.append(np.asarray(values, dtype=np.float64).reshape(-1, 1))
    return NBestList.from_lists(hyps, scores, [score_name])


def from_generate(output, tokenizer, num_return_sequences: int, *, score_name: str = "score",
                  skip_special_tokens: bool = True) -> NBestList:
    """The n-best list of a Hugging Face beam search, `num_return_sequences` hypotheses per input.

    `output`: what `model.generate(**inputs, num_beams=N, num_return_sequences=N,
    output_scores=True, return_dict_in_generate=True)` returns for an encoder-decoder model
    (Marian/OPUS-MT, NLLB, M2M-100, mBART, T5): `.sequences`, rows grouped N per input, best
    first, and `.sequences_scores`. The texts are `tokenizer.batch_decode(output.sequences,
    skip_special_tokens=skip_special_tokens)`. (A decoder-only model's sequences begin with the
    prompt, which would be decoded into every hypothesis: this function is for encoder-decoder
    models.)

    The column `score_name` holds `output.sequences_scores` unchanged: the beam score, the
    summed log-probabilities of the generated tokens divided by
    generated_length ** length_penalty (the generation config's length_penalty, default 1.0:
    the average log-probability per token; 0 gives the sum). The generated length counts every
    token after the decoder start token up to and including EOS (a forced BOS or EOS counts),
    not the start token or the padding. The log-probabilities are the model's log-softmax over
    the whole vocabulary after the logits processors, so a token forced by forced_eos_token_id
    or forced_bos_token_id adds 0 and a banned one (bad_words_ids) is set to -inf without
    renormalising the others. `sequences_scores` thus equals
    `model.compute_transition_scores(output.sequences, output.scores, output.beam_indices,
    normalize_logits=False).sum(1) / generated_length ** length_penalty`.

    Greedy search and sampling return no `sequences_scores`, and this function refuses them
    (InputError) rather than make a score up: the `output.scores` of those modes are the logits
    after the processors and warpers (temperature, top-k/top-p), not log-probabilities, so
    their sum is neither the beam score nor the model's log p(hypothesis | source). Decode with
    beam search instead, or build the list of sampled texts with `NBestList.from_lists` and
    score it with the `direct` feature (`rerank features --direct-model DIR`), which computes
    the model's log p(hypothesis | source) teacher-forced.
    """
    sequences = getattr(output, "sequences", None)
    if sequences is None:
        raise InputError(f"generate returned a {type(output).__name__}, not a generation output: call "
                         "model.generate(..., return_dict_in_generate=True, output_scores=True)")
    if not hasattr(output, "sequences_scores"):
        raise InputError(f"a {type(output).__name__} (greedy search or sampling) has no sequence scores: decode "
                         "with beam search (num_beams=N, num_return_sequences=N, output_scores=True), or score "
                         "sampled hypotheses with the direct feature")
    if output.sequences_scores is None:
        raise InputError("the beam search output has no sequences_scores: decode with output_scores=True "
                         "(and return_dict_in_generate=True)")
    if isinstance(num_return_sequences, bool) or not isinstance(num_return_sequences, Integral) or num_return_sequences < 1:
        raise InputError(f"num_return_sequences must be a positive int, not {num_return_sequences!r}")
    n = int(num_return_sequences)
    rows = len(sequences)
    values = np.asarray(_as_list(output.sequences_scores), dtype=np.float64).reshape(-1)
    if rows % n:
        raise InputError(f"{rows} sequences are not groups of num_return_sequences={n}: "
                         "give the num_return_sequences that generate was called with")
    if len(values) != rows:
        raise InputError(f"{rows} sequences but {len(values)} sequences_scores")
    texts = tokenizer.batch_decode(sequences, skip_special_tokens=skip_special_tokens)
    groups = range(0, rows, n)
    return NBestList.from_lists([texts[g:g + n] for g in groups], [values[g:g + n].reshape(-1, 1) for g in groups],
                                [score_name])


def _as_list(values) -> list:
    """A tensor's or an array's values as Python numbers (`tolist` of a torch tensor on any device, bf16
    included, or of an array)."""
    return values.tolist() if hasattr(values, "tolist") else list(values)
