"""Bad n-best lists (Moses, Joshua, fairseq, plain with its side files, gzip'd) given to every
command that reads one: exit 2, a message naming the file (and line), no traceback, nothing
written, every input byte-identical."""

import pytest

from tests.test_bad_inputs_common import (ANY_LINE, PATH_CORRUPTIONS, blank, bytes_on_line, corrupt_file, crlf,
                                          drop_lines, empty, insert_line, key, refused, replace, set_line, succeeds,
                                          text_corruptions, work)  # noqa: F401 (work is a fixture)

# command -> its command line; {nbest} is the n-best argument
COMMANDS = {
    "info": "info {nbest}",
    "convert": "convert {nbest} -o {d}/out.nbest",
    "add-feature": "add-feature {nbest} --name s --scores {sent_scores_txt} -o {d}/out.nbest",
    "apply": "apply {nbest} -w {w_nmt_json} -o {d}/out.txt --nbest-out {d}/out.nbest",
    "oracle": "oracle {nbest} -r {ref_txt} -o {d}/out.txt --quiet",
    "features": "features {nbest} --which mbr --src {src_txt} -o {d}/out.nbest --quiet",
    "tune": "tune {nbest} -r {ref_txt} -o {d}/w.json --epochs 2 --quiet",
    "eval": "eval -r {ref_txt} -b {base_txt} --nbest {nbest} --weights {w_nmt_json} --metrics bleu,ter --ar 20 "
            "--bootstrap 0 -o {d}/res.md --quiet",
}
# n-best kind -> (the file corrupted, the n-best argument)
KINDS = {
    "moses": ("in.nbest", "{in_nbest}"),
    "joshua": ("in.joshua", "{in_joshua}"),
    "fairseq": ("in.fairseq", "{in_fairseq}"),
    "moses.gz": ("in.nbest.gz", "{in_nbest_gz}"),
    "plain": ("hyps.txt", "{hyps_txt}"),
    "plain-ids": ("hyps.txt.ids", "{hyps_txt}"),
    "plain-tsv": ("hyps.txt.features.tsv", "{hyps_txt}"),
    "plain-sizes": ("hyps.sizes", "{hyps_txt} --plain-sizes {hyps_sizes}"),
}
LINE2 = "0 ||| a man is riding ||| nmt= -2.0 len= 4 ||| -2.0"
MOSES_BAD = {  # name -> (corruption, line named)
    "empty": (empty, None), "blank-lines": (blank, None),
    "truncated": (set_line(6, "2 ||| red car ||| nmt= -0.9 len"), 6),
    "two-fields": (set_line(6, "2 ||| red car"), 6),
    "not-a-number": (replace("-2.0 len", "abc len", 2), 2), "nan": (replace("nmt= -2.0", "nmt= nan", 2), 2),
    "inf-total": (replace("||| -2.0", "||| -inf", 2), 2), "huge": (replace("nmt= -2.0", "nmt= 1e400", 2), 2),
    "huge-id": (replace("0 |||", "99999999999999999999999 |||", 2), 2),
    "negative-id": (replace("0 |||", "-1 |||", 2), 2), "word-id": (replace("0 |||", "x |||", 2), 2),
    "decreasing-id": (replace("1 |||", "0 |||", 4), 4), "id-gap": (drop_lines(3, 4), 3),
    "total-missing": (set_line(2, LINE2.rsplit(" ||| ", 1)[0]), 2),
    "group-width": (replace("nmt= -2.0", "nmt= -2.0 -1.0", 2), 2),
    "feature-twice": (replace("len= 4", "len= 4 nmt= 1", 2), 2),
    "value-before-name": (replace("nmt= -2.0", "-2.0 nmt=", 2), 2), "bad-name": (replace("len=", "1len=", 2), 2),
    "fairseq-line": (insert_line(3, "H-0\t-1.0\ta man"), 3), "plain-line": (insert_line(3, "a man rides"), 3),
    "bom-inside": (replace("1 |||", "\ufeff1 |||", 3), 3), "crlf-bom-nan": (crlf(replace("-2.0 len", "nan len", 2)), 2),
}
JOSHUA_BAD = {
    "empty": (empty, None), "truncated": (set_line(6, "2 ||| red car ||| nmt=-0.9 len="), 6),
    "not-a-number": (replace("nmt=-2.0", "nmt=abc", 2), 2), "nan": (replace("nmt=-2.0", "nmt=NaN", 2), 2),
    "huge": (replace("len=4", "len=-1e999", 2), 2), "feature-twice": (replace("len=4", "len=4 len=5", 2), 2),
    "negative-id": (replace("0 |||", "-1 |||", 2), 2), "id-gap": (drop_lines(3, 4), 3),
    "fairseq-line": (insert_line(2, "S-0\tein mann"), 2), "crlf-bom-huge": (crlf(replace("len=4", "len=1e400", 2)), 2),
}
FAIRSEQ_BAD = {
    "empty": (empty, None), "blank-lines": (blank, None), "truncated": (set_line(12, "H-2\t-"), 12),
    "not-a-number": (replace("-1.5", "abc", 3), 3), "nan": (replace("-1.5", "nan", 3), 3),
    "huge": (replace("-1.5", "-1e400", 3), 3), "repeated-source": (set_line(5, "S-0\tagain"), 5),
    "missing-sentence": (drop_lines(5, 6, 7, 8), None), "h-without-score": (set_line(3, "H-0\t"), ANY_LINE),
    "crlf-bom-nan": (crlf(replace("-1.5", "nan", 3)), 3),
}
PLAIN_BAD = {
    "empty": (empty, None), "blank-lines": (blank, None), "line-dropped": (drop_lines(6), None),
    "line-added": (insert_line(3, "one more"), None),
}
IDS_BAD = {
    "empty": (empty, None), "not-a-number": (set_line(2, "x"), 2), "negative": (set_line(2, "-1"), 2),
    "huge": (set_line(2, "99999999999999999999999"), 2), "gap": (set_line(3, "2"), 3), "not-from-0": (set_line(1, "1"), 1),
    "decreasing": (set_line(4, "0"), 4), "fraction": (set_line(2, "0.5"), 2), "line-dropped": (drop_lines(6), None),
    "crlf-bom-gap": (crlf(set_line(3, "2")), 3),
}
TSV_BAD = {
    "empty": (empty, None), "not-a-number": (replace("-2.0", "abc", 3), 3), "nan": (replace("-2.0", "nan", 3), 3),
    "huge": (replace("-2.0", "1e400", 3), 3), "name-twice": (set_line(1, "nmt\tnmt"), 1),
    "bad-name": (set_line(1, "nmt\t1len"), 1), "short-row": (set_line(3, "-2.0"), 3),
    "long-row": (set_line(3, "-2.0\t4\t7"), 3), "row-dropped": (drop_lines(7), None),
    "crlf-bom-nan": (crlf(replace("-2.0", "nan", 3)), 3),
}
SIZES_BAD = {
    "empty": (empty, None), "zero": (set_line(2, "0"), 2), "negative": (set_line(2, "-2"), 2),
    "not-a-number": (set_line(2, "two"), 2), "sum": (set_line(3, "3"), None), "huge": (set_line(3, "1e400"), 3),
}
GZIP_BAD = {"bad-bytes": (bytes_on_line(2), 2), **{k: v for k, v in text_corruptions(6).items() if "gzip" in k}}
BAD = {"moses": MOSES_BAD, "joshua": JOSHUA_BAD, "fairseq": FAIRSEQ_BAD, "moses.gz": GZIP_BAD, "plain": PLAIN_BAD,
       "plain-ids": IDS_BAD, "plain-tsv": TSV_BAD, "plain-sizes": SIZES_BAD}
for _kind, (_name, _) in KINDS.items():
    if _kind != "moses.gz":
        BAD[_kind].update(text_corruptions(6))
    if _kind not in ("plain-ids", "plain-tsv"):  # side files found beside the list are optional
        BAD[_kind].update({p: (p, None) for p in PATH_CORRUPTIONS})



def sample(kind: str) -> list[str]:
    """The corruptions every command meets: the first two of the kind's own, and the common ones."""
    own = [bad for bad in BAD[kind] if bad not in ("empty", "blank-lines")][:2]
    return [bad for bad in BAD[kind] if bad in (*own, "empty", "bad-bytes", "corrupt-gzip", "missing", "directory")]


FULL = ("info", "convert")  # meet every corruption; the other commands a sample (the same reader)
CASES = [(command, kind, bad) for command in COMMANDS for kind in KINDS
         for bad in (BAD[kind] if command in FULL else sample(kind))]


def nbest_argument(command: str, kind: str) -> str:
    """The n-best argument of `kind` as `command` takes it (eval names the reading options --nbest-...)."""
    argument = KINDS[kind][1]
    return argument.replace(" --plain-", " --nbest-plain-") if command == "eval" else argument


@pytest.mark.parametrize("command,kind,bad", CASES, ids=["-".join(c) for c in CASES])
def test_a_bad_nbest_is_refused(work, capsys, command, kind, bad):
    name, argument = KINDS[kind][0], nbest_argument(command, kind)
    corruption, line = BAD[kind][bad]
    path = corrupt_file(work, name, corruption)
    assert "error: " in refused(work, COMMANDS[command].replace("{nbest}", argument), capsys, names=path, at=line, **{key(name): path})


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", KINDS)
def test_the_valid_files_are_accepted(work, capsys, command, kind):
    assert succeeds(work, COMMANDS[command].replace("{nbest}", nbest_argument(command, kind)), capsys) == 0
