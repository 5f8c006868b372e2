"""Plug-ins found through Python entry points, the way pytest and flake8 find theirs, and the one
registry type every extension point is (`Registry`: the built-in entries, then the plug-ins of an
entry-point group, checked and cached).

The groups, declared in a distribution's pyproject.toml (this package's own commands,
features and tuners are registered the same way as anybody else's):

    [project.entry-points."rerank.commands"]   name = "pkg.module:add_parser"
    [project.entry-points."rerank.features"]   name = "pkg.module:FeatureClass"
    [project.entry-points."rerank.tuners"]     name = "pkg.module:TunerClass"
    [project.entry-points."rerank.formats"]    name = "pkg.module:FORMAT_RECORD"
    [project.entry-points."rerank.metrics"]    name = "pkg.module:MetricClass"
    [project.entry-points."rerank.mbr_utilities"]  name = "pkg.module:UtilityClass"
    [project.entry-points."rerank.generators"]  name = "pkg.module:BackendClass"

A command is a callable `add_parser(subparsers)` that creates its argparse sub-parser and sets
`func`; a feature implements `rerank.features.Feature`; a tuner `rerank.tuning.Tuner`; a format
is a `rerank.formats.NBestFormat` record; a metric a `rerank.metrics.base.Metric`; an MBR utility
a class with `exact` and `aggregate` (rerank.consensus); a generation backend a
`rerank.generation.Backend`. The core never names a plug-in: it loads
what is installed. See docs/plugins.md.

Each group is one `Registry`: COMMANDS, FEATURES and TUNERS here, rerank.formats.table.FORMATS,
rerank.consensus.MBR_UTILITIES and the metrics' in rerank.metrics.registry.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, ItemsView, Iterator, Mapping, ValuesView
from functools import cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rerank.errors import InputError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from rerank.features import Feature
    from rerank.tuning import Tuner

GROUPS = ("rerank.commands", "rerank.features", "rerank.tuners", "rerank.formats", "rerank.metrics",
          "rerank.mbr_utilities", "rerank.generators")
T = TypeVar("T")


class PluginError(InputError):
    """An installed plug-in that cannot be loaded or clashes with another."""


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points installed in `group` (importlib.metadata, imported here: the command line
    scans them only when it needs a plug-in, rerank.commands.COMMANDS)."""
    from importlib.metadata import entry_points as installed

    return list(installed(group=group))


def _entries(group: str) -> list[EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group):
        other = found.get(ep.name)
        if other is not None and other.value != ep.value:
            raise PluginError(f"two plug-ins named {ep.name!r} in {group}: {other.value} and {ep.value}")
        found[ep.name] = ep
    return [found[name] for name in sorted(found)]


@cache
def load(group: str, known: frozenset[tuple[str, str]] = frozenset()) -> dict[str, Any]:
    """name -> loaded object of every plug-in installed in `group`, sorted by name; an entry
    point in `known` ((name, value) pairs the caller has without loading them) is left out. A
    plug-in whose module or object is not there (ImportError, AttributeError: a missing
    dependency, a wrong entry-point value) is a PluginError naming it; any other exception its
    import raises is a bug of the plug-in and propagates with its traceback."""
    if group not in GROUPS:
        raise ValueError(f"unknown plug-in group {group!r}")
    loaded = {}
    for ep in _entries(group):
        if (ep.name, ep.value) in known:
            continue
        try:
            loaded[ep.name] = ep.load()
        except (ImportError, AttributeError) as exc:  # its module or object is not there: it names itself
            raise PluginError(f"cannot load plug-in {ep.name!r} ({ep.value}) of {group}: "
                              f"{type(exc).__name__}: {exc}") from exc
    return loaded


def import_object(value: str) -> Any:
    """The object an entry-point value `module:attribute` names, its module imported now."""
    import importlib

    module, _, attribute = value.partition(":")
    found: Any = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        found = getattr(found, part)
    return found


class Registry(Generic[T]):
    """One extension point: name -> entry, the built-in entries (`builtin`, a function that returns
    them, called on first use so that building a registry imports nothing) first, then the
    plug-ins of the entry-point `group`, sorted by name. `check(name, entry)` refuses a plug-in
    (it raises PluginError: the wrong kind of object, a name that is not its own); a plug-in named
    like a built-in entry is refused here. `known` (a function of (name, value) pairs) names the
    entry points that are built-in entries themselves (this distribution's commands, declared in
    pyproject.toml and listed in rerank.commands.COMMANDS): they are not loaded again. `kind` names
    an entry in messages ("metric", "MBR utility").

    The plug-ins are read once per process (`load`'s cache): the table is rebuilt when that cache
    is cleared (`clear`, or `load.cache_clear()`: tests that install plug-ins), so that one call
    renews every registry."""

    def __init__(self, group: str, kind: str, builtin: Callable[[], Mapping[str, T]] | None = None,
                 check: Callable[[str, Any], None] | None = None,
                 known: Callable[[], Collection[tuple[str, str]]] | None = None) -> None:
        if group not in GROUPS:
            raise ValueError(f"unknown plug-in group {group!r}")
        self.group, self.kind, self._builtin, self._check, self._known = group, kind, builtin, check, known
        self._loaded: dict[str, Any] | None = None   # the `load` result the table was built from
        self._table: dict[str, T] = {}
        self._plugins: dict[str, T] = {}

    def _build(self) -> None:
        loaded = load(self.group, frozenset(self._known() if self._known is not None else ()))
        if loaded is self._loaded:
            return
        table = dict(self._builtin() if self._builtin is not None else {})
        for name, entry in loaded.items():
            if name in table:
                raise PluginError(f"plug-in {self.kind} {name!r} of {self.group} clashes with a built-in "
                                  f"{self.kind} of that name")
            if self._check is not None:
                self._check(name, entry)
        self._plugins = dict(loaded)
        self._table = {**table, **self._plugins}
        self._loaded = loaded

    def table(self) -> dict[str, T]:
        """Every entry by name: the built-in ones, then the plug-ins'."""
        self._build()
        return self._table

    def plugins(self) -> dict[str, T]:
        """The plug-ins' entries alone (every entry but the built-in ones)."""
        self._build()
        return self._plugins

    def get(self, name: str, path: str | None = None, option: str | None = None) -> T:
        """The entry `name`; an unknown name is an InputError naming the known ones."""
        table = self.table()
        if name not in table:
            raise InputError(f"unknown {self.kind} {name!r} (known: {', '.join(table) or 'none'})", path, option=option)
        return table[name]

    def names(self) -> tuple[str, ...]:
        return tuple(self.table())

    def __contains__(self, name: object) -> bool:
        return name in self.table()

    def __getitem__(self, name: str) -> T:
        return self.table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.table())

    def __len__(self) -> int:
        return len(self.table())

    def items(self) -> ItemsView[str, T]:
        return self.table().items()

    def values(self) -> ValuesView[T]:
        return self.table().values()

    def clear(self) -> None:
        """Forget the entry points read (every registry's), so that the next use loads anew."""
        self._loaded = None
        load.cache_clear()


def subclass_check(group: str, interface: str) -> Callable[[str, Any], None]:
    """A Registry check that a plug-in of `group` is a subclass of `interface` (`module:Class`,
    imported when a plug-in is checked: a plug-in's class imports it anyway)."""

    def check(name: str, entry: Any) -> None:
        base = import_object(interface)
        if not (isinstance(entry, type) and issubclass(entry, base)):
            what = f"the class {entry.__name__}" if isinstance(entry, type) else f"a {type(entry).__name__}"
            raise PluginError(f"plug-in {name!r} of {group} is {what}, not a subclass of {base.__module__}.{base.__name__}")

    return check


class BuiltinCommand:
    """This distribution's command `value` (`module:add_parser`, rerank.commands.COMMANDS): its
    module is imported when its parser is built."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __call__(self, subparsers: Any) -> Any:
        return import_object(self.value)(subparsers)


def _builtin_commands() -> dict[str, Callable]:
    from rerank.commands import COMMANDS as table

    return {name: BuiltinCommand(value) for name, (value, _) in table.items()}


def _known_commands() -> list[tuple[str, str]]:
    from rerank.commands import COMMANDS as table

    return [(name, value) for name, (value, _) in table.items()]


# This distribution's commands are built-in entries listed in rerank.commands.COMMANDS (not loaded
# through their entry points: the command line starts without a scan); features and tuners are all
# plug-ins, this distribution's included. The formats' registry is rerank.formats.table.FORMATS,
# the metrics' rerank.metrics.registry's, the MBR utilities' rerank.consensus.MBR_UTILITIES.
COMMANDS: Registry[Callable] = Registry("rerank.commands", "command", _builtin_commands, known=_known_commands)
FEATURES: Registry[type[Feature]] = Registry("rerank.features", "feature",
                                             check=subclass_check("rerank.features", "rerank.features:Feature"))
TUNERS: Registry[type[Tuner]] = Registry("rerank.tuners", "tuner",
                                         check=subclass_check("rerank.tuners", "rerank.tuning:Tuner"))


def features() -> dict[str, type[Feature]]:
    """name -> class of every installed feature plug-in."""
    return FEATURES.table()


def tuners() -> dict[str, type[Tuner]]:
    """name -> class of every installed tuner plug-in."""
    return TUNERS.table()


def mbr_utilities() -> dict[str, type]:
    """name -> class of every MBR utility, the built-in ones and the plug-ins' (rerank.consensus:
    `--mbr-utility NAME`)."""
    from rerank.consensus import MBR_UTILITIES

    return MBR_UTILITIES.table()
