"""The toolkits' own n-best outputs (tests/data/producers, made by make_outputs.sh there): each is
detected and read with the hypotheses and scores the toolkit meant, survives `convert` both ways,
and goes through info, tune, apply, oracle and eval, whose BLEU is sacrebleu's on the
post-processed strings.

The expected hypotheses and scores come from a parse written here from each toolkit's documented
layout (split on ` ||| `, on tabs, `json.loads`), independent of the readers under test, and
the expected post-processing from fairseq's one-line definitions and `html.unescape`.
"""

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from rerank.formats import ReadReport, read_nbest
from rerank.formats.decoders import from_ctranslate2
from tests.cli_helpers import run

DATA = Path(__file__).parent / "data" / "producers"
REF = DATA / "ref.en"
SRC_BPE = DATA / "bpe" / "src.bpe.de"


@dataclass
class Output:
    path: str                      # under tests/data/producers
    fmt: str
    columns: list[str]             # the score columns, as the reader names them
    post_process: str = "none"
    unescape: str = "none"
    options: list[str] = field(default_factory=list)   # what the file does not say (OpenNMT's list size)
    ref: Path = REF
    sentences: int = 20

    def __str__(self):
        return self.path


def _marian(line):
    parts = line.split(" ||| ")
    return parts[1], [float(parts[-2].split()[1])], float(parts[-1])


def _tabs(count):
    def parse(line):
        fields = line.rsplit("\t", count) if count else [line]
        return fields[0], [float(v) for v in fields[1:]], None
    return parse


OUTPUTS = [
    Output("marian/nbest.txt", "marian", ["F0"]),
    Output("marian/nbest.normalize1.txt", "marian", ["F0"]),
    Output("marian/nbest.align-hard.txt", "marian", ["F0"]),
    Output("marian/nbest.align-soft.first3.txt", "marian", ["F0"], sentences=3),
    Output("marian/nbest.wordscores.txt", "marian", ["F0"]),
    Output("marian/nbest.nospm.txt", "marian", ["F0"], post_process="sentencepiece"),
    Output("marian/nbest.all.txt", "marian", ["F0"], post_process="sentencepiece"),
    Output("marian/nbest.tokesc.txt", "marian", ["F0"], unescape="html"),
    Output("marian/nbest.tokesc.nospm.txt", "marian", ["F0"], post_process="sentencepiece", unescape="html"),
    Output("marian/nbest.quote.tokesc.txt", "marian", ["F0"], unescape="html", ref=DATA / "marian" / "quote.en",
           sentences=23),
    Output("opennmt/nbest4.with_score.txt", "opennmt", ["score"], "subword_nmt", options=["--src", str(SRC_BPE)]),
    Output("opennmt/nbest4.with_score.lp-none.txt", "opennmt", ["score"], "subword_nmt", options=["--nbest-size", "4"]),
    Output("opennmt/nbest4.txt", "opennmt", [], "subword_nmt", options=["--nbest-size", "4"]),
    Output("eole/nbest4.with_score.txt", "opennmt", ["score", "estim"], "subword_nmt", options=["--src", str(SRC_BPE)]),
    Output("eole/nbest4.noestim.with_score.txt", "opennmt", ["score", "estim"], "subword_nmt",
           options=["--nbest-size", "4"]),
    Output("eole/nbest4.noestim.with_score.lp-none.txt", "opennmt", ["score", "estim"], "subword_nmt",
           options=["--nbest-size", "4"]),
    Output("eole/nbest4.plain.txt", "opennmt", [], "subword_nmt", options=["--nbest-size", "4"]),
    Output("sockeye/nbest4.json", "sockeye", ["cost"], "subword_nmt"),
    Output("sockeye/nbest4.json-input.json", "sockeye", ["cost"], "subword_nmt"),
    Output("sockeye/nbest4.lp-alpha0.json", "sockeye", ["cost"], "subword_nmt"),
]


def expected(output: Output) -> tuple[list[int], list[str], np.ndarray, np.ndarray | None]:
    """(list sizes, hypotheses after post-processing, score columns, totals) parsed here."""
    lines = (DATA / output.path).read_text(encoding="utf-8").splitlines()
    if output.fmt == "sockeye":
        objects = [json.loads(line) for line in lines]
        sizes = [len(o["translations"]) for o in objects]
        rows = [(t, s, None) for o in objects for t, s in zip(o["translations"], o["scores"])]
    elif output.fmt == "marian":
        rows = [_marian(line) for line in lines]
        ids = [int(line.split(" ||| ")[0]) for line in lines]
        sizes = np.bincount(ids).tolist()
    else:
        rows = [_tabs(len(output.columns))(line) for line in lines]
        sizes = [4] * (len(lines) // 4)
    hyps = [text for text, _, _ in rows]
    if output.post_process == "subword_nmt":
        hyps = [re.sub(r"@@( |$)", "", h) for h in hyps]
    if output.post_process == "sentencepiece":
        hyps = ["".join(h.split(" ")).replace("\u2581", " ").strip() for h in hyps]
    if output.unescape == "html":
        hyps = [html.unescape(h) for h in hyps]
    totals = np.array([t for _, _, t in rows]) if output.fmt == "marian" else None
    return sizes, hyps, np.array([s for _, s, _ in rows], dtype=np.float64).reshape(len(rows), -1), totals


def _read_options(output: Output) -> dict:
    options = dict(zip(output.options[::2], output.options[1::2]))
    return {"nbest_size": int(options["--nbest-size"])} if "--nbest-size" in options else (
        {"src": options["--src"]} if "--src" in options else {})


def _text_options(output: Output) -> list[str]:
    return ["--post-process", output.post_process, "--unescape", output.unescape]


@pytest.mark.parametrize("output", OUTPUTS, ids=str)
def test_each_output_is_detected_and_read_as_the_toolkit_meant(output):
    report = ReadReport()
    nbest = read_nbest(str(DATA / output.path), report=report, post_process=output.post_process,
                       unescape=output.unescape, **_read_options(output))
    sizes, hyps, scores, totals = expected(output)
    assert report.detected == output.fmt and nbest.n_sentences == output.sentences == len(sizes)
    assert nbest.sizes.tolist() == sizes and list(nbest.hyps) == hyps
    assert nbest.feature_names == output.columns and np.array_equal(nbest.features, scores.reshape(len(hyps), -1))
    assert (nbest.scores is None) == (totals is None) and (totals is None or np.array_equal(nbest.scores, totals))
    assert not any(": try " in note for note in report.notes)  # nothing left segmented or escaped


@pytest.mark.parametrize("output", [o for o in OUTPUTS if o.post_process != "none" or o.path.endswith("quote.tokesc.txt")],
                         ids=str)
def test_info_says_what_the_raw_text_needs(output, capsys):
    code, out, _ = run(["info", DATA / output.path, *output.options, "--json"], capsys)
    hints = " ".join(json.loads(out)["problems"])
    assert code == 0
    if output.post_process != "none":
        assert f"try post_process={output.post_process!r}" in hints
    if output.path.endswith("quote.tokesc.txt"):
        assert "try unescape='html'" in hints


def test_the_guess_of_each_output_names_its_format(capsys):
    for output in OUTPUTS:
        code, out, err = run(["info", DATA / output.path, *output.options, *_text_options(output)], capsys)
        assert code == 0, (output, err)
        assert f"format:      {output.fmt} (detected)" in out


@pytest.mark.parametrize("output", OUTPUTS, ids=str)
def test_convert_round_trips(output, tmp_path, capsys):
    first = read_nbest(str(DATA / output.path), post_process=output.post_process, unescape=output.unescape,
                       **_read_options(output))
    for to in ("jsonl", "moses"):
        out = tmp_path / f"out.{to}"
        code, _, err = run(["convert", DATA / output.path, *output.options, *_text_options(output), "--to", to,
                            "-o", out], capsys)
        assert code == 0, err
        again = read_nbest(str(out))
        assert list(again.hyps) == list(first.hyps) and again.feature_names == first.feature_names
        assert np.array_equal(again.features, first.features) and np.array_equal(again.offsets, first.offsets)
        assert again.groups == first.groups and (again.scores is None) == (first.scores is None)
        assert first.scores is None or np.array_equal(again.scores, first.scores)   # the totals survive too


def _weights(output: Output, tmp_path) -> Path:
    """The decoder's own choice: its score up (a cost down); eole's estimator left out."""
    path = tmp_path / "w.json"
    path.write_text(json.dumps({output.columns[0]: -1.0 if output.columns[0] == "cost" else 1.0}))
    return path


@pytest.mark.parametrize("output", [o for o in OUTPUTS if o.columns], ids=str)
def test_apply_and_eval_score_the_post_processed_one_best_as_sacrebleu(output, tmp_path, capsys):
    sizes, hyps, scores, _ = expected(output)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    sign = -1.0 if output.columns[0] == "cost" else 1.0
    best = [hyps[a + int(np.argmax(sign * scores[a:b, 0]))] for a, b in zip(starts[:-1], starts[1:])]
    refs = output.ref.read_text(encoding="utf-8").splitlines()[:output.sentences]
    (tmp_path / "ref").write_text("\n".join(refs) + "\n", encoding="utf-8")
    weights, applied = _weights(output, tmp_path), tmp_path / "applied.txt"
    common = [*output.options, *_text_options(output)]
    code, _, err = run(["apply", DATA / output.path, "-w", weights, "-o", applied, *common], capsys)
    assert code == 0, err
    assert applied.read_text(encoding="utf-8").splitlines() == best
    eval_options = ["--nbest-size", "4"] if output.fmt == "opennmt" else []
    code, out, err = run(["eval", "-r", tmp_path / "ref", "-b", applied, "--nbest", f"nbest={DATA / output.path}",
                          "--weights", weights, "--metrics", "bleu", "--to", "json", "--post-process",
                          output.post_process, "--unescape", output.unescape, *eval_options], capsys)
    assert code == 0, err
    scores = {(row["system"], row["metric"]): row["score"] for row in json.loads(out)["results"]}
    assert scores["nbest", "bleu"] == pytest.approx(sacrebleu.corpus_bleu(best, [refs]).score, abs=1e-9)


@pytest.mark.parametrize("output", [o for o in OUTPUTS if o.columns], ids=str)
def test_tune_and_oracle_take_each_output(output, tmp_path, capsys):
    ref = tmp_path / "ref"
    ref.write_text("\n".join(output.ref.read_text(encoding="utf-8").splitlines()[:output.sentences]) + "\n")
    common = [*output.options, *_text_options(output)]
    code, _, err = run(["tune", "--nbest", DATA / output.path, "-r", ref, "--epochs", "3", "--quiet",
                        "-o", tmp_path / "w.json", *common], capsys)
    assert code == 0, err
    meta = json.loads((tmp_path / "w.json").read_text())["meta"]
    assert meta["nbest_text"] == {"post_process": output.post_process, "unescape": output.unescape}
    assert set(json.loads((tmp_path / "w.json").read_text())["weights"]) == set(output.columns)
    code, out, err = run(["oracle", DATA / output.path, "-r", ref, "-o", tmp_path / "oracle.txt", *common], capsys)
    assert code == 0, err
    oracle = (tmp_path / "oracle.txt").read_text(encoding="utf-8").splitlines()
    sizes, hyps, _, _ = expected(output)
    assert len(oracle) == output.sentences and set(oracle) <= set(hyps)
    starts = np.cumsum([0, *sizes])
    lists = [hyps[a:b] for a, b in zip(starts[:-1], starts[1:])]
    assert all(pick in own for pick, own in zip(oracle, lists))       # each pick from its own sentence's list
    refs = [ref.read_text(encoding="utf-8").splitlines()]
    first = [own[0] for own in lists]
    assert sacrebleu.corpus_bleu(oracle, refs).score >= sacrebleu.corpus_bleu(first, refs).score


def test_ctranslate2_results_as_the_toolkit_wrote_them():
    """translate_batch's results (hypotheses as tokens, scores), saved as JSON lines by make_outputs.sh,
    through `from_ctranslate2`: the order, the joined tokens and the scores unchanged."""
    class Result:
        def __init__(self, obj):
            self.hypotheses, self.scores = obj["hypotheses"], obj["scores"]

    for name in ("nbest4.jsonl", "nbest4.lp0.jsonl"):
        objects = [json.loads(line) for line in (DATA / "ctranslate2" / name).read_text(encoding="utf-8").splitlines()]
        nbest = from_ctranslate2([Result(o) for o in objects])
        assert nbest.sizes.tolist() == [len(o["hypotheses"]) for o in objects]
        assert list(nbest.hyps) == [" ".join(tokens) for o in objects for tokens in o["hypotheses"]]
        assert nbest.column("score").tolist() == [s for o in objects for s in o["scores"]]
