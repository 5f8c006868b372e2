"""What every n-best format module shares: the read report and number parsing/printing."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rerank.errors import InputError
from rerank.options import NotFinite, finite_float

if TYPE_CHECKING:
    from rerank.nbest import StringColumnBuilder


@dataclass
class ReadReport:
    """What a reader noticed that is not an error."""

    extra_fields_lines: int = 0
    ignored_lines: int = 0
    fairseq_refs: list[str | None] | None = None  # per sentence; None: the sentence has no T- line
    fairseq_sources: list[str | None] | None = None  # per sentence; None: no S- line
    notes: list[str] = field(default_factory=list)
    format: str | None = None  # the format read
    detected: str | None = None  # the format detection chose (None: given)
    detected_lines: int = 0  # the non-empty lines detection saw
    text: dict = field(default_factory=dict)  # the post-processing applied to the hypotheses
    hints: list[str] = field(default_factory=list)  # text that looks segmented or escaped (also in notes)
    columns: dict = field(default_factory=dict)  # what a column of the format means, by name (its direction)


def parse_number(token: str, what: str, path: str, line: int) -> float:
    """A finite float, or an InputError naming `what` at `path`:`line`."""
    try:
        return finite_float(token)
    except NotFinite:
        if token.strip().lstrip("+-").lower() in ("inf", "infinity", "nan"):
            raise InputError(f"{what} is {token} (values must be finite)", path, line) from None
        raise InputError(f"{what}: {token} is too large for a 64-bit float", path, line) from None
    except ValueError:
        raise InputError(f"{what}: {token!r} is not a number", path, line) from None


MAX_COUNT = 2 ** 53  # ids and list sizes beyond this cannot be real (and would overflow int64 sums)


def parse_count(token: str, what: str, path: str, line: int, least: int = 0) -> int:
    """A decimal integer >= `least`, or an InputError naming `what` at `path`:`line`."""
    text = token.strip()
    if not (text.isascii() and text.isdigit()):
        raise InputError(f"{what} {token!r} is not a {'positive' if least > 0 else 'non-negative'} integer", path, line)
    value = int(text)
    if value > MAX_COUNT:
        raise InputError(f"{what} {text} is too large (at most {MAX_COUNT})", path, line)
    if value < least:
        raise InputError(f"{what} {value} is not a positive integer", path, line)
    return value


def format_value(value: float) -> str:
    """Shortest text that reads back as the same float (round trips are exact)."""
    return repr(float(value))


def json_object(text: str) -> dict | None:
    """The JSON object a line holds, or None (not JSON, or JSON but not an object): detection asks."""
    text = text.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def append_text(builder: StringColumnBuilder, text: str, path: str, line: int) -> None:
    """`builder.append(text)`, or an InputError naming the line when JSON text holds a lone surrogate
    (valid JSON, but no UTF-8 string)."""
    try:
        builder.append(text)
    except UnicodeEncodeError:
        raise InputError(f"{text[:40]!r} is not valid Unicode (a lone surrogate)", path, line) from None
