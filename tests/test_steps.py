"""rerank.recipes.steps: a step's checkpoint is resumed only when the step was last started with the same
settings and inputs; what other settings or inputs left behind is trained afresh."""

import json

from rerank.recipes.steps import Steps


def _steps():
    lines = []
    return Steps(lines.append), lines


def test_a_run_stopped_midway_is_resumed(tmp_path):
    steps, log = _steps()
    out, base = tmp_path / "run", tmp_path / "base.pt"
    base.write_bytes(b"weights")
    assert not steps.resumable("fine-tune", str(out), [str(base)], {"epochs": 3}, directory=True)  # nothing there yet
    assert log == []
    steps.start("fine-tune", str(out), {"epochs": 3}, directory=True, inputs=[str(base)])
    (out / "checkpoint.pt").write_bytes(b"half-way")
    assert steps.resumable("fine-tune", str(out), [str(base)], {"epochs": 3}, directory=True)


def test_other_settings_or_inputs_start_afresh(tmp_path):
    steps, log = _steps()
    out, base = tmp_path / "run", tmp_path / "base.pt"
    base.write_bytes(b"weights")
    steps.start("fine-tune", str(out), {"epochs": 3}, directory=True, inputs=[str(base)])
    assert not steps.resumable("fine-tune", str(out), [str(base)], {"epochs": 4}, directory=True)
    base.write_bytes(b"other weights")   # the model it starts from was retrained
    assert not steps.resumable("fine-tune", str(out), [str(base)], {"epochs": 3}, directory=True)
    assert log[-1] == f"fine-tune: {out} was left by other settings or inputs: training afresh, not resuming"
    assert len(log) == 2


def test_a_step_beside_its_output_and_an_older_record_without_inputs(tmp_path):
    steps, _ = _steps()
    out = tmp_path / "lm"
    steps.start("LM", str(out), {"hidden": 16})
    assert json.loads((tmp_path / "lm.config.json").read_text())["inputs"] == []
    assert steps.resumable("LM", str(out), [], {"hidden": 16})
    (tmp_path / "lm.config.json").write_text(json.dumps({"step": "LM", "config": {"hidden": 16}}))  # before inputs were kept
    assert steps.resumable("LM", str(out), [], {"hidden": 16})
    (tmp_path / "lm.config.json").write_text("not JSON")
    assert not steps.resumable("LM", str(out), [], {"hidden": 16})
