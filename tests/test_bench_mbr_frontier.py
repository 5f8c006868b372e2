"""benchmarks/bench_mbr_frontier.py (issue 47 item 5) in its --tiny mode: three sentences of the
shipped 50-best list, N = 8 and 16, the lexical utilities, ours alone (no torch, no mbrs). Its
agreements must hold the decoders' limits (exact against itself, c2f with K = N and pruning whose
first step holds every pseudo-reference are exact MBR), and a second run must take every cell from
the cache, recomputing only a cell whose file is gone. A few seconds on two cores."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli_helpers import HANG_SECONDS

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_mbr_frontier.py"


def run_tiny(out: Path, *more: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--out", str(out), *more], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=HANG_SECONDS)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_tiny_frontier_limits_and_resume(tmp_path):
    out = tmp_path / "run"
    run_tiny(out)
    report = json.loads((out / "frontier.json").read_text())
    assert report["sizes"] == [8, 16] and report["sentences"] == 3 and not report["mbrs"]
    assert len(report["load_start"].split()) >= 3 and len(report["load_end"].split()) >= 3
    cells = report["cells"]
    for n in ("8", "16"):
        for utility in ("bleu", "chrf", "ter"):
            exact = cells[n][f"ours.{utility}.exact"]
            assert exact["status"] == "done" and exact["agreement"] == 1.0
            assert exact["seconds_per_sentence"] > 0 and 0 <= exact["bleu"] <= 100 and 0 <= exact["chrf"] <= 100
            assert all(0 <= c < int(n) for c in exact["choices"]) and len(exact["choices"]) == 3
            assert cells[n][f"mbrs.{utility}.exact"]["status"] == "not run"
        for utility in ("bleu", "chrf"):   # pruning's schedule ends at N: its first step holds all at N = 8
            assert cells[n][f"ours.{utility}.aggregate"]["status"] == "done"
        # the lexical utilities have no embeddings; TER has no aggregate form: refused by our code, said
        assert cells[n]["ours.chrf.centroid"]["status"] == "not defined"
        assert cells[n]["ours.ter.c2f"]["status"] == "not defined"
    for utility in ("bleu", "chrf"):
        assert cells["8"][f"ours.{utility}.c2f"]["agreement"] == 1.0      # K = 8 = N: exact MBR
    for utility in ("bleu", "chrf", "ter"):
        assert cells["8"][f"ours.{utility}.pruning"]["agreement"] == 1.0  # schedule [8]: nothing pruned
    table = (out / "frontier.md").read_text()
    assert "| 8 | chrf | exact | " in table and "100%" in table and (out / "frontier.png").stat().st_size > 0

    files = sorted((out / "cells").glob("*.json"))
    stamps = {f: f.stat().st_mtime_ns for f in files}
    gone = out / "cells" / "ours.chrf.c2f.N16.json"
    gone.unlink()
    again = run_tiny(out, "--no-plot")
    computed = [line for line in again.stdout.splitlines() if line.startswith(("ours ", "mbrs "))]
    assert len(computed) == 1 and "chrf" in computed[0] and "c2f" in computed[0]
    assert all(f.stat().st_mtime_ns == stamps[f] for f in files if f != gone) and gone.exists()
    assert json.loads((out / "frontier.json").read_text())["cells"]["16"]["ours.chrf.c2f"]["choices"] == \
        cells["16"]["ours.chrf.c2f"]["choices"]
