"""A refusal of a plug-in's option names the flag the user typed: the library says the field
(`centroids`), the command line says `--mbr-centroids` for every plug-in whose flags carry a
prefix (mbr-, bleurt-, metricx-, comet-, ...), wherever the message names the field (at its start,
in a parenthesis, or as a mention), and leaves every other word alone.

Two properties: (1) for every installed feature plug-in with a prefix and every field of its
Options that has a flag, an InputError about that field raised inside the plug-in's compute reads,
on the command line, with that plug-in's flag; (2) each of the MBR feature's own refusals, run
through `rerank features --which mbr`, is one line that names the flag of the option it refuses and
no Python field name."""

from __future__ import annotations

import dataclasses
import re

import pytest

from rerank import plugins
from rerank.cli import main
from rerank.consensus import MBROptions
from rerank.errors import InputError
from rerank.options import _dest, _flags, _option_fields

NBEST = "0 ||| a b c ||| nmt= -1 ||| -1\n0 ||| a b d ||| nmt= -2 ||| -2\n1 ||| e f ||| nmt= -1 ||| -1\n"


def prefixed_fields():
    """(plug-in name, its class, field, the field's long flag) of every prefixed feature option with a flag."""
    out = []
    for name, cls in sorted(plugins.features().items()):
        if not cls.option_prefix:
            continue
        for f in _option_fields(cls.Options):
            flags = _flags(f, cls.option_prefix)
            if flags:
                out.append((name, cls, f.name, max(flags, key=len)))
    return out


FIELDS = prefixed_fields()


def test_the_families_are_found():
    families = {name for name, *_ in FIELDS}
    assert {"mbr", "bleurt", "bertscore"} <= families
    assert {field for name, _, field, _ in FIELDS if name == "mbr"} >= {"centroids", "matrix", "pruning_schedule"}


def run(tmp_path, capsys, column: str, *args: str) -> str:
    (tmp_path / "in.nbest").write_text(NBEST, encoding="utf-8")
    try:
        status = main(["features", str(tmp_path / "in.nbest"), "--which", column, *args, "-o", str(tmp_path / "out")])
    except SystemExit as stop:   # argparse's own refusal of a value
        status = stop.code
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
    return err


@pytest.mark.parametrize("name, cls, field, flag", FIELDS, ids=[f"{n}.{f}" for n, _, f, _ in FIELDS])
def test_every_prefixed_option_is_said_as_its_flag(tmp_path, capsys, monkeypatch, name, cls, field, flag):
    dest = _dest(_flags(next(f for f in _option_fields(cls.Options) if f.name == field), cls.option_prefix),
                 next(f for f in _option_fields(cls.Options) if f.name == field))
    assert dest != field   # the prefix makes another destination: the library's name alone would not be found

    def refuse(self, nbest, which, context=None, options=None):
        raise InputError(f"{field} is refused here; it needs {field} (or ({field}))", option=field, mentions=(field,))

    monkeypatch.setattr(cls, "compute", refuse)
    monkeypatch.setattr(cls, "requires", ())
    err = run(tmp_path, capsys, cls.columns[0])
    given = re.search(r"\((\S+ ?\S*)\)\)$", err)
    assert err.startswith(f"rerank features: error: {flag} is refused here; it needs {flag} (or ("), err
    assert given is not None and given.group(1).split()[0] == min(_flags(
        next(f for f in _option_fields(cls.Options) if f.name == field), cls.option_prefix), key=len), err


def test_an_error_of_no_plug_in_option_keeps_its_words(tmp_path, capsys, monkeypatch):
    from rerank.consensus import MBRFeature

    def refuse(self, nbest, which, context=None, options=None):   # "method" is an MBR field; "nothing" none
        raise InputError("the centroid method needs nothing", option="nothing", mentions=("nothing",))

    monkeypatch.setattr(MBRFeature, "compute", refuse)
    assert run(tmp_path, capsys, "mbr").endswith("error: the centroid method needs nothing")


MBR_REFUSALS = [   # (arguments of `rerank features --which mbr`, the flag the refusal must name)
    (["--mbr-utility", "no-such"], "--mbr-utility"),
    (["--mbr-temperature", "0"], "--mbr-temperature"),
    (["--mbr-score-feature", "zz"], "--mbr-score-feature"),
    (["--mbr-tokenize", "zz"], "--mbr-tokenize"),
    (["--mbr-method", "nope"], "--mbr-method"),
    (["--mbr-method", "centroid"], "--mbr-method"),
    (["--mbr-method", "c2f", "--mbr-utility", "ter"], "--mbr-method"),
    (["--mbr-method", "aggregate", "--mbr-utility", "ter"], "--mbr-method"),
    (["--mbr-utility", "chrf", "--mbr-bleu-smooth", "exp"], "--mbr-bleu-smooth"),
    (["--mbr-bleu-smooth", "exp", "--mbr-bleu-smooth-value", "2"], "--mbr-bleu-smooth-value"),
    (["--mbr-candidates", "zz"], "--mbr-candidates"),
    (["--mbr-candidates", "zz:2"], "--mbr-candidates"),
    (["--mbr-utility", "chrf", "--mbr-model", "."], "--mbr-model"),
    (["--mbr-utility", "comet"], "--mbr-model"),
    (["--mbr-utility", "chrf", "--mbr-batch-size", "3"], "--mbr-batch-size"),
    (["--mbr-references", "0"], "--mbr-references"),
    (["--mbr-method", "aggregate", "--mbr-matrix", "{tmp}/m"], "--mbr-matrix"),
    (["--mbr-method", "pruning", "--mbr-matrix", "{tmp}/m"], "--mbr-matrix"),
    (["--mbr-matrix", "{tmp}/in.nbest"], "--mbr-matrix"),
    (["--mbr-centroids", "4"], "--mbr-centroids"),
    (["--mbr-sample-ratio", "0.5"], "--mbr-sample-ratio"),
    (["--mbr-rank", "2"], "--mbr-rank"),
    (["--mbr-method", "pruning", "--mbr-pruning-schedule", "8,4"], "--mbr-pruning-schedule"),
    (["--mbr-pruning-alpha", "0.5"], "--mbr-pruning-alpha"),
    (["--mbr-c2f-k", "3"], "--mbr-c2f-k"),
    (["--mbr-seed", "3"], "--mbr-seed"),
]


def test_the_refusals_cover_the_mbr_options_of_this_table():
    named = {flag for _, flag in MBR_REFUSALS}
    fields = {f.name for f in dataclasses.fields(MBROptions)}
    assert {f"--mbr-{name.replace('_', '-')}" for name in fields} >= named
    assert len(named) == 19   # every field MBROptions had when the table was written (a later one adds its row)


@pytest.mark.parametrize("args, flag", MBR_REFUSALS, ids=[" ".join(a) for a, _ in MBR_REFUSALS])
def test_each_mbr_refusal_names_its_flag(tmp_path, capsys, args, flag):
    err = run(tmp_path, capsys, "mbr", *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", err), err
    words = {f.name for f in dataclasses.fields(MBROptions) if "_" in f.name}
    assert not [w for w in words if re.search(rf"(?<![\w-]){w}(?![\w-])", err)], err
