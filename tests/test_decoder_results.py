"""N-best lists from decoders' results in memory (rerank.formats.decoders): CTranslate2's
translate_batch and transformers' generate on the tiny random-weight Marian of
rerank.recipes.tiny_models and its CTranslate2 conversion. Properties, not pinned values: the
list holds the decoder's hypotheses in its order, as the backend decodes them; its column is the
backend's own score to the bit; that score is what the module's docstring says (the summed
log-probabilities over length ** length_penalty, with the length each library counts); the list
survives Moses; bad input is an InputError that says what to do."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from rerank.errors import InputError
from rerank.formats import read_nbest, write_nbest
from rerank.formats.decoders import from_ctranslate2, from_generate

pytestmark = pytest.mark.neural

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SOURCES = ["Ein Mann in einem roten Hemd fährt Fahrrad.", "Zwei Hunde rennen auf dem Gras.", "Ein Mädchen."]
N, MAX_LEN = 4, 10


@pytest.fixture(scope="module")
def hf(tiny):
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    torch.set_num_threads(1)
    return AutoTokenizer.from_pretrained(tiny["marian"]), AutoModelForSeq2SeqLM.from_pretrained(tiny["marian"]).eval()


@pytest.fixture(scope="module")
def ct2(tiny):
    import ctranslate2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny["marian_ct2"])
    translator = ctranslate2.Translator(tiny["marian_ct2"], device="cpu", intra_threads=1)
    source = [tokenizer.convert_ids_to_tokens(tokenizer(s)["input_ids"]) for s in SOURCES]
    return tokenizer, translator, source


def generate(hf, **options):
    tokenizer, model = hf
    inputs = tokenizer(SOURCES, return_tensors="pt", padding=True)
    settings = dict(num_beams=N, num_return_sequences=N, output_scores=True, return_dict_in_generate=True,
                    max_new_tokens=MAX_LEN)
    return model.generate(**inputs, **{**settings, **options})


def translate(ct2, **options):
    _, translator, source = ct2
    return translator.translate_batch(source, **{"beam_size": N, "num_hypotheses": N, "return_scores": True,
                                                 "max_decoding_length": MAX_LEN, **options})


def per_sentence_order_is_best_first(nbest) -> bool:
    column = nbest.features[:, 0]
    return all(np.all(np.diff(column[nbest.sentence(i)]) <= 0) for i in range(nbest.n_sentences))


# ---- CTranslate2 ----------------------------------------------------------------------------

def test_ctranslate2_list_is_the_decoders_hypotheses_and_scores(ct2):
    tokenizer = ct2[0]
    results = translate(ct2)
    nbest = from_ctranslate2(results, tokenizer.convert_tokens_to_string)
    assert nbest.n_sentences == len(SOURCES) and list(nbest.sizes) == [N] * len(SOURCES)
    assert list(nbest.hyps) == [tokenizer.convert_tokens_to_string(h) for r in results for h in r.hypotheses]
    assert nbest.feature_names == ["score"] and nbest.scores is None
    assert np.array_equal(nbest.features[:, 0], [s for r in results for s in r.scores])  # to the bit
    assert per_sentence_order_is_best_first(nbest)
    plain = from_ctranslate2(results, score_name="ct2")  # default: the tokens joined by spaces
    assert list(plain.hyps) == [" ".join(h) for r in results for h in r.hypotheses]
    assert plain.feature_names == ["ct2"] and np.array_equal(plain.features, nbest.features)


def test_ctranslate2_asynchronous_results_give_the_same_list(ct2):
    waited, plain = from_ctranslate2(translate(ct2, asynchronous=True)), from_ctranslate2(translate(ct2))
    assert list(waited.hyps) == list(plain.hyps) and np.array_equal(waited.features, plain.features)
    assert np.array_equal(waited.offsets, plain.offsets)


def _ct2_relation(ct2, results, end_token):
    """Per hypothesis: CTranslate2's score, score_batch's summed log-probabilities of the same tokens
    (and of the end token when the hypothesis ended on it), the length counting that end token,
    and whether it ended."""
    _, translator, source = ct2
    score, total, length, ended = [], [], [], []
    for src, result in zip(source, results):
        for tokens, value in zip(result.hypotheses, result.scores):
            stopped = len(tokens) < MAX_LEN
            target = tokens + [end_token] if stopped and end_token else tokens
            log_probs = translator.score_batch([src], [target])[0].log_probs  # appends the model's EOS
            n = len(tokens) + 1 if stopped else len(tokens)
            score.append(value), total.append(float(np.sum(log_probs[:n]))), length.append(n), ended.append(stopped)
    return np.array(score), np.array(total), np.array(length, dtype=float), np.array(ended)


@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("stop", ["eos", "frequent"])
def test_ctranslate2_score_is_the_summed_log_probability_over_length_power(ct2, length_penalty, stop):
    """score * (hypothesis length + end token) ** length_penalty == score_batch's sum, with nothing
    disabled (min_decoding_length=0). The random model never says EOS, so `frequent` ends the
    hypotheses on a token it likes, which is then counted in the sum and in the length."""
    end = translate(ct2)[0].hypotheses[0][1] if stop == "frequent" else None
    results = translate(ct2, length_penalty=length_penalty, min_decoding_length=0, end_token=end)
    score, total, length, ended = _ct2_relation(ct2, results, end)
    assert ended.any() if stop == "frequent" else not ended.any()
    assert np.allclose(score * length ** length_penalty, total, rtol=1e-5, atol=2e-5)
    if length_penalty:  # normalised: the plain sum is not the score, nor is a length without the end token
        longer = length > 1
        assert longer.any() and not np.isclose(score[longer], total[longer], rtol=1e-3).any()
        short = ended & longer
        assert not np.isclose(score[short] * (length[short] - 1) ** length_penalty, total[short], rtol=1e-4).any()


def test_ctranslate2_first_token_leaves_eos_out_until_min_decoding_length(ct2):
    """With the default min_decoding_length=1 the end token is disabled at the first step, so the
    first token's log-probability is renormalised over the other tokens: the score exceeds
    score_batch's sum by -log(1 - p(EOS first))."""
    _, translator, source = ct2
    results = translate(ct2, length_penalty=0.0)
    for src, result in zip(source, results):
        p_eos = math.exp(translator.score_batch([src], [[]])[0].log_probs[0])
        for tokens, score in zip(result.hypotheses, result.scores):
            total = float(np.sum(translator.score_batch([src], [tokens])[0].log_probs[:len(tokens)]))
            assert score - total == pytest.approx(-math.log1p(-p_eos), abs=2e-5)


def test_ctranslate2_without_scores_is_an_input_error(ct2):
    with pytest.raises(InputError, match=r"result 0 has no scores: decode with return_scores=True"):
        from_ctranslate2(translate(ct2, return_scores=False))
    with pytest.raises(InputError, match="not a ctranslate2.TranslationResult"):
        from_ctranslate2([["a", "b"]])


# ---- transformers ---------------------------------------------------------------------------

def test_generate_list_is_the_decoders_hypotheses_and_scores(hf):
    tokenizer, _ = hf
    output = generate(hf)
    nbest = from_generate(output, tokenizer, N)
    assert nbest.n_sentences == len(SOURCES) and list(nbest.sizes) == [N] * len(SOURCES)
    assert list(nbest.hyps) == tokenizer.batch_decode(output.sequences, skip_special_tokens=True)
    assert nbest.feature_names == ["score"] and nbest.scores is None
    assert np.array_equal(nbest.features[:, 0], output.sequences_scores.numpy().astype(np.float64))  # to the bit
    assert per_sentence_order_is_best_first(nbest)


def _generated_lengths(sequences, stop_ids) -> np.ndarray:
    """Tokens after the decoder start token up to and including the first stop token (all of
    them when none stops the row: the row ran to the length limit)."""
    lengths = []
    for row in sequences.tolist():
        tail = row[1:]
        stops = [k for k, t in enumerate(tail) if t in stop_ids]
        lengths.append(stops[0] + 1 if stops else len(tail))
    return np.array(lengths)


@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("stop", ["eos", "frequent"])
def test_generate_score_is_the_summed_log_probability_over_generated_length_power(hf, length_penalty, stop):
    """sequences_scores == sum of compute_transition_scores / generated_length ** length_penalty,
    the length counting the tokens after the decoder start token, EOS included (the random model
    stops only on the forced EOS or, with `frequent`, on a token it likes, given as an EOS)."""
    tokenizer, model = hf
    eos = [model.generation_config.eos_token_id]
    if stop == "frequent":
        eos.append(int(generate(hf).sequences[0, 2]))
    output = generate(hf, length_penalty=length_penalty, eos_token_id=eos)
    transition = model.compute_transition_scores(output.sequences, output.scores, output.beam_indices,
                                                 normalize_logits=False).numpy().astype(np.float64)
    lengths = _generated_lengths(output.sequences, set(eos))
    assert np.array_equal(lengths, (output.beam_indices.numpy() >= 0).sum(1))  # transformers' own count
    assert (lengths < MAX_LEN).any() if stop == "frequent" else (lengths == MAX_LEN).all()
    scores = output.sequences_scores.numpy().astype(np.float64)
    assert np.allclose(scores, transition.sum(1) / lengths ** length_penalty, rtol=1e-5, atol=1e-6)
    assert np.array_equal(from_generate(output, tokenizer, N).features[:, 0], scores)
    if length_penalty:  # the decoder start token is not counted
        assert not np.isclose(scores, transition.sum(1) / (lengths + 1) ** length_penalty, rtol=1e-4).any()


def test_generate_without_beam_scores_is_an_input_error(hf):
    tokenizer, model = hf
    inputs = tokenizer(SOURCES, return_tensors="pt", padding=True)
    with pytest.raises(InputError, match="greedy search or sampling.*decode with beam search"):
        from_generate(generate(hf, num_beams=1, num_return_sequences=1), tokenizer, 1)
    with pytest.raises(InputError, match="decode with output_scores=True"):
        from_generate(generate(hf, output_scores=False), tokenizer, N)
    with pytest.raises(InputError, match="return_dict_in_generate=True"):
        from_generate(model.generate(**inputs, num_beams=2, num_return_sequences=2, max_new_tokens=3), tokenizer, 2)
    with pytest.raises(InputError, match="not groups of num_return_sequences=5"):
        from_generate(generate(hf), tokenizer, 5)


# ---- both -----------------------------------------------------------------------------------

def test_both_lists_survive_moses(ct2, hf, tmp_path):
    lists = {"ct2": from_ctranslate2(translate(ct2), ct2[0].convert_tokens_to_string),
             "hf": from_generate(generate(hf), hf[0], N, score_name="hf_beam")}
    for name, nbest in lists.items():
        path = str(tmp_path / f"{name}.nbest")
        write_nbest(nbest, path)
        back = read_nbest(path, "moses", cache=False)
        assert list(back.hyps) == list(nbest.hyps) and np.array_equal(back.offsets, nbest.offsets)
        assert back.feature_names == nbest.feature_names and np.array_equal(back.features, nbest.features)
        assert back.scores is None


def test_the_module_imports_no_model_library():
    code = ("import sys, rerank.formats.decoders; "
            "print(sorted({'torch', 'transformers', 'ctranslate2'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
