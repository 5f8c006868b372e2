"""Plug-ins registered by entry point, used without a line of the core changed: the toy package
tests/toy_plugins (rerank_toy) registers the MBR utility `unigram-f1`, the n-best format
`toy-blocks` and the metric `unigram-f1`, and the commands and the Python API take them by name
as they take the built-in ones.

The MBR feature of the toy utility is checked against the brute-force expectation
mbr(h_i) = 100 sum_j p_j U(h_i, h_j), p = softmax(nmt / T) within each list, with U computed
here; the format by round trips through moses and by its reader's fields.
"""

import json
from collections import Counter

import numpy as np
import pytest

import rerank
from rerank.cli import main
from rerank.errors import InputError
from tests.toy_plugins import run_rerank, toy_plugins  # noqa: F401 - the fixture, used by name

LISTS = [["the cat sat on the mat", "a cat sat on a mat", "the the cat", ""],
         ["hello world", "hello there world"],
         ["only one"],
         ["x y z", "z y x", "x x x x", "y"]]
NMT = [[-1.0, -1.5, -2.5, -4.0], [-0.5, -0.7], [-1.0], [-2.0, -2.1, -3.0, -0.2]]
TEMPERATURE = 0.7


def unigram_f1(a: str, b: str) -> float:
    """U(a, b) = 2 |a ∩ b| / (|a| + |b|) over whitespace words (1 for two empty texts)."""
    matches = sum((Counter(a.split()) & Counter(b.split())).values())
    total = len(a.split()) + len(b.split())
    return 2 * matches / total if total else 1.0


def posterior(scores):
    e = np.exp(np.array(scores) / TEMPERATURE - max(scores) / TEMPERATURE)
    return e / e.sum()


def brute_force_exact() -> list[float]:
    return [100 * sum(p_j * unigram_f1(h_i, h_j) for p_j, h_j in zip(posterior(scores), hyps))
            for hyps, scores in zip(LISTS, NMT) for h_i in hyps]


def brute_force_aggregate() -> list[float]:
    """100 U(h_i, E_p[h]): clipped matches against the expected word counts, over |h_i| + E|h|."""
    out = []
    for hyps, scores in zip(LISTS, NMT):
        p = posterior(scores)
        expected = Counter()
        for p_j, h_j in zip(p, hyps):
            for word, count in Counter(h_j.split()).items():
                expected[word] += p_j * count
        length = sum(p_j * len(h_j.split()) for p_j, h_j in zip(p, hyps))
        for h_i in hyps:
            matches = sum(min(count, expected[word]) for word, count in Counter(h_i.split()).items())
            out.append(100 * 2 * matches / (len(h_i.split()) + length))
    return out


def moses_text() -> str:
    return "".join(f"{i} ||| {h} ||| nmt= {s!r} ||| {s!r}\n" for i, (hyps, scores) in enumerate(zip(LISTS, NMT))
                   for h, s in zip(hyps, scores))


def toy_text() -> str:
    return "".join(f"== {i}\n" + "".join(f"{s!r} | nmt={s!r} | {h}\n" for h, s in zip(hyps, scores))
                   for i, (hyps, scores) in enumerate(zip(LISTS, NMT)))


@pytest.mark.usefixtures("toy_plugins")
def test_the_toy_utility_through_the_command_line_is_the_brute_force_expectation(tmp_path):
    (tmp_path / "in.nbest").write_text(moses_text(), encoding="utf-8")
    result = run_rerank("features", tmp_path / "in.nbest", "--which", "mbr", "--mbr-utility", "unigram-f1",
                        "--mbr-temperature", TEMPERATURE, "-o", tmp_path / "out.nbest")
    assert result.returncode == 0, result.stderr
    out = rerank.read_nbest(tmp_path / "out.nbest")
    assert out.feature_names == ["nmt", "mbr"]
    np.testing.assert_allclose(out.column("mbr"), brute_force_exact(), rtol=0, atol=1e-9)


@pytest.mark.usefixtures("toy_plugins")
def test_the_toy_utility_through_the_python_api_exact_and_aggregate():
    nbest = rerank.NBestList.from_lists(LISTS, [np.array(s)[:, None] for s in NMT], ["nmt"], [np.array(s) for s in NMT])
    exact = rerank.add_features(nbest, "mbr", mbr_utility="unigram-f1", mbr_temperature=TEMPERATURE)
    np.testing.assert_allclose(exact.column("mbr"), brute_force_exact(), rtol=0, atol=1e-9)
    aggregate = rerank.add_features(nbest, "mbr", mbr_utility="unigram-f1", mbr_temperature=TEMPERATURE,
                                    mbr_method="aggregate")
    np.testing.assert_allclose(aggregate.column("mbr"), brute_force_aggregate(), rtol=0, atol=1e-9)


@pytest.mark.usefixtures("toy_plugins")
def test_the_toy_utility_is_a_text_utility_with_no_model_or_smoothing(tmp_path):
    (tmp_path / "in.nbest").write_text(moses_text(), encoding="utf-8")
    for extra in (["--mbr-model", tmp_path / "in.nbest"], ["--mbr-bleu-smooth", "exp"]):
        result = run_rerank("features", tmp_path / "in.nbest", "--which", "mbr", "--mbr-utility", "unigram-f1",
                            *extra, "-o", tmp_path / "out.nbest")
        assert result.returncode == 2 and "the unigram-f1 utility has none" in result.stderr, result.stderr
        assert not (tmp_path / "out.nbest").exists()


def test_without_the_toy_package_its_names_are_unknown(tmp_path, capsys):
    (tmp_path / "in.nbest").write_text(moses_text(), encoding="utf-8")
    assert main(["features", str(tmp_path / "in.nbest"), "--which", "mbr", "--mbr-utility", "unigram-f1",
                 "-o", str(tmp_path / "out.nbest")]) == 2
    assert "--mbr-utility 'unigram-f1' is no MBR utility (known: bleu, chrf, ter, comet" in capsys.readouterr().err
    with pytest.raises(InputError, match="unknown n-best format 'toy-blocks'"):
        rerank.read_nbest(tmp_path / "in.nbest", "toy-blocks")


@pytest.mark.usefixtures("toy_plugins")
def test_the_toy_format_is_read_detected_and_round_trips_through_moses(tmp_path):
    (tmp_path / "in.toy").write_text(toy_text(), encoding="utf-8")
    nbest = rerank.read_nbest(tmp_path / "in.toy")  # detected
    hyps, offsets = list(nbest.hyps), nbest.offsets.tolist()
    assert [hyps[a:b] for a, b in zip(offsets, offsets[1:])] == LISTS
    assert nbest.feature_names == ["nmt"] and nbest.column("nmt").tolist() == sum(NMT, [])
    assert nbest.scores.tolist() == sum(NMT, [])
    info = run_rerank("info", tmp_path / "in.toy", "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["format"] == "toy-blocks"
    moses = run_rerank("convert", tmp_path / "in.toy", "--to", "moses", "-o", tmp_path / "out.nbest")
    assert moses.returncode == 0, moses.stderr
    assert rerank.read_nbest(tmp_path / "out.nbest", "moses").column("nmt").tolist() == sum(NMT, [])
    back = run_rerank("convert", tmp_path / "out.nbest", "--to", "toy-blocks", "-o", tmp_path / "back.toy")
    assert back.returncode == 0, back.stderr
    assert (tmp_path / "back.toy").read_text(encoding="utf-8") == toy_text()


@pytest.mark.usefixtures("toy_plugins")
def test_the_toy_utility_on_the_toy_format(tmp_path):
    """Both plug-ins in one command: a toy-blocks list in, its mbr column out in toy-blocks."""
    (tmp_path / "in.toy").write_text(toy_text(), encoding="utf-8")
    result = run_rerank("features", tmp_path / "in.toy", "--which", "mbr", "--mbr-utility", "unigram-f1",
                        "--mbr-temperature", TEMPERATURE, "--to", "toy-blocks", "-o", tmp_path / "out.toy")
    assert result.returncode == 0, result.stderr
    out = rerank.read_nbest(tmp_path / "out.toy", "toy-blocks")
    np.testing.assert_allclose(out.column("mbr"), brute_force_exact(), rtol=0, atol=1e-9)


# ---- the toy metric through eval, tune --metric, oracle --metric and report ---------------------

M_LISTS = [["the cat sat", "a cat sat on the mat", "dogs run"], ["hello world", "hello there world", "bye"],
           ["x y", "x y z w", "q"]]
M_NMT = [-1.0, -3.0, -2.0]          # every list: a negative nmt weight picks the second hypothesis
REF = ["a cat sat on", "hello there", "x"]


def corpus_f1(hyps, refs) -> float:
    """100 * 2 sum M / sum (|h| + |r|): the toy metric's corpus score, brute force."""
    matches = sum(sum((Counter(h.split()) & Counter(r.split())).values()) for h, r in zip(hyps, refs))
    return 100 * 2 * matches / sum(len(h.split()) + len(r.split()) for h, r in zip(hyps, refs))


@pytest.fixture
def metric_files(tmp_path):
    (tmp_path / "in.nbest").write_text("".join(f"{i} ||| {h} ||| nmt= {s!r} ||| {s!r}\n" for i, hyps in enumerate(M_LISTS)
                                               for h, s in zip(hyps, M_NMT)), encoding="utf-8")
    (tmp_path / "ref").write_text("\n".join(REF) + "\n", encoding="utf-8")
    for k in (0, 1):
        (tmp_path / f"sys{k}").write_text("\n".join(hyps[k] for hyps in M_LISTS) + "\n", encoding="utf-8")
    return tmp_path


@pytest.mark.usefixtures("toy_plugins")
def test_eval_scores_the_toy_metric(metric_files):
    result = run_rerank("eval", "-r", metric_files / "ref", "-b", metric_files / "sys0", metric_files / "sys1",
                        "--metrics", "bleu,unigram-f1", "--to", "json")
    assert result.returncode == 0, result.stderr
    scores = {(r["system"], r["metric"]): r["score"] for r in json.loads(result.stdout)["results"]}
    for k in (0, 1):
        assert scores[(f"sys{k}", "unigram-f1")] == pytest.approx(corpus_f1([h[k] for h in M_LISTS], REF), abs=1e-9)


@pytest.mark.usefixtures("toy_plugins")
def test_tune_toward_the_toy_metric(metric_files):
    references = [hyps[1] for hyps in M_LISTS]   # the hypotheses a negative nmt weight picks
    (metric_files / "ref1").write_text("\n".join(references) + "\n", encoding="utf-8")
    result = run_rerank("tune", metric_files / "in.nbest", "-r", metric_files / "ref1", "--metric", "unigram-f1",
                        "-o", metric_files / "w.json")
    assert result.returncode == 0, result.stderr
    meta = json.loads((metric_files / "w.json").read_text())["meta"]
    assert meta["metric"] == "unigram-f1" and meta["tuned_score"] == pytest.approx(100.0)


@pytest.mark.usefixtures("toy_plugins")
def test_oracle_by_the_toy_metric_is_the_brute_force_pick(metric_files):
    f1 = [[corpus_f1([h], [r]) for h in hyps] for hyps, r in zip(M_LISTS, REF)]
    assert all(len(set(row)) == len(row) for row in f1)   # no ties: the pick is one hypothesis
    picks = [hyps[int(np.argmax(row))] for hyps, row in zip(M_LISTS, f1)]
    result = run_rerank("oracle", metric_files / "in.nbest", "-r", metric_files / "ref", "--metric", "unigram-f1",
                        "-o", metric_files / "oracle.txt")
    assert result.returncode == 0, result.stderr
    assert (metric_files / "oracle.txt").read_text(encoding="utf-8").splitlines() == picks
    assert f"{corpus_f1(picks, REF):.2f}" in next(line for line in result.stdout.splitlines() if "oracle" in line)


@pytest.mark.usefixtures("toy_plugins")
def test_report_with_the_toy_metric_and_oracle_metric(metric_files):
    tuned = run_rerank("tune", metric_files / "in.nbest", "-r", metric_files / "ref", "-o", metric_files / "w.json")
    assert tuned.returncode == 0, tuned.stderr
    result = run_rerank("report", "-r", metric_files / "ref", "-b", metric_files / "sys0", metric_files / "sys1",
                        "--nbest", metric_files / "in.nbest", "--weights", metric_files / "w.json",
                        "--metrics", "unigram-f1", "--oracle-metric", "unigram-f1", "-o", metric_files / "report.html")
    assert result.returncode == 0, result.stderr
    page = (metric_files / "report.html").read_text(encoding="utf-8")
    assert "UniF1" in page
    for k in (0, 1):
        assert f"{corpus_f1([h[k] for h in M_LISTS], REF):.2f}" in page
