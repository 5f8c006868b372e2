"""Plug-in options declared once (rerank.options): for every installed feature and tuner plug-in,
the example plug-in and the recipe's settings, the generated flags agree with the Options
dataclass: the same defaults, the same checks (a value the library refuses the command line
refuses, exit 2), a command line reads back as the same options as the mapping it was made from,
and the help shows each default as the dataclass has it."""

import argparse
import dataclasses
import importlib.util
import math
from pathlib import Path

import pytest

from rerank import plugins
from rerank.errors import InputError
from rerank.options import (Configurable, NoOptions, add_option_flags, describe_options, make_options, option,
                            options_from_args)

HERE = Path(__file__).parent


def _example_plugin():
    """The example package's module (tests/data/plugin_example), imported from its file."""
    path = HERE / "data" / "plugin_example" / "rerank_example" / "plugin.py"
    spec = importlib.util.spec_from_file_location("rerank_example_plugin_for_options", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Declared:
    """One declaration under test: an Options dataclass with its flag prefix."""

    def __init__(self, name, options, prefix="", required=None):
        self.name, self.Options, self.prefix = name, options, prefix
        self.required = required or {}   # values for the fields without a default

    def parser(self):
        parser = argparse.ArgumentParser(prog=self.name)
        add_option_flags(parser, self.Options, self.prefix)
        return parser

    def required_args(self):
        return [x for name, value in self.required.items() for x in (self.flags()[name][0], str(value))]

    def flags(self):
        return {doc.name: doc.flags for doc in describe_options(self.Options, self.prefix)}

    def read(self, argv):
        return options_from_args(self.Options, self.parser().parse_args(self.required_args() + argv), self.prefix)


def declarations():
    found = []
    for group, loaded in (("feature", plugins.features()), ("tuner", plugins.tuners())):
        for name, cls in loaded.items():
            found.append(pytest.param(Declared(f"{group} {name}", cls.Options, cls.option_prefix), id=f"{group}-{name}"))
    example = _example_plugin()
    for cls in (example.LengthRatio, example.RandomSearch):
        found.append(pytest.param(Declared(cls.__name__, cls.Options, cls.option_prefix), id=f"example-{cls.__name__}"))
    from rerank.recipes.multi30k_config import RecipeConfig

    found.append(pytest.param(Declared("recipe multi30k", RecipeConfig, required={"data_dir": "d", "out": "o"}),
                              id="recipe-multi30k"))
    return found


def _default(f):
    if f.default is not dataclasses.MISSING or f.default_factory is dataclasses.MISSING:
        return f.default    # MISSING for a required field
    return f.default_factory()


def _candidates(f):
    """Values of the field's type other than its default, some allowed, some not."""
    default = _default(f)
    if isinstance(default, bool):
        return [not default]
    choices = f.metadata["rerank.option"].choices
    if choices:
        return [c for c in choices if c != default] + ["no-such-choice"]
    if isinstance(default, int) or (default is None and "int" in str(f.type)):
        base = default or 0
        return [base + 1, base + 7, 0, -1, 1.5]
    if isinstance(default, float) or (default is None and "float" in str(f.type)):
        base = default or 0.0
        return [base / 2, base * 3 + 0.25, 0.5, 0.0, -1.0, 1.0, 1.5, 2.0, math.inf]
    if isinstance(default, tuple):
        return [("a",), ("a", "b")]
    if isinstance(default, list):
        item = default[0]
        return [list(reversed(default)), default[:1], [item, item], []] + ([[0], [-1], [1.5]] if not isinstance(item, str)
                                                                          else [["no-such-item"]])
    return ["x y", "13a-other"]


def _command_line(flags, f, value):
    """The flags that give field `f` the value `value`."""
    default = _default(f)
    if isinstance(default, bool):
        return [flags[0]] if value != default else []
    if isinstance(value, tuple):
        return [x for item in value for x in (flags[-1], item)]
    if isinstance(value, list):
        return [flags[-1], ",".join(map(str, value))]
    return [flags[-1], str(value)]


def _allowed(declared, f, value):
    try:
        make_options(declared.Options, {**declared.required, f.name: value})
    except InputError:
        return False
    return True


def _cli_fields(declared):
    """(field, flags) of the fields with a flag and a default (the required ones are given by `read`)."""
    flags = declared.flags()
    return [(f, flags[f.name]) for f in dataclasses.fields(declared.Options) if flags[f.name] and
            _default(f) is not dataclasses.MISSING]


@pytest.mark.parametrize("declared", declarations())
def test_the_generated_flags_default_to_the_options_defaults(declared):
    parsed = declared.read([])
    assert parsed == make_options(declared.Options, dict(declared.required))
    for f in dataclasses.fields(declared.Options):
        if f.name not in declared.required:
            assert getattr(parsed, f.name) == _default(f), f.name


@pytest.mark.parametrize("declared", declarations())
def test_a_command_line_reads_back_as_the_mapping_it_was_made_from(declared):
    mapping, argv = dict(declared.required), []
    for f, flags in _cli_fields(declared):
        allowed = [v for v in _candidates(f) if _allowed(declared, f, v)]
        if allowed:
            mapping[f.name] = allowed[0]
            argv += _command_line(flags, f, allowed[0])
    assert declared.read(argv) == make_options(declared.Options, mapping)


@pytest.mark.parametrize("declared", declarations())
def test_the_library_and_the_command_line_refuse_the_same_values(declared, capsys):
    refused = 0
    for f, flags in _cli_fields(declared):
        if isinstance(_default(f), bool):
            continue
        for value in _candidates(f):
            argv = _command_line(flags, f, value)
            if _allowed(declared, f, value):
                assert getattr(declared.read(argv), f.name) == (tuple(value) if isinstance(value, tuple) else value)
                continue
            refused += 1
            with pytest.raises(InputError, match=f"option '{f.name}' of {declared.Options.__qualname__} must be"):
                make_options(declared.Options, {**declared.required, f.name: value})
            with pytest.raises(SystemExit) as stop:
                declared.read(argv)
            assert stop.value.code == 2
            assert f"argument {'/'.join(flags)}" in capsys.readouterr().err
    checked = [f for f, _ in _cli_fields(declared) if f.metadata["rerank.option"].check or
               f.metadata["rerank.option"].choices]
    assert refused or not checked, "no refused value tried"


@pytest.mark.parametrize("declared", declarations())
def test_an_unknown_option_is_an_input_error_naming_the_known_ones(declared):
    names = [f.name for f in dataclasses.fields(declared.Options)]
    with pytest.raises(InputError, match=f"unknown option 'no_such_option' for {declared.Options.__qualname__}") as err:
        make_options(declared.Options, {**declared.required, "no_such_option": 1})
    assert all(name in str(err.value) for name in names)
    assert ("known: none" in str(err.value)) == (not names)


@pytest.mark.parametrize("declared", declarations())
def test_the_help_shows_each_default_as_the_dataclass_has_it(declared):
    helps = {action.dest: (action.help or "").replace("%%", "%") for action in declared.parser()._actions}
    for f, flags in _cli_fields(declared):
        text = helps[flags[-1].lstrip("-").replace("-", "_")]
        info, default = f.metadata["rerank.option"], _default(f)
        if info.default_text is not None:
            assert f"(default: {info.default_text})" in text
        elif isinstance(default, bool):
            assert f"(default: {'on' if default else 'off'}" in text
        elif isinstance(default, list):
            assert f"(default: {','.join(map(str, default))})" in text
        elif default in (None, "", ()):
            assert "(default: none)" in text
        else:
            assert f"(default: {default})" in text, (f.name, text)


def test_features_and_tuners_share_one_options_interface():
    from rerank.features import Feature
    from rerank.tuning import Tuner

    for base in (Feature, Tuner):
        assert issubclass(base, Configurable) and base.Options is NoOptions
        assert not hasattr(base, "options")    # the old Feature.options(args) / Tuner.options(args)
    for cls in (*plugins.features().values(), *plugins.tuners().values()):
        assert "rerank.cliargs" not in Path(importlib.import_module(cls.__module__).__file__).read_text()


def test_a_bool_defaulting_to_true_is_a_no_flag_and_a_list_a_comma_separated_one():
    @dataclasses.dataclass(frozen=True)
    class Opts:
        shuffle: bool = option(True, "visit in random order")
        sizes: list = option([1, 2], "sizes", flag="--size-list")

    class Plugin(Configurable):
        Options = Opts

    parser = argparse.ArgumentParser()
    Plugin().add_arguments(parser)
    assert Plugin.options_from_args(parser.parse_args(["--no-shuffle", "--size-list", "3,4"])) == \
        Opts(shuffle=False, sizes=[3, 4])
    assert "(default: on; --no-shuffle turns it off)" in " ".join(parser.format_help().split())
    with pytest.raises(SystemExit):
        parser.parse_args(["--size-list", "3,x"])     # a list of the default's item type
    from rerank.recipes.multi30k_config import RecipeConfig

    required = [a for a in Declared("recipe", RecipeConfig).parser()._actions if a.required]
    assert [a.dest for a in required] == ["data_dir", "out"] and all(a.help.endswith("(required)") for a in required)
    assert Opts().sizes is not Opts().sizes           # a list default is copied per instance
    with pytest.raises(InputError, match="option 'shuffle' of .*Opts must be true or false, got 'yes'"):
        Plugin.make_options({"shuffle": "yes"})
