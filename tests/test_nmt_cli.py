"""`rerank nmt train|translate` end to end on a toy copy task, including bad input lines."""

import gzip
import random
import re

import pytest

from rerank.cli import main

pytestmark = pytest.mark.neural  # `rerank nmt` trains and runs NMT models (torch), which the imports do not show

WORDS = [f"w{i}" for i in range(10)]
LINE = re.compile(r"^(\d+) \|\|\| (.*) \|\|\| nmt= (\S+) nmt_norm= (\S+) len= (\S+) \|\|\| (\S+)$")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("nmtcli")
    rng = random.Random(4)
    for split, n in (("train", 300), ("val", 20)):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5))) for _ in range(n)]
        for lang in ("en", "de"):
            with gzip.open(d / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
    rc = main(["nmt", "train", "--data-dir", str(d), "--out", str(d / "run"), "--size", "tiny",
               "--max-epochs", "2", "--min-freq", "1", "--threads", "1", "--device", "cuda"])
    assert rc == 0
    return d


def parse(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [LINE.match(line.rstrip("\n")).groups() for line in f]


def test_every_line_gets_n_entries_even_bad_ones(run, capsys):
    inputs = ["w1 w2 w3", "", "w4 ☃ ∑ qqq w5", " ".join(["w6"] * 300), "w7"] * 7  # 35 lines, last batch partial
    (run / "odd.en").write_text("\n".join(inputs) + "\n", encoding="utf-8")
    out = run / "odd.nbest.gz"
    rc = main(["nmt", "translate", "--model", str(run / "run"), "--input", str(run / "odd.en"), "--beam", "4",
               "--nbest", "3", "--batch-size", "8", "--max-src-len", "50", "--nbest-out", str(out),
               "--output", str(run / "odd.1best")])
    assert rc == 0
    err = capsys.readouterr().err
    assert "odd.en:2: empty source line" in err and "odd.en:4: 300 tokens, cut to the first 50" in err
    rows = parse(out)
    ids = [int(r[0]) for r in rows]
    assert sorted(set(ids)) == list(range(len(inputs)))
    assert all(ids.count(i) == 3 for i in range(len(inputs)))
    assert ids == sorted(ids)
    for i in range(len(inputs)):
        block = [r for r in rows if int(r[0]) == i]
        assert len({r[1] for r in block}) == 3
        totals = [float(r[5]) for r in block]
        assert totals == sorted(totals, reverse=True)
        assert all(float(r[5]) == float(r[3]) for r in block)  # total = length-normalised score
        assert all(float(r[4]) == len(r[1].split()) for r in block)
    one_best = (run / "odd.1best").read_text(encoding="utf-8").split("\n")[:-1]
    assert one_best == [r[1] for r in rows if rows.index(r) % 3 == 0]


def test_scores_against_reference(run, capsys):
    rc = main(["nmt", "translate", "--model", str(run / "run"), "--input", str(run / "val.en.gz"), "--beam", "3",
               "--ref", str(run / "val.de.gz"), "--output", str(run / "val.1best"),
               "--scores-out", str(run / "scores.json")])
    assert rc == 0
    import json
    scores = json.loads((run / "scores.json").read_text())
    assert 0 <= scores["bleu"] <= scores["oracle_bleu_3best"] <= 100


def test_bad_arguments_give_clear_errors(run, capsys):
    rc = main(["nmt", "translate", "--model", str(run / "run"), "--input", str(run / "val.en.gz"), "--beam", "2",
               "--nbest", "5"])
    assert rc == 2 and "--nbest 5 must be between 1 and --beam 2" in capsys.readouterr().err
    rc = main(["nmt", "translate", "--model", str(run / "nowhere"), "--input", str(run / "val.en.gz")])
    assert rc == 2 and "no best.pt" in capsys.readouterr().err
    (run / "short.de").write_text("w1\n", encoding="utf-8")
    rc = main(["nmt", "translate", "--model", str(run / "run"), "--input", str(run / "val.en.gz"),
               "--ref", str(run / "short.de")])
    assert rc == 2 and "1 reference lines for 20 input lines" in capsys.readouterr().err
    rc = main(["nmt", "train", "--out", str(run / "x")])
    assert rc == 2 and "--data-dir" in capsys.readouterr().err


def test_subword_vocabulary_round_trip_and_files():
    import json

    from rerank.nmt.vocab import EOS_ID, SPECIALS, SubwordVocab, vocab_from_data
    sents = [["Ein", "Hund", "läuft", "über", "die", "Wiese", "."], ["Zwei", "Hunde", "laufen", "."]] * 20
    for kind in ("bpe", "unigram"):
        v = SubwordVocab.build(sents, 40, kind)
        assert v.itos[:4] == SPECIALS and len(v) <= 40
        ids = v.encode(sents[0])
        assert len(ids) > len(sents[0]) and min(ids) >= 4  # pieces, no specials
        assert v.decode(ids + [EOS_ID, 7, 8]) == sents[0]  # stops at </s>, gives words
        assert v.decode(v.encode(["Hund", "Qx"])) == ["Hund", "<unk>"]  # unseen characters
        again = vocab_from_data(json.loads(v.to_json()))
        assert again.encode(sents[1]) == v.encode(sents[1]) and again.model_type == kind


def test_subword_training_and_translation(tmp_path, capsys):
    rng = random.Random(5)
    for split, n in (("train", 120), ("val", 10)):
        lines = [" ".join(rng.choice(WORDS) + rng.choice(["", "s", "ing"]) for _ in range(rng.randint(2, 5)))
                 for _ in range(n)]
        for lang in ("en", "de"):
            (tmp_path / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rc = main(["nmt", "train", "--data-dir", str(tmp_path), "--out", str(tmp_path / "run"), "--size", "tiny",
               "--max-epochs", "1", "--subword", "bpe", "--subword-size", "30", "--threads", "1"])
    assert rc == 0
    import json
    vocab = json.loads((tmp_path / "run" / "vocab.tgt.json").read_text())
    assert vocab["sentencepiece"] == "bpe"
    rc = main(["nmt", "translate", "--model", str(tmp_path / "run"), "--input", str(tmp_path / "val.en"),
               "--beam", "3", "--nbest-out", str(tmp_path / "val.nbest")])
    assert rc == 0
    rows = parse(tmp_path / "val.nbest")
    assert sorted({int(r[0]) for r in rows}) == list(range(10))
    assert all("▁" not in r[1] and float(r[4]) == len(r[1].split()) for r in rows)  # words, not pieces
    with pytest.raises(SystemExit):
        main(["nmt", "train", "--data-dir", str(tmp_path), "--out", str(tmp_path / "bad"), "--subword", "wordpiece"])
    assert "invalid choice: 'wordpiece'" in capsys.readouterr().err
