"""The xml data type's values as SQL Server keeps and shows them: text parsed as an XML document
or fragment (content), its insignificant white space dropped, and serialized as SQL Server
serializes it — no XML declaration, attributes in double quotes, an empty element as ``<a />``,
CDATA as escaped text (xml-transact-sql.md, create-instances-of-xml-data.md: "the XML
declaration … is not preserved", white space "not preserved" unless ``xml:space="preserve"``).

The parsed form is an lxml element, :data:`WRAPPER`, standing for the document node: its
children are the document's top-level nodes, so a fragment of several elements is one tree.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lxml import etree
from lxml.etree import _Comment, _Element, _ProcessingInstruction

__all__ = ["WRAPPER", "XmlSyntaxError", "document", "normalize", "serialize"]

WRAPPER = "sbdocument"
"""The element standing for the document node of a parsed xml value."""

_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


class XmlSyntaxError(Exception):
    """Text that is not XML: ``line`` and ``character`` where the parser stopped, as SQL
    Server's Msg 9400 "XML parsing: line L, character C, …" names them."""

    def __init__(self, line: int, character: int, reason: str) -> None:
        super().__init__(f"XML parsing: line {line}, character {character}, {reason}")
        self.line = line
        self.character = character


@lru_cache(maxsize=128)
def document(text: str) -> _Element:
    """``text`` parsed: the :data:`WRAPPER` element holding its top-level nodes, insignificant
    white space (text nodes of white space only, outside ``xml:space="preserve"``) dropped.
    Shared between callers: never change it.

    Raises:
        XmlSyntaxError: ``text`` is not well-formed XML content.
    """
    body = _DECLARATION.sub("", text)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, strip_cdata=True)
    opening = f"<{WRAPPER}>"
    try:
        root = etree.fromstring(f"{opening}{body}</{WRAPPER}>", parser)
    except etree.XMLSyntaxError as exc:
        line, column = exc.position
        if line == 1:
            column = max(column - len(opening), 1)
        reason = str(exc.msg).split(", line ")[0].rstrip(".").lower()
        raise XmlSyntaxError(line, column, reason) from None
    _drop_blank(root, preserve=False)
    return root


def _drop_blank(element: _Element, *, preserve: bool) -> None:
    preserve = {"preserve": True, "default": False}.get(str(element.get(_XML_SPACE, "")), preserve)
    if not preserve and element.text is not None and not element.text.strip():
        element.text = None
    for child in element:
        if not preserve and child.tail is not None and not child.tail.strip():
            child.tail = None
        if isinstance(child.tag, str):
            _drop_blank(child, preserve=preserve)


def normalize(text: str) -> str:
    """``text`` as SQL Server keeps an xml value (parsed, then serialized).

    Raises:
        XmlSyntaxError: not well-formed XML content.
    """
    return serialize(document(text))


def _escape(text: str, *, attribute: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if attribute:
        text = text.replace('"', "&quot;")
    return text


def _name(tag: str, nsmap: dict[str | None, str]) -> str:
    if not tag.startswith("{"):
        return tag
    uri, local = tag[1:].split("}", 1)
    if uri == "http://www.w3.org/XML/1998/namespace":
        return f"xml:{local}"
    for prefix, bound in nsmap.items():
        if bound == uri and prefix is not None:
            return f"{prefix}:{local}"
    return local


def _used(node: _Element) -> set[tuple[str | None, str]]:
    """The (prefix, uri) pairs the names of ``node`` and its descendants are written with."""
    used: set[tuple[str | None, str]] = set()
    for element in node.iter():
        if not isinstance(element.tag, str):
            continue
        nsmap = element.nsmap
        names = [element.tag, *(str(k) for k in element.attrib)]
        for tag in names:
            if tag.startswith("{"):
                uri = tag[1:].split("}", 1)[0]
                used.update((p, u) for p, u in nsmap.items() if u == uri)
    return used


def serialize(node: _Element, *, top: bool = True) -> str:
    """A node as SQL Server writes it: the :data:`WRAPPER` as its content, an element with the
    namespace declarations it brings into scope (all in scope at ``top``), a comment, a
    processing instruction."""
    if isinstance(node, _Comment):
        return f"<!--{node.text or ''}-->"
    if isinstance(node, _ProcessingInstruction):
        target = getattr(node, "target", "")
        return f"<?{target} {node.text or ''}?>" if node.text else f"<?{target}?>"
    inner = _escape(node.text or "") + "".join(
        serialize(child, top=False) + _escape(child.tail or "") for child in node
    )
    tag = node.tag
    if isinstance(tag, str) and tag == WRAPPER:
        return inner
    nsmap = dict(node.nsmap)
    parent = node.getparent()
    inherited: dict[str | None, str] = {} if parent is None else dict(parent.nsmap)
    if top:  # a node taken out of its document: the namespaces its names use, and its own
        used = _used(node)
        inherited = {p: u for p, u in inherited.items() if (p, u) not in used}
    name = (
        node.prefix + ":" + etree.QName(node).localname
        if node.prefix
        else etree.QName(node).localname
    )
    parts = [name]
    for prefix, uri in nsmap.items():
        if inherited.get(prefix) != uri:
            parts.append(f'xmlns{":" + prefix if prefix else ""}="{_escape(uri, attribute=True)}"')
    for key, value in node.attrib.items():
        parts.append(f'{_name(str(key), nsmap)}="{_escape(str(value), attribute=True)}"')
    opening = " ".join(parts)
    if not inner:
        return f"<{opening} />"
    return f"<{opening}>{inner}</{name}>"
