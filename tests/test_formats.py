"""n-best formats: reading real files, round trips, and the data model's invariants."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from rerank.errors import InputError
from rerank.formats import detect_format, read_fairseq, read_nbest, read_plain, write_nbest, ReadReport
from rerank.nbest import NBestList, StringColumn, concatenate, segment_argmax

DATA = Path(__file__).parent / "data"
JOSHUA = str(DATA / "joshua10" / "nbest.joshua")

FAIRSEQ = """\
Generate test with beam=3: BLEU4 = 12.3
S-1\tein hund läuft
T-1\ta dog runs
H-1\t-0.25\ta dog runs
D-1\t-0.25\ta dog runs .
P-1\t-0.1 -0.1 -0.05
H-1\t-0.75\ta dog is running
D-1\t-0.75\ta dog is running .
S-0\tzwei männer
T-0\ttwo men
H-0\t-0.5\ttwo men
D-0\t-0.5\ttwo men .
"""


def test_joshua_file_reads_with_missing_feature_filled():
    nbest = read_nbest(JOSHUA)
    assert detect_format(JOSHUA) == "joshua"
    assert nbest.n_sentences == 10
    assert nbest.n_hyps == 82
    assert nbest.sizes.tolist()[:3] == [10, 7, 4]
    assert len(nbest.feature_names) == 21
    assert nbest.hyps[0] == "rabindranath was born in kolkata a পিরালী ব্রাহ্মণ in the family"
    assert nbest.column("lm_0")[0] == -27.184
    assert nbest.scores[0] == -227.217
    # OOVPenalty is absent on lines without OOV words: filled with 0 and counted
    lacking = [i for i, line in enumerate(Path(JOSHUA).read_text(encoding="utf-8").splitlines())
               if "OOVPenalty=" not in line]
    assert len(lacking) == 11 and nbest.missing["OOVPenalty"] == 11
    # the file's OOVPenalty values are 2, 3 or 4, so the zeros are exactly the filled rows
    assert np.flatnonzero(nbest.column("OOVPenalty") == 0).tolist() == lacking


def test_strict_makes_missing_feature_an_error():
    with pytest.raises(InputError, match=r"nbest\.joshua:\d+: feature 'OOVPenalty' is missing"):
        read_nbest(JOSHUA, strict=True)


@pytest.mark.parametrize("fmt", ["moses", "joshua"])
def test_round_trip_is_exact(tmp_path, fmt):
    nbest = read_nbest(JOSHUA)
    out = tmp_path / f"x.{fmt}.gz"
    write_nbest(nbest, str(out), fmt)
    again = read_nbest(str(out))
    assert again == nbest
    assert again.hyps == nbest.hyps
    assert np.array_equal(again.features, nbest.features)
    assert detect_format(str(out)) == fmt


def test_moses_groups_round_trip(tmp_path):
    text = "0 ||| a b ||| tm= 0.1 -2.5 1e-07 lm= -3 ||| 1.5\n0 ||| a c ||| tm= 0.2 -2 0 lm= -4 ||| 1.25\n1 |||  ||| tm= 1 2 3 lm= 0 ||| 0\n"
    src = tmp_path / "in.nbest"
    src.write_text(text)
    nbest = read_nbest(str(src))
    assert nbest.feature_names == ["tm_0", "tm_1", "tm_2", "lm"]
    assert nbest.groups == [("tm", 3), ("lm", 1)]
    assert nbest.hyps[2] == ""
    assert nbest.features[0, 2] == 1e-07
    write_nbest(nbest, str(tmp_path / "out.nbest"), "moses")
    assert read_nbest(str(tmp_path / "out.nbest")) == nbest
    assert (tmp_path / "out.nbest").read_text().splitlines()[0] == "0 ||| a b ||| tm= 0.1 -2.5 1e-07 lm= -3.0 ||| 1.5"


def test_plain_round_trip(tmp_path):
    nbest = read_nbest(JOSHUA)
    paths = write_nbest(nbest, str(tmp_path / "hyps.txt"), "plain")
    assert [Path(p).name for p in paths] == ["hyps.txt", "hyps.txt.ids", "hyps.txt.features.tsv"]
    again = read_plain(paths[0], ids=paths[1], features=paths[2])
    assert again.hyps == nbest.hyps
    assert np.array_equal(again.offsets, nbest.offsets)
    assert np.array_equal(again.features, nbest.features)
    # sizes file and .npy features are the other plain variant
    (tmp_path / "sizes").write_text("\n".join(str(s) for s in nbest.sizes) + "\n")
    np.save(tmp_path / "f.npy", nbest.features)
    again = read_plain(paths[0], sizes=str(tmp_path / "sizes"), features=str(tmp_path / "f.npy"), feature_names=nbest.feature_names)
    assert again.feature_names == nbest.feature_names
    assert np.array_equal(again.features, nbest.features)


def test_fairseq_ids_out_of_order_and_references(tmp_path):
    path = tmp_path / "gen.out"
    path.write_text(FAIRSEQ)
    report = ReadReport()
    nbest = read_fairseq(str(path), report=report)
    detected = ReadReport()
    assert detect_format(str(path), detected) == "fairseq"  # past the log line before the first S- line
    assert detected.notes == ["read as fairseq output: skipped 1 log line(s) before the first S-/T-/H-/D-/P- line"]
    assert nbest.n_sentences == 2
    assert list(nbest.hyps) == ["two men .", "a dog runs .", "a dog is running ."]
    assert nbest.column("nmt").tolist() == [-0.5, -0.25, -0.75]
    assert report.fairseq_refs == ["two men", "a dog runs"]
    assert report.fairseq_sources == ["zwei männer", "ein hund läuft"]
    tokenised = read_fairseq(str(path), field="H")
    assert list(tokenised.hyps) == ["two men", "a dog runs", "a dog is running"]
    out = tmp_path / "back.fairseq"
    write_nbest(nbest, str(out), "fairseq")
    again = read_nbest(str(out), "fairseq")
    assert again.hyps == nbest.hyps and np.array_equal(again.features, nbest.features)


def test_gzip_is_transparent(tmp_path):
    gz = tmp_path / "n.gz"
    gz.write_bytes(gzip.compress(Path(JOSHUA).read_bytes()))
    assert read_nbest(str(gz)) == read_nbest(JOSHUA)


def test_segment_argmax_ties_go_to_first_and_batches():
    offsets = np.array([0, 3, 4, 7])
    values = np.array([1.0, 3.0, 3.0, -1.0, 0.0, 0.0, 0.0])
    assert segment_argmax(values, offsets).tolist() == [1, 3, 4]
    batch = np.stack([values, -values])
    assert segment_argmax(batch, offsets).tolist() == [[1, 3, 4], [0, 3, 4]]


def test_select_concatenate_and_string_column():
    nbest = read_nbest(JOSHUA)
    first, second = nbest.select_sentences(range(0, 4)), nbest.select_sentences(range(4, 10))
    assert concatenate([first, second]) == nbest
    assert second.hyps[0] == nbest.hyps[int(nbest.offsets[4])]
    column = StringColumn.from_strings(["", "ä b", "c"])
    assert list(column) == ["", "ä b", "c"] and column[-1] == "c" and column[1:] == ["ä b", "c"]


def test_data_model_rejects_inconsistent_arrays():
    with pytest.raises(ValueError, match="offsets end at 3"):
        NBestList(np.array([0, 3]), ["a", "b"], np.zeros((2, 1)), ["f"])
    with pytest.raises(ValueError, match="duplicate feature names"):
        NBestList(np.array([0, 1]), ["a"], np.zeros((1, 2)), ["f", "f"])


def test_select_features_keeps_the_named_columns_in_that_order(tmp_path):
    text = ("0 ||| a b ||| tm= 0.1 -2.5 lm= -3 len= 2 ||| 1.5\n0 ||| a c ||| tm= 0.2 -2 lm= -4 len= 2 ||| 1.25\n"
            "1 ||| d ||| tm= 1 2 lm= 0 len= 1 ||| 0\n")
    (tmp_path / "in.nbest").write_text(text)
    nbest = read_nbest(str(tmp_path / "in.nbest"))
    kept = nbest.select_features(["len", "tm_1", "lm"])
    assert kept.feature_names == ["len", "tm_1", "lm"] and kept.groups == [("len", 1), ("tm_1", 1), ("lm", 1)]
    assert kept.features.tolist() == [[2, -2.5, -3], [2, -2, -4], [1, 2, 0]]
    assert kept.hyps == nbest.hyps and kept.scores.tolist() == [1.5, 1.25, 0]
    assert nbest.feature_names == ["tm_0", "tm_1", "lm", "len"]  # the original is untouched
    write_nbest(kept, str(tmp_path / "out.nbest"))
    assert (tmp_path / "out.nbest").read_text().splitlines()[0] == "0 ||| a b ||| len= 2.0 tm_1= -2.5 lm= -3.0 ||| 1.5"
    with pytest.raises(InputError, match=r"no feature column 'channel', 'nmt'; the columns are tm_0, tm_1, lm, len"):
        nbest.select_features(["lm", "channel", "nmt"])
