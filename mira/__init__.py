"""Tuners for reranking weights: k-best batch MIRA (default), MERT and PRO."""
