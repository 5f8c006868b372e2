"""Vocabularies of the embedding models: words with a frequency cut-off (`Vocab`), or SentencePiece
subwords over the same Moses tokens (`SubwordVocab`, config key `subword`). Index 0 is padding,
1 the unknown word (piece) in both.

Why subwords: with the words seen at least three times, many German sentences hold a word the
model does not know (mostly compounds), and translation retrieval fails mostly on those; pieces,
with bytes for unseen characters, leave nothing unknown (docs/results/embeddings.md measures the
lever). The SentencePiece model is
learnt on the training text alone and stored in the model's JSON (base64), so a model file is
still its state_dict plus a JSON config.
"""

from __future__ import annotations

import base64
import io
from collections import Counter
from collections.abc import Iterable

from rerank.embeddings.config import SUBWORDS as SUBWORD_TYPES  # bpe, unigram
from rerank.errors import InputError, needs_neural

PAD, UNK = "<pad>", "<unk>"


class Vocab:
    """Maps tokens to integer ids. Built from token lists, stored as a plain list in JSON."""

    def __init__(self, tokens: list[str]):
        if tokens[:2] != [PAD, UNK]:
            tokens = [PAD, UNK] + [t for t in tokens if t not in (PAD, UNK)]
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}

    @classmethod
    def build(cls, sentences: Iterable[list[str]], min_freq: int = 1, max_size: int | None = None) -> "Vocab":
        """Words seen at least `min_freq` times, most frequent first (ties alphabetical)."""
        counts = Counter(tok for sent in sentences for tok in sent)
        words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[: max(0, max_size - 2)]
        return cls([PAD, UNK] + words)

    def __len__(self) -> int:
        return len(self.tokens)

    def ids(self, tokens: list[str]) -> list[int]:
        get = self.index.get
        return [get(t, 1) for t in tokens]

    def to_list(self) -> list[str]:
        return list(self.tokens)

    def to_data(self) -> list[str]:
        """What the model's JSON stores: the word list."""
        return self.to_list()


class SubwordVocab:
    """SentencePiece pieces (BPE or unigram) of the Moses tokens, with Vocab's interface: `ids` of a
    token list are the pieces of the tokens joined by spaces; `tokens` are the pieces (a word
    alignment dictionary finds the words that are one piece). Normalisation is off and a character
    the training text lacks is spelt in its UTF-8 bytes (byte fallback: 256 byte pieces), so the
    pieces spell any tokens exactly and nothing is unknown."""

    def __init__(self, model_proto: bytes, model_type: str):
        with needs_neural("a subword (SentencePiece) embedding model"):
            import sentencepiece as spm

        self.model_proto, self.model_type = model_proto, model_type
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        self.tokens = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]
        if self.tokens[:2] != [PAD, UNK]:
            raise ValueError(f"a SentencePiece model of the embeddings must have ids 0, 1 = {PAD} {UNK}, it has "
                             f"{' '.join(self.tokens[:2])}")
        self.index = {t: i for i, t in enumerate(self.tokens)}

    @classmethod
    def build(cls, sentences: Iterable[list[str]], size: int, model_type: str = "bpe", seed: int = 1) -> "SubwordVocab":
        """Learn `size` pieces (the two specials included; fewer if the text cannot give so many)
        from tokenised sentences, deterministically for a seed."""
        import sentencepiece as spm

        if model_type not in SUBWORD_TYPES:
            raise ValueError(f"unknown subword model {model_type!r} ({' or '.join(SUBWORD_TYPES)})")
        spm.set_random_generator_seed(seed)
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=(" ".join(s) for s in sentences if s), model_writer=model, vocab_size=size,
                model_type=model_type, character_coverage=1.0, normalization_rule_name="identity",
                pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece=PAD, unk_piece=UNK, unk_surface=UNK,
                byte_fallback=True, hard_vocab_limit=False, num_threads=1, minloglevel=2)
        except RuntimeError as exc:   # e.g. fewer pieces than the text's characters need
            raise InputError(f"SentencePiece cannot learn {size} {model_type} pieces (config key subword_size): "
                             f"{' '.join(str(exc).split())}") from None
        return cls(model.getvalue(), model_type)

    def __len__(self) -> int:
        return len(self.tokens)

    def ids(self, tokens: list[str]) -> list[int]:
        return self.sp.encode(" ".join(tokens)) if tokens else []

    def to_data(self) -> dict:
        """What the model's JSON stores: the SentencePiece model, base64."""
        return {"sentencepiece": self.model_type, "model": base64.b64encode(self.model_proto).decode("ascii")}


AnyVocab = Vocab | SubwordVocab


def vocab_from_data(data) -> AnyVocab:
    """The vocabulary a model's JSON stores; ValueError (its cause kept) when it is none: not a word
    list without repeats or {"sentencepiece": type, "model": base64}, the model no base64 or no
    SentencePiece model, the specials not first."""
    if isinstance(data, dict):
        model, model_type = data.get("model"), data.get("sentencepiece")
        if not isinstance(model, str) or model_type not in SUBWORD_TYPES:
            raise ValueError(f'a SentencePiece vocabulary needs "sentencepiece" ({" or ".join(SUBWORD_TYPES)}) and '
                             'the base64 string "model"')
        proto = base64.b64decode(model, validate=True)   # binascii.Error, a ValueError
        try:
            return SubwordVocab(proto, model_type)
        except RuntimeError as exc:   # SentencePiece cannot parse the model
            raise ValueError(f"not a SentencePiece model: {' '.join(str(exc).split())}") from exc
    if not isinstance(data, list) or not all(isinstance(t, str) for t in data):
        raise ValueError("not a list of words or a SentencePiece vocabulary")
    if len(set(data)) != len(data):
        raise ValueError("the vocabulary repeats words")
    return Vocab(data)
