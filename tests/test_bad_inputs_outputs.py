"""Bad outputs (a directory, an input, a folder that does not exist, two outputs on one file), bad
numbers in options, and the model commands' cheap cases (missing files, outputs in the way): exit
2, a message naming the file or option, nothing written, every input unchanged."""

import shutil

import pytest

from tests.test_bad_inputs_common import BINARY, FILES, key, refused, succeeds, work  # noqa: F401 (work: a fixture)
from tests.test_features import make_model

pytestmark = pytest.mark.neural

EVAL = "eval -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu,ter --ar 20 --bootstrap 0 --quiet"
TUNE = "tune {in_nbest} -r {ref_txt} --epochs 2 --quiet"
# name -> (command line with {O} for the output under test, its valid value, an input of the command)
OUTPUTS = {
    "convert": ("convert {in_nbest} -o {O}", "{d}/out.nbest", "{in_nbest}"),
    "convert-gz": ("convert {in_nbest_gz} -o {O}", "{d}/out.nbest.gz", "{in_nbest_gz}"),
    "convert-plain": ("convert {in_nbest} --to plain -o {O}", "{d}/out.txt", "{in_nbest}"),
    "convert-save-refs": ("convert {in_fairseq} -o {d}/out.nbest --save-refs {O}", "{d}/refs.txt", "{in_fairseq}"),
    "convert-save-sources": ("convert {in_fairseq} -o {d}/out.nbest --save-sources {O}", "{d}/src.out", "{in_fairseq}"),
    "add-feature": ("add-feature {in_nbest} --name s --scores {scores_txt} -o {O}", "{d}/out.nbest", "{scores_txt}"),
    "add-feature-plain": ("add-feature {hyps_txt} --name s --scores {scores_txt} -o {O}", "{d}/out.nbest",
                          "{hyps_txt_ids}"),
    "apply": ("apply {in_nbest} -w {weights_json} -o {O}", "{d}/out.txt", "{weights_json}"),
    "apply-nbest-out": ("apply {in_nbest} -w {weights_json} -o {d}/out.txt --nbest-out {O}", "{d}/out.nbest",
                        "{in_nbest}"),
    "oracle": ("oracle {in_nbest} -r {ref_txt} -o {O} --quiet", "{d}/out.txt", "{ref_txt}"),
    "features": ("features {in_nbest} --which mbr --src {src_txt} -o {O} --quiet", "{d}/out.nbest", "{src_txt}"),
    "tune": (TUNE + " -o {O}", "{d}/w.json", "{ref_txt}"),
    "tune-init": (TUNE + " --init {weights_json} -o {O}", "{d}/w.json", "{weights_json}"),
    "tune-plot": (TUNE + " -o {d}/w.json --plot {O}", "{d}/curve.png", "{in_nbest}"),
    "eval": (EVAL + " -o {O}", "{d}/res.md", "{ref_txt}"),
    "eval-system": (EVAL + " -o {O}", "{d}/res.md", "{sys_txt}"),
    "eval-plot": (EVAL.replace("--bootstrap 0", "--bootstrap 20") + " -o {d}/res.md --plot {O}", "{d}/d.png",
                  "{base_txt}"),
    "report": ("report -r {ref_txt} -b {base_txt} {sys_txt} --metrics bleu --ar 20 --bootstrap 0 -o {O} --quiet",
               "{d}/r.html", "{sys_txt}"),
    "apply-ref": ("apply {in_nbest} -w {weights_json} -r {ref_txt} -o {O} --quiet", "{d}/out.txt", "{ref_txt}"),
    "embed-encode": ("embed encode --model {emb_pt} --lang en --input {src_txt} -o {O}", "{d}/vec.npy", "{src_txt}"),
    "embed-encode-model": ("embed encode --model {emb_pt} --lang en --input {src_txt} -o {O}", "{d}/vec.npy", "{emb_pt}"),
    "features-model": ("features {in_nbest} -m {emb_pt} --src {src_txt} -o {O} --quiet", "{d}/out.nbest", "{emb_pt}"),
}
# outputs a command writes beside the one given: name -> (command, the file beside)
BESIDE = {
    "convert-plain-ids": ("convert {in_nbest} --to plain -o {d}/out.txt", "out.txt.ids"),
    "convert-plain-tsv": ("convert {in_nbest} --to plain -o {d}/out.txt", "out.txt.features.tsv"),
    "apply-plain-ids": ("apply {in_nbest} -w {weights_json} -o {d}/out.txt --nbest-out {d}/o.txt --to plain", "o.txt.ids"),
    "eval-config": (EVAL + " -o {d}/res.md", "res.config.json"),
    "tune-run-file": (TUNE + " -o {d}/w.json --runs 2", "w.run2.json"),
}
MODEL_COMMANDS = ("embed-encode", "embed-encode-model", "features-model")
CASES = [(name, bad) for name in OUTPUTS for bad in ("directory", "input", "missing-folder")
         if not (bad == "missing-folder" and name in MODEL_COMMANDS)]
TWO_OUTPUTS = {
    "convert": "convert {in_fairseq} -o {d}/same --save-refs {d}/same",
    "convert-sources": "convert {in_fairseq} -o {d}/out.nbest --save-refs {d}/same --save-sources {d}/same",
    "apply": "apply {in_nbest} -w {weights_json} -o {d}/same --nbest-out {d}/same",
    "apply-plain": "apply {in_nbest} -w {weights_json} -o {d}/same.ids --nbest-out {d}/same --to plain",
    "eval-plot": EVAL.replace("--bootstrap 0", "--bootstrap 20") + " -o {d}/same --plot {d}/same",
}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("model") / "emb.pt")


@pytest.fixture
def files(work, model):
    for suffix in (".pt", ".json"):
        shutil.copy(model[:-3] + suffix, work / ("emb" + suffix))
    return work


def _fields(files) -> dict:
    return {key(k): str(files / k) for k in [*FILES, *BINARY]}


@pytest.mark.parametrize("name,bad", CASES, ids=["-".join(c) for c in CASES])
def test_a_bad_output_is_refused(files, capsys, name, bad):
    line, valid, an_input = OUTPUTS[name]
    fields = {"d": str(files), "emb_pt": str(files / "emb.pt"), **_fields(files)}
    out = valid.format(**fields)
    if bad == "directory":
        (files / out.rsplit("/", 1)[1]).mkdir()
    elif bad == "input":
        out = an_input.format(**fields)
    else:
        out = str(files / "no-such-folder" / "out")
    assert "error: " in refused(files, line.replace("{O}", out), capsys, names=out, emb_pt=str(files / "emb.pt"))


@pytest.mark.parametrize("name", BESIDE)
def test_an_output_written_beside_that_is_a_directory_is_refused(files, capsys, name):
    line, beside = BESIDE[name]
    (files / beside).mkdir()
    assert "error: " in refused(files, line, capsys, names=str(files / beside), emb_pt=str(files / "emb.pt"))


@pytest.mark.parametrize("name", TWO_OUTPUTS)
def test_two_outputs_on_one_file_are_refused(files, capsys, name):
    assert "error: " in refused(files, TWO_OUTPUTS[name], capsys, names=str(files / "same"))


@pytest.mark.parametrize("name", [*OUTPUTS, *BESIDE])
def test_the_valid_outputs_are_written(files, capsys, name):
    if name in OUTPUTS:
        line, valid, _ = OUTPUTS[name]
        line = line.replace("{O}", valid)
    else:
        line = BESIDE[name][0]
    assert succeeds(files, line, capsys, emb_pt=str(files / "emb.pt")) == 0


# The model commands' cheap cases: (command line, the file or option the message names)
MISSING = {
    "features-model": ("features {in_nbest} -m {d}/none.pt --src {src_txt} -o {d}/out.nbest", "{d}/none.pt"),
    "features-model-dir": ("features {in_nbest} -m {d} --src {src_txt} -o {d}/out.nbest", "{d}"),
    "features-images": ("features {in_nbest} -m {emb_pt} --images {d}/none.npy --src {src_txt} -o {d}/out.nbest",
                        "{d}/none.npy"),
    "features-src": ("features {in_nbest} -m {emb_pt} --src {d}/none.txt -o {d}/out.nbest", "{d}/none.txt"),
    "features-lm": ("features {in_nbest} --which lm --lm-model {d}/none -o {d}/out.nbest", "{d}/none"),
    "features-channel": ("features {in_nbest} --which channel --src {src_txt} --channel-model {d}/none "
                         "-o {d}/out.nbest", "{d}/none"),
    "embed-encode-model": ("embed encode --model {d}/none.pt --lang en --input {src_txt} -o {d}/vec.npy", "{d}/none.pt"),
    "embed-encode-input": ("embed encode --model {emb_pt} --lang en --input {d}/none.txt -o {d}/vec.npy", "{d}/none.txt"),
    "embed-encode-empty": ("embed encode --model {emb_pt} --lang en --input {d}/empty.txt -o {d}/vec.npy", "{d}/empty.txt"),
    "embed-encode-bad-bytes": ("embed encode --model {emb_pt} --lang en --input {d}/bad.txt -o {d}/vec.npy", "{d}/bad.txt:2:"),
    "embed-eval-model": ("embed eval --model {d}/none.pt --data-dir {d}", "{d}/none.pt"),
    "nmt-translate-model": ("nmt translate --model {d}/none --input {src_txt} --output {d}/out.txt", "{d}/none"),
    "nmt-train-data": ("nmt train --data-dir {d}/none --out {d}/run --max-epochs 1", "{d}/none"),
    "lm-score-model": ("lm score --model {d}/none --input {src_txt} -o {d}/out.tsv", "{d}/none"),
    "lm-train-data": ("lm train --train {d}/none.de --val {ref_txt} --out {d}/lm --max-epochs 1", "{d}/none.de"),
    "lm-train-val-bad-bytes": ("lm train --train {ref_txt} --val {d}/bad.txt --out {d}/lm --max-epochs 1",
                               "{d}/bad.txt:2:"),
    "embed-train-config": ("embed train --config {d}/none.json --data-dir {d} --out {d}/run", "{d}/none.json"),
}
# Bad numbers and names in options: (command line, the option the message names)
NUMBERS = {
    "eval-ar-0": (EVAL + " --ar 0", "--ar"), "eval-ar-word": (EVAL + " --ar many", "--ar"),
    "eval-bootstrap-1": (EVAL.replace("--bootstrap 0", "--bootstrap 1"), "--bootstrap"),
    "eval-bootstrap-negative": (EVAL.replace("--bootstrap 0", "--bootstrap -5"), "--bootstrap"),
    "eval-alpha": (EVAL + " --alpha 1.5", "--alpha"), "eval-alpha-nan": (EVAL + " --alpha nan", "--alpha"),
    "eval-seed-negative": (EVAL + " --seed -1", "--seed"),
    "eval-metric": (EVAL.replace("bleu,ter", "bleu,nosuch"), "nosuch"), "eval-lang": (EVAL + " --lang xx", "xx"),
    "tune-runs-0": (TUNE + " -o {d}/w.json --runs 0", "--runs"), "tune-seed-negative": (TUNE + " -o {d}/w.json --seed -1", "--seed"),
    "tune-epochs-0": (TUNE.replace("--epochs 2", "--epochs 0") + " -o {d}/w.json", "--epochs"),
    "tune-epochs-word": (TUNE.replace("--epochs 2", "--epochs two") + " -o {d}/w.json", "--epochs"),
    "tune-C-nan": (TUNE + " -o {d}/w.json --C nan", "--C"), "tune-C-negative": (TUNE + " -o {d}/w.json --C -1", "--C"),
    "tune-sentences": (TUNE + " -o {d}/w.json --sentences 5-9", "--sentences"),
    "tune-sentences-word": (TUNE + " -o {d}/w.json --sentences all", "--sentences"),
    "tune-tokenize": (TUNE + " -o {d}/w.json --tokenize nosuch", "nosuch"),
    "oracle-tokenize": ("oracle {in_nbest} -r {ref_txt} --tokenize nosuch", "nosuch"),
    "features-threads": ("features {in_nbest} --which mbr -o {d}/out.nbest --threads 0", "--threads"),
    "features-id-offset": ("features {in_nbest} --which mbr -o {d}/out.nbest --id-offset -1", "--id-offset"),
    "features-shard": ("features {in_nbest} --which mbr -o {d}/out.nbest --shard 3/2", "--shard"),
    "features-shard-word": ("features {in_nbest} --which mbr -o {d}/out.nbest --shard half", "--shard"),
    "features-which": ("features {in_nbest} --which nosuch -o {d}/out.nbest", "nosuch"),
    "features-mbr-temperature": ("features {in_nbest} --which mbr -o {d}/out.nbest --mbr-temperature 0",
                                 "--mbr-temperature"),
    "features-mbr-temperature-nan": ("features {in_nbest} --which mbr -o {d}/out.nbest --mbr-temperature nan",
                                     "--mbr-temperature"),
    "features-mbr-score-feature": ("features {in_nbest} --which mbr -o {d}/out.nbest --mbr-score-feature nosuch",
                                   "nosuch"),
    "features-batch-size": ("features {in_nbest} -m {emb_pt} --src {src_txt} -o {d}/out.nbest --batch-size 0",
                            "--batch-size"),
    "convert-to": ("convert {in_nbest} -o {d}/out --to nosuch", "--to"),
    "convert-format": ("convert {in_nbest} -o {d}/out --format nosuch", "--format"),
    "nmt-translate-beam": ("nmt translate --model {d} --input {src_txt} --output {d}/out.txt --beam 0", "--beam"),
    "nmt-translate-nbest": ("nmt translate --model {d} --input {src_txt} --output {d}/out.txt --nbest -2", "--nbest"),
    "nmt-translate-alpha": ("nmt translate --model {d} --input {src_txt} --output {d}/out.txt --alpha nan", "--alpha"),
    "embed-encode-batch-size": ("embed encode --model {emb_pt} --lang en --input {src_txt} -o {d}/vec.npy --batch-size 0",
                                "--batch-size"),
    "lm-score-batch-size": ("lm score --model {d} --input {src_txt} -o {d}/out.tsv --batch-size 0", "--batch-size"),
}


@pytest.mark.parametrize("name", MISSING)
def test_a_missing_model_or_input_of_a_model_command_is_refused(files, capsys, name):
    (files / "empty.txt").write_bytes(b"")
    (files / "bad.txt").write_bytes(b"ein mann\n\xff\xfe zwei\n")
    line, named = MISSING[name]
    assert "error: " in refused(files, line, capsys, names=named.format(d=files).removesuffix(":2:"),
            at=2 if named.endswith(":2:") else None, emb_pt=str(files / "emb.pt"))


@pytest.mark.parametrize("name", NUMBERS)
def test_a_bad_number_or_name_in_an_option_is_refused(files, capsys, name):
    line, option = NUMBERS[name]
    assert "error: " in refused(files, line, capsys, names=option, error_line_only=True, emb_pt=str(files / "emb.pt"))


# A writer that refuses what the first output already held: the outputs written before go too.
# name -> (command line, the output refused)
LATE = {
    "convert-save-refs": ("convert {d}/pipes.fairseq --save-refs {d}/refs.out -o {d}/out.nbest", "out.nbest"),
    "convert-save-sources": ("convert {d}/pipes.fairseq --save-sources {d}/src.out -o {d}/out.joshua --to joshua",
                             "out.joshua"),
    "apply-nbest-out": ("apply {d}/pipes.fairseq -w {w_nmt_json} -o {d}/best.txt --nbest-out {d}/out.nbest", "out.nbest"),
    "apply-nbest-out-fairseq": ("apply {d}/cr.nbest -w {w_nmt_json} -o {d}/best.txt --nbest-out {d}/out --to fairseq",
                                "out"),
    "apply-nbest-out-plain": ("apply {d}/cr.nbest -w {w_nmt_json} -o {d}/best.txt --nbest-out {d}/out --to plain", "out"),
}


@pytest.mark.parametrize("name", LATE)
def test_a_refused_second_output_leaves_no_first_output(work, capsys, name):
    (work / "pipes.fairseq").write_text("S-0\tein mann\nT-0\ta man\nH-0\t-1\ta ||| man\nH-0\t-2\tman\n")
    (work / "cr.nbest").write_bytes(b"0 ||| a man\r ||| nmt= -1 ||| -1\n0 ||| man ||| nmt= -2 ||| -2\n")
    line, output = LATE[name]
    assert "error: " in refused(work, line, capsys, names=str(work / output))
