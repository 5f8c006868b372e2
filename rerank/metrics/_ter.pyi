# Type stub of the C kernel rerank/metrics/_ter.c (see rerank/metrics/ter.py, its one caller).
from typing import Any

def edit_counts(ids: Any, offsets: Any, hyp_index: Any, ref_index: Any, out: Any, /) -> None: ...
