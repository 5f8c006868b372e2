"""One score per translation model, whichever backend: log p(target | source) counts exactly one
EOS after the target, the one generation ends on, whether or not the model's tokenizer appends it
(rerank.nmt.backends). The transformers form and the CTranslate2 conversion of one model give the
same channel, direct and r2l columns, and both equal a hand computation from the model's logits,
for a tokenizer with a post-processor that appends `</s>`, for one without a post-processor, and
for one that appends a language code after `</s>` (as mBART's does), which decoding never emits.
Tiny random-weight Marian and BART models (rerank.recipes.tiny_models); nothing is downloaded."""

from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest
import torch

from rerank.features import FeatureContext
from rerank.nbest import NBestList
from rerank.nmt.backends import TranslationSettings, translation_scores
from rerank.nmt.features import ChannelFeature, DirectFeature, R2LFeature, reverse_words
from rerank.recipes import tiny_models

pytestmark = pytest.mark.neural

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SOURCES = ["A man in a red shirt is riding a bike.", "Two dogs run on the grass."]
HYPS = [["Ein Mann in einem roten Hemd fährt Fahrrad.", "Ein Mann fährt."], ["Zwei Hunde laufen.", "Hunde"]]
FEATURES = {"channel": ChannelFeature, "direct": DirectFeature, "r2l": R2LFeature}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def convert(model_dir: str, family: str) -> str:
    """The CTranslate2 conversion of a tiny model. ctranslate2 4.8.5's BART loader reads
    `normalize_before`, which transformers 5's BartConfig lacks (BART normalises after each block),
    and copies the tokenizer's BOS, which these tokenizers lack (BART's bos_token_id is </s> here)."""
    if family == "bart":
        update_json(os.path.join(model_dir, "config.json"), normalize_before=False)
    out = tiny_models.convert_ct2(model_dir, model_dir + "-ct2")
    update_json(os.path.join(out, "config.json"), bos_token="</s>", only_if_none=True)
    return out


def update_json(path: str, only_if_none: bool = False, **items) -> None:
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config.update({k: v for k, v in items.items() if not only_if_none or config.get(k) is None})
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)


def suffix_tokenizer(tokenizer):
    """The tokenizer with a special <de> after its </s>, as mBART's tokenizer puts the target language."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    backend = copy.deepcopy(tokenizer.backend_tokenizer)
    backend.add_special_tokens(["<de>"])
    backend.post_processor = processors.TemplateProcessing(
        single="$A </s> <de>", special_tokens=[(t, backend.token_to_id(t)) for t in ("</s>", "<de>")])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", unk_token="<unk>", pad_token="<pad>",
                                   additional_special_tokens=["<de>"])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """{(family, tokenizer): (transformers directory, CTranslate2 directory)}; the tokenizer "eos"
    appends </s> (its post-processor), "plain" has no post-processor and adds nothing, "suffix"
    appends </s> and a special <de> after it (BART alone: CTranslate2's Marian converter drops the
    last token of the vocabulary, Marian's <pad>, which <de> follows)."""
    root = tmp_path_factory.mktemp("eos")
    with_eos = tiny_models.train_tokenizer(tiny_models.read_text(tiny_models.DEFAULT_TEXT))
    plain = copy.deepcopy(with_eos)
    plain.backend_tokenizer.post_processor = None
    words = plain(text_target="Ein Hund")["input_ids"]
    assert words + [plain.eos_token_id] == with_eos(text_target="Ein Hund")["input_ids"]
    suffix = suffix_tokenizer(with_eos)
    assert suffix(text_target="Ein Hund")["input_ids"] == words + [suffix.eos_token_id, suffix.convert_tokens_to_ids("<de>")]
    built = {}
    for name, tokenizer in (("eos", with_eos), ("plain", plain), ("suffix", suffix)):
        for family, build in (("marian", tiny_models.build_marian), ("bart", tiny_models.build_bart)):
            if name == "suffix" and family == "marian":
                continue
            model_dir = build(str(root / f"{family}-{name}"), tokenizer, seed=5)
            built[family, name] = (model_dir, convert(model_dir, family))
    return built


@pytest.fixture(scope="module")
def nbest():
    return NBestList.from_lists(HYPS, [-np.arange(len(h), dtype=float) for h in HYPS], ["nmt"])


def by_hand(model_dir: str, source: str, target: str) -> tuple[float, int]:
    """(log p(target | source), scored tokens) from the model's logits: the tokenizer's target ids
    up to its EOS, if any, then the generation config's EOS; the decoder starts from
    decoder_start_token_id; a Marian model's banned <pad> is outside the softmax."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    eos = model.generation_config.eos_token_id
    labels = tok(text_target=target)["input_ids"]
    labels = (labels[:labels.index(eos)] if eos in labels else labels) + [eos]
    decoder_in = [model.config.decoder_start_token_id] + labels[:-1]
    with torch.no_grad():
        logits = model(input_ids=tok(source, return_tensors="pt")["input_ids"],
                       decoder_input_ids=torch.tensor([decoder_in])).logits[0].double()
    if model.config.model_type == "marian":
        logits[:, model.config.pad_token_id] = float("-inf")
    logp = torch.log_softmax(logits, -1)
    return sum(logp[t, label].item() for t, label in enumerate(labels)), len(labels)


@pytest.mark.parametrize("family, name", [("marian", "eos"), ("marian", "plain"), ("bart", "eos"), ("bart", "plain"),
                                          ("bart", "suffix")])
def test_transformers_and_ctranslate2_give_one_score_with_one_eos(models, nbest, family, name):
    hf_dir, ct2_dir = models[family, name]
    context = FeatureContext(sources=SOURCES)
    rows = list(zip(nbest.sentence_of_hyp.tolist(), nbest.hyps))
    pairs = {"channel": [(h, SOURCES[i]) for i, h in rows], "direct": [(SOURCES[i], h) for i, h in rows],
             "r2l": [(SOURCES[i], reverse_words(h)) for i, h in rows]}
    for feature, cls in FEATURES.items():
        columns = [feature, f"{feature}_norm"]
        hf = cls().compute(nbest, columns, context, cls.Options(model=hf_dir))
        ct2 = cls().compute(nbest, columns, context, cls.Options(model=ct2_dir))
        expected = [by_hand(hf_dir, s, t) for s, t in pairs[feature]]
        scores = np.array([e[0] for e in expected])
        counts = np.array([e[1] for e in expected], dtype=float)
        np.testing.assert_allclose(hf[feature], scores, rtol=0, atol=1e-4)
        np.testing.assert_allclose(ct2[feature], hf[feature], rtol=0, atol=1e-3)
        np.testing.assert_allclose(hf[f"{feature}_norm"], scores / counts, rtol=0, atol=1e-5)
        np.testing.assert_allclose(ct2[f"{feature}_norm"], hf[f"{feature}_norm"], rtol=0, atol=1e-4)


def test_the_eos_is_counted_once_and_an_empty_target_is_its_eos(models):
    """With or without the tokenizer's </s> (and <de> after it), a target's count is its words' tokens plus one, on both
    backends; an empty target scores the EOS alone."""
    targets = HYPS[0] + [""]
    sources = [SOURCES[0]] * len(targets)
    counts = {}
    for key, (hf_dir, ct2_dir) in models.items():
        for kind, model_dir in (("hf", hf_dir), ("ct2", ct2_dir)):
            scores, counts[key + (kind,)] = translation_scores(model_dir, sources, targets, torch.device("cpu"), 1,
                                                               TranslationSettings(), "direct")
            assert np.isfinite(scores).all() and (scores < 0).all()
            if kind == "hf" and key[1] == "plain":
                assert scores[-1] == pytest.approx(by_hand(hf_dir, sources[-1], "")[0], abs=1e-4)
    first = next(iter(counts.values()))
    assert first[-1] == 1
    for value in counts.values():
        np.testing.assert_array_equal(value, first)
