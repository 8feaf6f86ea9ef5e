"""T-SQL expressions, conditions, types and queries: parse tree → typed nodes (:mod:`.nodes`),
for :mod:`.build`'s statements (a query is an expression where it is a subquery).
"""

from __future__ import annotations

from decimal import Decimal

from lark import Token, Tree

from ..errors import TSqlError
from ..syntax import name_text, string_text
from . import nodes as n
from .build_xml import for_xml, method_call, method_expression, namespace_items, nodes_apply
from .types import BIGINT, INT, SqlType, parse_type

__all__ = ["ExpressionBuilder", "line_of", "name_of", "string_of"]


def name_of(token: Token | Tree[Token]) -> str:
    """A name (a token, or a ``name`` tree holding one) as T-SQL reads it
    (:func:`servicebroker.syntax.name_text`)."""
    if isinstance(token, Tree):
        token = token.children[0]
    assert isinstance(token, Token)
    return name_text(token)


string_of = string_text
"""A string literal's text (:func:`servicebroker.syntax.string_text`)."""


def line_of(tree: Tree[Token]) -> int:
    """The batch line ``tree`` starts on (1 when the parse kept no position)."""
    return tree.meta.line if not tree.meta.empty else 1


class ExpressionBuilder:
    """Parse tree → expression, condition, type and query nodes for one batch's ``text``
    (a query keeps its source text, for the statements translated to the database underneath).

    Raises (from :meth:`data_type`): TSqlError 2715 for an unknown type name, 131 for a size
    above 8000.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.namespaces: tuple[tuple[str, str], ...] = ()
        """WITH XMLNAMESPACES' declarations while its SELECT is built (build_xml)."""

    def span(self, tree: Tree[Token]) -> str:
        """The batch text ``tree`` was parsed from."""
        return self.text[tree.meta.start_pos : tree.meta.end_pos]

    # -- queries ---------------------------------------------------------------------------
    def qname(self, tree: Tree[Token]) -> tuple[str, ...]:
        if tree.data == "variable_table":  # FROM @t, UPDATE @t: the table variable's name
            return (str(tree.children[0]),)
        return tuple(name_of(c) for c in tree.children if isinstance(c, Tree))

    def top(self, tree: Tree[Token]) -> n.Expr:
        count = tree.children[0]
        if isinstance(count, Token):  # TOP n, without parentheses
            return n.Literal(int(str(count)), INT)
        return self.expr(count)

    def select_list(self, tree: Tree[Token]) -> tuple[n.SelectItem, ...]:
        items: list[n.SelectItem] = []
        for item in tree.children:
            assert isinstance(item, Tree)
            if item.data == "assign_item":
                var, value = item.children
                items.append(n.Assign(str(var), self.expr(value)))
            elif item.data == "star_item":
                items.append(n.Star())
            elif item.data == "qualified_star":  # alias.* (from-transact-sql.md)
                items.append(n.Star(tuple(name_of(c) for c in item.children)))
            else:
                expr = self.expr(item.children[0])
                alias = None
                if len(item.children) > 1:
                    a = item.children[1]
                    alias = string_of(a) if isinstance(a, Token) else name_of(a)
                items.append(n.ExprItem(expr, alias))
        return tuple(items)

    def table_ref(self, ref: Tree[Token]) -> tuple[tuple[str, ...], str | None]:
        """A FROM source's name parts and its alias (None without one)."""
        aliases = [a for a in ref.children[1:] if isinstance(a, Tree) and a.data == "name"]
        return self.qname(ref.children[0]), (name_of(aliases[0]) if aliases else None)  # type: ignore[arg-type]

    def join(self, tree: Tree[Token]) -> n.Join:
        """``[INNER | LEFT | RIGHT | FULL [OUTER]] JOIN source ON cond``, ``CROSS JOIN source``
        or ``, source`` (a CROSS join) as a :class:`~.nodes.Join`."""
        ref = next(c for c in tree.children if isinstance(c, Tree) and c.data == "table_ref")
        source, alias = self.table_ref(ref)
        if tree.data != "join":
            return n.Join("CROSS", source, alias, None)
        word = self.span(tree).split(None, 1)[0].upper()  # the join_kind keeps no token
        kind = word if word in ("LEFT", "RIGHT", "FULL") else "INNER"
        return n.Join(kind, source, alias, self.cond(tree.children[-1]))

    def select_core(self, tree: Tree[Token]) -> n.SelectCore:
        items: tuple[n.SelectItem, ...] = ()
        source = None
        alias = None
        where = None
        top = None
        distinct = False
        group_by: tuple[n.Expr, ...] = ()
        order_by: list[tuple[n.Expr, bool]] = []
        joins: list[n.Join] = []
        applies: list[n.XmlApply] = []
        xml: n.ForXml | None = None
        for c in tree.children:
            assert isinstance(c, Tree)
            if c.data == "select_list":
                items = self.select_list(c)
            elif c.data == "distinct":
                distinct = True
            elif c.data == "top":
                top = self.top(c)
            elif c.data == "from_clause":
                ref = c.children[0]
                assert isinstance(ref, Tree)
                if ref.data == "xml_nodes":  # FROM ….nodes(…) AS t(c): one row, applied
                    applies.append(nodes_apply(self, ref))
                else:
                    source, alias = self.table_ref(ref)
                for more in c.children[1:]:
                    assert isinstance(more, Tree)
                    if more.data in ("cross_apply", "outer_apply"):
                        applies.append(
                            nodes_apply(self, more.children[0], outer=more.data == "outer_apply")  # type: ignore[arg-type]
                        )
                    else:
                        joins.append(self.join(more))
            elif c.data == "for_xml":
                xml = for_xml(c, self.namespaces)
            elif c.data == "where_clause":
                where = self.cond(c.children[0])
            elif c.data == "group_by":
                group_by = tuple(self.expr(e) for e in c.children)
            elif c.data == "order_by":
                for item in c.children:
                    assert isinstance(item, Tree)
                    descending = len(item.children) > 1 and str(item.children[1]).upper() == "DESC"
                    order_by.append((self.expr(item.children[0]), descending))
        return n.SelectCore(
            items,
            source,
            alias,
            where,
            top,
            distinct,
            group_by,
            tuple(order_by),
            bool(joins),
            self.span(tree),
            tuple(applies),
            xml,
            tuple(joins),
        )

    def with_namespaces(self, tree: Tree[Token]) -> n.SelectCore:
        """``WITH XMLNAMESPACES (…) SELECT …``: the SELECT, its xml methods and FOR XML with
        the declared prefixes (with-xmlnamespaces.md)."""
        *items, core = tree.children
        self.namespaces = namespace_items(items)
        try:
            return self.select_core(core)  # type: ignore[arg-type]
        finally:
            self.namespaces = ()

    def data_type(self, tree: Tree[Token], *, converting: bool = False) -> SqlType:
        """The type ``tree`` names; ``converting`` (CAST, CONVERT): a character or binary type
        without a length has 30, as there (a declaration's has 1)."""
        name = name_of(tree.children[0])
        size = None
        if (
            converting
            and len(tree.children) == 1
            and name.upper() in ("CHAR", "VARCHAR", "NCHAR", "NVARCHAR", "BINARY", "VARBINARY")
        ):
            size = "30"
        scale = None
        if len(tree.children) > 1:
            size_tree = tree.children[1]
            assert isinstance(size_tree, Tree)
            size = str(size_tree.children[0])
        if len(tree.children) > 2:
            scale = int(str(tree.children[2]))
        try:
            return parse_type(name, size, scale)
        except KeyError:
            raise TSqlError(
                2715,
                f"Column, parameter, or variable #0: Cannot find data type {name}.",
                line=line_of(tree),
            ) from None
        except ValueError:
            raise TSqlError(
                131,
                f"The size ({size}) given to the type '{name.lower()}' exceeds the maximum allowed for any data type (8000).",
                severity=15,
                line=line_of(tree),
            ) from None

    # -- expressions -----------------------------------------------------------------------
    def expr(self, node: Tree[Token] | Token) -> n.Expr:
        if isinstance(node, Token):  # a bare VARIABLE where the grammar inlines it
            if node.type == "VARIABLE":
                return n.Variable(str(node))
            raise AssertionError(f"unexpected token {node.type}")
        rule = str(node.data)
        c = node.children
        if rule == "string":
            token = c[0]
            assert isinstance(token, Token)
            unicode_ = str(token)[:1] in "nN"
            text = string_of(token)
            return n.Literal(
                text, SqlType("NVARCHAR" if unicode_ else "VARCHAR", max(len(text), 1))
            )
        if rule == "integer":
            digits = str(c[0])
            value = int(digits)
            if value < 2**63:
                return n.Literal(value, INT if value < 2**31 else BIGINT)
            return n.Literal(Decimal(value), SqlType("DECIMAL", len(digits.lstrip("0")), 0))
        if rule == "decimal":
            text = str(c[0])
            value_d = Decimal(text)
            scale = len(text.split(".", 1)[1]) if "." in text else 0
            return n.Literal(value_d, SqlType("DECIMAL", 38, scale))
        if rule == "float":
            return n.Literal(float(str(c[0])), SqlType("FLOAT"))
        if rule == "binary":
            digits = str(c[0])[2:]
            if len(digits) % 2:
                digits = "0" + digits
            data = bytes.fromhex(digits)
            return n.Literal(data, SqlType("VARBINARY", max(len(data), 1)))
        if rule == "null":
            return n.Literal(None, INT)
        if rule == "variable":
            return n.Variable(str(c[0]))
        if rule == "global_variable":
            return n.GlobalVariable(str(c[0])[2:].upper())
        if rule == "column":
            return n.Column(self.path(c[0]))  # type: ignore[arg-type]
        if rule == "function_call":
            path = self.path(c[0])  # type: ignore[arg-type]
            args: tuple[n.Expr, ...] = ()
            star = False
            if len(c) > 1:
                if isinstance(c[1], Token) and c[1].type == "STAR":
                    star = True
                else:
                    args = tuple(self.expr(a) for a in c[1].children)  # type: ignore[union-attr]
            if len(path) > 1 and path[-1].lower() in ("value", "query", "exist", "nodes", "modify"):
                target: n.Expr = (
                    n.Variable(path[0]) if path[0].startswith("@") else n.Column(path[:-1])
                )
                arguments = c[1] if len(c) > 1 and isinstance(c[1], Tree) else None
                return method_call(self, target, path[-1], arguments, line_of(node))
            return n.FunctionCall(path[-1].upper(), args, star)
        if rule in ("cast", "try_cast"):
            to_type = self.data_type(c[1], converting=True)  # type: ignore[arg-type]
            return n.Cast(self.expr(c[0]), to_type, try_=rule == "try_cast")
        if rule in ("convert", "try_convert"):
            style = self.expr(c[2]) if len(c) > 2 else None
            to_type = self.data_type(c[0], converting=True)  # type: ignore[arg-type]
            return n.Cast(self.expr(c[1]), to_type, style, try_=rule == "try_convert")
        if rule in ("add", "subtract", "multiply", "divide", "modulo"):
            op = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "modulo": "%"}[rule]
            return n.Binary(op, self.expr(c[0]), self.expr(c[1]))
        if rule == "negate":
            return n.Negate(self.expr(c[0]))
        if rule == "unary":  # "+" expr
            return self.expr(c[0])
        if rule == "simple_case":
            operand = self.expr(c[0])
            whens = tuple(
                (self.expr(w.children[0]), self.expr(w.children[1]))
                for w in c[1:]
                if isinstance(w, Tree) and w.data == "simple_when"
            )
            return n.Case(operand, whens, self._else(c))
        if rule == "searched_case":
            whens_c = tuple(
                (self.cond(w.children[0]), self.expr(w.children[1]))
                for w in c
                if isinstance(w, Tree) and w.data == "searched_when"
            )
            return n.Case(None, whens_c, self._else(c))
        if rule == "subquery":
            return n.Subquery(self.select_core(c[0]))  # type: ignore[arg-type]
        if rule in ("variable_method", "cast_method", "paren_method", "subquery_method"):
            return method_expression(self, node)
        if rule == "select_core":
            return n.Subquery(self.select_core(node))
        raise AssertionError(f"no node for expression rule {rule}")

    def _else(self, children: list[Tree[Token] | Token]) -> n.Expr | None:
        for w in children:
            if isinstance(w, Tree) and w.data == "case_else":
                return self.expr(w.children[0])
        return None

    def path(self, tree: Tree[Token]) -> tuple[str, ...]:
        return tuple(name_of(c) for c in tree.children)

    def cond(self, node: Tree[Token] | Token) -> n.Cond:
        assert isinstance(node, Tree)
        rule = str(node.data)
        c = node.children
        if rule == "compare":
            op = str(c[1])
            return n.Compare(op, self.expr(c[0]), self.expr(c[2]))
        if rule == "equal":
            return n.Compare("=", self.expr(c[0]), self.expr(c[1]))
        if rule in ("or_cond", "and_cond"):
            return n.Logical("OR" if rule == "or_cond" else "AND", self.cond(c[0]), self.cond(c[1]))
        if rule == "not_cond":
            return n.Not(self.cond(c[0]))
        if rule in ("is_null", "is_not_null"):
            return n.IsNull(self.expr(c[0]), rule == "is_not_null")
        if rule in ("in_list", "not_in_list"):
            return n.InList(
                self.expr(c[0]),
                tuple(self.expr(a) for a in c[1].children),  # type: ignore[union-attr]
                rule == "not_in_list",
            )
        if rule in ("in_query", "not_in_query"):
            return n.InQuery(self.expr(c[0]), self.select_core(c[1]), rule == "not_in_query")  # type: ignore[arg-type]
        if rule in ("like", "not_like"):
            return n.Like(self.expr(c[0]), self.expr(c[1]), rule == "not_like")
        if rule in ("between", "not_between"):
            return n.Between(
                self.expr(c[0]), self.expr(c[1]), self.expr(c[2]), rule == "not_between"
            )
        if rule == "exists":
            return n.Exists(self.select_core(c[0]))  # type: ignore[arg-type]
        if rule == "column_updated":
            return n.ColumnUpdated(name_of(c[0]))
        raise AssertionError(f"no node for condition rule {rule}")
