"""Feature names: what a name may be (every format must write it and read it back) and the
columns a Moses feature group makes."""

from __future__ import annotations

from rerank.errors import InputError


def feature_name_problem(name: object) -> str | None:
    """Why `name` cannot be a feature name (every format must write and read it back), or None."""
    if not isinstance(name, str) or not name:
        return "is empty"
    if name[0].isdigit() or name[0] == "-":
        return "starts with a digit or '-' (it would read as a number)"
    if any(c.isspace() for c in name):
        return "contains white space"
    if "=" in name:
        return "contains '='"
    if "|||" in name:
        return "contains '|||'"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not UTF-8 text (a lone surrogate)"
    return None


def check_feature_name(name: object, path: str | None = None, line: int | None = None) -> None:
    """InputError naming `path`:`line` if `name` cannot be a feature name."""
    problem = feature_name_problem(name)
    if problem:
        raise InputError(f"feature name {name!r} {problem}", path, line)


def group_columns(group: str, width: int) -> list[str]:
    """The columns of a feature group as every reader names them: `tm= a` is tm, `tm= a b` tm_0, tm_1."""
    return [group] if width == 1 else [f"{group}_{k}" for k in range(width)]
