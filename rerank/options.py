"""Plug-in options declared once: dataclass fields that carry their help, check and flag.

A feature, a tuner or a pipeline declares its options as a dataclass whose fields are made with
`option(default, help, check=...)`. Everything else follows from that one declaration:

- the command line: `add_option_flags(group, Options)` adds one flag per field (the name from the
  field's, or `flag`; the help ends with the default; a bool becomes a switch; the check is the
  flag's argparse type, so a bad value is an argparse error) and `options_from_args` reads the
  parsed flags back into an instance;
- the library: `make_options(Options, value)` takes an instance, a mapping of the fields (as
  weights.json records a tuner's options, or as the Python API's keywords) or None, and checks
  every value with the same checks: a bad value or an unknown name is an `InputError`;
- the docs: `describe_options` lists the fields with their flags, defaults and help.

`Configurable` is the base that `rerank.features.Feature` and `rerank.tuning.Tuner` share: its
classmethods do the above for the plug-in's `Options` and its flag prefix.

The checks (`POSITIVE_INT`, `UNIT_INTERVAL`, ...) live here, not in the command-line helpers
(rerank.cliargs, whose argparse types are built from them), so that library code and plug-ins
need nothing of the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from numbers import Integral, Real
from typing import Any, TypeVar

from rerank.errors import InputError

METADATA_KEY = "rerank.option"
OptionsT = TypeVar("OptionsT")   # a plug-in's Options dataclass
# an argparse parser or argument group: what add_argument is called on
ArgumentContainer = argparse._ActionsContainer


# ---- checks: one rule for a flag's text and for a value a script passes ----

@dataclass(frozen=True)
class Check:
    """A rule for one option's values, shared by the command line and the library.

    `what` names the allowed values ("a positive integer": messages say "must be {what}"),
    `convert` turns a flag's text into a value (raising ValueError when the text is not of the
    kind, e.g. not an integer; `noun` names that kind in the message), and `accepts` says
    whether a value, from a flag or from a script, is allowed (its type included). `quote`: the
    message shows the flag's text quoted (a list, whose commas would blur into the sentence).
    `ceiling`: the largest value allowed of a count whose memory or time grows with it (`at_most`),
    said as "must be at most N" for a larger one.
    """

    what: str
    convert: Callable[[str], Any]
    accepts: Callable[[Any], bool]
    noun: str = "a value"
    quote: bool = False
    ceiling: int | None = None

    def refused(self, value: Any) -> str | None:
        """What a refused value must be ("a positive integer", "at most 10,000,000"); None if allowed."""
        if not self.accepts(value):
            return self.what
        if self.ceiling is not None and value > self.ceiling:
            return f"at most {self.ceiling:,}"
        return None

    def parse(self, text: str) -> Any:
        """argparse type: the value of a flag's text, or ArgumentTypeError naming the problem."""
        try:
            value = self.convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {self.noun}") from None
        what = self.refused(value)
        if what is not None:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}" if self.quote
                                             else f"must be {what}, got {text}")
        return value


def _is_int(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def int_check(what: str, test: Callable[[int], bool]) -> Check:
    """A Check of integers (a flag's text as int) that pass `test`."""
    return Check(what, int, lambda v: _is_int(v) and test(v), "an integer")


def at_most(check: Check, ceiling: int) -> Check:
    """`check` with a ceiling: a count whose memory or time grows with it is refused above `ceiling`
    before any work (the option's help says the ceiling)."""
    return dataclasses.replace(check, ceiling=ceiling)


def float_check(what: str, test: Callable[[float], bool]) -> Check:
    """A Check of real numbers (ints allowed from a script) that pass `test`."""
    return Check(what, float, lambda v: _is_number(v) and test(float(v)), "a number")


def one_of(choices: Sequence[str]) -> Check:
    """A Check of strings among `choices` (for the items of a list; a plain field takes `choices=`)."""
    allowed = tuple(choices)
    return Check(f"one of {', '.join(allowed)}", str, lambda v: v in allowed, "a name")


def list_of(item: Check, what: str) -> Check:
    """A Check of a non-empty list whose items pass `item`; a flag gives it comma-separated (an
    item that is not of its kind, "20,x", fails the check as one out of range does)."""
    def convert(text: str) -> list | None:
        try:
            return [item.convert(part.strip()) for part in text.split(",")]
        except ValueError:
            return None

    return Check(f"a comma-separated list of {what}", convert,
                 lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(item.accepts(x) for x in v),
                 f"a comma-separated list of {what}", quote=True)


def split_names(text: str) -> tuple[str, ...]:
    """The names of a comma-separated flag ("bleu, ter" -> ("bleu", "ter")), empty ones left out."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


INTEGER = int_check("an integer", lambda v: True)
NUMBER = float_check("a finite number", math.isfinite)
POSITIVE_INT = int_check("a positive integer", lambda v: v >= 1)
NONNEGATIVE_INT = int_check("0 or more", lambda v: v >= 0)
POSITIVE = float_check("a positive finite number", lambda v: 0 < v < math.inf)
NONNEGATIVE = float_check("a finite number >= 0", lambda v: 0 <= v < math.inf)
PROBABILITY = float_check("between 0 and 1 (exclusive)", lambda v: 0 < v < 1)     # a significance level
UNIT_INTERVAL = float_check("between 0 and 1", lambda v: 0 <= v <= 1)            # a decay or interpolation factor
FRACTION = float_check("a number in [0, 1)", lambda v: 0 <= v < 1)               # a dropout rate
TEXT = Check("a string", str, lambda v: isinstance(v, str), "a string")
PATH = Check("a path", str, lambda v: isinstance(v, (str, os.PathLike)), "a path")   # str or pathlib.Path
BOOL = Check("true or false", bool, lambda v: isinstance(v, bool), "a switch")


class NotFinite(ValueError):
    """Text that float() reads as an infinity or a NaN (an overflow, `1e400`, too)."""


def finite_float(text: str) -> float:
    """The finite number `text` spells, in Python's float syntax (spaces around it allowed): the
    one reader of a finite number from text (the formats' feature values and scores, score files,
    segment scores), each caller with its own messages. ValueError for text that is no number;
    NotFinite, a ValueError, for an infinity, a NaN or an overflow."""
    value = float(text)
    if not math.isfinite(value):
        raise NotFinite(f"{text.strip()} is not a finite number")
    return value
ANY = Check("any value", lambda text: text, lambda v: True, "a value")   # checked by its owner (a tuner's Options)
NAMES = Check("a list of names", split_names,        # a flag gives them comma-separated
              lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v), "names")
MAPPING = Check("a dict", str, lambda v: isinstance(v, Mapping), "a dict")   # a nested field's value

# The ceilings of the significance counts a user gives (rerank.significance; EvalOptions.ar and
# bootstrap, the recipes' --ar and --bootstrap): the randomisation runs in blocks of trials
# (bounded memory, time linear in the trials); the bootstrap keeps every resample's score of each
# run (8 bytes x statistics x runs per resample) for its intervals.
MAX_TRIALS = 10_000_000
MAX_RESAMPLES = 1_000_000
# tuning: runs (a weights file each: TuneSettings.runs, the recipe's --runs) and kbmira's epochs
# (each keeps a record: KBMiraOptions.epochs, the recipe's --epochs)
MAX_RUNS = 10_000
MAX_EPOCHS = 100_000


# ---- declaring a field ----

@dataclass(frozen=True)
class OptionInfo:
    """What `option()` records in a field's metadata (see `option`)."""

    help: str = ""
    flag: str | tuple[str, ...] | None = None
    check: Check | None = None
    choices: tuple | Callable[[], Sequence] | None = None
    metavar: str | None = None
    many: bool = False
    default_text: str | None = None
    cli: bool = True
    group: str | None = None
    cli_default: Any = None   # (the value,) when given: a default that is MISSING would be no default
    nested: type | None = None
    prefix: str = ""
    dest: str | None = None

    def allowed(self) -> tuple | None:
        """The allowed values (`choices`, called when it is a function of the installed plug-ins)."""
        return tuple(self.choices()) if callable(self.choices) else self.choices


def option(default: Any = MISSING, help: str = "", **declared: Any) -> Any:
    """A dataclass field declaring one option: its default, one line of help (without the default:
    "(default: X)" is added from `default`), and optionally

    - `flag`: the command-line flag(s) as written ("--ar", or ("-m", "--model")); default
      `--PREFIX-NAME` from the plug-in's prefix and the field name (underscores as dashes), and
      for a bool that defaults to True `--no-PREFIX-NAME`;
    - `check`: a `Check` of the values (default: by the default's type: int, float, str, bool);
    - `choices`: the allowed values, or a function that returns them (a table that plug-ins extend,
      such as the writable n-best formats: called when the flags are made and when a value is checked);
    - `metavar`: the flag's value placeholder in the help;
    - `many`: the flag may be repeated, the values collected in a tuple (the default: ());
    - `default_text`: what the default means, when the value alone does not say it ("4,096 on
      CUDA" for None); help shows it instead of the value;
    - `cli=False`: no flag is generated (one that a shared helper adds, e.g. --device); the value
      is read from the parsed arguments' attribute of the field's name when there is one;
    - `group`: the title of the help section its flag is listed in (default: the parser or group
      `add_option_flags` is given);
    - `cli_default`: the flag's default, when the command line's differs from the library's (eval's
      --metrics); the help shows it;
    - `nested`: the field is a dict of the options of another declared dataclass (METEOR's for
      EvalOptions.meteor): its flags are that class's, under `prefix`, and the parsed value is the
      dict of those given other than at their default (None when none is);
    - `dest`: the parsed arguments' attribute of the flag (default: argparse's, from the flag); the
      field's name for a `flag` spelt otherwise (`--src` of `sources`) lets the command line say
      that flag for the library's errors about the field (InputError.option).

    A field without a default is a required option (a required flag). A list or dict default is
    copied for every instance (a dataclass default_factory).
    """
    known = {f.name for f in fields(OptionInfo)} - {"help"}
    unknown = sorted(set(declared) - known)
    if unknown:   # a misspelt declaration: a bug of the declaring code
        raise TypeError(f"option() got unknown keyword(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    choices = declared.get("choices")
    if choices is not None and not callable(choices):
        declared["choices"] = tuple(choices)
    if "cli_default" in declared:
        declared["cli_default"] = (declared["cli_default"],)
    info = OptionInfo(help=help, **declared)
    metadata = {METADATA_KEY: info}
    if isinstance(default, (list, dict, set)):
        template = default
        return dataclasses.field(default_factory=lambda: type(template)(template), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def wait_option() -> Any:
    """The `wait` option of every call that writes files, declared once: one writer per output
    (rerank.io.output_lock), and another process writing one is refused at once unless `wait`,
    which waits until it ends. A config object's field (ApplyOptions.wait, ...) and `Writing`'s."""
    return option(False, "if another rerank process is writing the same output, wait until it ends",
                  default_text="refuse at once, naming that process")


@dataclass(frozen=True)
class Writing:
    """The flag --wait of a command whose call takes `wait` as a keyword, not in a config object
    (tune, convert, add-feature): `add_option_flags(parser, Writing)`."""

    wait: bool = wait_option()


@dataclass(frozen=True)
class NoOptions:
    """The options of a plug-in that has none."""


# ---- what a field means on the command line ----

@dataclass(frozen=True)
class OptionDoc:
    """One option as the docs and the generated flags show it."""

    name: str                 # the field
    flags: tuple[str, ...]    # its flags (empty when it has none: cli=False)
    default: str              # the default as help shows it ("60", "none", "on", "required")
    help: str                 # the field's help, without the default


def _info(f: dataclasses.Field) -> OptionInfo:
    return f.metadata.get(METADATA_KEY) or OptionInfo()


def _default(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def _flag_default(f: dataclasses.Field) -> Any:
    """The default of the field's flag: its `cli_default`, else the field's."""
    cli_default = _info(f).cli_default
    return _default(f) if cli_default is None else cli_default[0]


def _check_of(f: dataclasses.Field) -> Check | None:
    """The field's check, or one implied by its default's type (None: any value)."""
    info = _info(f)
    if info.check is not None:
        return info.check
    if info.nested is not None:
        return MAPPING
    return _check_by_type(_default(f), info.many)


def _check_by_type(default: Any, many: bool = False) -> Check | None:
    """The check a default's type implies: its kind (a list: of items like its first), any value."""
    if isinstance(default, bool):
        return BOOL
    if _is_int(default):
        return INTEGER
    if isinstance(default, float):
        return NUMBER
    if isinstance(default, str) or default is None or many:
        return TEXT
    if isinstance(default, list):
        item = (_check_by_type(default[0]) if default else None) or TEXT
        return list_of(item, {INTEGER: "integers", NUMBER: "numbers"}.get(item, "strings"))
    return None


def _is_switch(f: dataclasses.Field) -> bool:
    return isinstance(_default(f), bool)


def _flags(f: dataclasses.Field, prefix: str) -> tuple[str, ...]:
    info = _info(f)
    if not info.cli or info.nested is not None:
        return ()
    if info.flag is not None:
        return (info.flag,) if isinstance(info.flag, str) else tuple(info.flag)
    name = f"{prefix}{f.name}".replace("_", "-")
    return (f"--no-{name}",) if _default(f) is True else (f"--{name}",)


def _dest(flags: Sequence[str], f: dataclasses.Field | None = None) -> str:
    """The Namespace attribute of these flags: the field's `dest`, else as argparse names it (first long flag)."""
    if f is not None and _info(f).dest is not None:
        return str(_info(f).dest)
    long = [flag for flag in flags if flag.startswith("--")]
    return (long or list(flags))[0].lstrip("-").replace("-", "_")


def default_text(f: dataclasses.Field) -> str:
    """The default as the help shows it: the value as the dataclass has it (60, 0.01, 13a), `on`
    or `off` for a switch, `none` for None or an empty value, items joined by commas, or the
    field's `default_text`."""
    info = _info(f)
    if info.default_text is not None:
        return info.default_text
    value = _flag_default(f)
    if value is MISSING:
        return "required"
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None or (isinstance(value, (str, tuple, list, dict)) and not value):
        return "none"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _option_fields(cls: type) -> tuple[dataclasses.Field, ...]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"options must be declared as a dataclass, not {cls!r}")
    return fields(cls)


def describe_options(cls: type, prefix: str = "") -> list[OptionDoc]:
    """Every option of the dataclass `cls` with its flags (under the plug-in's flag `prefix`),
    default and help: what the generated flags show, for docs and help tables."""
    return [OptionDoc(f.name, _flags(f, prefix), default_text(f), _info(f).help) for f in _option_fields(cls)]


def flag_help(f: dataclasses.Field, prefix: str = "") -> str:
    """The generated help line of the field's flag: its help and "(default: X)"."""
    help_text = _info(f).help
    if _default(f) is MISSING:
        return f"{help_text} (required)"
    if _default(f) is True:
        return f"{help_text} (default: on; {_flags(f, prefix)[0]} turns it off)"
    return f"{help_text} (default: {default_text(f)})".lstrip()


def _section(parent: ArgumentContainer, title: str | None) -> ArgumentContainer:
    """The argument group titled `title` of the parser `parent` (made on first use); `parent` itself
    without a title, or when it is a group already (argparse nests no groups)."""
    if title is None or not isinstance(parent, argparse.ArgumentParser):
        return parent
    for existing in parent._action_groups:
        if existing.title == title:
            return existing
    return parent.add_argument_group(title)


def add_option_flags(parent: ArgumentContainer, cls: type, prefix: str = "") -> None:
    """Add one flag per field of the dataclass `cls` to the argparse parser or group `parent` (a
    field with a `group` to that section of the parser; a `nested` one's flags, those of its class)."""
    for f in _option_fields(cls):
        flags = _flags(f, prefix)
        info = _info(f)
        group = _section(parent, info.group)
        if info.nested is not None and info.cli:
            add_option_flags(group, info.nested, prefix + info.prefix)
        if not flags:
            continue
        kwargs: dict[str, Any] = {"dest": _dest(flags, f), "help": flag_help(f, prefix).replace("%", "%%")}
        if _is_switch(f):
            group.add_argument(*flags, action="store_true", **kwargs)
            continue
        check = _check_of(f)
        if check is not None and check is not TEXT:
            kwargs["type"] = check.parse
        if info.choices is not None:
            kwargs["choices"] = info.allowed()
            kwargs["type"] = _one_of(kwargs["choices"], kwargs.get("type"))
        if info.metavar is not None:
            kwargs["metavar"] = info.metavar
        default = _flag_default(f)
        if info.many:
            kwargs["action"] = "append"
        elif default is MISSING:
            kwargs["required"] = True
        else:
            kwargs["default"] = default
        group.add_argument(*flags, **kwargs)


def _one_of(allowed: Sequence, convert: Callable[[str], Any] | None) -> Callable[[str], Any]:
    """argparse type of a flag with choices: the value (converted by `convert`) if allowed, else the
    words the library says (`must be one of A, B, got 'x'`) rather than argparse's own."""
    def parse(text: str) -> Any:
        value = convert(text) if convert is not None else text
        if value not in allowed:
            raise argparse.ArgumentTypeError(f"must be one of {', '.join(map(str, allowed))}, got {value!r}")
        return value

    return parse


def options_from_args(cls: type[OptionsT], args: argparse.Namespace, prefix: str = "") -> OptionsT:
    """The dataclass `cls` from parsed arguments: each field from its generated flag (absent ones,
    e.g. of a parser built without them, keep their default), checked as `make_options` checks."""
    values = {}
    for f in _option_fields(cls):
        flags = _flags(f, prefix)
        nested = _info(f).nested
        if nested is not None and _info(f).cli:
            given: Any = options_from_args(nested, args, prefix + _info(f).prefix)
            values[f.name] = {g.name: getattr(given, g.name) for g in _option_fields(nested)
                              if getattr(given, g.name) != _default(g)} or None
            continue
        dest = _dest(flags, f) if flags else f.name
        if not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        if _is_switch(f) and _default(f) is True:
            value = not value
        elif _info(f).many:
            value = tuple(value) if value is not None else _default(f)
        values[f.name] = value
    return make_options(cls, values)


# ---- the library boundary ----

def _check_value(cls: type, f: dataclasses.Field, value: Any, as_keywords: bool = False) -> None:
    info = _info(f)
    if value is None and _default(f) is None:
        return
    name = f.name if as_keywords else f"option {f.name!r} of {cls.__qualname__}"
    items = value if info.many else (value,)
    if info.many and not isinstance(value, (list, tuple)):
        raise InputError(f"{name} must be a list, got {value!r}", option=f.name)
    check = _check_of(f)
    for item in items:
        allowed = info.allowed()
        if allowed is not None and item not in allowed:
            raise InputError(f"{name} must be one of {', '.join(map(str, allowed))}, got {item!r}", option=f.name)
        what = check.refused(item) if check is not None else None
        if what is not None:
            raise InputError(f"{name} must be {what}, got {item!r}", option=f.name)


def check_options(options: Any, as_keywords: bool = False) -> None:
    """Raise InputError naming the first field of the dataclass instance `options` whose value its
    check or choices refuse. The message names the plug-in option (`option 'epochs' of Options
    must be ...`), or with `as_keywords` the field alone, as a job's settings that a script gives
    as keywords say it (`ar must be a positive integer, got 0`: EvalOptions). Either way
    `InputError.option` is the field, which the command line says as its flag."""
    cls = type(options)
    for f in _option_fields(cls):
        _check_value(cls, f, getattr(options, f.name), as_keywords)


def make_options(cls: type[OptionsT], options: OptionsT | Mapping[str, Any] | None = None) -> OptionsT:
    """`options` as a checked instance of the dataclass `cls`: None gives the defaults, a mapping
    its fields (as weights.json records a tuner's options, or the Python API's keywords), an
    instance itself. An unknown name, a missing required one or a bad value is an InputError
    naming the option (and, for an unknown one, the known ones)."""
    if options is None:
        options = {}
    if isinstance(options, Mapping):
        known = {f.name: f for f in _option_fields(cls)}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InputError(f"unknown option {unknown[0]!r} for {cls.__qualname__} "
                             f"(known: {', '.join(known) or 'none'})")
        missing = [name for name, f in known.items() if _default(f) is MISSING and name not in options]
        if missing:
            raise InputError(f"option {missing[0]!r} of {cls.__qualname__} is required")
        for name, value in options.items():
            _check_value(cls, known[name], value)
        values = {name: tuple(value) if _info(known[name]).many else value for name, value in options.items()}
        return cls(**values)
    if isinstance(options, cls):
        check_options(options)
        return options
    raise TypeError(f"options must be a {cls.__qualname__}, a mapping or None, not {type(options).__name__}")


def with_fields(cls: type[OptionsT], base: OptionsT | None = None, what: str = "option", **keywords: Any) -> OptionsT:
    """`base` (default: `cls()`, the defaults) with `keywords` replacing its fields, checked anew: the
    Python API's config objects (`rerank.evaluate(..., ar=1000)`, `rerank.apply_file(..., to="jsonl")`).
    An unknown keyword is an InputError naming the fields (`what` names the kind: "evaluation option")."""
    known = [f.name for f in _option_fields(cls)]
    unknown = sorted(set(keywords) - set(known))
    if unknown:
        raise InputError(f"unknown {what} {unknown[0]!r} (known: {', '.join(known)})")
    base = base if base is not None else cls()
    return dataclasses.replace(base, **keywords) if keywords else base  # type: ignore[type-var]


class Configurable:
    """The options interface that features and tuners share (rerank.features.Feature,
    rerank.tuning.Tuner): the plug-in names its `Options` dataclass (fields made with `option`)
    and, when its flags need one, a flag prefix (`option_prefix = "mbr-"` gives --mbr-utility).

    The three classmethods are generated from `Options`; a plug-in overrides one only for what
    the fields cannot say (a flag shared with other plug-ins, a custom argparse action).
    """

    Options: type = NoOptions
    option_prefix: str = ""

    @classmethod
    def add_arguments(cls, group: ArgumentContainer) -> None:
        """Add the plug-in's flags to the argparse parser or group `group` (names must not clash
        with other plug-ins')."""
        add_option_flags(group, cls.Options, cls.option_prefix)

    @classmethod
    def options_from_args(cls, args: argparse.Namespace) -> Any:
        """The plug-in's checked Options from the parsed command line."""
        return options_from_args(cls.Options, args, cls.option_prefix)

    @classmethod
    def make_options(cls, options: Any = None) -> Any:
        """`options` (an Options, a mapping of its fields, or None for the defaults) as a checked
        Options; a bad value or unknown name is an InputError."""
        return make_options(cls.Options, options)

    @classmethod
    def describe_options(cls) -> list[OptionDoc]:
        """The plug-in's options with their flags, defaults and help (rerank.options.describe_options)."""
        return describe_options(cls.Options, cls.option_prefix)

    @classmethod
    @contextlib.contextmanager
    def naming_flags(cls) -> Iterator[None]:
        """Within it, an InputError about the plug-in's options (their fields, as the library names
        them: `centroids`) says which flags they are (InputError.of_options: their command-line
        destinations under `option_prefix`), so that the command line names `--mbr-centroids`."""
        try:
            yield
        except InputError as exc:
            if cls.option_prefix:
                exc.of_options({f.name: _dest(flags, f) for f in _option_fields(cls.Options)
                                if (flags := _flags(f, cls.option_prefix))})
            raise
