"""The torch device for a `--device` option: CUDA when asked for and present, else the CPU."""

from __future__ import annotations

import sys


def resolve_device(device: str | None):
    """torch.device for `device`; 'cuda' without CUDA falls back to the CPU with a message."""
    import torch

    device = device or "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        print(f"CUDA is not available ({device} requested): using the CPU", file=sys.stderr)
        device = "cpu"
    return torch.device(device)
