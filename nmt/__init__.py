"""Attention NMT (bidirectional-GRU encoder, GRU decoder with additive attention) and n-best
generation, used to produce the n-best lists that the `rerank` toolkit reranks.

Modules: vocab (tokenisation + vocabularies), data (batching), model (the network and presets),
beam (batched beam search / greedy), train (training loop with checkpoints), translate
(n-best / 1-best output and evaluation helpers).
"""
