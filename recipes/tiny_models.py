"""Tiny users' models for tests and docs: random weights, built from configs, no download.

    python -m rerank.recipes.tiny_models --out DIR [--text FILE ...] [--seed 0]

writes, under DIR:
- `tokenizer/`: a BPE tokenizer (Hugging Face `tokenizers`) trained on the text files (default:
  the shipped Multi30k val sources and references, rerank/data/multi30k/val.{en,de}.gz), with `</s>`, `<unk>` and, last, `<pad>`, as Marian
  vocabularies have it;
- `marian-de-en/`: a Marian encoder-decoder (transformers' MarianMTModel, 1+1 layers, width 32),
  `<pad>` banned from generation (bad_words_ids) as in the OPUS-MT conversions;
- `marian-de-en-ct2/`: its CTranslate2 conversion, made with CTranslate2's own converter
  (tokenizer files copied beside model.bin);
- `gpt2-de/`: a GPT-2 causal LM (1 layer) with `<s>`/`</s>` and its CTranslate2 conversion
  `gpt2-de-ct2/`;
- `st-en-de/`: a sentence-transformers encoder (a 1-layer BERT with mean pooling);
- with --bertscore-bleurt, `bertscore-tiny/`: a 2-layer BERT with its WordPiece tokenizer, for
  BERTScore, and `bleurt-tiny/`: a BLEURT-20-style RemBERT with its regression head, in
  rerank.metrics.bleurt's checkpoint format;
- with --comet, `cometkiwi-tiny/`: a reference-free COMET checkpoint (UnifiedMetric, src + mt)
  and `comet22-tiny/`: a reference-based one (RegressionMetric, src + mt + ref, as COMET-22), on
  2-layer XLM-R encoders (needs unbabel-comet, extra [comet]);
- `build_metricx` (not in `build_all`): a MetricX-24 or MetricX-23 checkpoint on a tiny mT5.

The models know no language: their scores are random functions of the tokens. They exist to
test that each backend's column equals the backend's own computation, and to run the whole
feature -> tune -> eval chain in docs/models.md. Needs the [hf], [ct2] and [st] extras.
"""

from __future__ import annotations

import argparse
import os
import sys

from rerank.io import read_lines
from rerank.recipes.demo import data_dir

DEFAULT_TEXT = [os.path.join(data_dir(), "multi30k", f"val.{lang}.gz") for lang in ("en", "de")]


def train_tokenizer(lines: list[str], vocab_size: int = 600, lm: bool = False):
    """A PreTrainedTokenizerFast: BPE on `lines`. Translation style (lm=False): `</s>` appended,
    `<pad>` the last id. LM style: `<s>` and `</s>` known but not added (GPT-2 style)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    specials = ["<s>", "</s>", "<unk>"] if lm else ["</s>", "<unk>"]
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                       show_progress=False))
    tok.add_special_tokens(["<pad>"])
    if lm:
        return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                       pad_token="<pad>")
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>", pad_token="<pad>")


def build_marian(out: str, tokenizer, seed: int = 0, ban_pad: bool = True, forced_bos: int | None = None, *,
                 d_model: int = 32, layers: int = 1, heads: int = 2, ffn: int = 64) -> str:
    import torch
    from transformers import MarianConfig, MarianMTModel

    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    config = MarianConfig(vocab_size=len(tokenizer), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                          encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn,
                          decoder_ffn_dim=ffn,
                          max_position_embeddings=256, pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad,
                          forced_eos_token_id=eos, bad_words_ids=[[pad]] if ban_pad else None,
                          forced_bos_token_id=forced_bos)
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    if ban_pad:  # transformers 5 keeps generation settings in generation_config.json only
        model.generation_config.bad_words_ids = [[pad]]
    if forced_bos is not None:
        model.generation_config.forced_bos_token_id = forced_bos
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_bart(out: str, tokenizer, seed: int = 0, forced_bos: int | None = None) -> str:
    """A BART encoder-decoder (nothing banned from its softmax; decoding starts from </s>)."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    config = BartConfig(vocab_size=len(tokenizer), d_model=32, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        max_position_embeddings=256, pad_token_id=pad, eos_token_id=eos, bos_token_id=eos,
                        decoder_start_token_id=eos, forced_eos_token_id=eos)
    torch.manual_seed(seed)
    model = BartForConditionalGeneration(config).eval()
    if forced_bos is not None:
        model.generation_config.forced_bos_token_id = forced_bos
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_gpt2(out: str, tokenizer, seed: int = 0) -> str:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=len(tokenizer), n_positions=256, n_embd=32, n_layer=1, n_head=2,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    GPT2LMHeadModel(config).eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_sentence_encoder(out: str, tokenizer, seed: int = 0) -> str:
    import tempfile

    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel

    try:  # sentence-transformers 6 (the old path warns there)
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Pooling, Transformer
    bert_dir = tempfile.mkdtemp(prefix="tiny-bert-")
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=256, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    BertModel(config).eval().save_pretrained(bert_dir)
    tokenizer.save_pretrained(bert_dir)
    word = Transformer(bert_dir, max_seq_length=128)
    width = (word.get_embedding_dimension if hasattr(word, "get_embedding_dimension")
             else word.get_word_embedding_dimension)()
    SentenceTransformer(modules=[word, Pooling(width, "mean")], device="cpu").save(out)
    import shutil

    shutil.rmtree(bert_dir, ignore_errors=True)
    return out


# The COMET model classes a tiny checkpoint can be built of (kind -> class identifier, input
# segments): every class unbabel-comet 2.2 loads, reference-free (qe) and reference-based.
COMET_KINDS = {
    "kiwi": ("unified_metric", ["mt", "src"]),          # CometKiwi-style, for qe
    "referenceless": ("referenceless_regression_metric", None),
    "regression": ("regression_metric", None),           # COMET-22-style
    "unified": ("unified_metric", ["mt", "src", "ref"]),
    "xcomet": ("xcomet_metric", None),
    "ranking": ("ranking_metric", None),
}


def build_comet(out: str, lines: list[str], seed: int = 0, kind: str = "kiwi") -> str:
    """A COMET checkpoint of `kind` (COMET_KINDS) on a 2-layer XLM-R encoder of width 32 with
    random weights, saved as COMET lays a model out (hparams.yaml, checkpoints/model.ckpt: the
    state_dict and hyper-parameters, nothing pickled beyond them), its encoder's config and
    tokenizer in `out`/encoder (named by pretrained_model, so it loads offline). Needs the [comet]
    extra."""
    import pytorch_lightning
    import torch
    import yaml
    from comet.models import str2model
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import XLMRobertaConfig, XLMRobertaTokenizerFast

    identifier, segments = COMET_KINDS[kind]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=600, show_progress=False,
                                                       special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    encoder = os.path.abspath(os.path.join(out, "encoder"))
    tokenizer = XLMRobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                        cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")
    tokenizer.save_pretrained(encoder)
    XLMRobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=258, pad_token_id=1, bos_token_id=0,
                     eos_token_id=2).save_pretrained(encoder)
    torch.manual_seed(seed)
    common = {"pretrained_model": encoder, "encoder_model": "XLM-RoBERTa", "load_pretrained_weights": False,
              "local_files_only": True}
    if identifier in ("unified_metric", "xcomet_metric"):
        common.update(hidden_sizes=[32], word_layer=2)
        if segments:
            common["input_segments"] = segments
    elif identifier != "ranking_metric":
        common["hidden_sizes"] = [32]
    model = str2model[identifier](**common)
    hparams = {**dict(model.hparams), "class_identifier": identifier}
    os.makedirs(os.path.join(out, "checkpoints"), exist_ok=True)
    with open(os.path.join(out, "hparams.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(hparams, f)
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams),
                "pytorch-lightning_version": pytorch_lightning.__version__},
               os.path.join(out, "checkpoints", "model.ckpt"))
    return out


def build_comet_qe(out: str, lines: list[str], seed: int = 0) -> str:
    """A reference-free COMET (UnifiedMetric with input segments mt and src, as CometKiwi): `build_comet` of kind kiwi."""
    return build_comet(out, lines, seed, "kiwi")


def build_metricx(out: str, lines: list[str], seed: int = 0, version: int = 24, mode: str | None = None) -> str:
    """A MetricX checkpoint (rerank.metrics.metricx's layout) on a 2+1-layer mT5 of width 32 with
    random weights: config.json (embeddings untied, as mT5's) and model.safetensors with the public
    MT5ForRegression's weights (shared, encoder, decoder, lm_head), a BPE tokenizer with
    mT5's special ids (<pad> 0, </s> 1 appended, <unk> 2) and metricx.json naming the version, the
    mode (MetricX-23: reference or qe) and the score token, the vocabulary's last id. The score
    token's output row is set so that the scores of the training lines spread over about [-8, 33]:
    some inputs fall on each side of the clamp to [0, 25]."""
    import json

    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import MT5Config, MT5ForConditionalGeneration, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=600, special_tokens=["<pad>", "</s>", "<unk>"],
                                                       show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    config = MT5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=1,
                       num_heads=4, relative_attention_num_buckets=8, feed_forward_proj="gated-gelu",
                       tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    config.architectures = ["MT5ForRegression"]
    token = len(tokenizer) - 1
    torch.manual_seed(seed)
    model = MT5ForConditionalGeneration(config).eval()
    texts = [f"source: {a} candidate: {b}" if k % 2 else f"candidate: {b} reference: {a}"
             for k, (a, b) in enumerate(zip(lines[:64], lines[-64:]))]   # MetricX-24 and MetricX-23 inputs
    batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    head = torch.randn(config.vocab_size, config.d_model)   # its own output projection (transformers 5 ties it)
    with torch.no_grad():
        encoded = model.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        hidden = model.decoder(input_ids=torch.zeros((len(texts), 1), dtype=torch.long), encoder_hidden_states=encoded,
                               encoder_attention_mask=batch["attention_mask"]).last_hidden_state[:, 0]
    raw = hidden @ head[token]
    unit = hidden.mean(0) / hidden.mean(0).square().sum()   # hidden . unit is about 1 for every input
    scale = 12.0 / raw.std()
    head[token] = scale * head[token] + (12.5 - scale * raw.mean()) * unit
    os.makedirs(out, exist_ok=True)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file({**state, "lm_head.weight": head.contiguous()}, os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump({**config.to_dict(), "tie_word_embeddings": False}, f, indent=1)   # as mT5's own configs
    tokenizer.save_pretrained(out)
    settings: dict[str, int | str] = {"version": version, "score_token_id": token, "max_input_length": 128}
    if mode is not None or version == 23:
        settings["mode"] = mode or "reference"
    with open(os.path.join(out, "metricx.json"), "w", encoding="utf-8") as f:
        json.dump(settings, f)
    return out


def wordpiece_tokenizer(lines: list[str], vocab_size: int = 400):
    """A BERT WordPiece tokenizer (transformers' BertTokenizer: lower case, [CLS] A [SEP] B [SEP])
    with a vocabulary trained on `lines`, as bert_score and BLEURT read theirs."""
    import tempfile

    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertTokenizer

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(lines, trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    vocab = sorted(tok.get_vocab().items(), key=lambda item: item[1])
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "vocab.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(token + "\n" for token, _ in vocab)
        return BertTokenizer(path, model_max_length=256)


def build_bertscore(out: str, lines: list[str], seed: int = 0, layers: int = 2) -> str:
    """A BERT of `layers` layers, width 32, random weights, with its WordPiece tokenizer: a model
    directory for BERTScore (--bertscore-model, bert_score's model_type)."""
    import torch
    from transformers import BertConfig, BertModel

    tokenizer = wordpiece_tokenizer(lines)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=256, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    BertModel(config).eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def random_bleurt(config: dict, seed: int):
    """(RemBertModel, head) of a bleurt_config.json's contents with seeded random weights, the
    pooler and head spread: RemBERT's init (std 0.02) leaves the pooled output and the score near 0."""
    import torch

    from rerank.metrics.bleurt import build_model

    torch.manual_seed(seed)
    model, head = build_model(config)
    with torch.no_grad():
        model.pooler.dense.weight.normal_(0.0, 0.5)
        head.weight.normal_(0.0, 1.0)
    return model, head


def build_bleurt(out: str, lines: list[str], seed: int = 0, layers: int = 2, *, hidden: int = 32,
                 embedding: int = 16, heads: int = 2, ffn: int = 64, max_length: int = 256) -> str:
    """A BLEURT-20-style model (RemBERT encoder, input embeddings narrower than the hidden states
    as RemBERT's, and a linear head on the pooled output) with random weights, in the checkpoint
    format of rerank.metrics.bleurt: bleurt_config.json, model.safetensors, its tokenizer."""
    import json

    from safetensors.torch import save_file

    from rerank.metrics.bleurt import CONFIG, FORMAT

    tokenizer = wordpiece_tokenizer(lines)
    encoder = {"vocab_size": len(tokenizer), "hidden_size": hidden, "num_hidden_layers": layers,
               "num_attention_heads": heads, "input_embedding_size": embedding, "output_embedding_size": embedding,
               "intermediate_size": ffn, "max_position_embeddings": max_length, "type_vocab_size": 2,
               "pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.cls_token_id,
               "eos_token_id": tokenizer.sep_token_id}
    config = {"format": FORMAT, "max_length": max_length, "encoder": encoder}
    model, head = random_bleurt(config, seed)
    os.makedirs(out, exist_ok=True)
    state = {f"encoder.{k}": v.contiguous() for k, v in model.state_dict().items()}
    state.update({f"head.{k}": v.contiguous() for k, v in head.state_dict().items()})
    save_file(state, os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, CONFIG), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    tokenizer.save_pretrained(out)
    return out


def spm_tokenizer_model(lines: list[str], vocab_size: int = 300) -> bytes:
    """A sentencepiece unigram model of `lines` with BERT's special pieces ([PAD] 0, [UNK] 1,
    [CLS], [SEP], [MASK]), as BLEURT-20's spm.model has them."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                   model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="[PAD]",
                                   unk_piece="[UNK]", user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"],
                                   minloglevel=2, num_threads=1)
    return model.getvalue()


def build_bleurt_port(out: str, lines: list[str], seed: int = 0, layers: int = 2, *, hidden: int = 32,
                      embedding: int | None = 16, heads: int = 2, ffn: int = 64, max_length: int = 256,
                      weights: str = "model.safetensors", pieces: int = 300, vocab: int | None = None,
                      tokenizer: str = "spm") -> str:
    """A tiny BLEURT with random weights in the PyTorch port's layout, as its save_pretrained
    writes lucadiliello/BLEURT-20 (bleurt-pytorch): config.json of model_type "bleurt" (without
    `embedding_size` when `embedding` is None: the port then has no input projection), the
    BleurtForSequenceClassification state_dict (`weights`: model.safetensors or pytorch_model.bin),
    spm.model (of `pieces` pieces) with BleurtSPTokenizer's tokenizer_config.json, or with
    `tokenizer="wordpiece"` a WordPiece vocab.txt as BleurtTokenizerFast saves it (the older BLEURT
    checkpoints'); the embedding table has `vocab` rows (None: the vocabulary's). Written without
    the port."""
    import json

    import torch
    from safetensors.torch import save_file

    from rerank.metrics.bleurt import FORMAT

    os.makedirs(out, exist_ok=True)
    special = {"bos_token": "[CLS]", "cls_token": "[CLS]", "eos_token": "[SEP]", "mask_token": "[MASK]",
               "pad_token": "[PAD]", "sep_token": "[SEP]", "unk_token": "[UNK]"}
    if tokenizer == "wordpiece":
        wordpiece = wordpiece_tokenizer(lines)
        wordpiece.save_pretrained(out)
        with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:   # as transformers 4 saves it (5: not)
            f.writelines(token + "\n" for token, _ in sorted(wordpiece.get_vocab().items(), key=lambda kv: kv[1]))
        with open(os.path.join(out, "tokenizer_config.json"), encoding="utf-8") as f:
            settings = json.load(f)
        with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({**settings, "tokenizer_class": "BleurtTokenizer"}, f, indent=2)
        vocab = vocab or len(wordpiece)
    else:
        with open(os.path.join(out, "spm.model"), "wb") as f:
            f.write(spm_tokenizer_model(lines, pieces))
        import sentencepiece as spm

        vocab = vocab or spm.SentencePieceProcessor(model_file=os.path.join(out, "spm.model")).get_piece_size()
        with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({**special, "do_lower_case": False, "split_by_punct": False, "sp_model_kwargs": {},
                       "tokenizer_class": "BleurtSPTokenizer"}, f, indent=2)
        with open(os.path.join(out, "special_tokens_map.json"), "w", encoding="utf-8") as f:
            json.dump(special, f, indent=2)
    port = {"model_type": "bleurt", "architectures": ["BleurtForSequenceClassification"], "vocab_size": vocab,
            "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": ffn,
            "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": max_length, "type_vocab_size": 2, "initializer_range": 0.02,
            "layer_norm_eps": 1e-12, "pad_token_id": 0, "num_labels": 1, "id2label": {"0": "LABEL_0"},
            "label2id": {"LABEL_0": 0}}
    if embedding is not None:
        port["embedding_size"] = embedding
    width = hidden if embedding is None else embedding
    encoder = {**{k: port[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                       "intermediate_size", "max_position_embeddings", "type_vocab_size",
                                       "pad_token_id")},
               "input_embedding_size": width, "output_embedding_size": width, "bos_token_id": None,
               "eos_token_id": None}
    model, head = random_bleurt({"format": FORMAT, "max_length": max_length, "encoder": encoder}, seed)
    state = {}
    for name, tensor in model.state_dict().items():
        if name.startswith("encoder.embedding_hidden_mapping_in."):
            if embedding is None:
                continue
            name = "encoder.embedding_projection." + name.rsplit(".", 1)[1]
        state["bleurt." + name] = tensor.contiguous()
    state["bleurt.embeddings.position_ids"] = torch.arange(max_length).expand((1, -1)).contiguous()   # persisted
    state.update({f"classifier.{k}": v.contiguous() for k, v in head.state_dict().items()})
    if weights == "model.safetensors":
        save_file(state, os.path.join(out, weights), metadata={"format": "pt"})
    else:
        torch.save(state, os.path.join(out, weights))
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(port, f, indent=2)
    return out


def convert_ct2(model_dir: str, out: str) -> str:
    """CTranslate2's own converter on a transformers directory, tokenizer files copied beside model.bin."""
    from ctranslate2.converters import TransformersConverter

    copy = [f for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
            if os.path.isfile(os.path.join(model_dir, f))]
    TransformersConverter(model_dir, copy_files=copy).convert(out, force=True)
    return out


def read_text(paths: list[str]) -> list[str]:
    """The non-empty lines of text files (plain or .gz)."""
    return [line.strip() for path in paths for line in read_lines(path) if line.strip()]


def build_all(out: str, text: list[str] | None = None, seed: int = 0, ct2: bool = True, st: bool = True,
              comet: bool = False, bertscore_bleurt: bool = False) -> dict[str, str]:
    """Every tiny model under `out` (the COMET ones only with `comet`, BERTScore's and BLEURT's only
    with `bertscore_bleurt`); returns {name: directory}."""
    from rerank.progress import transformers_bars_off

    with transformers_bars_off():
        return _build_all(out, text, seed, ct2, st, comet, bertscore_bleurt)


def _build_all(out, text, seed, ct2, st, comet, bertscore_bleurt=False) -> dict[str, str]:
    os.makedirs(out, exist_ok=True)
    lines = read_text(text or DEFAULT_TEXT)
    tokenizer = train_tokenizer(lines)
    lm_tokenizer = train_tokenizer(lines, lm=True)
    paths = {"tokenizer": os.path.join(out, "tokenizer")}
    tokenizer.save_pretrained(paths["tokenizer"])
    paths["marian"] = build_marian(os.path.join(out, "marian-de-en"), tokenizer, seed)
    paths["gpt2"] = build_gpt2(os.path.join(out, "gpt2-de"), lm_tokenizer, seed)
    if ct2:
        paths["marian_ct2"] = convert_ct2(paths["marian"], os.path.join(out, "marian-de-en-ct2"))
        paths["gpt2_ct2"] = convert_ct2(paths["gpt2"], os.path.join(out, "gpt2-de-ct2"))
    if st:
        paths["st"] = build_sentence_encoder(os.path.join(out, "st-en-de"), tokenizer, seed)
    if bertscore_bleurt:
        paths["bertscore"] = build_bertscore(os.path.join(out, "bertscore-tiny"), lines, seed)
        paths["bleurt"] = build_bleurt(os.path.join(out, "bleurt-tiny"), lines, seed)
        paths["bleurt_port"] = build_bleurt_port(os.path.join(out, "bleurt-port-tiny"), lines, seed)
    if comet:
        paths["comet"] = build_comet_qe(os.path.join(out, "cometkiwi-tiny"), lines, seed)
        paths["comet_ref"] = build_comet(os.path.join(out, "comet22-tiny"), lines, seed, "regression")
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rerank.recipes.tiny_models", description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--text", nargs="+", help="tokenizer training text (default: rerank/data/multi30k/val.{en,de}.gz)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--comet", action="store_true", help="also COMET models, reference-free and reference-based "
                        "(needs the [comet] extra)")
    parser.add_argument("--bertscore-bleurt", action="store_true", help="also a BERT for BERTScore and a "
                        "BLEURT-20-style RemBERT (in this toolkit's format and in the PyTorch port's layout)")
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("transformers").setLevel(logging.ERROR)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for name, path in build_all(args.out, args.text, args.seed, comet=args.comet,
                                    bertscore_bleurt=args.bertscore_bleurt).items():
        print(f"{name}\t{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
