"""Multilingual multi-modal sentence embeddings (Calixto & Liu 2017) and the VSE baseline.

`Encoder.load(path).encode(sentences, lang)` gives L2-normalised vectors; see docs/embeddings.md.
`Encoder` is imported on first use, so the `rerank` command line can list this package's
command and feature without loading torch.
"""

__all__ = ["Encoder"]


def __getattr__(name):
    if name == "Encoder":
        from rerank.embeddings.encoder import Encoder

        return Encoder
    raise AttributeError(f"module 'embeddings' has no attribute {name!r}")
