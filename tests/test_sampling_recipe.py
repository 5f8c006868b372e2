"""The sampling recipe (recipes/sampling_recipe.py, issue 48 item 6) end to end in its tiny mode on a
random-weight NMT built here from a config and the shipped MLMME model: every step writes its
output, the MBR picks are hypotheses of the sampled list, the evaluation tests each system against
the beam 1-best, and a second run reuses every step and gives the same table."""

from __future__ import annotations

import json
import os

import pytest

import rerank
from rerank.recipes import sampling_recipe
from tests.test_generate import SOURCES, build_nmt

pytestmark = pytest.mark.neural

MLMME = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rerank", "data", "models",
                     "mlmme-small.pt")


def test_tiny_recipe_runs_every_step_and_resumes(tmp_path, capsys):
    model = build_nmt(tmp_path / "nmt")
    (tmp_path / "src.en").write_text("".join(s + "\n" for s in SOURCES))
    (tmp_path / "ref.de").write_text("".join(s + "\n" for s in reversed(SOURCES)))
    out, pub = tmp_path / "run", tmp_path / "pub"
    argv = ["--model", model, "--src", str(tmp_path / "src.en"), "--ref", str(tmp_path / "ref.de"), "--mlmme", MLMME,
            "--out", str(out), "--sentences", "4", "--tiny", "--publish", str(pub)]
    assert sampling_recipe.main(argv) == 0
    result = json.loads((pub / "sampling.json").read_text())
    systems = json.loads((out / "systems.json").read_text())["systems"]
    assert set(systems) == {"beam 1-best", *sampling_recipe.SYSTEMS}
    samples = rerank.read_nbest(out / "samples.jsonl.gz")
    assert samples.n_sentences == 4 and all(len(v) == 4 for v in systems.values())
    for name in sampling_recipe.SYSTEMS:   # every pick is one of its sentence's sampled candidates
        assert all(pick in samples.hyps[samples.sentence(i)] for i, pick in enumerate(systems[name])), name
    assert systems["beam 1-best"] == rerank.first_best(out / "beam.jsonl.gz")
    ev = rerank.evaluate([str(out / "ref.de")], ("beam 1-best", systems["beam 1-best"]),
                         {name: systems[name] for name in sampling_recipe.SYSTEMS}, metrics=["bleu", "chrf"],
                         ar=200, bootstrap=50, seed=12345, lang="de")
    assert json.loads(ev.to_json())["systems"] == result["systems"]   # the table is the API's on these picks
    first = (pub / "sampling.json").read_bytes()
    capsys.readouterr()
    assert sampling_recipe.main(argv) == 0
    assert "steps run: 0" in capsys.readouterr().err and (pub / "sampling.json").read_bytes() == first
