"""The format table: the built-in n-best formats' records and the installed plug-ins' (entry-point
group `rerank.formats`, each an `NBestFormat` record), by name and in detection order: FORMATS, the
extension point's registry (rerank.plugins.Registry)."""

from __future__ import annotations

from rerank.formats.fairseq import FAIRSEQ
from rerank.formats.jsonl import JSONL
from rerank.formats.marian import MARIAN
from rerank.formats.moses import JOSHUA, MOSES
from rerank.formats.opennmt import OPENNMT
from rerank.formats.plain import PLAIN
from rerank.formats.record import NBestFormat
from rerank.formats.sockeye import SOCKEYE
from rerank.plugins import PluginError, Registry

BUILTIN: tuple[NBestFormat, ...] = (MOSES, JOSHUA, MARIAN, FAIRSEQ, SOCKEYE, OPENNMT, JSONL, PLAIN)


def check_plugin(name: str, record: object) -> None:
    """A plug-in format is an NBestFormat record under its own name, neither cached nor streamed."""
    if not isinstance(record, NBestFormat):
        raise PluginError(f"plug-in {name!r} of rerank.formats is a {type(record).__name__}, not a "
                          "rerank.formats.NBestFormat record")
    if record.name != name:
        raise PluginError(f"plug-in {name!r} of rerank.formats is registered under another name than its "
                          f"record's ({record.name!r})")
    if record.cached or record.streamed:  # the cache keys on this package's reading code, the two-pass path reads Moses
        raise PluginError(f"plug-in format {name!r} sets cached or streamed, which only built-in formats may")


FORMATS: Registry[NBestFormat] = Registry("rerank.formats", "n-best format",
                                          lambda: {record.name: record for record in BUILTIN}, check_plugin)


def formats() -> dict[str, NBestFormat]:
    """name -> record of every format: the built-in ones, then the plug-ins' (sorted by name)."""
    return FORMATS.table()


def get_format(name: str, path: str | None = None) -> NBestFormat:
    return FORMATS.get(name, path)


def detection_order() -> list[NBestFormat]:
    """The formats that detect themselves, in the order detection asks them (plain last)."""
    return sorted((r for r in formats().values() if r.detect is not None), key=lambda r: r.detect_order)


def format_names(writable: bool = False) -> tuple[str, ...]:
    return tuple(name for name, record in formats().items() if not writable or record.write is not None)


def markdown_table() -> str:
    """The formats table of docs/formats.md (between its `formats-table` markers), from the records."""
    rows = ["| format | layout | written by | detected | `--to` | cached | two-pass |", "|---|---|---|---|---|---|---|"]
    for name, record in formats().items():
        layout = record.layout.replace("|", "\\|")
        rows.append(f"| `{name}` | {layout} | {record.producers} | "
                    f"{'yes' if record.detect is not None else 'no'} | {'yes' if record.write is not None else 'no'} | "
                    f"{'yes' if record.cached else 'no'} | {'yes' if record.streamed else 'no'} |")
    return "\n".join(rows) + "\n"
