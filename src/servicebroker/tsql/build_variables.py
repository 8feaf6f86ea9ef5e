"""Parse tree → nodes for table variables and cursors (:mod:`.build`'s statements on them):
DECLARE @t TABLE (…), INSERT / UPDATE / DELETE on a table variable, DECLARE … CURSOR, OPEN,
FETCH, CLOSE and DEALLOCATE.
"""

from __future__ import annotations

from collections.abc import Callable

from lark import Token, Tree

from ..errors import TSqlError
from . import nodes as n
from .build_expressions import ExpressionBuilder, name_of
from .unsupported import not_supported

__all__ = [
    "cursor_statement",
    "declare_cursor",
    "delete_variable",
    "fetch_cursor",
    "insert_variable",
    "table_definition",
    "update_variable",
]

_CURSOR_OPTIONS = frozenset(
    {
        "LOCAL",
        "GLOBAL",
        "FORWARD_ONLY",
        "SCROLL",
        "STATIC",
        "KEYSET",
        "DYNAMIC",
        "FAST_FORWARD",
        "READ_ONLY",
        "SCROLL_LOCKS",
        "OPTIMISTIC",
        "TYPE_WARNING",
    }
)
"""The options of T-SQL's DECLARE CURSOR after CURSOR (declare-cursor-transact-sql.md)."""


def table_definition(decl: Tree[Token], x: ExpressionBuilder, line: int) -> n.TableDef:
    """``@t TABLE (column type [NULL | NOT NULL] [PRIMARY KEY] [UNIQUE] [IDENTITY [(s, i)]]
    [DEFAULT expr], … [, PRIMARY KEY (…)] [, UNIQUE (…)])``.

    Raises:
        TSqlError: Msg 40000 for what a table variable does not run here (a FOREIGN KEY,
            REFERENCES; a CHECK is a syntax error already).
    """
    name = str(decl.children[0])
    columns: list[n.ColumnDef] = []
    keys: list[tuple[str, ...]] = []
    for element in decl.children[1:]:
        assert isinstance(element, Tree)
        if element.data == "column_def":
            column, type_tree, *options = element.children
            assert isinstance(type_tree, Tree)
            nullable = True
            identity = None
            default = None
            for option in options:
                assert isinstance(option, Tree)
                kind = str(option.data)
                if kind == "not_null":
                    nullable = False
                elif kind == "primary_key":
                    nullable = False
                    keys.append((name_of(column),))
                elif kind == "unique":
                    keys.append((name_of(column),))
                elif kind == "identity":
                    values = [int(str(c)) for c in option.children]
                    identity = (values[0], values[1]) if values else (1, 1)
                    nullable = False
                elif kind == "default":
                    default = x.expr(option.children[-1])
                elif kind == "references":
                    raise not_supported("REFERENCES in a table variable", line)
            columns.append(
                n.ColumnDef(name_of(column), x.data_type(type_tree), nullable, identity, default)
            )
        else:
            constraint = element if element.data == "table_constraint" else element.children[-1]
            assert isinstance(constraint, Tree)
            parts = [c for c in constraint.children if isinstance(c, Tree)]
            if any(c.data == "qname" for c in parts):
                raise not_supported("A FOREIGN KEY in a table variable", line)
            keys.append(tuple(name_of(c) for c in parts if c.data == "name"))
    return n.TableDef(name, tuple(columns), tuple(keys))


def _target(tree: Tree[Token], x: ExpressionBuilder) -> tuple[str, str | None]:
    """The table variable a statement names (its ``table_ref`` or ``qname``) and its alias."""
    ref = next(c for c in tree.children if isinstance(c, Tree) and c.data in ("qname", "table_ref"))
    if ref.data == "qname":
        return x.qname(ref)[-1], None
    aliases = [a for a in ref.children[1:] if isinstance(a, Tree) and a.data == "name"]
    first = ref.children[0]
    assert isinstance(first, Tree)
    return x.qname(first)[-1], name_of(aliases[0]) if aliases else None


def names_table_variable(tree: Tree[Token], x: ExpressionBuilder) -> bool:
    """Whether an INSERT, UPDATE or DELETE statement's target is a table variable."""
    return _target(tree, x)[0].startswith("@")


def insert_variable(
    tree: Tree[Token], x: ExpressionBuilder, line: int, execute: Callable[[Tree[Token]], n.Execute]
) -> n.InsertVariable:
    """INSERT [INTO] @t [(columns)] VALUES … | SELECT … | EXEC … | DEFAULT VALUES."""
    table, _ = _target(tree, x)
    columns = None
    for c in tree.children:
        if not isinstance(c, Tree):
            continue
        if c.data == "insert_columns":
            columns = tuple(name_of(name) for name in c.children if isinstance(name, Tree))
        elif c.data == "values_clause":
            rows = tuple(
                tuple(x.expr(e) for e in row.children[0].children)  # type: ignore[union-attr]
                for row in c.children
                if isinstance(row, Tree)
            )
            return n.InsertVariable(line, table, columns, rows)
        elif c.data == "select_core":
            return n.InsertVariable(line, table, columns, select=x.select_core(c))
        elif c.data == "execute":
            return n.InsertVariable(line, table, columns, execute=execute(c))
        elif c.data == "default_values":
            return n.InsertVariable(line, table, columns, rows=((),))
    raise AssertionError("an INSERT without its rows")


def update_variable(tree: Tree[Token], x: ExpressionBuilder, line: int) -> n.UpdateVariable:
    """UPDATE [TOP (n)] @t SET column = expr, … [WHERE …] (a FROM is refused by name)."""
    table, _ = _target(tree, x)
    sets: list[tuple[str, n.Expr]] = []
    where = None
    top = None
    for c in tree.children:
        if not isinstance(c, Tree):
            continue
        if c.data == "set_item":
            path, value = c.children
            sets.append((x.path(path)[-1], x.expr(value)))  # type: ignore[arg-type]
        elif c.data == "where_clause":
            where = x.cond(c.children[0])
        elif c.data == "top":
            top = x.top(c)
        elif c.data == "from_clause":
            raise not_supported("UPDATE of a table variable with a FROM clause", line)
    return n.UpdateVariable(line, table, tuple(sets), where, top)


def delete_variable(tree: Tree[Token], x: ExpressionBuilder, line: int) -> n.DeleteVariable:
    """DELETE [TOP (n)] [FROM] @t [WHERE …] (a second FROM is refused by name)."""
    table, _ = _target(tree, x)
    where = None
    top = None
    for c in tree.children:
        if not isinstance(c, Tree):
            continue
        if c.data == "where_clause":
            where = x.cond(c.children[0])
        elif c.data == "top":
            top = x.top(c)
        elif c.data == "from_clause":
            raise not_supported("DELETE from a table variable with a FROM clause", line)
    return n.DeleteVariable(line, table, where, top)


def declare_cursor(tree: Tree[Token], x: ExpressionBuilder, line: int) -> n.DeclareCursor:
    """DECLARE name [INSENSITIVE] [SCROLL] CURSOR [options] FOR select.

    Raises:
        TSqlError: Msg 102 at an option the page does not have, or at T-SQL's options after
            the ISO form's (the page: "cannot be mixed").
    """
    name, iso, options, select = tree.children
    assert isinstance(iso, Tree) and isinstance(options, Tree) and isinstance(select, Tree)
    before = [str(t).upper() for t in iso.children]
    after = [str(t).upper() for t in options.children]
    for word in before:
        if word not in ("INSENSITIVE", "SCROLL"):
            raise TSqlError(102, f"Incorrect syntax near '{word}'.", severity=15, line=line)
    for word in after:
        if word not in _CURSOR_OPTIONS or before:
            raise TSqlError(102, f"Incorrect syntax near '{word}'.", severity=15, line=line)
    words = set(before) | set(after)
    local = True if "LOCAL" in words else False if "GLOBAL" in words else None
    scroll = bool(words & {"SCROLL", "STATIC", "KEYSET", "DYNAMIC", "INSENSITIVE"}) and not (
        words & {"FORWARD_ONLY", "FAST_FORWARD"}
    )
    return n.DeclareCursor(line, name_of(name), x.select_core(select), scroll, local)


def _cursor_name(tree: Tree[Token]) -> tuple[str, bool]:
    """A ``cursor_name``: the name and whether GLOBAL was said."""
    name = tree.children[-1]
    assert isinstance(name, Tree)
    return name_of(name), len(tree.children) > 1


def cursor_statement(tree: Tree[Token], kind: str, line: int) -> n.CursorStatement:
    """OPEN, CLOSE or DEALLOCATE (``kind``) [GLOBAL] name."""
    ref = tree.children[0]
    assert isinstance(ref, Tree)
    name, global_ = _cursor_name(ref)
    return n.CursorStatement(line, kind, name, global_)


def fetch_cursor(tree: Tree[Token], x: ExpressionBuilder, line: int) -> n.FetchCursor:
    """FETCH [direction [n]] [FROM] [GLOBAL] name [INTO @v, …]."""
    direction = "NEXT"
    offset = None
    name = ""
    global_ = False
    into: tuple[str, ...] = ()
    for c in tree.children:
        if isinstance(c, Token) and c.type == "FETCH_DIRECTION":
            direction = str(c).upper()
        elif isinstance(c, Tree) and c.data == "cursor_name":
            name, global_ = _cursor_name(c)
        elif isinstance(c, Tree) and c.data == "fetch_into":
            into = tuple(str(v) for v in c.children)
        else:
            offset = x.expr(c)
    if direction in ("ABSOLUTE", "RELATIVE") and offset is None:
        raise TSqlError(102, f"Incorrect syntax near '{direction}'.", severity=15, line=line)
    return n.FetchCursor(line, name, direction, offset, into, global_)
