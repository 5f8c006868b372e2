"""`python -m rerank`, which torchrun's ranks run too (rerank.cli.exit_process)."""

from rerank.cli import run

run()
