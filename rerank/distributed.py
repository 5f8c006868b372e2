"""Several processes for one feature run: torchrun's ranks split the work of the model features.

`torchrun --nproc_per_node N -m rerank features ...` starts N copies of the command and tells each
its place through the environment (WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).
Inside `ranks()`, a gloo process group (CPU, any machine) joins them, and the model features
split their work units over the ranks with three helpers:

- `map_parts(fn, n, weights)`: the units 0..n-1 are cut into one contiguous part per rank, of
  about equal weight; each rank runs `fn(start, stop)` on its part and every rank gets the
  parts' results in rank order. Concatenated, they are what one process computes when a unit's
  value does not depend on the part it falls in: the features cut the single-process batches
  (whole batches, never a batch in two) or sentences whose vectors do not depend on their batch;
- `on_main(fn)`: rank 0 alone runs `fn` (a score-cache lookup), every rank gets its result, so
  all ranks agree on what is left to compute;
- `checked(fn)`: every rank runs `fn`; a failure on any rank is raised on all of them.

Every exchange is one all-gather of (error, result). A rank that fails goes on to its next
exchange with its error instead of a result, so no rank waits for a rank that will not come: the
exchange raises the error on every rank, bad input as the same InputError (the command line
prints it on rank 0 alone, exit status 2), anything else as itself on its rank and as PeerFailed
on the others. The process group's timeout (RERANK_DIST_TIMEOUT seconds, default 6 hours) only
bounds how long a rank waits for a slower one.

Without torchrun (no WORLD_SIZE, or WORLD_SIZE=1) nothing is started and every helper runs `fn`
once on the whole: the single-process behaviour. torch is imported only when a group starts, so
the core imports without it.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rerank.errors import InputError, needs_neural

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

TIMEOUT_ENV = "RERANK_DIST_TIMEOUT"
DEFAULT_TIMEOUT = 6 * 3600.0
_SHARED = "rerank_shared"     # attribute of an exception every rank raised at the same exchange
_active = False               # inside ranks(), with a process group of more than one rank
_closing: list = []           # torch.distributed, when ranks() left its group for close() to end
_joined = False               # this process started a process group (rerank.cli.exit_process: os._exit)


class PeerFailed(RuntimeError):
    """Another rank failed with an error that is not bad input (its traceback is on that rank's stderr)."""


def world() -> tuple[int, int]:
    """(world size, rank) that torchrun gives this process through WORLD_SIZE and RANK; (1, 0)
    without them."""
    size_text, rank_text = os.environ.get("WORLD_SIZE", "1"), os.environ.get("RANK", "0")
    try:
        size, rank = int(size_text), int(rank_text)
    except ValueError:
        raise InputError(f"WORLD_SIZE={size_text!r} and RANK={rank_text!r} must be integers (torchrun sets them)") \
            from None
    if size < 1 or not 0 <= rank < size:
        raise InputError(f"RANK={rank} is not a rank of WORLD_SIZE={size} processes")
    return size, rank


def is_main() -> bool:
    """Whether this process speaks for the run: rank 0, or the only process."""
    try:
        return world()[1] == 0
    except InputError:
        return True


def active() -> bool:
    """Inside `ranks()` with more than one process: the helpers split and exchange."""
    return _active


def local_device(device: str) -> str:
    """`cuda` as this rank's own GPU under torchrun (cuda:LOCAL_RANK, one GPU per rank of a node);
    any other device as given."""
    if _active and str(device).strip() == "cuda":
        local = os.environ.get("LOCAL_RANK", "0")
        if not local.isdigit():
            raise InputError(f"LOCAL_RANK={local!r} must be an integer (torchrun sets it)")
        return f"cuda:{int(local)}"
    return device


def timeout_seconds() -> float:
    text = os.environ.get(TIMEOUT_ENV)
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise InputError(f"{TIMEOUT_ENV}={text!r} must be a number of seconds > 0")
    return value


@contextlib.contextmanager
def ranks():
    """Join the torchrun ranks of this run in a gloo process group for the `with` block (nothing
    without torchrun or with one process). A group someone else started is used, not ended."""
    global _active, _joined
    size, rank = world()
    if size == 1:
        yield
        return
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
    if missing:
        raise InputError(f"WORLD_SIZE={size} but {' and '.join(missing)} not set: start the processes with torchrun")
    timeout = timeout_seconds()
    with needs_neural(f"running as {size} processes (torchrun)"):
        import torch.distributed as dist
    started = not dist.is_initialized()
    if started:
        dist.init_process_group("gloo", rank=rank, world_size=size, timeout=datetime.timedelta(seconds=timeout))
        _joined = True
    elif dist.get_world_size() != size:
        raise InputError(f"a process group of {dist.get_world_size()} ranks is running, but WORLD_SIZE={size}")
    log.debug("rank %d of %d joined", rank, size)
    _active = True
    try:
        yield
    except BaseException as exc:
        _active = False
        if started and shared(exc):   # ended by close(), once rank 0 has told the error
            _closing.append(dist)
        elif started:
            dist.destroy_process_group()
        raise
    _active = False
    if started:  # every rank past its last exchange before any ends the group (else gloo may abort a peer)
        dist.barrier()
        dist.destroy_process_group()


def close() -> None:
    """After an error every rank raised together (see `ranks`): wait until every rank is here,
    then end the process group. The command line calls it once rank 0 has printed the error, so
    that no rank ends first and has torchrun stop rank 0 before it tells what went wrong."""
    while _closing:
        dist = _closing.pop()
        try:
            dist.barrier()
        except Exception as exc:  # noqa: BLE001 - a rank already gone: nothing left to wait for
            log.debug("closing the process group: %s", exc)
        dist.destroy_process_group()


def joined() -> bool:
    """This process started a process group (a torchrun rank of more than one)."""
    return _joined


def _describe(error: BaseException | None):
    if error is None:
        return None
    if isinstance(error, InputError):
        return ("input", error.problem, error.path, error.line)
    return (type(error).__name__, " ".join(str(error).split())[:500], None, None)


def _rebuild(rank: int, description) -> Exception:
    kind, message, path, line = description
    if kind == "input":
        return InputError(message, path, line)
    return PeerFailed(f"rank {rank} failed: {kind}: {message}")


def _exchange(fn: Callable, send: Callable) -> tuple[object, list]:
    """fn() on this rank, then one all-gather of (error, send(result)): (this rank's result, every
    rank's sent value in rank order); an error on any rank is raised on every rank."""
    import torch.distributed as dist

    result, error = None, None
    try:
        result = fn()
    except Exception as exc:  # every failure is told to the other ranks, then raised
        if getattr(exc, _SHARED, False):
            raise   # raised on every rank at an inner exchange: no rank waits for another
        error = exc
    parts: list = [None] * dist.get_world_size()
    dist.all_gather_object(parts, (_describe(error), None if error is not None else send(result)))
    failures = [(rank, description) for rank, (description, _) in enumerate(parts) if description is not None]
    if failures:
        raised = error if error is not None else _rebuild(*failures[0])
        setattr(raised, _SHARED, True)
        raise raised
    return result, [value for _, value in parts]


def bounds(n: int, size: int, weights: Sequence[float] | np.ndarray | None = None) -> list[int]:
    """Cut points 0 = b_0 <= b_1 <= ... <= b_size = n of `size` contiguous parts of range(n), of
    about equal total weight (a unit goes to the part its weight's midpoint falls in)."""
    if weights is None:
        return [r * n // size for r in range(size + 1)]
    import numpy as np

    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or (w < 0).any():
        raise ValueError("weights must be n non-negative numbers")
    middle = np.cumsum(w) - w / 2
    total = float(w.sum())
    cuts = [int(np.searchsorted(middle, total * r / size, side="left")) for r in range(size + 1)]
    cuts[0], cuts[-1] = 0, n
    return cuts


def map_parts(fn: Callable[[int, int], object], n: int, weights: Sequence[float] | np.ndarray | None = None) -> list:
    """The results of `fn(start, stop)` on the non-empty parts of range(n), in order: one part
    per rank (`bounds`), each computed by its rank; one part, fn(0, n), without ranks."""
    if not _active:
        return [fn(0, n)] if n else []
    import torch.distributed as dist

    size, rank = dist.get_world_size(), dist.get_rank()
    cuts = bounds(n, size, weights)
    start, stop = cuts[rank], cuts[rank + 1]
    _, parts = _exchange(lambda: fn(start, stop) if stop > start else None, lambda result: result)
    return [part for part, lo, hi in zip(parts, cuts, cuts[1:]) if hi > lo]


def concat(parts: list, empty=None):
    """map_parts' array parts as one numpy array (`empty`, default a float64 array of length 0, if none)."""
    import numpy as np

    if not parts:
        return np.zeros(0) if empty is None else empty
    return np.concatenate(parts)


def on_main(fn: Callable):
    """fn() run by rank 0 alone (without ranks: by this process), its result on every rank."""
    if not _active:
        return fn()
    import torch.distributed as dist

    main = dist.get_rank() == 0
    _, parts = _exchange(lambda: fn() if main else None, lambda result: result if main else None)
    return parts[0]


def checked(fn: Callable):
    """fn() on every rank; this rank's result once every rank has finished it, or the first
    rank's error raised on all of them."""
    if not _active:
        return fn()
    result, _ = _exchange(fn, lambda result: None)
    return result


def shared(error: BaseException) -> bool:
    """Whether every rank raised `error` at one exchange (this rank's own failure, or another's)."""
    return bool(getattr(error, _SHARED, False))


def speaks(error: BaseException) -> bool:
    """Whether this process should report `error`: always, unless every rank raised it at one
    exchange and this is not rank 0 (which reports it once for all)."""
    return is_main() or not shared(error)


@contextlib.contextmanager
def without_launcher_environment():
    """The torchrun variables hidden from a library that would otherwise start distributed work of
    its own on one rank's slice (PyTorch Lightning, under COMET), restored afterwards."""
    names = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE",
             "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)
