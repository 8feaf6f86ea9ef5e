"""XQuery as the xml data type's methods take it, translated to XPath 1.0 for lxml: the prolog's
``declare namespace p = "uri";`` and ``declare default element namespace "uri";``, WITH
XMLNAMESPACES' prefixes, path expressions (``/a/b/@c``, ``(path)[1]``, ``//``, ``text()``,
predicates), XPath 1.0's functions, ``data()``, ``empty()``, ``exists()``, ``upper-case()``,
``lower-case()``, ``sql:variable("@v")`` and ``sql:column("c")``
(xquery-language-reference-sql-server.md, xquery-extension-functions-sql-variable.md,
xquery-extension-functions-sql-column.md).

A construct XPath 1.0 cannot express — FLWOR, ``if``, constructors, sequences, casts, the
``xs:`` functions — is refused by name (:class:`XQueryRefused`), never run approximately.
:func:`translate` also says whether the expression is statically a singleton, as value()
requires (value-method-xml-data-type.md: "the static typing rules require you to explicitly
specify that the path expression returns a singleton").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["DOC_VARIABLE", "UnknownPrefix", "XPathQuery", "XQueryRefused", "translate"]

DOC_VARIABLE = "sbdoc"
"""The XPath variable bound to the document node (an absolute path ``/a`` reads ``$sbdoc/a``)."""

DEFAULT_PREFIX = "sbdefault"
"""The prefix the default element namespace's names are given in the XPath."""

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|\(:.*?:\))
    |(?P<string>"(?:[^"]|"")*"|'(?:[^']|'')*')
    |(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)
    |(?P<var>\$[A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.\-]*)?)
    |(?P<axis>[A-Za-z_][\w.\-]*\s*::)
    |(?P<name>(?:[A-Za-z_][\w.\-]*:)?(?:[A-Za-z_][\w.\-]*|\*)|\*:[A-Za-z_][\w.\-]*)
    |(?P<op>//|/|\.\.|\.|@|\(|\)|\[|\]|,|\||!=|<=|>=|=|<|>|\+|-|\*|\{|\}|;)
    """,
    re.X | re.S,
)

_XPATH_FUNCTIONS = frozenset(
    [
        "string",
        "number",
        "boolean",
        "not",
        "true",
        "false",
        "count",
        "sum",
        "floor",
        "ceiling",
        "round",
        "concat",
        "contains",
        "starts-with",
        "substring",
        "substring-before",
        "substring-after",
        "string-length",
        "normalize-space",
        "translate",
        "local-name",
        "name",
        "namespace-uri",
        "position",
        "last",
        "lang",
        "id",
    ]
)
_NODE_TESTS = frozenset({"text", "node", "comment", "processing-instruction"})
_EXTENSIONS = frozenset({"data", "upper-case", "lower-case", "ends-with"})
"""Functions of XQuery that XPath 1.0 lacks, run as lxml extension functions (xml_methods)."""
_RENAMED = {"empty": "not", "exists": "boolean"}
_OPERATOR_NAMES = {
    "and": "and",
    "or": "or",
    "div": "div",
    "mod": "mod",
    "eq": "=",
    "ne": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
}
_ATOMIC_OPERATORS = frozenset({"=", "!=", "<", "<=", ">", ">=", "+", "-", "*"})
_STEP_START = frozenset({"*", "@", ".", ".."})


class XQueryRefused(Exception):
    """An XQuery construct XPath 1.0 cannot express: the message names it (the interpreter
    refuses it with Msg 40000)."""


class UnknownPrefix(Exception):
    """A name's prefix that no declaration binds (SQL Server's Msg 2229); ``prefix`` it."""

    def __init__(self, prefix: str) -> None:
        super().__init__(prefix)
        self.prefix = prefix


@dataclass(frozen=True)
class XPathQuery:
    """A translated XQuery: the ``xpath`` text; ``namespaces`` (prefix, uri) it needs; the SQL
    values it reads, ``bindings`` of (XPath variable, ``"variable"`` | ``"column"``, SQL
    name); ``singleton`` whether its result is statically one item at most."""

    xpath: str
    namespaces: tuple[tuple[str, str], ...]
    bindings: tuple[tuple[str, str, str], ...]
    singleton: bool


def _tokens(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise XQueryRefused(f"The XQuery text near '{text[position : position + 20]}'")
        position = match.end()
        kind = match.lastgroup
        assert kind is not None
        if kind != "ws":
            value = match.group()
            found.append((kind, re.sub(r"\s+", "", value) if kind == "axis" else value))
    return found


def _string_value(literal: str) -> str:
    quote = literal[0]
    return literal[1:-1].replace(quote * 2, quote)


def _xpath_string(value: str) -> str:
    if '"' not in value:
        return f'"{value}"'
    if "'" not in value:
        return f"'{value}'"
    raise XQueryRefused("A string literal holding both kinds of quotes in XQuery")


def _prolog(
    tokens: list[tuple[str, str]], namespaces: dict[str, str]
) -> tuple[list[tuple[str, str]], str | None]:
    """The tokens after the prolog, which adds its prefixes to ``namespaces``; the default
    element namespace it declares (None: none)."""
    default: str | None = None
    i = 0
    while i < len(tokens) and tokens[i] == ("name", "declare"):
        words = [t for _, t in tokens[i + 1 : i + 4]]
        if words[:1] == ["namespace"] and len(tokens) > i + 4 and tokens[i + 3][1] == "=":
            prefix, uri = tokens[i + 2][1], tokens[i + 4]
            if uri[0] != "string":
                raise XQueryRefused("A namespace declaration without a string literal")
            namespaces[prefix] = _string_value(uri[1])
            i += 5
        elif words[:3] == ["default", "element", "namespace"] and len(tokens) > i + 4:
            if tokens[i + 4][0] != "string":
                raise XQueryRefused("A namespace declaration without a string literal")
            default = _string_value(tokens[i + 4][1])
            i += 5
        else:
            raise XQueryRefused(f"The XQuery prolog declaration 'declare {' '.join(words[:2])}'")
        if i < len(tokens) and tokens[i][1] == ";":
            i += 1
    return tokens[i:], default


@lru_cache(maxsize=256)
def translate(xquery: str, namespaces: tuple[tuple[str, str], ...] = ()) -> XPathQuery:
    """``xquery`` (a method's string literal) as XPath 1.0, with WITH XMLNAMESPACES'
    ``namespaces`` ((prefix, uri); prefix ``""`` is DEFAULT) in scope.

    Raises:
        XQueryRefused: a construct XPath 1.0 cannot express, named.
        UnknownPrefix: a name's prefix is not declared.
    """
    prefixes = {p: u for p, u in namespaces if p}
    default = next((u for p, u in namespaces if not p), None)
    tokens, declared_default = _prolog(_tokens(xquery), prefixes)
    if declared_default is not None:
        default = declared_default
    if default:
        prefixes[DEFAULT_PREFIX] = default
    if not tokens:
        raise XQueryRefused("An empty XQuery expression")
    out: list[str] = []
    roles: list[tuple[int, str, str]] = []  # (depth, role, text) for the singleton analysis
    bindings: list[tuple[str, str, str]] = []
    stack: list[str] = []
    expect_operand = True
    attribute_next = False
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else ("", "")
        depth = len(stack)
        if kind == "name" and text == "*":
            kind = "op"
        if kind == "string":
            out.append(_xpath_string(_string_value(text)))
            roles.append((depth, "literal", text))
            expect_operand = False
        elif kind == "number":
            out.append(text)
            roles.append((depth, "literal", text))
            expect_operand = False
        elif kind == "var":
            raise XQueryRefused(f"The XQuery variable {text} (FLWOR and quantified expressions)")
        elif kind == "axis":
            out.append(text)
            attribute_next = text == "attribute::"
            roles.append((depth, "attribute" if attribute_next else "axis", text))
        elif kind == "name" and not expect_operand:
            operator = _OPERATOR_NAMES.get(text)
            if operator is None:
                raise XQueryRefused(f"The XQuery operator or keyword '{text}'")
            out.append(f" {operator} ")
            roles.append((depth, "operator", operator))
            expect_operand = True
        elif kind == "name" and following[1] == "(":
            if text in ("for", "let", "some", "every", "if", "typeswitch", "element", "attribute"):
                raise XQueryRefused(f"The XQuery '{text}' expression")
            name = text[3:] if text.startswith("fn:") else text
            if name in ("sql:variable", "sql:column"):
                argument = tokens[i + 2] if i + 2 < len(tokens) else ("", "")
                if argument[0] != "string" or tokens[i + 3 : i + 4] != [("op", ")")]:
                    raise XQueryRefused(f"{name}() without a string literal")
                variable = f"sb{len(bindings)}"
                bindings.append((variable, name[4:], _string_value(argument[1])))
                out.append("$" + variable)
                roles.append((depth, "value", name))
                i += 4
                expect_operand = False
                continue
            name = _RENAMED.get(name, name)
            if name in _NODE_TESTS:
                roles.append((depth, "step", name))
            elif name in _XPATH_FUNCTIONS or name in _EXTENSIONS:
                roles.append((depth, "call", name))
            else:
                raise XQueryRefused(f"The XQuery function {text}()")
            out.append(name)
            stack.append("call")
            out.append("(")
            i += 2
            expect_operand = True
            attribute_next = False
            continue
        elif kind == "name":
            if text in ("for", "let", "some", "every") and following[0] == "var":
                raise XQueryRefused(f"The XQuery '{text}' expression (FLWOR)")
            if following == ("op", "{"):
                raise XQueryRefused("XQuery constructors")
            attribute = attribute_next or (bool(out) and out[-1] == "@")
            prefix = text.split(":", 1)[0] if ":" in text else None
            if prefix is not None and prefix != "*" and prefix not in prefixes:
                raise UnknownPrefix(prefix)
            if default and not attribute and prefix is None:
                text = f"{DEFAULT_PREFIX}:{text}"
            out.append(text)
            roles.append((depth, "attribute" if attribute else "step", text))
            expect_operand = False
            attribute_next = False
        elif text in ("/", "//"):
            if expect_operand:
                starts_step = following[0] in ("name", "axis") or following[1] in _STEP_START
                out.append(f"${DOC_VARIABLE}{text if starts_step or text == '//' else ''}")
                roles.append((depth, "root", text))
                if text == "//":
                    roles.append((depth, "separator", text))
            else:
                out.append(text)
                roles.append((depth, "separator", text))
            expect_operand = True
        elif text == "@":
            out.append(text)
            roles.append((depth, "attribute", text))
        elif text in (".", ".."):
            out.append(text)
            roles.append((depth, "step", text))
            expect_operand = False
        elif text in ("(", "["):
            if text == "(" and not expect_operand:
                raise XQueryRefused("An XQuery expression that calls a step as a function")
            stack.append("group" if text == "(" else "predicate")
            out.append(text)
            roles.append((depth, "open", text))
            expect_operand = True
        elif text in (")", "]"):
            if not stack or (stack[-1] == "predicate") != (text == "]"):
                raise XQueryRefused(f"The XQuery text near '{text}'")
            stack.pop()
            out.append(text)
            roles.append((len(stack), "close", text))
            expect_operand = False
        elif text == ",":
            if not stack or stack[-1] != "call":
                raise XQueryRefused("XQuery sequences (a comma outside a function's arguments)")
            out.append(text)
            expect_operand = True
        elif text in ("{", "}") or (text == "<" and expect_operand):
            raise XQueryRefused("XQuery constructors")
        elif text == ";":
            raise XQueryRefused("The XQuery text near ';'")
        elif text == "*" and expect_operand:
            attribute = attribute_next or (bool(out) and out[-1] == "@")
            out.append(text)
            roles.append((depth, "attribute" if attribute else "step", text))
            expect_operand = False
            attribute_next = False
        else:  # an operator: | + - * = != < <= > >=
            if text == "-" and expect_operand:
                out.append(" -")
            else:
                out.append(f" {text} ")
                roles.append((depth, "operator", text))
            expect_operand = True
        i += 1
    if stack:
        raise XQueryRefused("An XQuery expression with an unclosed parenthesis or bracket")
    return XPathQuery(
        _join(out), tuple(sorted(prefixes.items())), tuple(bindings), _singleton(roles)
    )


def _join(parts: list[str]) -> str:
    text = ""
    for part in parts:
        if text and (text[-1].isalnum() or text[-1] in "_") and (part[:1].isalnum()):
            text += " "
        text += part
    return text


def _singleton(roles: list[tuple[int, str, str]]) -> bool:
    """Whether the expression is statically one item at most: an atomic result (a comparison,
    arithmetic, a function's value, a literal), or a path each of whose steps is one node at
    most (``.``, ``..``, an attribute of one node, a step or ``( … )`` ending with a
    ``[n]`` / ``[last()]`` predicate) — SQL Server's static typing, for value()."""
    top = [(i, role, text) for i, (depth, role, text) in enumerate(roles) if depth == 0]
    operators = [text for _, role, text in top if role == "operator"]
    if "|" in operators:
        return False
    if any(op in _ATOMIC_OPERATORS or op in _OPERATOR_NAMES.values() for op in operators):
        return True
    if any(role == "separator" and text == "//" for _, role, text in top):
        return False
    steps: list[list[int]] = [[]]
    for index, role, _ in top:
        if role in ("separator", "root"):
            steps.append([])
        else:
            steps[-1].append(index)
    for step in steps:
        if not step:
            continue
        first = roles[step[0]]
        if first[1] in ("literal", "value", "call"):
            continue
        one = (first[1] == "attribute" and roles[step[-1]][2] != "*") or first[2] in (".", "..")
        if one and all(roles[j][1] != "open" or roles[j][2] != "[" for j in step[1:]):
            continue
        if not _ends_with_position(roles, step):
            return False
    return True


def _ends_with_position(roles: list[tuple[int, str, str]], step: list[int]) -> bool:
    """Whether a step's last predicate is ``[n]`` or ``[last()]``."""
    closes = [j for j in step if roles[j][1] == "close" and roles[j][2] == "]"]
    if not closes:
        return False
    end = closes[-1]
    opening = max(j for j in step if j < end and roles[j][1] == "open" and roles[j][2] == "[")
    inside = [roles[j] for j in range(opening + 1, end)]
    if len(inside) == 1 and inside[0][1] == "literal" and inside[0][2].isdigit():
        return True
    return [r[2] for r in inside if r[1] != "close"] == ["last"]
