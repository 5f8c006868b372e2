"""Multilingual multi-modal sentence embeddings (Calixto & Liu 2017) and the VSE baseline.

`Encoder.load(path).encode(sentences, lang)` gives L2-normalised vectors; see docs/embeddings.md.
"""

from embeddings.encoder import Encoder

__all__ = ["Encoder"]
