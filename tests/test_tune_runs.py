"""`rerank tune`: one BLEU default (13a) recorded with its signature, the best-of-runs file with the
runs' metadata, and --runs N that resumes after an interruption without mixing invocations."""

import argparse
import json

import pytest
import sacrebleu

from rerank.mira.tuners import KBMiraTuner
from tests.mira_helpers import NBEST, REFS, one_best
from tests.cli_helpers import run

REF_ARGS = [x for r in REFS for x in ("-r", r)]
SMALL = ["tune", NBEST, *REF_ARGS, "--sentences", "0-29", "--epochs", "3", "--quiet"]


def meta_of(path):
    return json.loads(path.read_text())["meta"]


def test_default_tokenizer_is_13a_with_its_signature(tmp_path, capsys):
    out = tmp_path / "w.json"
    code, _, err = run([*SMALL, "-o", out], capsys)
    assert code == 0, err
    data = json.loads(out.read_text())
    meta = data["meta"]
    assert meta["tokenize"] == "13a"
    assert meta["signature"] == f"BLEU|nrefs:4|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    from rerank.formats import read_nbest

    nbest = read_nbest(NBEST).select_sentences(list(range(30)))
    refs = [open(r, encoding="utf-8").read().splitlines()[:30] for r in REFS]
    tuned = one_best(nbest, [data["weights"][n] for n in nbest.feature_names])
    assert meta["tuned_score"] == pytest.approx(sacrebleu.corpus_bleu(tuned, refs).score)   # sacrebleu's default: 13a


def test_ter_signature(tmp_path, capsys):
    code, _, err = run([*SMALL, "--sentences", "0-4", "--tuner", "mert", "--metric", "ter", "--restarts", "1",
                        "-o", tmp_path / "w.json"], capsys)    # sacrebleu's TER is slow: 5 lists
    assert code == 0, err
    assert meta_of(tmp_path / "w.json")["signature"].startswith("TER|nrefs:4|case:lc|tok:tercom")


def test_best_of_runs_carries_the_metadata_of_its_run(tmp_path, capsys):
    out = tmp_path / "w.json"
    code, _, err = run([*SMALL, "--runs", "3", "-o", out], capsys)
    assert code == 0, err
    best = meta_of(out)
    runs = [meta_of(tmp_path / f"w.run{r}.json") for r in (1, 2, 3)]
    chosen = runs[best["run"] - 1]
    assert best["best_of_runs"] == str(tmp_path / f"w.run{best['run']}.json")
    assert best["tuned_scores"] == [r["tuned_score"] for r in runs] and best["tuned_score"] == max(best["tuned_scores"])
    extra = {"best_of_runs", "tuned_scores"}
    assert {k: v for k, v in best.items() if k not in extra} == chosen
    assert json.loads(out.read_text())["weights"] == json.loads((tmp_path / f"w.run{best['run']}.json").read_text())["weights"]
    for key in ("signature", "settings", "tokenize", "curve", "seed", "options"):
        assert key in best


@pytest.mark.faults
def test_an_interrupted_run_resumes_without_mixing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "w.json"
    assert run([*SMALL, "--runs", "2", "-o", out], capsys)[0] == 0
    old_best = out.read_bytes()
    tune = KBMiraTuner.tune

    def interrupted(self, data, w0, *, seed, **kw):
        if seed == 2:
            raise KeyboardInterrupt
        return tune(self, data, w0, seed=seed, **kw)

    monkeypatch.setattr(KBMiraTuner, "tune", interrupted)
    code, _, err = run([*SMALL, "--runs", "2", "--C", "0.02", "-o", out], capsys)   # other settings: redo both
    assert code == 130
    assert "note: removed" in err and "w.run2.json" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.run1.json"]   # new run 1 only; no old run 2, no w.json
    assert meta_of(tmp_path / "w.run1.json")["options"]["C"] == 0.02
    run1 = (tmp_path / "w.run1.json").read_bytes()
    monkeypatch.setattr(KBMiraTuner, "tune", tune)
    code, stdout, err = run([*SMALL, "--runs", "3", "--C", "0.02", "-o", out], capsys)
    assert code == 0, err
    assert f"run 1: reused {tmp_path / 'w.run1.json'} (same settings and inputs)" in stdout
    assert "run 2: BLEU initial" in stdout and "run 3: BLEU initial" in stdout
    assert (tmp_path / "w.run1.json").read_bytes() == run1
    best = meta_of(out)
    assert out.read_bytes() != old_best and len(best["tuned_scores"]) == 3 and best["options"]["C"] == 0.02
    assert all(meta_of(tmp_path / f"w.run{r}.json")["settings"] == best["settings"] for r in (1, 2, 3))


def test_changed_input_or_fewer_runs_redo_and_remove(tmp_path, capsys):
    nbest = tmp_path / "dev.nbest"
    nbest.write_bytes(open(NBEST, "rb").read())
    args = ["tune", nbest, *REF_ARGS, "--sentences", "0-29", "--epochs", "2", "--quiet"]
    out = tmp_path / "w.json"
    assert run([*args, "--runs", "3", "-o", out], capsys)[0] == 0
    nbest.write_bytes(nbest.read_bytes().replace(b"was born", b"was bron", 1))   # same name, another list
    code, stdout, err = run([*args, "--runs", "2", "-o", out], capsys)
    assert code == 0, err
    assert "reused" not in stdout and "w.run3.json" in err and not (tmp_path / "w.run3.json").exists()
    assert len(meta_of(out)["tuned_scores"]) == 2
    code, stdout, err = run([*args, "--runs", "1", "-o", out], capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.nbest", "w.json"]
    assert meta_of(out)["runs"] == 1


def test_a_user_file_named_like_a_run_is_not_removed(tmp_path, capsys):
    keep = tmp_path / "w.run5.json"
    keep.write_text("my notes\n")
    code, _, err = run([*SMALL, "--runs", "2", "-o", tmp_path / "w.json"], capsys)
    assert code == 0, err
    assert keep.read_text() == "my notes\n"


def test_the_nbest_cache_does_not_redo_finished_runs(tmp_path, capsys):
    """--cache changes how the list is read, not what is read: the runs of a first call are reused."""
    out = tmp_path / "w.json"
    assert run([*SMALL, "--runs", "2", "-o", out], capsys)[0] == 0
    code, stdout, err = run([*SMALL, "--runs", "2", "--cache", "-o", out], capsys)
    assert code == 0, err
    assert stdout.count("reused") == 2


def test_the_command_and_the_api_reuse_each_others_runs_and_the_cache_does_not_matter(tmp_path, capsys, monkeypatch):
    """One whitelist of what a run depends on (TuneSettings.REUSE, the list and references as tuned, the
    start weights): runs written by `rerank tune` are reused by `rerank.tune` and the other way round,
    whether the list came through the n-best cache or not and whatever its line endings."""
    import rerank

    monkeypatch.setenv("RERANK_CACHE_DIR", str(tmp_path / "cache"))
    nbest = tmp_path / "dev.nbest"
    nbest.write_bytes(b"".join(open(NBEST, "rb").readlines()[:400]))
    n = rerank.read_nbest(nbest).n_sentences
    refs = [tmp_path / f"ref{k}" for k in range(len(REFS))]
    for path, source in zip(refs, REFS):
        path.write_text("".join(open(source, encoding="utf-8").readlines()[:n]), encoding="utf-8")
    out = tmp_path / "w.json"
    cli = ["tune", nbest, *(x for r in refs for x in ("-r", r)), "--runs", "2", "--quiet", "-o", out, "--epochs", "2"]
    code, stdout, err = run([*cli, "--no-cache"], capsys)
    assert code == 0 and "reused" not in stdout, err
    by_cli = json.loads(out.read_text())["weights"]
    again = rerank.tune(nbest, refs, runs=2, epochs=2, output=out)
    assert [r.reused for r in again.runs] == [True, True] and again.weights == pytest.approx(by_cli)

    nbest.write_bytes(nbest.read_bytes().replace(b"\n", b"\r\n"))   # other bytes, the same list
    for cache in ("--cache", "--no-cache"):
        code, stdout, err = run([*cli, cache], capsys)
        assert code == 0 and stdout.count("reused") == 2, (cache, stdout, err)
    other = rerank.tune(nbest, refs, runs=2, epochs=3, output=out)   # another setting: tuned again
    assert [r.reused for r in other.runs] == [False, False]
    code, stdout, err = run([*cli[:-1], "3"], capsys)
    assert code == 0 and stdout.count("reused") == 2, err


def test_the_normalize_choices_are_the_settings():
    from rerank.api import TuneSettings
    from rerank.cli import build_parser

    parser = build_parser("tune")
    tune = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["tune"]
    NORMALIZE = next(a.choices for a in tune._actions if a.dest == "normalize")
    assert tuple(NORMALIZE) == TuneSettings.NORMALIZE
