"""Moses tokenisation (sacremoses) and word vocabularies with a frequency cut-off."""

from __future__ import annotations

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

    @classmethod
    def from_json(cls, text: str) -> Vocab:
        return cls(json.loads(text))
