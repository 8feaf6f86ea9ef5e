"""XML schema collections (create-xml-schema-collection-transact-sql.md, alter-…, drop-…) and
the validation of a ``VALID_XML WITH SCHEMA COLLECTION`` message type's bodies
(create-message-type-transact-sql.md), on libxml2's XSD 1.0 through ``lxml.etree.XMLSchema``.

A collection is a set of ``<xsd:schema>`` documents, one or several per target namespace (an
ALTER … ADD adds components to a namespace with a document of its own), possibly without
``targetNamespace``. CREATE and ALTER … ADD take an expression holding one or more such
documents side by side (example B of the CREATE page), which :func:`prepare_documents` splits,
checks and compiles together with the collection's documents before anything is stored.

Compiling: a driver schema (no target namespace) includes the documents without a target
namespace and imports every other namespace — the namespace's document itself, or a namespace
driver including its documents when it has several; a custom lxml resolver serves them, so an
``<xsd:import namespace="…"/>`` without ``schemaLocation`` finds another namespace of the same
collection (the pages' rule), and any other location (``schemaLocation="http://…"``) resolves
to nothing: no file and no network is ever read. ``<xsd:include>`` and ``<xsd:redefine>`` are
refused, as SQL Server refuses them, and so are ``<xsd:key>``, ``<xsd:keyref>`` and
``<xsd:unique>`` (requirements-and-limitations-for-xml-schema-collections-on-the-server.md).

Parsing never resolves entities, never loads a DTD and never touches the network
(``resolve_entities=False``, ``no_network=True``); a schema expression may begin with an XML
declaration naming any encoding (``N'<?xml version="1.0" encoding="UTF-16"?>…'``: the text is
already characters) and is read as content: no DTD, elements nested at most
:data:`~servicebroker.messages.MAX_XML_DEPTH` deep.

The compiled schema is built once per collection version (its documents) and cached
(:func:`compiled`); a body is checked against it under a lock (an ``XMLSchema`` object keeps
its error log: one check at a time).
"""

from __future__ import annotations

import re
import threading
import xml.parsers.expat
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from lxml import etree

from ..errors import CatalogError
from ..messages import MAX_XML_DEPTH

__all__ = [
    "XSD_NAMESPACE",
    "CompiledCollection",
    "SchemaDocument",
    "XmlSchemaCollectionDef",
    "compiled",
    "prepare_documents",
    "schema_text",
]

XSD_NAMESPACE = "http://www.w3.org/2001/XMLSchema"
_XSD = "{" + XSD_NAMESPACE + "}"
_URL = "servicebroker-xml-schema-collection:"
"""The scheme of the locations the resolver serves (the documents and the drivers)."""
_WRAPPER = "sbschemas"
_DECLARATION = re.compile(r"\A\ufeff?\s*<\?xml\s[^>]*?\?>", re.S)
_ENCODING = re.compile(rb"""\A<\?xml\s[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
_REFUSED = {
    "include": "<xsd:include> is not supported (merge the included schema into this one)",
    "redefine": "<xsd:redefine> is not supported",
    "key": "<xsd:key> constraints are not supported",
    "keyref": "<xsd:keyref> constraints are not supported",
    "unique": "<xsd:unique> constraints are not supported",
}
"""What SQL Server refuses in a schema collection
(requirements-and-limitations-for-xml-schema-collections-on-the-server.md), refused here too."""
_SYMBOL_SPACES = {
    "element": "element",
    "attribute": "attribute",
    "complexType": "type",
    "simpleType": "type",
    "group": "group",
    "attributeGroup": "attributeGroup",
    "notation": "notation",
}
"""XSD's top-level components by element and the symbol space each names a component in."""


@dataclass(frozen=True, slots=True)
class SchemaDocument:
    """One ``<xsd:schema>`` document of a collection: its ``targetNamespace`` ('' for none)
    and its ``text`` as written (the element alone: no XML declaration)."""

    target_namespace: str
    text: str


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A document just split from an expression: where it starts in the expression (its
    1-based ``line``) and its parse tree."""

    document: SchemaDocument
    line: int
    root: Any


def schema_text(collection: str, expression: object) -> str:
    """The text of a CREATE / ALTER XML SCHEMA COLLECTION expression: a ``str`` as it is, bytes
    (varbinary) decoded by their byte-order mark or XML declaration (UTF-8 otherwise).

    Raises:
        CatalogError: None, another type, or bytes that are not text in their encoding.
    """
    if isinstance(expression, str):
        return expression
    if isinstance(expression, bytes | bytearray | memoryview):
        data = bytes(expression)
        encoding = "utf-8"
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            encoding = "utf-16"
        elif len(data) >= 2 and data[1:2] == b"\x00" and data[:1] != b"\x00":
            encoding = "utf-16-le"
        else:
            declared = _ENCODING.match(data)
            if declared is not None:
                encoding = declared.group(1).decode("ascii")
        try:
            return data.decode(encoding)
        except (LookupError, UnicodeDecodeError) as exc:
            raise CatalogError(
                f"XML schema collection {collection!r}: the schema bytes are not {encoding} "
                f"text ({exc})"
            ) from None
    if expression is None:
        raise CatalogError(
            f"XML schema collection {collection!r}: the schemas are NULL (a collection is "
            f"created from a non-null value)"
        )
    raise CatalogError(
        f"XML schema collection {collection!r}: the schemas must be a string (str, or bytes "
        f"of XML), got {type(expression).__name__}"
    )


def _split(collection: str, text: str) -> list[_Parsed]:
    """The ``<xsd:schema>`` documents side by side in ``text`` (module docstring).

    Raises:
        CatalogError: not well-formed XML content ("XML parsing: line L, character C, …"),
            nested more than MAX_XML_DEPTH levels, text or a non-schema element at the top,
            a refused XSD construct, or no schema at all.
    """
    declaration = _DECLARATION.match(text)
    if declaration is not None:  # blanked, not removed: every line and column stays put
        text = re.sub(r"[^\n]", " ", declaration.group()) + text[declaration.end() :]
    text = text.lstrip("\ufeff")
    opening = f"<{_WRAPPER}>"
    wrapped = (opening + text + f"</{_WRAPPER}>").encode("utf-8", "surrogatepass")
    spans = _spans(collection, wrapped, len(opening))
    parser = _parser()
    found: list[_Parsed] = []
    for start, end, line in spans:
        source = wrapped[start:end].decode("utf-8", "surrogatepass")
        try:
            root = etree.fromstring(source, parser)
        except (etree.XMLSyntaxError, ValueError) as exc:  # expat already read it: unlikely
            raise CatalogError(
                f"XML schema collection {collection!r}: XML parsing: line {line}: {exc}"
            ) from None
        if root.tag != _XSD + "schema":
            raise CatalogError(
                f"XML schema collection {collection!r}: line {line}: expected an XML schema "
                f"document (<xsd:schema> of namespace {XSD_NAMESPACE}), found <{root.tag}>"
            )
        for element in root.iter(*(_XSD + name for name in _REFUSED)):
            at = element.sourceline
            where = line + (at if isinstance(at, int) else 1) - 1
            raise CatalogError(
                f"XML schema collection {collection!r}: line {where}: "
                f"{_REFUSED[etree.QName(element).localname]}"
            )
        namespace = root.get("targetNamespace", "")
        found.append(_Parsed(SchemaDocument(namespace, source), line, root))
    if not found:
        raise CatalogError(
            f"XML schema collection {collection!r}: the expression holds no <xsd:schema> document"
        )
    return found


def _spans(collection: str, wrapped: bytes, opening: int) -> list[tuple[int, int, int]]:
    """Read ``wrapped`` (the expression inside the wrapper element) with expat: the byte span
    and the line of each top-level element. expat refuses a DTD inside the wrapper and limits
    entity amplification; the depth is counted here."""
    parser = xml.parsers.expat.ParserCreate()
    depth = [0]
    spans: list[tuple[int, int, int]] = []
    starts: list[tuple[int, int]] = []

    def start(name: str, attributes: object) -> None:
        depth[0] += 1
        if depth[0] == 2:
            starts.append((parser.CurrentByteIndex, parser.CurrentLineNumber))
        if depth[0] > MAX_XML_DEPTH + 1:
            raise _TooDeep

    def end(name: str) -> None:
        if depth[0] == 2:  # expat is at the end tag's "</" (past an empty element's "/>")
            begin, line = starts[-1]
            tag_end = _start_tag_end(wrapped, begin)
            if wrapped[tag_end - 2 : tag_end] == b"/>":
                spans.append((begin, tag_end, line))
            else:
                spans.append((begin, wrapped.index(b">", parser.CurrentByteIndex) + 1, line))
        depth[0] -= 1

    def characters(data: str) -> None:
        if depth[0] == 1 and data.strip():
            raise _Stray(data.strip()[:40], parser.CurrentLineNumber)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    try:
        parser.Parse(wrapped, True)
    except xml.parsers.expat.ExpatError as exc:
        line, column = exc.lineno, exc.offset + 1 - (opening if exc.lineno == 1 else 0)
        reason = xml.parsers.expat.ErrorString(exc.code)
        if parser.ErrorByteIndex >= len(wrapped) - opening - 1:  # at the wrapper's end tag
            text = wrapped[opening : len(wrapped) - opening - 1].decode("utf-8", "replace")
            line, column = text.count("\n") + 1, len(text.rsplit("\n", 1)[-1]) + 1
            reason = "unexpected end of input"
        raise CatalogError(
            f"XML schema collection {collection!r}: XML parsing: line {line}, "
            f"character {max(column, 1)}, {reason}"
        ) from None
    except _TooDeep:
        raise CatalogError(
            f"XML schema collection {collection!r}: the schemas nest elements more than "
            f"{MAX_XML_DEPTH} levels deep"
        ) from None
    except _Stray as stray:
        raise CatalogError(
            f"XML schema collection {collection!r}: line {stray.line}: expected an XML schema "
            f"document, found text {stray.text!r}"
        ) from None
    return spans


def _start_tag_end(data: bytes, begin: int) -> int:
    """The index just past the ``>`` closing the start tag at ``begin`` (quoted attribute
    values skipped)."""
    quote = None
    for i in range(begin, len(data)):
        c = data[i : i + 1]
        if quote is not None:
            if c == quote:
                quote = None
        elif c in (b'"', b"'"):
            quote = c
        elif c == b">":
            return i + 1
    return len(data)


class _TooDeep(Exception):
    """Raised inside expat's handler when the nesting passes MAX_XML_DEPTH."""


class _Stray(Exception):
    """Raised inside expat's handler at text between the schemas."""

    def __init__(self, text: str, line: int) -> None:
        super().__init__(text)
        self.text = text
        self.line = line


def _parser() -> etree.XMLParser:
    """A parser that reads no DTD, resolves no entity and touches no network."""
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def _components(root: Any, namespace: str) -> list[tuple[str, str, str, int]]:
    """The top-level components a schema document declares: (symbol space, namespace, name,
    source line)."""
    found = []
    for child in root:
        if not isinstance(child.tag, str) or not child.tag.startswith(_XSD):
            continue
        space = _SYMBOL_SPACES.get(child.tag[len(_XSD) :])
        name = child.get("name")
        if space is not None and name is not None:
            found.append((space, namespace, name, child.sourceline or 1))
    return found


def prepare_documents(
    collection: str, expression: object, existing: Sequence[SchemaDocument] = ()
) -> tuple[SchemaDocument, ...]:
    """The documents ``expression`` gives the collection ``collection`` (CREATE, or ALTER …
    ADD to a collection of ``existing`` documents), checked: split (module docstring), no
    component declared twice or already in the collection (ALTER XML SCHEMA COLLECTION adds,
    it never changes a component), and the whole collection compiled by libxml2.

    Raises:
        CatalogError: naming the collection — what :func:`schema_text` and the split refuse; a
            component that exists ("the element 'x' of namespace 'n' exists already"); a
            schema libxml2 does not compile, with libxml2's first error and its line in the
            expression.
    """
    text = schema_text(collection, expression)
    parsed = _split(collection, text)
    seen: set[tuple[str, str, str]] = set()
    for document in existing:
        root = etree.fromstring(document.text, _parser())
        seen.update(c[:3] for c in _components(root, document.target_namespace))
    for item in parsed:
        for space, namespace, name, line in _components(item.root, item.document.target_namespace):
            if (space, namespace, name) in seen:
                raise CatalogError(
                    f"XML schema collection {collection!r}: line {item.line + line - 1}: the "
                    f"{space} {name!r} of namespace {namespace!r} exists already (a component "
                    f"is never replaced: ALTER XML SCHEMA COLLECTION only adds)"
                )
            seen.add((space, namespace, name))
    documents = tuple(item.document for item in parsed)
    padded = {  # each new document starts on its own line: libxml2's lines are the expression's
        len(existing) + i: "\n" * (item.line - 1) + item.document.text
        for i, item in enumerate(parsed)
    }
    try:
        _compile((*existing, *documents), padded)
    except _CompileError as exc:
        index, line, message = exc.args
        if index is not None and index >= len(existing):
            where = f"line {line}: "
        elif index is not None:
            namespace = existing[index].target_namespace
            where = f"in its document {index + 1} (namespace {namespace!r}), line {line}: "
        else:
            where = ""
        raise CatalogError(
            f"XML schema collection {collection!r}: the schemas do not compile: {where}{message}"
        ) from None
    return documents


class _CompileError(Exception):
    """libxml2 refused a collection: (document index or None, line, message)."""


_IMPORT_TAG = re.compile(r"<(?:[\w.-]+:)?import\b(?:[^>\"']|\"[^\"]*\"|'[^']*')*>")
_LOCATION = re.compile(r"""\bschemaLocation\s*=\s*(?:"[^"]*"|'[^']*')""")


def _without_locations(text: str) -> str:
    """``text`` with the ``schemaLocation`` of every ``<xsd:import>`` blanked (lines and
    columns kept): an import names a namespace of the collection, never a place to read."""

    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group())

    return _IMPORT_TAG.sub(lambda tag: _LOCATION.sub(blank, tag.group()), text)


class _Resolver(etree.Resolver):
    """Serves the documents and drivers of one compilation. Any other location (none is left
    after :func:`_without_locations`) is answered with a document that is no schema: libxml2
    refuses it, and never reads the location itself."""

    def __init__(self, texts: dict[str, str]) -> None:
        super().__init__()
        self.texts = texts

    # lxml calls resolve(system_url, public_id, context); lxml-stubs leave the context out
    def resolve(self, system_url: str, public_id: str, context: Any) -> Any:  # type: ignore[override]
        text = self.texts.get(system_url, "<not-read-by-servicebroker/>")
        return self.resolve_string(text, context, base_url=system_url)


def _compile(documents: Sequence[SchemaDocument], texts: dict[int, str] | None = None) -> Any:
    """Compile ``documents`` together (module docstring); ``texts`` replaces some documents'
    text (by index) for this compilation.

    Raises:
        _CompileError: libxml2's first error.
    """
    served: dict[str, str] = {}
    by_namespace: dict[str, list[int]] = {}
    for i, document in enumerate(documents):
        served[f"{_URL}doc/{i}"] = _without_locations((texts or {}).get(i, document.text))
        by_namespace.setdefault(document.target_namespace, []).append(i)
    parts: list[str] = []
    for k, (namespace, indexes) in enumerate(by_namespace.items()):
        if not namespace:
            parts.extend(f'<xs:include schemaLocation="{_URL}doc/{i}"/>' for i in indexes)
            continue
        location = f"{_URL}doc/{indexes[0]}"
        if len(indexes) > 1:
            location = f"{_URL}namespace/{k}"
            includes = "".join(f'<xs:include schemaLocation="{_URL}doc/{i}"/>' for i in indexes)
            served[location] = (
                f'<xs:schema xmlns:xs="{XSD_NAMESPACE}" '
                f'targetNamespace="{_attribute(namespace)}">{includes}</xs:schema>'
            )
        parts.append(
            f'<xs:import namespace="{_attribute(namespace)}" schemaLocation="{location}"/>'
        )
    driver = f'<xs:schema xmlns:xs="{XSD_NAMESPACE}">{"".join(parts)}</xs:schema>'
    parser = _parser()
    parser.resolvers.add(_Resolver(served))
    root = etree.fromstring(driver, parser, base_url=f"{_URL}driver")
    try:
        return etree.XMLSchema(root)
    except etree.XMLSchemaParseError as exc:
        errors = exc.error_log.filter_from_errors() or exc.error_log
        first = errors[0] if errors else None
        if first is None:
            raise _CompileError(None, 0, str(exc)) from None
        index = None
        if first.filename and first.filename.startswith(f"{_URL}doc/"):
            index = int(first.filename.rsplit("/", 1)[1])
        raise _CompileError(index, first.line, first.message) from None


def _attribute(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


class CompiledCollection:
    """A collection's compiled schema (:func:`compiled`): checks message bodies against it."""

    def __init__(self, schema: Any) -> None:
        self._schema = schema
        self._lock = threading.Lock()

    def check(self, body: bytes) -> str | None:
        """None when ``body`` (an XML document as bytes: UTF-8, or UTF-16 with a byte-order
        mark or without one, as T-SQL's ``N'…'`` makes it) is valid against the schema; else
        libxml2's first error, ``"line L: text"``. The body is parsed without DTD, entities
        or network."""
        if len(body) >= 2 and body[1:2] == b"\x00" and body[:1] != b"\x00":
            body = b"\xff\xfe" + body  # UTF-16LE without a byte-order mark
        try:
            document = etree.fromstring(body, _parser())
        except etree.XMLSyntaxError as exc:
            return f"line {exc.lineno}: {exc.msg}"
        with self._lock:
            if self._schema.validate(document):
                return None
            log = self._schema.error_log
            errors = log.filter_from_errors() or log
            first = errors[0] if errors else None
        if first is None:
            return "the document is not valid"
        return f"line {first.line}: {first.message}"


@lru_cache(maxsize=64)
def compiled(documents: tuple[SchemaDocument, ...]) -> CompiledCollection:
    """The compiled schema of a collection's ``documents``: compiled once per collection
    version (its documents) and kept (64 versions at most).

    Raises:
        CatalogError: the documents no longer compile (the libxml2 underneath changed since
            they were stored).
    """
    try:
        return CompiledCollection(_compile(documents))
    except _CompileError as exc:
        raise CatalogError(f"an XML schema collection does not compile: {exc.args[2]}") from None


@dataclass(frozen=True, slots=True)
class XmlSchemaCollectionDef:
    """An XML schema collection (sys.xml_schema_collections): its id, name, dates (broker-clock
    seconds) and documents, in the order they were added."""

    xml_collection_id: int
    name: str
    create_date: float
    modify_date: float
    documents: tuple[SchemaDocument, ...]

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Its target namespaces, each once, in the order they came ('' for none)."""
        return tuple(dict.fromkeys(d.target_namespace for d in self.documents))

    def check(self, body: bytes) -> str | None:
        """Validate a message body against the collection (:meth:`CompiledCollection.check`,
        on the cached compiled schema).

        Raises:
            CatalogError: the collection no longer compiles (see :func:`compiled`).
        """
        return compiled(self.documents).check(body)
