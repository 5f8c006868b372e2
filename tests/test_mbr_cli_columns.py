"""The `rerank features` commands of docs/results/stronger.md's one-list MBR block (shown there,
not run by the docs test: it takes a minute) add the columns the MBR study adds through the Python
API (rerank.recipes.mbr_neural_study.mbr_columns), byte for byte: `--mbr-utility chrf`, the
shipped MLMME model's cosine (`--mbr-utility mlmme --mbr-model`) and its two-stage form
(`--mbr-candidates nmt:5`, with `mbr_candidate`), on the first sentences of the shipped list."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rerank.cli import main
from rerank.formats import read_nbest, write_nbest
from rerank.recipes import mbr_neural_study as study
from rerank.recipes.demo import data_dir

pytestmark = pytest.mark.neural

N = 6  # sentences of the shipped optimised val 20-best list
MODEL = study.model_path(study.MODEL)
# the block's commands, each system's flags after `rerank features LIST`
COMMANDS = {
    "chrf": ["--which", "mbr", "--mbr-utility", "chrf"],
    "mlmme": ["--which", "mbr", "--mbr-utility", "mlmme", "--mbr-model", MODEL, "--tgt-lang", "de"],
    "mlmme_nmt5": ["--which", "mbr,mbr_candidate", "--mbr-utility", "mlmme", "--mbr-model", MODEL, "--tgt-lang", "de",
                   "--mbr-candidates", "nmt:5"],
}


@pytest.fixture(scope="module")
def small_list(tmp_path_factory):
    path = tmp_path_factory.mktemp("list") / "optimised.val.20best.gz"
    shipped = read_nbest(os.path.join(data_dir(), "multi30k", "optimised.val.20best.gz"))
    write_nbest(shipped.select_sentences(range(N)), str(path))
    return path


@pytest.mark.parametrize("system", COMMANDS)
def test_the_docs_commands_add_the_studys_columns(small_list, tmp_path, system):
    out = tmp_path / f"{system}.gz"
    assert main(["features", str(small_list), *COMMANDS[system], "--quiet", "-o", str(out)]) == 0
    written, expected = read_nbest(str(out)), study.mbr_columns(read_nbest(str(small_list)), system)
    assert written.feature_names == expected.feature_names
    np.testing.assert_array_equal(written.features, expected.features)
