"""What running T-SQL produces: result sets, messages, row counts and errors, in order."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import TSqlError
from .types import SqlType, Typed

__all__ = ["ResultSet", "Results"]


@dataclass
class ResultSet:
    """One result set: ``columns`` (name, type) and ``rows`` of typed values."""

    columns: list[tuple[str, SqlType]]
    rows: list[list[Typed]]

    @property
    def names(self) -> list[str]:
        """The column names."""
        return [name for name, _ in self.columns]

    @property
    def values(self) -> list[list[object]]:
        """The rows as plain Python values (None for NULL)."""
        return [[v.value for v in row] for row in self.rows]


@dataclass
class Results:
    """What a session produced, in order (``events``): result sets, messages (PRINT,
    RAISERROR of severity 10 and below, informational texts), row counts (``int``, shown as
    ``(N rows affected)`` unless SET NOCOUNT ON) and errors."""

    events: list[ResultSet | str | int | TSqlError] = field(default_factory=list)

    @property
    def result_sets(self) -> list[ResultSet]:
        """The result sets, in order."""
        return [e for e in self.events if isinstance(e, ResultSet)]

    @property
    def messages(self) -> list[str]:
        """The messages (PRINT, informational RAISERROR, USE's), in order."""
        return [e for e in self.events if isinstance(e, str)]

    @property
    def row_counts(self) -> list[int]:
        """The row counts, in order."""
        return [e for e in self.events if isinstance(e, int)]

    @property
    def errors(self) -> list[TSqlError]:
        """The errors raised to the client, in order."""
        return [e for e in self.events if isinstance(e, TSqlError)]
