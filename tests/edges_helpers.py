"""Shared by the edge-case tests of the model commands: toy models of every kind, and a check
that a refused command exits 2 with one error line naming the file and leaves every file as it was."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from rerank.embeddings.encoder import save_model
from rerank.embeddings.model import MLMME, ModelConfig
from rerank.embeddings.vocab import Vocab
from rerank.cli import main

WORDS = ["ein", "hund", "mann", "rennt", "auf", "dem", "gras", "zwei"]
NBEST = "0 ||| ein hund rennt ||| nmt= -1 ||| -1\n0 ||| ein mann ||| nmt= -2 ||| -2\n1 ||| zwei hund ||| nmt= -1 ||| -1\n"


def write_toy_data(d: Path) -> None:
    """train/val .en/.de (the same toy sentences on both sides), an n-best list and its sources."""
    rng = random.Random(7)
    for split, n in (("train", 60), ("val", 6)):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 4))) for _ in range(n)]
        for lang in ("en", "de"):
            (d / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (d / "in.nbest").write_text(NBEST, encoding="utf-8")
    (d / "src.en").write_text("ein hund rennt\nzwei hund\n", encoding="utf-8")


def train_runs(d: Path) -> None:
    """d/nmt (reverse de->en NMT, tiny), d/lm (de LM) and d/emb.pt (+ d/img.pt with 5-d images)."""
    assert main(["nmt", "train", "--data-dir", str(d), "--src-lang", "de", "--tgt-lang", "en", "--out", str(d / "nmt"),
                 "--preset", "tiny", "--max-epochs", "1", "--min-freq", "1", "--threads", "1"]) == 0
    assert main(["lm", "train", "--train", str(d / "train.de"), "--val", str(d / "val.de"), "--out", str(d / "lm"),
                 "--emb-dim", "8", "--hidden", "8", "--min-freq", "1", "--max-epochs", "1", "--threads", "1"]) == 0
    vocab = Vocab.build([[w] for w in WORDS])
    for name, image_dim in (("emb", 0), ("img", 5)):
        torch.manual_seed(0)
        cfg = ModelConfig(languages=["en", "de"], vocab_sizes={"en": len(vocab), "de": len(vocab)}, word_dim=8,
                          hidden_dim=8, joint_dim=6, image_dim=image_dim)
        save_model(str(d / f"{name}.pt"), MLMME(cfg), {"en": vocab, "de": vocab}, {"note": "test model"})


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (names and bytes), symlinks as their targets."""
    return {str(p.relative_to(root)): (str(p.readlink()).encode() if p.is_symlink() else p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file() or p.is_symlink()}


def run(argv: list[str]) -> int:
    """main(argv)'s exit status, argparse's SystemExit included."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def refused(argv: list[str], capsys, root: Path, *needles: str) -> str:
    """Run argv: exit 2, one `rerank CMD: error:` line holding every needle, no file under root
    created, changed or removed. Returns the error line."""
    before = snapshot(root)
    status = run(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("rerank ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert snapshot(root) == before
    return lines[0]
