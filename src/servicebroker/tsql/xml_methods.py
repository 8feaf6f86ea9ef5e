"""The xml data type's methods — ``value()``, ``query()``, ``exist()``, ``nodes()``
(xml-data-type-methods.md and the page of each) — run on an xml value or a node ``nodes()``
returned, the XQuery translated to XPath 1.0 by :mod:`.xquery` and run by lxml.

``value()`` converts the value it finds with T-SQL's conversions, to NULL when nothing is
found; ``query()`` gives xml; ``exist()`` 1, 0 or NULL; ``nodes()`` a row per node (the
interpreter's FROM and APPLY, :func:`apply_rows`). ``modify()`` (XML DML) is refused by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from functools import lru_cache
from typing import Any

from lxml import etree
from lxml.etree import _Element

from ..errors import TSqlError
from . import nodes as n
from .scope import Scope, fail
from .types import BIT, NVARCHAR_MAX, XML, ConversionFailed, SqlType, Typed, convert, parse_type
from .unsupported import not_supported
from .xml_values import XmlSyntaxError, document, serialize
from .xquery import DOC_VARIABLE, UnknownPrefix, XPathQuery, XQueryRefused, translate

__all__ = ["XmlNode", "apply_rows", "check_method", "run_method", "value_type"]


class XmlNode:
    """A node ``nodes()`` returned (the value of its column): usable only through the four
    methods or IS [NOT] NULL (Msg 493 otherwise, nodes-method-xml-data-type.md)."""

    __slots__ = ("element",)

    def __init__(self, element: _Element) -> None:
        self.element = element

    def __repr__(self) -> str:
        return f"XmlNode({serialize(self.element)!r})"


def value_type(text: str, line: int) -> SqlType:
    """value()'s second argument, ``'nvarchar(20)'``, as a type.

    Raises:
        TSqlError: 2715 an unknown type; Msg 40000 for xml (which value() does not take).
    """
    match = re.fullmatch(r"\s*(\w+)\s*(?:\(\s*(\w+)\s*(?:,\s*(\d+)\s*)?\))?\s*", text)
    try:
        if match is None:
            raise KeyError(text)
        name, size, scale = match.groups()
        if name.upper() == "XML":
            raise not_supported("value() of SQL type xml", line)
        size_text = size.upper() if size is not None and size.upper() == "MAX" else size
        return parse_type(name, size_text, int(scale) if scale is not None else None)
    except (KeyError, ValueError):
        raise TSqlError(
            2715, f"Column, parameter, or variable #0: Cannot find data type {text}.", line=line
        ) from None


def _translate(call: n.XmlMethod, line: int) -> XPathQuery:
    try:
        return translate(call.xquery, call.namespaces)
    except XQueryRefused as exc:
        raise not_supported(f"{exc} (XQuery beyond XPath 1.0, in {call.method}())", line) from None
    except UnknownPrefix as exc:
        raise TSqlError(
            2229,
            f'XQuery [{call.method}()]: The name "{exc.prefix}" does not denote a namespace.',
            line=line,
        ) from None


def check_method(call: n.XmlMethod, line: int) -> None:
    """What SQL Server checks when it compiles a method call: the XQuery translates, and
    value()'s is statically a singleton (Msg 2389).

    Raises:
        TSqlError: 2389, 2229, or Msg 40000 for XQuery beyond XPath 1.0 and modify().
    """
    if call.method == "modify":
        raise not_supported("The xml method modify() (XML DML)", line)
    query = _translate(call, line)
    if call.method == "value" and not query.singleton:
        raise TSqlError(
            2389,
            "XQuery [value()]: 'value()' requires a singleton (or empty sequence), found "
            "operand of type 'xdt:untypedAtomic *'",
            line=line,
        )


@lru_cache(maxsize=256)
def _compiled(xpath: str, namespaces: tuple[tuple[str, str], ...]) -> etree.XPath:
    return etree.XPath(xpath, namespaces=dict(namespaces), extensions=_EXTENSIONS)


def _string(item: object) -> str:
    if isinstance(item, _Element):
        return str(item.xpath("string()"))
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, float):
        return str(int(item)) if item.is_integer() else repr(item)
    return str(item)


def _first_string(argument: object) -> str:
    if isinstance(argument, list):
        return _string(argument[0]) if argument else ""
    return _string(argument)


def _data(context: object, argument: object) -> object:
    items = argument if isinstance(argument, list) else [argument]
    values = [_string(item) for item in items]
    return values[0] if len(values) == 1 else values


_EXTENSIONS: dict[tuple[str | None, str], Callable[..., object]] = {
    (None, "data"): _data,
    (None, "upper-case"): lambda context, a: _first_string(a).upper(),
    (None, "lower-case"): lambda context, a: _first_string(a).lower(),
    (None, "ends-with"): lambda context, a, b: _first_string(a).endswith(_first_string(b)),
}
"""XQuery's functions XPath 1.0 lacks (:mod:`.xquery` lets these through)."""


def _xpath_value(value: Typed) -> object:
    """A SQL value as an XPath variable (sql:variable, sql:column): NULL the empty sequence."""
    v = value.value
    if v is None:
        return []
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float | Decimal):
        return float(v)
    return str(convert(v, value.type, NVARCHAR_MAX))


def _evaluate(call: n.XmlMethod, target: Typed, scope: Scope) -> list[object] | object | None:
    """The XPath's result on the target (None: the target is NULL)."""
    value = target.value
    if value is None:
        return None
    if isinstance(value, XmlNode):
        context: _Element = value.element
        root = context.getroottree().getroot()
    elif target.type.name == "XML":
        try:
            root = context = document(str(value))
        except XmlSyntaxError as exc:
            raise fail(9400, str(exc), scope) from None
    else:
        raise fail(258, f"Cannot call methods on {target.type}.", scope, severity=15)
    query = _translate(call, scope.line)
    variables: dict[str, Any] = {DOC_VARIABLE: root}
    for name, kind, sql_name in query.bindings:
        if kind == "variable":
            bound = scope.variable(sql_name, scope.line)
        else:
            bound = scope.column(tuple(sql_name.split(".")))
        variables[name] = _xpath_value(bound)
    try:
        return _compiled(query.xpath, query.namespaces)(context, **variables)
    except (etree.XPathError, ValueError) as exc:
        raise not_supported(
            f"The XQuery '{call.xquery.strip()[:60]}' in {call.method}() ({exc})", scope.line
        ) from None


def run_method(call: n.XmlMethod, target: Typed, scope: Scope) -> Typed:
    """``target.value()`` / ``.query()`` / ``.exist()`` (``target`` evaluated: xml, or a node
    of nodes()).

    Raises:
        TSqlError: 258 a target not xml, 9400 text that is not XML, the conversion errors of
            value() (245, 8114, …), Msg 40000 for nodes() outside FROM / APPLY.
    """
    if call.method == "nodes":
        raise not_supported("nodes() outside FROM or APPLY", scope.line)
    result = _evaluate(call, target, scope)
    if call.method == "exist":
        if result is None:
            return Typed(None, BIT)
        return Typed(int(result != [] and result is not None), BIT)
    if call.method == "query":
        if result is None:
            return Typed(None, XML)
        return Typed(_serialize_items(result, scope), XML)
    assert call.type is not None
    items = result if isinstance(result, list) else [result]
    if result is None or not items:
        return Typed(None, call.type)
    text = _string(items[0])
    try:
        return Typed(convert(text, NVARCHAR_MAX, call.type), call.type)
    except ConversionFailed as exc:
        raise fail(exc.number, str(exc), scope) from None


def _serialize_items(result: object, scope: Scope) -> str:
    items = result if isinstance(result, list) else [result]
    parts: list[str] = []
    atomic_before = False
    for item in items:
        if isinstance(item, _Element):
            parts.append(serialize(item))
            atomic_before = False
            continue
        if getattr(item, "is_attribute", False):
            raise fail(
                2396, "XQuery [query()]: Attribute may not appear outside of an element", scope
            )
        text = _string(item).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        is_text_node = getattr(item, "is_text", False) or getattr(item, "is_tail", False)
        if atomic_before and not is_text_node:
            parts.append(" ")
        parts.append(text)
        atomic_before = not is_text_node
    return "".join(parts)


def _nodes(
    apply: n.XmlApply, scope: Scope, evaluate: Callable[[n.Expr, Scope], Typed]
) -> list[XmlNode]:
    result = _evaluate(apply.nodes, evaluate(apply.nodes.target, scope), scope)
    if result is None:
        return []
    if not isinstance(result, list) or not all(isinstance(i, _Element) for i in result):
        raise not_supported(
            "nodes() of an XQuery that returns values, attributes or text", scope.line
        )
    return [XmlNode(element) for element in result if isinstance(element, _Element)]


def apply_rows(
    rows: Sequence[Mapping[str, Typed]],
    applies: Sequence[n.XmlApply],
    scope_of: Callable[[Mapping[str, Typed]], Scope],
    evaluate: Callable[[n.Expr, Scope], Typed],
) -> list[dict[str, Typed]]:
    """``rows`` joined with each APPLY's nodes, in order: CROSS APPLY drops a row whose
    nodes() found nothing, OUTER APPLY keeps it with the column NULL; the column is named by
    the APPLY's ``table(column)`` alias."""
    current = [dict(row) for row in rows]
    for apply in applies:
        joined: list[dict[str, Typed]] = []
        key = apply.column.lower()
        for row in current:
            found = _nodes(apply, scope_of(row), evaluate)
            for node in found:
                joined.append({**row, key: Typed(node, XML)})
            if not found and apply.outer:
                joined.append({**row, key: Typed(None, XML)})
        current = joined
    return current


def nodes_column_error(name: str, line: int) -> TSqlError:
    """Msg 493: a column of nodes() read directly."""
    return TSqlError(
        493,
        f"The column '{name}' that was returned from the nodes() method cannot be used "
        "directly. It can only be used with one of the four XML data type methods, exist(), "
        "nodes(), query(), and value(), or in IS NULL and IS NOT NULL checks.",
        line=line,
    )
