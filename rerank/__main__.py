"""`python -m rerank`, which torchrun's ranks run too (rerank.distributed.exit_process)."""

from rerank import distributed
from rerank.cli import main

distributed.exit_process(main())
