"""Test-wide settings: one torch thread, so the suite's speed does not collapse when other
processes share the cores (torch's OpenMP threads spin when oversubscribed)."""

import torch

torch.set_num_threads(1)
