"""Test-wide settings: one torch thread, so the suite's speed does not collapse when other
processes share the cores (torch's OpenMP threads spin when oversubscribed)."""

import shutil

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """Toy data and tiny trained embedding, NMT and LM models (tests.edges_helpers), once per module.
    A test module may define its own `toy`."""
    from tests.edges_helpers import train_runs, write_toy_data

    d = tmp_path_factory.mktemp("toy")
    write_toy_data(d)
    train_runs(d)
    return d


@pytest.fixture
def work(toy, tmp_path):
    """A private copy of the toy data and models (tests corrupt them)."""
    shutil.copytree(toy, tmp_path / "w")
    return tmp_path / "w"
