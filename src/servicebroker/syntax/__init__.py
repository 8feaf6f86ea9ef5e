"""T-SQL's syntax: one LALR grammar (``tsql.lark``) read by lark, with two entry points — a
script of Service Broker DDL (``"start"``: ``broker.execute_ddl`` and ``servicebroker ddl``,
built into statement records by :mod:`servicebroker.ddl.parser`) and one T-SQL batch
(``"batch"``: ``servicebroker sqlcmd`` and :class:`servicebroker.Instance`, built into typed
nodes by :mod:`servicebroker.tsql.build`). One grammar, so a DDL statement reads the same in
both (docs/tsql.md).

The parse tables are kept in lark's cache (the system's temporary folder), so a process pays
for building them once per grammar version, not per start.
"""

from __future__ import annotations

from importlib import resources
from typing import Literal

from lark import Lark, Token, Tree

__all__ = ["parse"]

_PARSER = Lark(
    resources.files(__package__).joinpath("tsql.lark").read_text(encoding="utf-8"),
    parser="lalr",
    start=["start", "batch"],
    propagate_positions=True,
    cache=True,
)


def parse(text: str, start: Literal["start", "batch"]) -> Tree[Token]:
    """The parse tree of ``text`` read from the entry point ``start``.

    Raises:
        lark.UnexpectedInput: ``text`` is not in the grammar (the callers turn it into their
            own error: :class:`~servicebroker.errors.CatalogError` for DDL, a T-SQL syntax
            error, Msg 102, for a batch).
    """
    return _PARSER.parse(text, start=start)
