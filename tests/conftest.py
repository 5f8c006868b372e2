"""Test-wide settings: one torch thread, so the suite's speed does not collapse when other
processes share the cores (torch's OpenMP threads spin when oversubscribed)."""

import gzip
import shutil
from pathlib import Path

import pytest
import torch

from rerank.io import read_lines

torch.set_num_threads(1)

PACKAGE_DATA = Path(__file__).parent.parent / "rerank" / "data" / "multi30k"


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


def _write(path: Path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


@pytest.fixture(scope="session")
def mini_multi30k(tmp_path_factory):
    """80 train / 20 val / 20 test sentences cut from the shipped val and test_2016 text."""
    root = tmp_path_factory.mktemp("m30k")
    val = {lang: read_lines(str(PACKAGE_DATA / f"val.{lang}.gz")) for lang in ("en", "de")}
    test = {lang: read_lines(str(PACKAGE_DATA / f"test_2016_flickr.{lang}.gz")) for lang in ("en", "de")}
    splits = {"train": {k: v[:80] for k, v in val.items()}, "val": {k: v[80:100] for k, v in val.items()},
              "test_2016_flickr": {k: v[:20] for k, v in test.items()}}
    for split, text in splits.items():
        n = len(text["en"])
        task2 = "test_2016" if split == "test_2016_flickr" else split
        images = [f"{split}-{i}.jpg" for i in range(n)]
        (root / "task1" / "image_splits").mkdir(parents=True, exist_ok=True)
        (root / "task2" / "image_splits").mkdir(parents=True, exist_ok=True)
        (root / "task1" / "image_splits" / f"{split}.txt").write_text("\n".join(images) + "\n")
        (root / "task2" / "image_splits" / f"{task2}_images.txt").write_text("\n".join(images) + "\n")
        for lang, lines in text.items():
            _write(root / "task1" / "raw" / f"{split}.{lang}.gz", lines)
            for k in range(1, 6):  # comparable captions: the same sentences, rotated
                _write(root / "task2" / "raw" / f"{task2}.{k}.{lang}.gz", lines[k:] + lines[:k])
    return root
