"""FOR XML: a query's rows as XML (for-xml-sql-server.md; use-raw-mode-with-for-xml.md,
use-path-mode-with-for-xml.md, use-the-root-directive-with-for-xml.md, type-directive-in-for-xml-
queries.md, use-raw-mode-with-for-xml.md's ELEMENTS).

RAW makes an element per row (``row`` or the name given) with a column per attribute, or per
child element with ELEMENTS; PATH an element per row whose columns are placed by their names —
``@a`` an attribute, ``a/b`` nested elements (adjacent columns sharing a parent share its
element), ``text()`` / ``data()`` / ``node()`` / ``*`` / no name the column's value inline, an
xml value unescaped — and ``PATH('')`` no row element. NULL columns are left out. ROOT wraps
the whole; WITH XMLNAMESPACES' declarations go on the outermost elements. Without TYPE the result
is one nvarchar(max) column named ``XML_F52E2B61-18A1-11d1-B105-00805F49916B``; with TYPE an
xml value, as SQL Server serializes xml.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from ..errors import TSqlError
from . import nodes as n
from .types import NVARCHAR_MAX, XML, SqlType, Typed
from .unsupported import not_supported
from .xml_values import normalize

__all__ = ["XML_COLUMN", "shape"]

XML_COLUMN = "XML_F52E2B61-18A1-11d1-B105-00805F49916B"
"""The name of FOR XML's one column without TYPE."""


def _escape(text: str, *, attribute: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("\r", "&#x0D;")
    if attribute:
        text = text.replace('"', "&quot;")
    return text


def _encode_name(name: str) -> str:
    """A column name as an XML name: each character a name cannot hold as ``_xHHHH_``."""
    out = []
    for i, ch in enumerate(name):
        ok = ch.isalpha() or ch == "_" or ch == ":" or (i > 0 and (ch.isdigit() or ch in "-."))
        out.append(ch if ok else f"_x{ord(ch):04X}_")
    return "".join(out)


def _float(value: float) -> str:
    mantissa, exponent = f"{value:.15e}".split("e")
    return f"{mantissa}e{exponent[0]}{int(exponent[1:]):03d}"


def _text(value: Typed, line: int) -> str:
    """A non-NULL value as FOR XML writes it (its XSD form)."""
    v = value.value
    if value.type.name == "XML":
        if not isinstance(v, str):
            raise TSqlError(
                493,
                "The column that was returned from the nodes() method cannot be used directly. "
                "It can only be used with one of the four XML data type methods, exist(), "
                "nodes(), query(), and value(), or in IS NULL and IS NOT NULL checks.",
                line=line,
            )
        return v
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, uuid.UUID):
        return str(v).upper()
    if isinstance(v, datetime):
        text = v.strftime("%Y-%m-%dT%H:%M:%S")
        return text + (f".{v.microsecond // 1000:03d}" if v.microsecond else "")
    if isinstance(v, Decimal | int):
        return str(v)
    return str(v)


@dataclass
class _Element:
    name: str
    attributes: list[str] = field(default_factory=list)
    content: list[str] = field(default_factory=list)

    def close(self) -> str:
        opening = " ".join([self.name, *self.attributes])
        if not self.content:
            return f"<{opening}/>"
        return f"<{opening}>{''.join(self.content)}</{self.name}>"


class _Writer:
    """Elements opened and closed in document order, the outermost given the namespace
    declarations."""

    def __init__(self, declarations: list[str]) -> None:
        self.declarations = declarations
        self.stack: list[_Element] = []
        self.out: list[str] = []

    def open(self, name: str) -> _Element:
        element = _Element(name, list(self.declarations) if not self.stack else [])
        self.stack.append(element)
        return element

    def put(self, text: str) -> None:
        (self.stack[-1].content if self.stack else self.out).append(text)

    def close(self) -> None:
        self.put_closed(self.stack.pop().close())

    def put_closed(self, text: str) -> None:
        self.put(text)


def _declarations(namespaces: tuple[tuple[str, str], ...]) -> list[str]:
    return [
        f'xmlns{":" + prefix if prefix else ""}="{_escape(uri, attribute=True)}"'
        for prefix, uri in namespaces
    ]


def _raw_row(
    writer: _Writer, spec: n.ForXml, columns: list[tuple[str, SqlType]], row: list[Typed], line: int
) -> None:
    element = writer.open(_encode_name(spec.element or "row"))
    for (name, _), value in zip(columns, row, strict=True):
        if not name:
            raise not_supported("A column without a name in FOR XML RAW", line)
        if value.value is None:
            continue
        if isinstance(value.value, bytes):
            raise not_supported("A binary column in FOR XML RAW (BINARY BASE64)", line)
        text = _text(value, line)
        tag = _encode_name(name)
        if spec.elements or value.type.name == "XML":
            body = text if value.type.name == "XML" else _escape(text)
            element.content.append(f"<{tag}>{body}</{tag}>" if body else f"<{tag}/>")
        else:
            element.attributes.append(f'{tag}="{_escape(text, attribute=True)}"')
    writer.close()


def _path_row(
    writer: _Writer, spec: n.ForXml, columns: list[tuple[str, SqlType]], row: list[Typed], line: int
) -> None:
    base = len(writer.stack)
    if spec.element != "":
        writer.open(_encode_name(spec.element or "row"))
    floor = len(writer.stack)
    opened: list[str] = []  # the path of elements open for this row's columns
    data_before = False
    for (name, _), value in zip(columns, row, strict=True):
        steps = [s for s in name.split("/")] if name else [""]
        *parents, last = steps
        if any(not s or s.startswith("@") for s in parents):
            raise not_supported(f"The FOR XML PATH column name '{name}'", line)
        shared = 0
        while shared < min(len(opened), len(parents)) and opened[shared] == parents[shared]:
            shared += 1
        if value.value is None:
            continue
        while len(opened) > shared:
            writer.close()
            opened.pop()
            data_before = False
        for parent in parents[shared:]:
            writer.open(_encode_name(parent))
            opened.append(parent)
        text = _text(value, line)
        is_xml = value.type.name == "XML"
        if last.startswith("@"):
            if not writer.stack or len(writer.stack) == base:
                raise TSqlError(
                    6864,
                    "Row tag omission (empty row tag name) cannot be used with attribute-centric "
                    "FOR XML serialization.",
                    line=line,
                )
            current = writer.stack[-1]
            if current.content:
                raise TSqlError(
                    6852,
                    f"Attribute-centric column '{name}' must not come after a non-attribute-"
                    "centric sibling in XML hierarchy in FOR XML PATH.",
                    line=line,
                )
            current.attributes.append(f'{_encode_name(last[1:])}="{_escape(text, attribute=True)}"')
            continue
        lowered = last.lower()
        if lowered == "data()":
            writer.put((" " if data_before else "") + (text if is_xml else _escape(text)))
            data_before = True
            continue
        data_before = False
        if lowered in ("", "*", "text()", "node()"):
            writer.put(text if is_xml else _escape(text))
        elif lowered == "comment()":
            writer.put(f"<!--{text}-->")
        elif lowered.endswith("()"):
            raise not_supported(f"The FOR XML PATH column name '{name}'", line)
        else:
            tag = _encode_name(last)
            writer.put(f"<{tag}>{text if is_xml else _escape(text)}</{tag}>")
    while len(writer.stack) > floor:
        writer.close()
    if len(writer.stack) > base:
        writer.close()


def shape(
    spec: n.ForXml, columns: list[tuple[str, SqlType]], rows: list[list[Typed]], line: int
) -> tuple[list[tuple[str, SqlType]], list[list[Typed]]]:
    """The rows of a query as FOR XML gives them: one row of one column (no row when the query
    returned none).

    Raises:
        TSqlError: 6852 an attribute column after an element one (PATH), 6864 an attribute
            with PATH(''), 493 a nodes() column; Msg 40000 for what is refused by name.
    """
    column = ("", XML) if spec.type else (XML_COLUMN, NVARCHAR_MAX)
    if not rows:
        return [column], []
    writer = _Writer(_declarations(spec.namespaces))
    if spec.root is not None:
        writer.open(_encode_name(spec.root))
    for row in rows:
        if spec.mode == "RAW":
            _raw_row(writer, spec, columns, row, line)
        else:
            _path_row(writer, spec, columns, row, line)
    if spec.root is not None:
        writer.close()
    text = "".join(writer.out)
    if spec.type:
        return [column], [[Typed(normalize(text), XML)]]
    return [column], [[Typed(text, NVARCHAR_MAX)]]
