"""XML's syntax built into nodes, for :mod:`.build_expressions`: an xml method call
(``target.value('xquery', 'type')`` and the others, xml-data-type-methods.md), ``….nodes(…) AS
t(c)`` in FROM and CROSS / OUTER APPLY (nodes-method-xml-data-type.md), WITH XMLNAMESPACES'
declarations (with-xmlnamespaces.md) and FOR XML's directives (for-xml-sql-server.md).

What SQL Server checks when it compiles is checked here, so nothing of the batch runs: a
method's arguments are string literals (Msg 8172), value()'s XQuery is a singleton (Msg 2389).
"""

from __future__ import annotations

from typing import Protocol

from lark import Token, Tree

from ..errors import TSqlError
from ..syntax import name_text, string_text
from . import nodes as n
from .types import SqlType
from .unsupported import not_supported
from .xml_methods import check_method, value_type

__all__ = ["for_xml", "method_call", "namespace_items", "nodes_apply"]

_ARITY = {"value": 2, "query": 1, "exist": 1, "nodes": 1, "modify": 1}


class Builds(Protocol):
    """What these builders need of the expression builder."""

    namespaces: tuple[tuple[str, str], ...]

    def expr(self, node: Tree[Token] | Token) -> n.Expr: ...
    def data_type(self, tree: Tree[Token], *, converting: bool = False) -> SqlType: ...


def _line(tree: Tree[Token]) -> int:
    return tree.meta.line if not tree.meta.empty else 1


def _name(node: Tree[Token] | Token) -> str:
    token = node.children[0] if isinstance(node, Tree) else node
    assert isinstance(token, Token)
    return name_text(token)


def method_call(
    builder: Builds,
    target: n.Expr,
    method: str,
    arguments: Tree[Token] | None,
    line: int,
) -> n.XmlMethod:
    """``target.method(arguments)`` as an :class:`~.nodes.XmlMethod`, checked.

    Raises:
        TSqlError: 227 not an xml method, 174 the wrong number of arguments, 8172 an argument
            that is not a string literal, 2715 value()'s unknown type, and
            :func:`~.xml_methods.check_method`'s.
    """
    name = method.lower()
    if name not in _ARITY:
        raise TSqlError(
            227, f'"{method}" is not a valid function, property, or field.', severity=15, line=line
        )
    args = [] if arguments is None else list(arguments.children)
    if len(args) != _ARITY[name]:
        raise TSqlError(
            174, f"The {name} function requires {_ARITY[name]} argument(s).", severity=15, line=line
        )
    texts = []
    for position, arg in enumerate(args, 1):
        if not (isinstance(arg, Tree) and arg.data == "string"):
            raise TSqlError(
                8172,
                f'The argument {position} of the XML data type method "{name}" must be a '
                "string literal.",
                line=line,
            )
        token = arg.children[0]
        assert isinstance(token, Token)
        texts.append(string_text(token))
    type_ = value_type(texts[1], line) if name == "value" else None
    call = n.XmlMethod(name, target, texts[0], type_, builder.namespaces)
    check_method(call, line)
    return call


def method_expression(builder: Builds, tree: Tree[Token]) -> n.XmlMethod:
    """A method call on a variable, a CAST, a parenthesised expression or a subquery (the
    grammar's ``variable_method``, ``cast_method``, ``paren_method``, ``subquery_method``)."""
    c = tree.children
    rule = str(tree.data)
    arguments = c[-1] if isinstance(c[-1], Tree) and c[-1].data == "arguments" else None
    rest = c[:-1] if arguments is not None else c
    if rule == "variable_method":
        target: n.Expr = n.Variable(str(rest[0]))
    elif rule == "cast_method":
        target = n.Cast(builder.expr(rest[0]), builder.data_type(rest[1], converting=True))  # type: ignore[arg-type]
    elif rule == "column_method":  # qname "(" arguments ")": t.c.nodes(…)
        parts = [_name(p) for p in rest[0].children if isinstance(p, Tree)]  # type: ignore[union-attr]
        if len(parts) < 2:
            raise TSqlError(
                195,
                f"'{parts[-1]}' is not a recognized built-in function name.",
                severity=15,
                line=_line(tree),
            )
        return method_call(builder, n.Column(tuple(parts[:-1])), parts[-1], arguments, _line(tree))
    else:  # paren_method, subquery_method
        target = builder.expr(rest[0])
    return method_call(builder, target, _name(rest[-1]), arguments, _line(tree))


def nodes_apply(builder: Builds, tree: Tree[Token], *, outer: bool = False) -> n.XmlApply:
    """``call AS t(c)`` (the grammar's ``xml_nodes``) as an :class:`~.nodes.XmlApply`."""
    call_tree, table, column = (c for c in tree.children if isinstance(c, Tree))
    call = method_expression(builder, call_tree)
    if call.method != "nodes":
        raise not_supported(f"The xml method {call.method}() as a table source", _line(tree))
    return n.XmlApply(call, _name(table), _name(column), outer)


def namespace_items(items: list[Tree[Token] | Token]) -> tuple[tuple[str, str], ...]:
    """WITH XMLNAMESPACES' declarations as (prefix, uri); prefix ``""`` for DEFAULT."""
    found: list[tuple[str, str]] = []
    for item in items:
        assert isinstance(item, Tree)
        strings = [c for c in item.children if isinstance(c, Token) and c.type == "STRING"]
        uri = string_text(strings[0])
        if item.data == "xmlns_default":
            found.append(("", uri))
        else:
            found.append((_name(item.children[-1]), uri))
    return tuple(found)


def for_xml(tree: Tree[Token], namespaces: tuple[tuple[str, str], ...]) -> n.ForXml:
    """FOR XML's directives as a :class:`~.nodes.ForXml`.

    Raises:
        TSqlError: Msg 40000 for EXPLICIT, XMLDATA, XMLSCHEMA, BINARY BASE64 and ELEMENTS
            XSINIL (refused by name); Msg 102 for a directive FOR XML does not have.
    """
    line = _line(tree)
    mode = ""
    element: str | None = None
    root: str | None = None
    type_ = elements = False
    for directive in tree.children:
        assert isinstance(directive, Tree)
        words = [
            str(c).upper() for c in directive.children if isinstance(c, Token) and c.type == "IDENT"
        ]
        strings = [
            string_text(c)
            for c in directive.children
            if isinstance(c, Token) and c.type == "STRING"
        ]
        argument = strings[0] if strings else None
        word = words[0]
        if word in ("RAW", "PATH", "AUTO") and not mode and len(words) == 1:
            mode = word
            element = argument
            if word == "AUTO" and argument is not None:
                raise TSqlError(102, "Incorrect syntax near '('.", severity=15, line=line)
        elif word == "ROOT" and len(words) == 1:
            root = argument if argument is not None else "root"
        elif word == "TYPE" and len(words) == 1 and argument is None:
            type_ = True
        elif word == "ELEMENTS" and len(words) == 1 and argument is None:
            elements = True
        elif word in ("EXPLICIT", "XMLDATA", "XMLSCHEMA", "BINARY", "ELEMENTS"):
            raise not_supported(f"FOR XML {' '.join(words)}", line)
        else:
            raise TSqlError(102, f"Incorrect syntax near '{word}'.", severity=15, line=line)
    if not mode:
        raise TSqlError(102, "Incorrect syntax near 'XML'.", severity=15, line=line)
    if mode == "AUTO":
        raise not_supported("FOR XML AUTO", line)
    return n.ForXml(mode, element, root, type_, elements, namespaces)
