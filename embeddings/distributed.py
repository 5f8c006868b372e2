"""Helpers for DistributedDataParallel training (torchrun sets WORLD_SIZE / RANK / LOCAL_RANK).

In-batch negatives must come from the whole global batch, so each rank encodes its shard and
the shards are all-gathered with a differentiable gather: every rank then computes the same
global loss, and DDP's gradient averaging yields exactly the single-process gradient.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def world() -> tuple[int, int, int]:
    """(world size, rank, local rank) from the torchrun environment (1, 0, 0 when absent)."""
    return int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))


def init(device: torch.device) -> None:
    if world()[0] > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class _GatherRows(torch.autograd.Function):
    """all_gather along dim 0 (equal shard sizes); backward sums the gradient over ranks."""

    @staticmethod
    def forward(ctx, x):
        ctx.rank, ctx.n = dist.get_rank(), x.shape[0]
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        return grad[ctx.rank * ctx.n:(ctx.rank + 1) * ctx.n]


def gather_rows(x: torch.Tensor) -> torch.Tensor:
    return _GatherRows.apply(x) if active() else x


def shard(n: int) -> tuple[int, int, int]:
    """Contiguous shard of n global items for this rank: (start, stop, padded shard size)."""
    size, rank = (dist.get_world_size(), dist.get_rank()) if active() else (1, 0)
    per = -(-n // size)
    start = min(rank * per, n)
    return start, min(start + per, n), per


def any_flag(flag: bool) -> bool:
    """True on every rank if it is True on any rank (keeps stopping decisions in lockstep)."""
    if not active():
        return flag
    dev = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    t = torch.tensor([1.0 if flag else 0.0], device=dev)
    dist.all_reduce(t)
    return bool(t.item() > 0)


def barrier() -> None:
    if active():
        dist.barrier()
