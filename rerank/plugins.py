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

A command is a callable `add_parser(subparsers)` that creates its argparse sub-parser and sets
`func`; a feature implements `rerank.features.Feature`; a tuner `rerank.tuning.Tuner`; a format
is a `rerank.formats.NBestFormat` record (rerank.formats.table adds it to the built-in ones). The core
never names a plug-in: it loads what is installed. See docs/plugins.md.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, ItemsView, Iterator, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rerank.errors import InputError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from rerank.features import Feature
    from rerank.tuning import Tuner

GROUPS = ("rerank.commands", "rerank.features", "rerank.tuners", "rerank.formats", "rerank.metrics",
          "rerank.mbr_utilities")
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
    point in `known` ((name, value) pairs the caller has without loading them) is left out."""
    if group not in GROUPS:
        raise ValueError(f"unknown plug-in group {group!r}")
    loaded = {}
    for ep in _entries(group):
        if (ep.name, ep.value) in known:
            continue
        try:
            loaded[ep.name] = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plug-in names itself instead of a traceback
            raise PluginError(f"cannot load plug-in {ep.name!r} ({ep.value}) of {group}: "
                              f"{type(exc).__name__}: {exc}") from None
    return loaded


def commands(known: Collection[tuple[str, str]] = ()) -> dict[str, Callable]:
    """name -> add_parser of every installed command but those in `known` ((name, value) pairs)."""
    return load("rerank.commands", frozenset(known))


def features() -> dict[str, type[Feature]]:
    return load("rerank.features")


def tuners() -> dict[str, type[Tuner]]:
    return load("rerank.tuners")


def mbr_utilities() -> dict[str, type]:
    """name -> class of every installed MBR utility plug-in (rerank.consensus: `--mbr-utility NAME`)."""
    return load("rerank.mbr_utilities")


class Registry(Generic[T]):
    """One extension point: name -> entry, the built-in entries (`builtin`, a function that returns
    them, called on first use so that building a registry imports nothing) first, then the
    plug-ins of the entry-point `group`, sorted by name. `check(name, entry)` refuses a plug-in
    (it raises PluginError: the wrong kind of object, a name that is not its own); a plug-in named
    like a built-in entry is refused here. `kind` names an entry in messages ("metric", "MBR
    utility"). Loaded once per process (`clear` forgets it, for tests that install plug-ins)."""

    def __init__(self, group: str, kind: str, builtin: Callable[[], Mapping[str, T]] | None = None,
                 check: Callable[[str, Any], None] | None = None) -> None:
        if group not in GROUPS:
            raise ValueError(f"unknown plug-in group {group!r}")
        self.group, self.kind, self._builtin, self._check = group, kind, builtin, check
        self._table: dict[str, T] | None = None

    def table(self) -> dict[str, T]:
        """Every entry by name: the built-in ones, then the plug-ins'."""
        if self._table is None:
            table = dict(self._builtin() if self._builtin is not None else {})
            for name, entry in load(self.group).items():
                if name in table:
                    raise PluginError(f"plug-in {self.kind} {name!r} of {self.group} clashes with a built-in "
                                      f"{self.kind} of that name")
                if self._check is not None:
                    self._check(name, entry)
                table[name] = entry
            self._table = table
        return self._table

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

    def __iter__(self) -> Iterator[str]:
        return iter(self.table())

    def __len__(self) -> int:
        return len(self.table())

    def items(self) -> ItemsView[str, T]:
        return self.table().items()

    def clear(self) -> None:
        """Forget the loaded table (and the entry points read), so that the next use loads anew."""
        self._table = None
        load.cache_clear()
