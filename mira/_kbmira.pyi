# Type stub of the C kernel mira/_kbmira.c (see mira/kbmira.py, its one caller).
from typing import Any

def epoch(F: Any, offsets: Any, order: Any, w: Any, total: Any, bg: Any, U: Any, stat_of: Any, uoff: Any,
          gains: Any, mask: Any, C: float, decay: float, model_bg: bool, /) -> tuple[float, int]: ...
