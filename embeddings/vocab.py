"""Word vocabulary with a frequency cut-off; index 0 is padding, 1 the unknown word."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

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
