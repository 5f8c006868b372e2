"""Bad side files given to the commands that read them: references (oracle, tune, eval), sources
(features), score files (add-feature, text and .npy), weights (apply, tune --init, eval --weights;
JSON, Moses and Joshua), hypothesis files (eval) and an n-best list shorter than its partner
files: exit 2, a message naming the file (and line), nothing written, every input unchanged."""

import numpy as np
import pytest

from tests.test_bad_inputs_common import (ANY_LINE, PATH_CORRUPTIONS, binary, corrupt_file, crlf, drop_lines,
                                          empty, insert_line, key, npy, refused, replace, set_line, succeeds,
                                          text_corruptions, work)  # noqa: F401 (work is a fixture)

EVAL = "eval -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu,ter --ar 20 --bootstrap 0 -o {d}/res.md --quiet"
ORACLE = "oracle {in_nbest} -r {ref_txt} -o {d}/out.txt --quiet"
TUNE = "tune {in_nbest} -r {ref_txt} -o {d}/w.json --epochs 2 --quiet"
REPORT = "report -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu --ar 20 --bootstrap 0 -o {d}/r.html --quiet"
APPLY_REF = "apply {in_nbest} -w {w_nmt_json} -o {d}/out.txt -r {ref_txt} --quiet"
LINES = {"ref": 3, "src": 3, "scores": 6, "hyps": 3}


def common(kind: str) -> dict:
    """Corruptions of any text file: bad bytes, UTF-16, broken gzip, empty, and the path ones."""
    return {**text_corruptions(LINES.get(kind, 2)), "empty": (empty, None),
            **{p: (p, None) for p in PATH_CORRUPTIONS}}


LINE_COUNT = {"line-dropped": (drop_lines(2), None), "line-added": (insert_line(2, "one more line"), None)}
SCORES_BAD = {
    **common("scores"), **LINE_COUNT, "not-a-number": (set_line(2, "high"), 2), "nan": (set_line(2, "nan"), 2),
    "inf": (set_line(3, "-inf"), 3), "huge": (set_line(3, "1e400"), 3), "blank-line": (set_line(4, ""), 4),
    "two-columns": (set_line(2, "0.25 0.5"), 2), "crlf-bom-nan": (crlf(set_line(2, "NaN")), 2),
}
NPY_BAD = {
    "2-d": (binary(lambda _: npy(np.zeros((6, 2)))), None), "strings": (binary(lambda _: npy(np.array(["a"] * 6))), None),
    "objects": (binary(lambda _: npy(np.array([1.0, None] * 3, dtype=object))), None),
    "nan": (binary(lambda _: npy([0.0, np.nan, 1, 2, 3, 4])), None), "length": (binary(lambda _: npy(np.zeros(5))), None),
    "truncated": (binary(lambda data: data[:-5]), None), "not-npy": (binary(lambda _: b"0.5\n1.5\n"), None),
    "missing": ("missing", None), "directory": ("directory", None),
}
JSON_BAD = {
    **common("json"), "truncated": (drop_lines(4), ANY_LINE), "trailing-comma": (replace("0.1", "0.1,", 3), ANY_LINE),
    "string": (replace("1.0", '"high"', 2), None), "nan": (replace("1.0", "NaN", 2), None),
    "huge": (replace("1.0", "1e400", 2), None), "boolean": (replace("1.0", "true", 2), None),
    "list": (lambda _: "[1.0, 0.1]\n", None), "unknown-feature": (replace('"len"', '"lm"', 3), None),
    "crlf-bom-truncated": (crlf(drop_lines(4)), ANY_LINE),
}
MOSES_W_BAD = {
    **common("moses-weights"), "not-a-number": (set_line(2, "len= x"), 2), "nan": (set_line(2, "len= nan"), 2),
    "no-value": (set_line(2, "len="), 2), "garbage": (set_line(2, "hello world again"), 2),
    "group-continued": (set_line(2, "nmt= 2.0"), None), "crlf-bom-huge": (crlf(set_line(2, "len= 1e400")), 2),
}
JOSHUA_W_BAD = {
    **common("joshua-weights"), "not-a-number": (set_line(2, "len x"), 2), "twice": (set_line(2, "nmt 2.0"), 2),
    "huge": (set_line(2, "len -1e400"), 2), "unknown-feature": (set_line(2, "lm 0.1"), None),
}
TEXT_BAD = {**common("ref"), **LINE_COUNT}
WEIGHTS_COMMANDS = {
    "apply": "apply {in_nbest} -w {W} -o {d}/out.txt",
    "tune-init": "tune {in_nbest} -r {ref_txt} --init {W} -o {d}/w.json --epochs 2 --quiet",
    "eval": "eval -r {ref_txt} -b {base_txt} --nbest {in_nbest} --weights {W} --metrics bleu --ar 20 --bootstrap 0 "
            "-o {d}/res.md --quiet",
}
# (test name, command line, file corrupted, corruptions)
GROUPS = [
    *[(f"{c}-ref", line, "ref.txt", TEXT_BAD) for c, line in (("oracle", ORACLE), ("tune", TUNE), ("eval", EVAL),
                                                             ("report", REPORT), ("apply", APPLY_REF))],
    *[(f"{c}-second-ref", line.replace("{ref_txt}", "{ref_txt} -r {ref2_txt}"), "ref2.txt", TEXT_BAD)
      for c, line in (("oracle", ORACLE), ("tune", TUNE), ("eval", EVAL), ("report", REPORT), ("apply", APPLY_REF))],
    ("report-baseline", REPORT, "base.txt", TEXT_BAD),
    ("oracle-ref.gz", ORACLE.replace("{ref_txt}", "{ref_txt_gz}"), "ref.txt.gz", {**text_corruptions(3), **LINE_COUNT}),
    ("features-src", "features {in_nbest} --which mbr --src {src_txt} -o {d}/out.nbest --quiet", "src.txt", TEXT_BAD),
    ("add-feature-scores", "add-feature {in_nbest} --name s --scores {scores_txt} -o {d}/out.nbest", "scores.txt",
     SCORES_BAD),
    ("add-feature-npy", "add-feature {in_nbest} --name s --scores {scores_npy} -o {d}/out.nbest", "scores.npy", NPY_BAD),
    ("plain-npy-features", "info {hyps_txt} --plain-ids {hyps_txt_ids} --plain-features {feats_npy} "
     "--feature-names nmt,len", "feats.npy", {k: v for k, v in NPY_BAD.items() if k != "2-d"}),
    ("eval-baseline", EVAL, "base.txt", TEXT_BAD), ("eval-system", EVAL, "sys.txt", TEXT_BAD),
    *[(f"{c}-json", line.replace("{W}", "{weights_json}"), "weights.json", JSON_BAD) for c, line in WEIGHTS_COMMANDS.items()],
    *[(f"{c}-moses-weights", line.replace("{W}", "{weights_moses}"), "weights.moses", MOSES_W_BAD)
      for c, line in WEIGHTS_COMMANDS.items()],
    *[(f"{c}-joshua-weights", line.replace("{W}", "{weights_joshua}"), "weights.joshua", JOSHUA_W_BAD)
      for c, line in WEIGHTS_COMMANDS.items()],
]
CASES = [(name, bad) for name, _, _, table in GROUPS for bad in table]
GROUP = {name: (line, file, table) for name, line, file, table in GROUPS}


@pytest.mark.parametrize("group,bad", CASES, ids=["-".join(c) for c in CASES])
def test_a_bad_file_is_refused(work, capsys, group, bad):
    line, name, table = GROUP[group]
    corruption, at = table[bad]
    path = corrupt_file(work, name, corruption)
    refused(work, line, capsys, names=path, at=at, **{key(name): path})


@pytest.mark.parametrize("group", GROUP)
def test_the_valid_files_are_accepted(work, capsys, group):
    succeeds(work, GROUP[group][0], capsys)


# An n-best list that is itself valid but shorter than its partner file: both are named.
SHORT = {
    "oracle": (ORACLE, "ref.txt"), "tune": (TUNE, "ref.txt"), "tune-second-ref": (TUNE + " -r {ref2_txt}", "ref.txt"),
    "eval": ("eval -r {ref_txt} -b {base_txt} --nbest {in_nbest} --weights {w_nmt_json} --metrics bleu --ar 20 "
             "--bootstrap 0 -o {d}/res.md", "ref.txt"),
    "features": ("features {in_nbest} --which mbr --src {src_txt} -o {d}/out.nbest --quiet", "src.txt"),
    "add-feature": ("add-feature {in_nbest} --name s --scores {sent_scores_txt} -o {d}/out.nbest", "sent-scores.txt"),
}


@pytest.mark.parametrize("command", SHORT)
@pytest.mark.parametrize("kind", ["moses", "fairseq"])
def test_an_nbest_shorter_than_its_partner_names_both(work, capsys, command, kind):
    line, partner = SHORT[command]
    nbest = corrupt_file(work, "in.nbest" if kind == "moses" else "in.fairseq", drop_lines(5, 6) if kind == "moses"
                         else drop_lines(9, 10, 11, 12))
    err = refused(work, line, capsys, names=nbest, in_nbest=nbest)
    assert str(work / partner) in err.splitlines()[-1]
