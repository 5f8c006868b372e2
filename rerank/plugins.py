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

from collections.abc import Callable
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from rerank.errors import InputError

if TYPE_CHECKING:
    from rerank.features import Feature
    from rerank.tuning import Tuner

GROUPS = ("rerank.commands", "rerank.features", "rerank.tuners", "rerank.formats")


class PluginError(InputError):
    """An installed plug-in that cannot be loaded or clashes with another."""


def _entries(group: str) -> list[EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group):
        other = found.get(ep.name)
        if other is not None and other.value != ep.value:
            raise PluginError(f"two plug-ins named {ep.name!r} in {group}: {other.value} and {ep.value}")
        found[ep.name] = ep
    return [found[name] for name in sorted(found)]


@cache
def load(group: str) -> dict[str, Any]:
    """name -> loaded object of every plug-in installed in `group`, sorted by name."""
    if group not in GROUPS:
        raise ValueError(f"unknown plug-in group {group!r}")
    loaded = {}
    for ep in _entries(group):
        try:
            loaded[ep.name] = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plug-in names itself instead of a traceback
            raise PluginError(f"cannot load plug-in {ep.name!r} ({ep.value}) of {group}: "
                              f"{type(exc).__name__}: {exc}") from None
    return loaded


def commands() -> dict[str, Callable]:
    return load("rerank.commands")


def features() -> dict[str, type[Feature]]:
    return load("rerank.features")


def tuners() -> dict[str, type[Tuner]]:
    return load("rerank.tuners")
