"""One progress mechanism: library calls take `progress` (False, True, a callback); the command
line passes tqdm bars as such a callback (rerank.cliargs.TerminalBars), with no process-wide reporter."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from rerank import cliargs, progress
from rerank.io import iter_lines, reading_progress


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(st.integers(0, 5), max_size=30), initial=st.integers(0, 3))
def test_a_callback_sees_done_grow_to_total(steps, initial):
    seen = []
    total = initial + sum(steps)
    with progress.progress_bar(lambda desc, done, of: seen.append((desc, done, of)), "work", total, initial=initial) as bar:
        for n in steps:
            bar.update(n)
    done = [d for _, d, _ in seen]
    assert done == sorted(done) and all(of == total and desc == "work" for desc, _, of in seen)
    assert done[-1:] == ([total] if steps else [])

    seen.clear()
    assert list(progress.track(range(len(steps)), lambda *a: seen.append(a), "items")) == list(range(len(steps)))
    assert seen == [("items", k + 1, len(steps)) for k in range(len(steps))]


def test_a_callback_with_open_bar_opens_the_bars():
    opened = []

    class Bars:
        def __call__(self, desc, done, total):
            raise AssertionError("bars open through open_bar")

        def open_bar(self, desc, **options):
            opened.append((desc, options))
            return progress._Silent(desc, options["total"])

    assert list(progress.track("ab", Bars(), "letters", unit="char", mininterval=0.5)) == ["a", "b"]
    assert opened == [("letters", {"total": 2, "unit": "char", "initial": 0, "leave": False, "mininterval": 0.5})]


def test_no_process_wide_reporter():
    assert not hasattr(progress, "set_reporter") and not hasattr(progress, "_reporter")


def test_terminal_bars_draw_tqdm_bars_on_stderr(monkeypatch):
    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    bars = cliargs.TerminalBars()
    for done in range(1, 4):
        bars("counting", done, 3)  # as a plain callback: one bar, closed at its total
    assert not bars._bars and "counting:" in stderr.getvalue() and "0/3" in stderr.getvalue()
    with progress.progress_bar(bars, "epoch 1", total=2, unit="batch") as bar:
        bar.update(2)
    assert "epoch 1:" in stderr.getvalue() and "batch/s" in stderr.getvalue()


def test_reading_reports_to_the_progress_given(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("a\nb\nc\n")
    seen = []
    with reading_progress(lambda desc, done, total: seen.append((desc, done))):
        assert [line for _, line in iter_lines(str(path))] == ["a", "b", "c"]
    assert seen == [("reading lines.txt", 1), ("reading lines.txt", 2), ("reading lines.txt", 3)]
    seen.clear()
    list(iter_lines(str(path)))  # outside the block: nothing
    assert not seen
