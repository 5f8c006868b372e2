"""Plug-ins found through Python entry points, the way pytest and flake8 find theirs.

Four groups, declared in a distribution's pyproject.toml (this package's own commands,
features and tuners are registered the same way as anybody else's):

    [project.entry-points."rerank.commands"]   name = "pkg.module:add_parser"
    [project.entry-points."rerank.features"]   name = "pkg.module:FeatureClass"
    [project.entry-points."rerank.tuners"]     name = "pkg.module:TunerClass"
    [project.entry-points."rerank.formats"]    name = "pkg.module:FORMAT_RECORD"

A command is a callable `add_parser(subparsers)` that creates its argparse sub-parser and sets
`func`; a feature implements `rerank.features.Feature`; a tuner `rerank.tuning.Tuner`; a format
is a `rerank.formats.NBestFormat` record (rerank.formats.table adds it to the built-in ones). The core
never names a plug-in: it loads what is installed. See docs/plugins.md.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from functools import cache
from typing import TYPE_CHECKING, Any

from rerank.errors import InputError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from rerank.features import Feature
    from rerank.tuning import Tuner

GROUPS = ("rerank.commands", "rerank.features", "rerank.tuners", "rerank.formats", "rerank.mbr_utilities")


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
