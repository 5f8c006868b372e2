"""The qe feature (embeddings/comet_qe.py) on a tiny reference-free COMET checkpoint built from a
config with random weights (rerank.recipes.tiny_models): the column is COMET's own segment score
of each row's (source, hypothesis), loaded offline; a re-run reads the cache; bad checkpoints are
one clear error. unbabel-comet needs transformers 4: `make test-compat` runs this file in
.venv-compat (tests/conftest.py names it when the installed environment has no comet)."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import torch

from rerank import api
from rerank.cli import main
from rerank.embeddings import comet_qe
from rerank.errors import InputError
from rerank.features import FeatureContext
from rerank.metrics import comet
from rerank.nbest import NBestList
from rerank.recipes import tiny_models

pytestmark = pytest.mark.neural

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SOURCES = ["A man is riding a bike.", "Two dogs run on the grass."]
HYPS = [["Ein Mann fährt Fahrrad.", "Ein Mann fährt.", "Ein Mann fährt Fahrrad."], ["Zwei Hunde rennen.", "Hunde."]]


@pytest.fixture(scope="module")
def comet_dir(tmp_path_factory):
    torch.set_num_threads(1)
    return tiny_models.build_comet_qe(str(tmp_path_factory.mktemp("comet") / "kiwi"),
                                      tiny_models.read_text(tiny_models.DEFAULT_TEXT))


@pytest.fixture(scope="module")
def nbest():
    return NBestList.from_lists(HYPS, [np.zeros(len(h)) for h in HYPS], ["nmt"])


def test_qe_is_comets_own_segment_score(comet_dir, nbest, tmp_path):
    from comet import load_from_checkpoint

    out = api.add_features(nbest, "qe", sources=SOURCES, qe_model=comet_dir).column("qe")
    model = load_from_checkpoint(os.path.join(comet_dir, "checkpoints", "model.ckpt"), local_files_only=True)
    rows = [{"src": SOURCES[i], "mt": h} for i, h in zip(nbest.sentence_of_hyp, nbest.hyps)]
    expected = model.predict(rows, batch_size=2, gpus=0, progress_bar=False, accelerator="cpu").scores
    np.testing.assert_allclose(out, expected, atol=1e-5)
    assert out[0] == out[2]   # the repeated hypothesis


def test_a_rerun_reads_the_cache_and_loads_nothing(comet_dir, nbest, tmp_path, monkeypatch):
    cache = str(tmp_path / "c.sqlite")
    first = api.add_features(nbest, "qe", sources=SOURCES, qe_model=comet_dir, cache=cache).column("qe")
    monkeypatch.setattr(comet, "load_comet", lambda *a: pytest.fail("the model was loaded"))
    again = api.add_features(nbest, "qe", sources=SOURCES, qe_model=comet_dir, cache=cache).column("qe")
    assert np.array_equal(first, again)


def test_bad_checkpoints_are_one_clear_error(comet_dir, tmp_path, nbest, capsys):
    with pytest.raises(InputError, match="not a COMET model"):
        comet_qe.QEFeature().compute(nbest, ["qe"], FeatureContext(sources=SOURCES), {"model": str(tmp_path)})
    moved = shutil.copytree(comet_dir, str(tmp_path / "moved"))
    os.remove(os.path.join(moved, "hparams.yaml"))
    with pytest.raises(InputError, match="needs hparams.yaml"):
        comet.load_comet(moved, False, "qe")
    offline = shutil.copytree(comet_dir, str(tmp_path / "offline"))   # an encoder named on the hub, not cached
    ckpt = os.path.join(offline, "checkpoints", "model.ckpt")
    state = torch.load(ckpt, weights_only=False)
    state["hyper_parameters"]["pretrained_model"] = "no-such-org/no-such-encoder"
    torch.save(state, ckpt)
    (tmp_path / "in.nbest").write_text("0 ||| Ein Hund ||| nmt= -1 ||| -1\n")
    (tmp_path / "src").write_text("A dog\n")
    assert main(["features", str(tmp_path / "in.nbest"), "--src", str(tmp_path / "src"), "--which", "qe",
                 "--qe-model", offline, "--no-score-cache", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot load the COMET checkpoint offline" in err[0] and "Hugging Face cache" in err[0]
    assert not (tmp_path / "o").exists()
