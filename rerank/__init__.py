"""mlmme-rerank: rerank MT n-best lists with multilingual multi-modal sentence embeddings."""

__version__ = "0.1.0"
