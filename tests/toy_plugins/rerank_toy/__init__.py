"""Toy plug-ins of mlmme-rerank (docs/plugins.md's worked example): an MBR utility, an n-best
format and a metric, each in rerank_toy.plugins and registered by entry point in
../rerank_toy-0.0.dist-info/entry_points.txt."""
