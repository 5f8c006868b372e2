"""A wall-clock budget spent in whole epochs: what `--max-minutes` means for `rerank nmt train`
and `rerank embed train` alike.

Training stops at the first epoch boundary where the time this invocation has run (setup
included) plus the expected length of one more epoch would exceed the budget. The expected
length is the mean of the epochs timed so far in the run, earlier invocations included (the
trainer passes them in); before any epoch is timed it is 0. So no epoch is cut, and the budget
is overrun only by an epoch slower than the mean, or by the first epoch of a run. Every
invocation, a resume included, gets the whole budget. The clock is injectable for tests.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class EpochBudget:
    """Reads the clock when created, in `allows_epoch` and in `epoch_done`, nowhere else."""

    def __init__(self, max_minutes: float | None, clock: Callable[[], float] = time.monotonic):
        if max_minutes is not None and not max_minutes > 0:
            raise ValueError(f"the time budget (max_minutes) must be > 0, got {max_minutes}")
        self.limit = math.inf if max_minutes is None else 60.0 * max_minutes
        self.clock = clock
        self.start = clock()
        self.epoch_seconds: list[float] = []  # durations of the run's whole epochs, for the mean
        self.used = 0.0  # seconds this invocation had run at the last allows_epoch
        self._epoch_start: float | None = None

    def expected_epoch(self) -> float:
        """Mean seconds of the epochs timed so far (0 before the first)."""
        return sum(self.epoch_seconds) / len(self.epoch_seconds) if self.epoch_seconds else 0.0

    def allows_epoch(self) -> bool:
        """True if one more epoch is expected to end within the budget; its time starts now."""
        now = self.clock()
        self.used = now - self.start
        if self.used + self.expected_epoch() > self.limit:
            return False
        self._epoch_start = now
        return True

    def epoch_done(self, timed: bool = True) -> float:
        """Seconds since the last allows_epoch(); added to the mean unless `timed` is False
        (an epoch resumed mid-way: part of it ran in an earlier invocation)."""
        if self._epoch_start is None:
            raise RuntimeError("epoch_done() before allows_epoch()")
        seconds = self.clock() - self._epoch_start
        if timed:
            self.epoch_seconds.append(seconds)
        return seconds

    def reason(self) -> str:
        """Why allows_epoch() said no, for the log."""
        return (f"time budget: {self.used / 60:.1f} of {self.limit / 60:g} minutes used, "
                f"another epoch is expected to take {self.expected_epoch() / 60:.1f}")
