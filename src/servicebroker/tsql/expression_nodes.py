"""The expressions, search conditions and queries of a T-SQL batch as typed nodes (the statements
that hold them are :mod:`.nodes`): scalar expressions, conditions (T-SQL keeps the two apart) and
the SELECT core every query shape shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .types import SqlType

__all__ = [
    "Assign",
    "Between",
    "Binary",
    "Case",
    "Cast",
    "Column",
    "ColumnUpdated",
    "Compare",
    "Cond",
    "Exists",
    "Expr",
    "ExprItem",
    "ForXml",
    "FunctionCall",
    "GlobalVariable",
    "InList",
    "InQuery",
    "IsNull",
    "Join",
    "Like",
    "Literal",
    "Logical",
    "Negate",
    "Not",
    "SelectCore",
    "SelectItem",
    "Star",
    "Subquery",
    "Variable",
    "XmlApply",
    "XmlMethod",
]


# -- expressions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    """A constant: ``value`` of ``type`` (``N'…'`` NVARCHAR, ``'…'`` VARCHAR, ``0x…`` VARBINARY,
    a number INT / BIGINT / DECIMAL, NULL)."""

    value: object
    type: SqlType


@dataclass(frozen=True)
class Variable:
    """``@name`` (``name`` with its ``@``, as written)."""

    name: str


@dataclass(frozen=True)
class GlobalVariable:
    """``@@ROWCOUNT``, ``@@TRANCOUNT``, ``@@ERROR``, … (``name`` upper case, without ``@@``)."""

    name: str


@dataclass(frozen=True)
class Column:
    """A column of the row being read: ``parts`` as written (``alias.column`` or ``column``)."""

    parts: tuple[str, ...]


@dataclass(frozen=True)
class FunctionCall:
    """A scalar or aggregate function: ``name`` upper case (its schema dropped), ``args``;
    ``star`` for ``COUNT(*)``. ``target`` is set for an XML method (``@x.value(…)``,
    ``message_body.query(…)``): the expression the method is called on."""

    name: str
    args: tuple[Expr, ...]
    star: bool = False
    target: Expr | None = None


@dataclass(frozen=True)
class Cast:
    """CAST / CONVERT / TRY_CAST / TRY_CONVERT of ``expr`` to ``type`` (``style``: CONVERT's
    third argument)."""

    expr: Expr
    type: SqlType
    style: Expr | None = None
    try_: bool = False


@dataclass(frozen=True)
class Binary:
    """``left op right`` for ``op`` in ``+ - * / %`` (``+`` also joins strings)."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Negate:
    """``-expr``."""

    expr: Expr


@dataclass(frozen=True)
class Case:
    """CASE: ``operand`` (simple form) or None (searched form, each WHEN a :data:`Cond`)."""

    operand: Expr | None
    whens: tuple[tuple[Expr | Cond, Expr], ...]
    otherwise: Expr | None


@dataclass(frozen=True)
class Subquery:
    """``(SELECT …)`` as a value: its one column of its one row (NULL with no row)."""

    select: SelectCore


@dataclass(frozen=True)
class XmlMethod:
    """An xml data type method (xml-data-type-methods.md): ``target.value('xquery', 'type')``,
    ``.query('xquery')``, ``.exist('xquery')``, ``.nodes('xquery')`` (``method`` lower case;
    ``type`` value()'s SQL type; ``namespaces`` WITH XMLNAMESPACES' prefixes, ``""`` the
    default) — run by :mod:`.xml_methods`."""

    method: str
    target: Expr
    xquery: str
    type: SqlType | None = None
    namespaces: tuple[tuple[str, str], ...] = ()


Expr = (
    Literal
    | Variable
    | GlobalVariable
    | Column
    | FunctionCall
    | Cast
    | Binary
    | Negate
    | Case
    | Subquery
    | XmlMethod
)
"""A scalar expression."""


# -- search conditions --------------------------------------------------------------------


@dataclass(frozen=True)
class Compare:
    """``left op right``, ``op`` one of ``= <> != < > <= >= !< !>``."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Logical:
    """``left AND right`` / ``left OR right`` (``op`` ``"AND"`` | ``"OR"``)."""

    op: str
    left: Cond
    right: Cond


@dataclass(frozen=True)
class Not:
    """``NOT cond``."""

    cond: Cond


@dataclass(frozen=True)
class IsNull:
    """``expr IS [NOT] NULL``."""

    expr: Expr
    negated: bool = False


@dataclass(frozen=True)
class InList:
    """``expr [NOT] IN (a, b, …)``."""

    expr: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True)
class InQuery:
    """``expr [NOT] IN (SELECT …)``."""

    expr: Expr
    select: SelectCore
    negated: bool = False


@dataclass(frozen=True)
class Like:
    """``expr [NOT] LIKE pattern`` (``%``, ``_``, ``[…]``)."""

    expr: Expr
    pattern: Expr
    negated: bool = False


@dataclass(frozen=True)
class Between:
    """``expr [NOT] BETWEEN low AND high``."""

    expr: Expr
    low: Expr
    high: Expr
    negated: bool = False


@dataclass(frozen=True)
class Exists:
    """``EXISTS (SELECT …)``."""

    select: SelectCore


@dataclass(frozen=True)
class ColumnUpdated:
    """``UPDATE (column)`` in a trigger (update-trigger-functions-transact-sql.md): whether the
    statement that fired it wrote the column."""

    column: str


Cond = Compare | Logical | Not | IsNull | InList | InQuery | Like | Between | Exists | ColumnUpdated
"""A search condition (true, false or unknown)."""


# -- queries ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assign:
    """``@variable = expr`` in a select list or a RECEIVE column list."""

    variable: str
    expr: Expr


@dataclass(frozen=True)
class Star:
    """``*`` in a select list; ``qualifier.*`` (``qualifier``: an alias or an object's name
    parts) the columns of that FROM source only."""

    qualifier: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExprItem:
    """``expr [AS alias]`` in a select list (``alias`` None: the column's own name, or no
    column name)."""

    expr: Expr
    alias: str | None = None


SelectItem = Assign | Star | ExprItem


@dataclass(frozen=True)
class XmlApply:
    """``CROSS | OUTER APPLY target.nodes('xquery') AS table(column)`` in FROM (and a FROM
    that is only ``….nodes(…) AS table(column)``): a row per node (nodes-method-xml-data-type.md).
    """

    nodes: XmlMethod
    table: str
    column: str
    outer: bool = False


@dataclass(frozen=True)
class ForXml:
    """``FOR XML RAW | PATH | AUTO [('element')] [, ROOT[('root')]] [, TYPE] [, ELEMENTS]``
    (for-xml-sql-server.md): ``mode`` upper case, ``element`` the row element's name as
    written (None: ``row``), ``root`` None without ROOT, ``namespaces`` WITH XMLNAMESPACES'."""

    mode: str
    element: str | None = None
    root: str | None = None
    type: bool = False
    elements: bool = False
    namespaces: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Join:
    """A FROM source after the first (from-transact-sql.md, <joined_table>): ``kind`` INNER,
    LEFT, RIGHT, FULL or CROSS (a comma is CROSS), the object's name parts (``@t`` for a table
    variable), its alias, and its ON condition (None for CROSS)."""

    kind: str
    source: tuple[str, ...]
    alias: str | None
    on: Cond | None


@dataclass(frozen=True)
class SelectCore:
    """SELECT [DISTINCT] [TOP (n)] items [FROM source [alias]] [WHERE …] [GROUP BY …]
    [ORDER BY …] [FOR XML …]. ``source`` is the object name's parts (``sys.services``, a queue,
    a table); ``applies`` the ``.nodes()`` of FROM and its APPLYs, in order; ``joins`` the
    sources joined to ``source`` (``joined``: there are some)."""

    items: tuple[SelectItem, ...]
    source: tuple[str, ...] | None = None
    alias: str | None = None
    where: Cond | None = None
    top: Expr | None = None
    distinct: bool = False
    group_by: tuple[Expr, ...] = ()
    order_by: tuple[tuple[Expr, bool], ...] = ()
    joined: bool = False
    text: str = field(default="", compare=False)
    applies: tuple[XmlApply, ...] = ()
    for_xml: ForXml | None = None
    joins: tuple[Join, ...] = ()
