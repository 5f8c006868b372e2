"""benchmarks/gpu_check.sh, the check prepared for a lent GPU machine (docs/benchmarks/gpu.md), on its
CPU path: `--device cpu --quick` runs every part twice on the CPU, and the files it writes must hold
every part with its devices, agreements (exact here: the same code on the same CPU), throughputs,
wall seconds and load averages, and the model parts' bf16 runs beside float32. About 25 s on two
quiet cores."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import HANG_SECONDS

pytestmark = pytest.mark.neural

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
PARTS = {"features", "embedding_training", "nmt_nbest", "channel", "comet_score", "comet_mbr", "metricx"}
COMET_PARTS = {"comet_score", "comet_mbr"}   # skipped where unbabel-comet is missing (.venv; make test-compat has it)


def run_check(out: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(out)}
    env.pop("PYTHONPATH", None)
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=HANG_SECONDS)


def test_cpu_path_writes_every_part(tmp_path):
    out = tmp_path / "out"
    done = run_check(out, "--device", "cpu", "--quick", "--threads", "1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads((out / "gpu_check.json").read_text())
    assert record["device"] == "cpu" and record["size"] == "quick" and "error" not in record
    assert record["device_names"]["reference"].startswith("CPU") and record["device_names"]["test"].startswith("CPU")
    assert record["install"].startswith(("an install", "pip install", "PYTHONPATH"))
    assert len(record["load_average"]["start"]) == len(record["load_average"]["end"]) == 3
    assert set(record["parts"]) == PARTS
    has_comet = importlib.util.find_spec("comet") is not None
    for name in set() if has_comet else COMET_PARTS:
        part = record["parts"].pop(name)
        assert part["status"] == "skipped" and "needs comet" in part["error"], part
    for name, part in record["parts"].items():
        assert part["status"] == "ok", (name, part.get("traceback"))
        assert part["items"] > 0 and part["unit"] and part["wall_seconds"] > 0, name
        assert len(part["load_average"]["start"]) == 3, name
        for role in ("reference", "test"):
            device = part["devices"][role]
            assert device["device"] == "cpu" and device["name"].startswith("CPU"), (name, device)
            assert device["items_per_s"] > 0 and device["seconds"] > 0, (name, device)
        assert part["agreement"]["max_abs_diff"] <= 1e-9, (name, part["agreement"])
    parts = record["parts"]
    for column in ("s_s", "s_i"):
        assert parts["features"]["agreement"][column]["argmax_agreement"] == 1.0
        assert parts["features"]["agreement"][column]["identical_order"] == 1.0
    assert any("random image" in note for note in parts["features"]["notes"])  # s_i's image features
    training = parts["embedding_training"]["agreement"]
    assert training["losses_reference"] == training["losses_test"] and training["weights_max_abs_diff"] == 0.0
    nmt = parts["nmt_nbest"]["agreement"]
    assert nmt["identical_nbest_lists"] == nmt["identical_1best"] == 1.0 and nmt["hypotheses_compared"] > 0
    assert parts["channel"]["agreement"]["argmax_agreement"] == 1.0
    for name in set(parts) & {"comet_score", "comet_mbr", "metricx"}:   # bf16 autocast beside float32
        bf16 = parts[name]["agreement"]["bf16"]
        assert parts[name]["devices"]["test_bf16"]["dtype"] == "bf16 autocast"
        # the CPU's and the test device's float32 scores are the same, so bf16 differs from both alike
        assert bf16["vs_float32_cpu"] == bf16["vs_float32_test_device"], bf16
        assert 0 <= bf16["vs_float32_cpu"]["max_abs_diff"] < 5, bf16
    assert parts["metricx"]["agreement"]["pair_order_agreement"] == 1.0 and parts["metricx"]["scores_inside_0_25"] > 0
    if has_comet:
        assert {"exact", "aggregate"} <= set(parts["comet_mbr"]["agreement"])
        assert parts["comet_mbr"]["devices"]["test"]["exact_s"] > 0
    table = (out / "gpu_check.md").read_text()
    assert all(f"| {name} |" in table for name in PARTS)
    assert "[gpu_check] metricx: ok" in (out / "gpu_check.log").read_text()
    assert "[gpu_check] channel: ok" in (out / "gpu_check.log").read_text()


def test_a_missing_test_device_is_an_error_in_the_json(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "out"
    done = run_check(out, "--quick", "--threads", "1")
    assert done.returncode == 2
    record = json.loads((out / "gpu_check.json").read_text())
    assert "sees no CUDA device" in record["error"] and record["parts"] == {}
