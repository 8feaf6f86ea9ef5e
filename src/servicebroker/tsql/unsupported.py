"""The refusal of a construct the interpreter does not run: an error in SQL Server's shape that
names it and ends the batch — never run approximately (docs/tsql.md)."""

from __future__ import annotations

from ..errors import TSqlError

__all__ = ["not_supported"]


def not_supported(what: str, line: int) -> TSqlError:
    """A construct the interpreter does not run: refused, never run approximately."""
    error = TSqlError(
        40000,
        f"{what} is not supported by servicebroker's T-SQL (docs/tsql.md lists what runs).",
        line=line,
    )
    error.ends_batch = True  # type: ignore[attr-defined]
    return error
