"""Every command that writes refuses, before any work, an output that is an input, two outputs
on one file, and an output it cannot write: exit 2, the file named, nothing written, inputs intact."""

import os
import re

import pytest

from rerank.cli import main

NBEST = "0 ||| a b ||| f= 1 g= 2 ||| 3\n0 ||| a c ||| f= 2 g= 0 ||| 2\n1 ||| d ||| f= 0 g= 1 ||| 1\n" \
        "1 ||| e ||| f= 1 g= 1 ||| 2\n"
FILES = {"in.nbest": NBEST, "ref": "a b\nd\n", "src": "x y\nz\n", "w.json": '{"f": 1.0, "g": 0.5}\n',
         "scores": "1\n2\n3\n4\n", "sys": "a c\ne\n", "base": "a b\nd\n", "m.pt": "not a model\n",
         "init.json": '{"f": 1.0}\n'}

# command line before "-o OUT": every input is one of FILES (relative to the working directory)
COMMANDS = {
    "apply": ["apply", "in.nbest", "-w", "w.json"],
    "oracle": ["oracle", "in.nbest", "-r", "ref", "--quiet"],
    "add-feature": ["add-feature", "in.nbest", "--name", "s", "--scores", "scores"],
    "features": ["features", "in.nbest", "--src", "src", "-m", "m.pt", "--quiet"],
    "eval": ["eval", "-r", "ref", "-b", "base", "sys", "--metrics", "bleu", "--quiet"],
    "tune": ["tune", "in.nbest", "-r", "ref", "--init", "init.json", "--quiet"],
    "convert": ["convert", "in.nbest", "--to", "joshua"],
}
INPUTS = {
    "apply": ["in.nbest", "w.json"], "oracle": ["in.nbest", "ref"], "add-feature": ["in.nbest", "scores"],
    "features": ["in.nbest", "src", "m.pt"], "eval": ["ref", "base", "sys"], "tune": ["in.nbest", "ref", "init.json"],
    "convert": ["in.nbest"],
}


@pytest.fixture
def work(tmp_path, monkeypatch):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def snapshot(root):
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def refused(work, capsys, argv, message):
    """Run `argv`; it must exit 2 with `message` and leave every file as it was (no new file either)."""
    before = snapshot(work)
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"rerank {argv[0]}: error: ") and re.search(message, err), err
    assert snapshot(work) == before
    return err


@pytest.mark.parametrize("command,victim", [(c, i) for c, inputs in INPUTS.items() for i in inputs])
def test_an_output_that_is_an_input_is_refused(work, capsys, command, victim):
    refused(work, capsys, [*COMMANDS[command], "-o", victim], rf"{re.escape(victim)}: the output is also the input")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_relative_symlinked_and_hard_linked_spellings_are_the_same_file(work, capsys, command):
    victim = INPUTS[command][0]
    refused(work, capsys, [*COMMANDS[command], "-o", f"sub/../{victim}"], "the output is also the input")
    os.symlink(victim, "link")
    refused(work, capsys, [*COMMANDS[command], "-o", "link"], f"link: the output is also the input {victim}")
    os.unlink("link")
    os.link(victim, "hard")
    refused(work, capsys, [*COMMANDS[command], "-o", work / "hard"], "hard: the output is also the input")


def test_a_symlinked_input_is_followed(work, capsys):
    os.symlink("in.nbest", "link.nbest")
    refused(work, capsys, ["apply", "link.nbest", "-w", "w.json", "-o", "in.nbest"],
            "in.nbest: the output is also the input link.nbest")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_unwritable_outputs(work, capsys, command):
    refused(work, capsys, [*COMMANDS[command], "-o", "sub"], "sub: is a directory")
    refused(work, capsys, [*COMMANDS[command], "-o", "nowhere/out"], "nowhere/out: its folder nowhere does not exist")
    (work / "old").write_text("keep\n")
    os.chmod(work / "old", 0o444)
    if os.geteuid() != 0:  # root may write anything
        refused(work, capsys, [*COMMANDS[command], "-o", "old"], "old: is read-only")


def test_a_folder_or_file_without_write_permission(work, capsys, monkeypatch):
    """As a user without the permission sees it (root passes os.access everywhere)."""
    (work / "old").write_text("keep\n")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p).endswith(("sub", "old")) else real(p, mode))
    refused(work, capsys, [*COMMANDS["apply"], "-o", "sub/best"], r"sub/best: cannot write in its folder sub \(permission denied\)")
    refused(work, capsys, [*COMMANDS["tune"], "-o", "old"], r"old: is read-only")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any folder")
def test_a_folder_without_write_permission_for_real(work, capsys):
    os.chmod(work / "sub", 0o555)
    try:
        refused(work, capsys, [*COMMANDS["oracle"], "-o", "sub/oracle.txt"], "cannot write in its folder sub")
    finally:
        os.chmod(work / "sub", 0o755)


@pytest.mark.parametrize("argv,message", [
    (["apply", "in.nbest", "-w", "w.json", "-o", "out", "--nbest-out", "./out"], r"two outputs are the same file \(out and ./out\)"),
    (["apply", "in.nbest", "-w", "w.json", "-o", "-", "--nbest-out", "w.json"], "w.json: the output is also the input"),
    (["apply", "in.nbest", "-w", "s.features.tsv", "-o", "best", "--nbest-out", "s", "--to", "plain"],
     "s.features.tsv: the output is also the input"),
    (["add-feature", "in.nbest", "--name", "s", "--scores", "out.ids", "-o", "out", "--to", "plain"],
     "out.ids: the output is also the input"),
    (["features", "in.nbest", "--src", "f.ids", "-m", "m.pt", "-o", "f", "--to", "plain"], "f.ids: the output is also the input"),
    (["eval", "-r", "ref", "-b", "base", "sys", "-o", "res.md", "--plot", "res.md"], "two outputs are the same file"),
    (["eval", "-r", "ref", "-b", "base", "sys", "-o", "res.md", "--plot", "sys"], "sys: the output is also the input"),
    (["eval", "-r", "ref", "-b", "base", "res.config.json", "-o", "res.md"], "res.config.json: the output is also the input"),
    (["tune", "in.nbest", "-r", "ref", "-o", "w.json", "--runs", "2", "--init", "w.run2.json"],
     "w.run2.json: the output is also the input"),
    (["tune", "in.nbest", "-r", "ref", "-o", "out.json", "--plot", "ref"], "ref: the output is also the input"),
    (["tune", "in.nbest", "-r", "ref", "-o", "out.json", "--runs", "3", "--plot", "out.run3.json"], "two outputs"),
])
def test_every_file_a_command_writes_is_checked(work, capsys, argv, message):
    """--nbest-out, plain's OUT.ids and OUT.features.tsv, eval's plot and OUT.config.json, tune's runs."""
    (work / "s.features.tsv").write_text('{"f": 1.0}\n')
    (work / "out.ids").write_text("1\n2\n3\n4\n")
    (work / "f.ids").write_text("x y\nz\n")
    (work / "res.config.json").write_text("a c\ne\n")
    (work / "w.run2.json").write_text('{"f": 1.0}\n')
    refused(work, capsys, argv, message)


def test_writing_to_stdout_never_clashes(work, capsys):
    code = main(["apply", "in.nbest", "-w", "w.json", "-o", "-"])
    assert code == 0 and capsys.readouterr().out == "a b\ne\n"


def test_the_side_files_a_plain_input_reads_are_inputs(work, capsys):
    (work / "hyps").write_text("a b\na c\nd\n")
    (work / "hyps.ids").write_text("0\n0\n1\n")
    (work / "hyps.features.tsv").write_text("f\n1\n2\n3\n")
    refused(work, capsys, ["add-feature", "hyps", "--name", "s", "--scores", "scores", "-o", "hyps.ids"],
            "hyps.ids: the output is also the input")
