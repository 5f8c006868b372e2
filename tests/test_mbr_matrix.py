"""The MBR utility matrix folder (`MBROptions.matrix`, --mbr-matrix DIR; rerank.mbr_matrix): a run
that writes it equals one without, bit for bit; a later run reads it without scoring a pair (the
utility patched to fail) and equals a run without it, at any temperature, reference limit or
candidates; another utility, utility option, model or list is refused in one line naming the
file; a run killed before the index is rebuilt, a damaged folder refused."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from rerank import consensus as C
from rerank.cli import main
from rerank.errors import InputError
from rerank.formats import read_nbest, write_nbest
from rerank.mbr_matrix import FORMAT, INDEX, matrix_store
from rerank.nbest import NBestList

LISTS = [
    ["the cat sat on the mat .", "a cat sat on the mat .", "the cat is on the mat", "the the the cat"],
    ["Hello , world !", "hello world"],
    [],
    ["only one"],
    ["3.5 km , 12-4", "3.5 km, 12 - 4", "", "km km km km km km", "The Cat sat"],
]


def make(lists=LISTS):
    rng = np.random.default_rng(len(lists))
    feats = [rng.normal(size=(len(hyps), 1)) for hyps in lists]
    return NBestList.from_lists(lists, feats, ["nmt"], [f[:, 0] for f in feats])


def scores(nbest, **options):
    return C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions(**options), block_pairs=20)


def no_pair_scored(monkeypatch):
    """Every built-in text utility's exact fails: what follows reads the matrix alone."""
    def fail(*args, **kwargs):
        raise AssertionError("a pair was scored")
    for cls in (C.BLEUUtility, C.CHRFUtility, C.TERUtility):
        monkeypatch.setattr(cls, "exact", fail)


@pytest.mark.parametrize("utility", ["bleu", "chrf", "ter"])
def test_writing_then_reading_the_matrix_equals_no_matrix(tmp_path, monkeypatch, utility):
    nbest, folder = make(), tmp_path / "m"
    plain = scores(nbest, utility=utility)
    np.testing.assert_array_equal(scores(nbest, utility=utility, matrix=str(folder)), plain)
    index = json.loads((folder / INDEX).read_text())
    assert index["format"] == FORMAT and len(index["lists"]) == nbest.n_sentences
    for entry, hyps in zip(index["lists"], LISTS):  # each list's n x n matrix, where the index says
        assert entry["n"] == len(hyps)
        if hyps:
            block = np.load(folder / entry["file"], mmap_mode="r")
            matrix = np.asarray(block[entry["start"]:entry["start"] + len(hyps) ** 2]).reshape(len(hyps), len(hyps))
            one = make([hyps])
            I, J, _ = C.pair_index(np.asarray(one.offsets))
            np.testing.assert_array_equal(matrix.ravel(), C.MBR_UTILITIES.get(utility)().exact(
                None, hyps, np.zeros(len(hyps), dtype=np.int64), I, J))
    no_pair_scored(monkeypatch)
    np.testing.assert_array_equal(scores(nbest, utility=utility, matrix=str(folder)), plain)


def test_another_temperature_limit_or_candidates_reuse_the_matrix(tmp_path, monkeypatch):
    nbest, folder = make(), str(tmp_path / "m")
    settings = [dict(temperature=0.3), dict(temperature=4.0, references=2), dict(references=1)]
    expected = [scores(nbest, utility="chrf", **s) for s in settings]
    candidates = C.top_rows(nbest.column("nmt"), np.asarray(nbest.offsets), 2)
    with_candidates = C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("chrf"), candidates=candidates)
    plain = scores(nbest, utility="chrf")
    scores(nbest, utility="chrf", matrix=folder)
    no_pair_scored(monkeypatch)
    for s, values in zip(settings, expected):
        np.testing.assert_array_equal(scores(nbest, utility="chrf", matrix=folder, **s), values)
    np.testing.assert_array_equal(C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("chrf", matrix=folder),
                                               candidates=candidates), with_candidates)
    # the blocks of the reading run need not be the writing run's
    np.testing.assert_array_equal(C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("chrf", matrix=folder)),
                                  plain)


DECODERS = [dict(method="c2f", c2f_k=2), dict(method="pruning", pruning_schedule=[1, 2, 3], seed=3),
            dict(method="probabilistic", sample_ratio=0.5, rank=2, seed=1), dict(method="c2f", c2f_k=1, temperature=3.0)]


@pytest.mark.parametrize("utility", ["bleu", "chrf"])
def test_the_decoders_that_score_pairs_read_the_exact_methods_matrix(tmp_path, monkeypatch, utility):
    nbest, folder = make(), str(tmp_path / "m")
    expected = [scores(nbest, utility=utility, **d) for d in DECODERS]
    scores(nbest, utility=utility, matrix=folder)
    no_pair_scored(monkeypatch)
    for decoder, values in zip(DECODERS, expected):
        np.testing.assert_array_equal(scores(nbest, utility=utility, matrix=folder, **decoder), values)


@pytest.mark.parametrize("change", [
    dict(utility="bleu"), dict(utility="bleu", tokenize="char"), dict(utility="bleu", bleu_smooth="exp")])
def test_another_utility_or_its_options_is_refused_naming_the_index(tmp_path, change):
    folder = tmp_path / "m"
    scores(make(), utility="bleu" if change.get("utility") != "bleu" or len(change) > 1 else "chrf",
           matrix=str(folder))
    with pytest.raises(InputError, match="the utility matrix was made by") as caught:
        scores(make(), matrix=str(folder), **change)
    assert caught.value.path == str(folder / INDEX) and "\n" not in str(caught.value)


def test_other_texts_or_lists_are_refused(tmp_path):
    folder = str(tmp_path / "m")
    scores(make(), utility="chrf", matrix=folder)
    changed = [list(hyps) for hyps in LISTS]
    changed[4][2] = "a new hypothesis"
    with pytest.raises(InputError, match="list 5's texts are not those of the utility matrix"):
        scores(make(changed), utility="chrf", matrix=folder)
    with pytest.raises(InputError, match="the utility matrix was made by"):   # lowercased: in the signature
        C.mbr_scores(make(), make().column("nmt"), C.MBROptions("chrf", matrix=folder), lowercase=True)
    with pytest.raises(InputError, match="holds 5 lists, the n-best 4"):
        scores(make(LISTS[:4]), utility="chrf", matrix=folder)
    with pytest.raises(InputError, match="list 2 has 3 hypotheses, its utility matrix 2"):
        scores(make([LISTS[0], LISTS[1] + ["x"], *LISTS[2:]]), utility="chrf", matrix=folder)


def test_a_killed_run_is_rebuilt_and_a_damaged_folder_refused(tmp_path, monkeypatch):
    nbest, folder = make(), tmp_path / "m"
    plain = scores(nbest, utility="chrf")
    real = C.CHRFUtility.exact
    calls = []

    def dies_on_the_third_block(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(C.CHRFUtility, "exact", dies_on_the_third_block)
    with pytest.raises(KeyboardInterrupt):
        scores(nbest, utility="chrf", matrix=str(folder))
    assert not (folder / INDEX).exists() and len(os.listdir(folder)) == 2   # two blocks, no index: no matrix
    (folder / "block-000099.npy").write_bytes(b"left over")
    monkeypatch.setattr(C.CHRFUtility, "exact", real)
    np.testing.assert_array_equal(scores(nbest, utility="chrf", matrix=str(folder)), plain)
    assert not (folder / "block-000099.npy").exists()
    index = json.loads((folder / INDEX).read_text())
    used = sorted({e["file"] for e in index["lists"] if e["file"]})
    assert sorted(f for f in os.listdir(folder) if f.endswith(".npy")) == used
    (folder / used[-1]).write_bytes(b"damaged")
    with pytest.raises(InputError, match="cannot read this utility matrix block") as caught:
        scores(nbest, utility="chrf", matrix=str(folder))
    assert caught.value.path == str(folder / used[-1])
    np.save(folder / used[-1], np.zeros(1))
    with pytest.raises(InputError, match="shorter than the index says"):
        scores(nbest, utility="chrf", matrix=str(folder))
    os.unlink(folder / used[-1])
    with pytest.raises(InputError, match="cannot read this utility matrix block"):
        scores(nbest, utility="chrf", matrix=str(folder))


def test_a_method_without_a_matrix_and_a_file_as_folder_are_refused(tmp_path):
    with pytest.raises(InputError, match="the aggregate method scores none") as caught:
        scores(make(), utility="chrf", method="aggregate", matrix=str(tmp_path / "m"))
    assert caught.value.option == "matrix"
    with pytest.raises(InputError, match="the centroid method scores none"):   # (chrf has no embeddings either)
        matrix_store(C.MBROptions("chrf", method="centroid", matrix=str(tmp_path / "m")), C.CHRFUtility(), False, [2])
    with pytest.raises(InputError, match="the c2f method reads a utility matrix \\(matrix\\) but writes none") as caught:
        scores(make(), utility="chrf", method="c2f", matrix=str(tmp_path / "m"))
    assert caught.value.path == str(tmp_path / "m" / INDEX) and not (tmp_path / "m").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is not a folder"):
        scores(make(), utility="chrf", matrix=str(tmp_path / "file"))


def test_the_command_line_writes_reads_and_refuses_in_one_line(tmp_path, capsys):
    nbest_path, folder = tmp_path / "list.gz", tmp_path / "m"
    write_nbest(make([hyps for hyps in LISTS if hyps]), str(nbest_path))
    outputs = []
    for k in range(2):
        out = tmp_path / f"out{k}.gz"
        assert main(["features", str(nbest_path), "--which", "mbr", "--mbr-utility", "chrf", "--mbr-matrix",
                     str(folder), "--quiet", "-o", str(out)]) == 0
        outputs.append(read_nbest(str(out)).column("mbr"))
    np.testing.assert_array_equal(outputs[0], outputs[1])
    capsys.readouterr()
    assert main(["features", str(nbest_path), "--which", "mbr", "--mbr-utility", "bleu", "--mbr-matrix", str(folder),
                 "--quiet", "-o", str(tmp_path / "bleu.gz")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(folder / INDEX) in err


@pytest.mark.neural
def test_a_model_utilitys_matrix_is_read_for_its_model_alone(tmp_path, monkeypatch):
    """sim on tiny random-weight encoders: the second run encodes nothing, another model (other
    weights: another sha256 of its files) is refused."""
    import torch

    from rerank.recipes import tiny_models

    torch.set_num_threads(1)
    tokenizer = tiny_models.train_tokenizer(tiny_models.read_text(tiny_models.DEFAULT_TEXT))
    encoders = [tiny_models.build_sentence_encoder(str(tmp_path / f"st{seed}"), tokenizer, seed=seed)
                for seed in (3, 4)]
    nbest, folder = make([hyps for hyps in LISTS if hyps]), str(tmp_path / "m")

    def run(encoder, **options):
        return C.mbr_scores(nbest, nbest.column("nmt"), C.MBROptions("sim", **options),
                            model=C.make_utility("sim", encoder, None))

    plain = run(encoders[0], temperature=0.5)
    run(encoders[0], matrix=folder)
    cls = type(C.make_utility("sim", encoders[0], None))
    monkeypatch.setattr(cls, "vectors", lambda self, texts: (_ for _ in ()).throw(AssertionError("encoded")))
    with pytest.raises(AssertionError, match="encoded"):   # the patch holds: only the folder can answer
        run(encoders[0])
    np.testing.assert_array_equal(run(encoders[0], temperature=0.5, matrix=folder), plain)
    with pytest.raises(InputError, match="the utility matrix was made by .*model_sha256"):
        run(encoders[1], matrix=folder)
