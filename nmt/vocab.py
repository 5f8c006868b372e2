"""Moses tokenisation (sacremoses), word vocabularies with a frequency cut-off, and subword
vocabularies (SentencePiece BPE or unigram) over the Moses tokens."""

from __future__ import annotations

import base64
import io
import json
from collections import Counter
from collections.abc import Iterable

from sacremoses import MosesDetokenizer, MosesTokenizer

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = [PAD, UNK, BOS, EOS]
PAD_ID, UNK_ID, BOS_ID, EOS_ID = range(4)


class Tokenizer:
    """Moses tokenizer/detokenizer for one language (no XML escaping, so text stays readable)."""

    def __init__(self, lang: str):
        self.lang = lang
        self._tok = MosesTokenizer(lang=lang)
        self._detok = MosesDetokenizer(lang=lang)

    def tokenize(self, text: str) -> list[str]:
        return self._tok.tokenize(text.strip(), escape=False)

    def detokenize(self, tokens: list[str]) -> str:
        return self._detok.detokenize(tokens)


class Vocab:
    """Token <-> id map. Ids 0-3 are <pad>, <unk>, <s>, </s>; unknown words map to <unk>."""

    def __init__(self, tokens: list[str]):
        if tokens[: len(SPECIALS)] != SPECIALS:
            raise ValueError("vocabulary must start with the special tokens " + " ".join(SPECIALS))
        self.itos = list(tokens)
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    @classmethod
    def build(cls, sentences: Iterable[list[str]], min_freq: int = 2, max_size: int | None = None) -> Vocab:
        """Words seen at least `min_freq` times, most frequent first (ties alphabetical)."""
        counts = Counter(tok for sent in sentences for tok in sent)
        words = sorted((w for w, c in counts.items() if c >= min_freq and w not in SPECIALS),
                       key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[: max(0, max_size - len(SPECIALS))]
        return cls(SPECIALS + words)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.stoi.get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens for `ids`, stopping at </s> and skipping <pad>/<s>."""
        out = []
        for i in ids:
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            out.append(self.itos[i])
        return out

    def to_json(self) -> str:
        return json.dumps(self.itos, ensure_ascii=False)


class SubwordVocab:
    """SentencePiece pieces (BPE or unigram) of Moses-tokenised text, with Vocab's interface.

    Ids 0-3 are the same specials as Vocab's; `decode` gives words (pieces merged), so
    detokenisation and the `len` feature count words, not pieces. Normalisation is off, so
    decoding gives back exactly the tokens that were encoded.
    """

    def __init__(self, model_proto: bytes, model_type: str):
        import sentencepiece as spm

        self.model_proto, self.model_type = model_proto, model_type
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        if self.sp.get_piece_size() < len(SPECIALS):
            raise ValueError(f"SentencePiece model must have ids 0-3 = {' '.join(SPECIALS)}, it has "
                             f"{self.sp.get_piece_size()} pieces")
        got = [self.sp.id_to_piece(i) for i in range(len(SPECIALS))]
        if got != SPECIALS:
            raise ValueError(f"SentencePiece model must have ids 0-3 = {' '.join(SPECIALS)}, got {' '.join(got)}")
        self.itos = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]

    @classmethod
    def build(cls, sentences: Iterable[list[str]], size: int, model_type: str = "bpe", seed: int = 1) -> SubwordVocab:
        """Learn `size` pieces (specials included; fewer if the text cannot give so many)."""
        import sentencepiece as spm

        if model_type not in ("bpe", "unigram"):
            raise ValueError(f"unknown subword model {model_type!r} (bpe or unigram)")
        spm.set_random_generator_seed(seed)
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=(" ".join(s) for s in sentences if s), model_writer=model, vocab_size=size,
            model_type=model_type, character_coverage=1.0, normalization_rule_name="identity",
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, pad_piece=PAD, unk_piece=UNK,
            bos_piece=BOS, eos_piece=EOS, unk_surface=UNK, hard_vocab_limit=False, num_threads=1,
            minloglevel=2)
        return cls(model.getvalue(), model_type)

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, tokens: list[str]) -> list[int]:
        return self.sp.encode(" ".join(tokens)) if tokens else []

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Words for `ids`, stopping at </s> and skipping <pad>/<s>."""
        pieces = []
        for i in ids:
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID):
                pieces.append(int(i))
        return self.sp.decode(pieces).split()

    def to_json(self) -> str:
        return json.dumps({"sentencepiece": self.model_type, "model": base64.b64encode(self.model_proto).decode("ascii")})


def vocab_from_data(data) -> Vocab | SubwordVocab:
    """The vocabulary of a parsed vocabulary file; ValueError (its cause kept) when it is none: not
    a word list or {"sentencepiece": type, "model": base64}, the model no base64 or no SentencePiece
    model (SentencePiece's RuntimeError), the specials not first."""
    if isinstance(data, dict):
        model, model_type = data.get("model"), data.get("sentencepiece")
        if not isinstance(model, str) or not isinstance(model_type, str):
            raise ValueError('a SentencePiece object needs the strings "sentencepiece" and "model"')
        proto = base64.b64decode(model, validate=True)   # binascii.Error, a ValueError
        try:
            return SubwordVocab(proto, model_type)
        except RuntimeError as exc:   # SentencePiece cannot parse the model
            raise ValueError(f"not a SentencePiece model: {' '.join(str(exc).split())}") from exc
    if not isinstance(data, list):
        raise ValueError(f"expected a word list or a SentencePiece object, found a {type(data).__name__}")
    return Vocab(data)
