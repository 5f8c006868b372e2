"""An example plug-in package for mlmme-rerank (see docs/plugins.md)."""
