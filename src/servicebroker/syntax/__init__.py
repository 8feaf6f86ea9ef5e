"""T-SQL's syntax: one LALR grammar (``tsql.lark``) read by lark, with two entry points — a
script of Service Broker DDL (``"start"``: ``broker.execute_ddl`` and ``servicebroker ddl``,
built into statement records by :mod:`servicebroker.ddl.parser`) and one T-SQL batch
(``"batch"``: ``servicebroker sqlcmd`` and :class:`servicebroker.Instance`, built into typed
nodes by :mod:`servicebroker.tsql.build`). One grammar, so a DDL statement reads the same in
both (docs/tsql.md).

A batch is read as SQL Server reads one (:func:`parse_batch`): comments nest, a string or a
delimited name runs to its closing mark whatever it holds, a reserved keyword is no plain name,
and what SQL Server refuses before running anything is refused here with its error — a syntax
error (Msg 102, or 156 at a reserved keyword, at the batch line), an unclosed quotation mark
(105) or comment (113), a name longer than 128 characters (103), a number beyond DECIMAL(38)
(1007) or FLOAT (168), CASE nested beyond 10 levels (125), a batch nested too deeply (191).

The parse tables are kept in lark's cache (the system's temporary folder), so a process pays
for building them once per grammar version, not per start.
"""

from __future__ import annotations

import math
import re
from collections import deque
from importlib import resources
from typing import Literal

from lark import Lark, Token, Tree, UnexpectedInput
from lark.exceptions import UnexpectedCharacters, UnexpectedToken

from ..errors import TSqlError

__all__ = ["MAX_NESTING", "RESERVED", "name_text", "parse", "parse_batch", "string_text"]

_PARSER = Lark(
    resources.files(__package__).joinpath("tsql.lark").read_text(encoding="utf-8"),
    parser="lalr",
    start=["start", "batch"],
    propagate_positions=True,
    cache=True,
)


def name_text(token: Token) -> str:
    """A name token as T-SQL reads it: ``[a]]b]`` is ``a]b``, ``"a"`` is ``a``, a plain name
    itself."""
    text = str(token)
    if token.type == "BRACKETED":
        return text[1:-1].replace("]]", "]")
    if token.type == "QUOTED":
        return text[1:-1].replace('""', '"')
    return text


def string_text(token: Token) -> str:
    """A string literal token's text: ``N'…'`` or ``'…'`` without its quotes, doubled quotes
    undone."""
    text = str(token)
    if text[:1] in "nN":
        text = text[1:]
    return text[1:-1].replace("''", "'")


def parse(text: str, start: Literal["start", "batch"]) -> Tree[Token]:
    """The parse tree of ``text`` read from the entry point ``start``.

    Raises:
        lark.UnexpectedInput: ``text`` is not in the grammar (the callers turn it into their
            own error: :class:`~servicebroker.errors.CatalogError` for DDL; a batch is read by
            :func:`parse_batch`).
    """
    return _PARSER.parse(text, start=start)


def parse_batch(text: str) -> Tree[Token]:
    """The parse tree of one T-SQL batch (GO already split off), its comments left out.

    Raises:
        TSqlError: what SQL Server raises for the batch's text before running any of it (module
            docstring), level 15, with the batch line.
    """
    code = _code_of(text)
    try:
        tree = parse(code, "batch")
    except UnexpectedInput as exc:
        raise _syntax_error(code, exc) from None
    _check_limits(tree)
    return tree


# -- comments, strings and delimited names ----------------------------------------------------
_LEXEME = re.compile(r"'|\[|\"|--|/\*")
_COMMENT_MARK = re.compile(r"/\*|\*/")
_NOT_NEWLINE = re.compile(r"[^\n]")


def _code_of(text: str) -> str:
    """``text`` with its comments (``-- …`` to the end of the line, ``/* … */`` nested as T-SQL
    nests them) turned into blanks, lines kept, so that the grammar sees code only and every
    position stays where it was. Strings and delimited names are read as SQL Server reads them
    (a doubled closing mark is part of the text), so that one left open is found where it opens.

    Raises:
        TSqlError: Msg 113, a ``/*`` comment left open; Msg 105, a string ('…', N'…') or a
            delimited name ([…], "…") left open.
    """
    if _LEXEME.search(text) is None:
        return text
    out: list[str] = []
    kept = 0  # text[:kept] is in out
    at = 0
    while True:
        found = _LEXEME.search(text, at)
        if found is None:
            break
        start = found.start()
        lexeme = found.group()
        if lexeme in ("'", '"', "["):
            close = "]" if lexeme == "[" else lexeme
            end = start + 1
            while True:
                end = text.find(close, end)
                if end < 0:
                    raise TSqlError(
                        105,
                        f"Unclosed quotation mark after the character string "
                        f"'{text[start + 1 :]}'.",
                        severity=15,
                        line=text.count("\n", 0, start) + 1,
                    )
                if text.startswith(close * 2, end):
                    end += 2
                    continue
                break
            at = end + 1
            continue
        if lexeme == "--":
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
        else:
            depth = 0
            end = start
            for mark in _COMMENT_MARK.finditer(text, start):
                depth += 1 if mark.group() == "/*" else -1
                if depth == 0:
                    end = mark.end()
                    break
            else:
                raise TSqlError(
                    113,
                    "Missing end comment mark '*/'.",
                    severity=15,
                    line=text.count("\n", 0, start) + 1,
                )
        out.append(text[kept:start])
        out.append(_NOT_NEWLINE.sub(" ", text[start:end]))
        kept = at = end
    out.append(text[kept:])
    return "".join(out)


# -- syntax errors ----------------------------------------------------------------------------
_RESERVED_WORDS = """
    ADD ALL ALTER AND ANY AS ASC AUTHORIZATION BACKUP BEGIN BETWEEN BREAK BROWSE BULK BY
    CASCADE CASE CHECK CHECKPOINT CLOSE CLUSTERED COALESCE COLLATE COLUMN COMMIT COMPUTE
    CONSTRAINT CONTAINS CONTAINSTABLE CONTINUE CONVERT CREATE CROSS CURRENT CURRENT_DATE
    CURRENT_TIME CURRENT_TIMESTAMP CURRENT_USER CURSOR DATABASE DBCC DEALLOCATE DECLARE DEFAULT
    DELETE DENY DESC DISK DISTINCT DISTRIBUTED DOUBLE DROP DUMP ELSE END ERRLVL ESCAPE EXCEPT
    EXEC EXECUTE EXISTS EXIT EXTERNAL FETCH FILE FILLFACTOR FOR FOREIGN FREETEXT FREETEXTTABLE
    FROM FULL FUNCTION GOTO GRANT GROUP HAVING HOLDLOCK IDENTITY IDENTITY_INSERT IDENTITYCOL IF
    IN INDEX INNER INSERT INTERSECT INTO IS JOIN KEY KILL LEFT LIKE LINENO LOAD MERGE NATIONAL
    NOCHECK NONCLUSTERED NOT NULL NULLIF OF OFF OFFSETS ON OPEN OPENDATASOURCE OPENQUERY
    OPENROWSET OPENXML OPTION OR ORDER OUTER OVER PERCENT PIVOT PLAN PRECISION PRIMARY PRINT
    PROC PROCEDURE PUBLIC RAISERROR READ READTEXT RECONFIGURE REFERENCES REPLICATION RESTORE
    RESTRICT RETURN REVERT REVOKE RIGHT ROLLBACK ROWCOUNT ROWGUIDCOL RULE SAVE SCHEMA
    SECURITYAUDIT SELECT SEMANTICKEYPHRASETABLE SEMANTICSIMILARITYDETAILSTABLE
    SEMANTICSIMILARITYTABLE SESSION_USER SET SETUSER SHUTDOWN SOME STATISTICS SYSTEM_USER TABLE
    TABLESAMPLE TEXTSIZE THEN TO TOP TRAN TRANSACTION TRIGGER TRUNCATE TRY_CONVERT TSEQUAL UNION
    UNIQUE UNPIVOT UPDATE UPDATETEXT USE USER VALUES VARYING VIEW WAITFOR WHEN WHERE WHILE WITH
    WRITETEXT"""
RESERVED = frozenset(_RESERVED_WORDS.split())
"""T-SQL's reserved keywords (reserved-keywords-transact-sql.md): a syntax error at one of
them is Msg 156 ("near the keyword"), at any other word Msg 102. The grammar's IDENT refuses
them too (only a delimited name, ``[from]``, holds one), but for the few T-SQL reads as names
(LEFT, COALESCE, CURRENT_TIMESTAMP, … — tsql.lark)."""

_TOKEN = re.compile(
    r"""N?'(?:[^']|'')*'|\[(?:[^\]]|\]\])*\]|"(?:[^"]|"")*"|[\w@#$]+(?:\.\d*)?"""
    r"|<>|!=|<=|>=|!<|!>|::|\S",
    re.I,
)
"""One token of a batch, roughly: enough to name the one a syntax error is near."""


def _near(word: str, line: int) -> TSqlError:
    if word.upper() in RESERVED:
        return TSqlError(
            156, f"Incorrect syntax near the keyword '{word}'.", severity=15, line=line
        )
    return TSqlError(102, f"Incorrect syntax near '{word}'.", severity=15, line=line)


def _syntax_error(text: str, exc: UnexpectedInput) -> TSqlError:
    """SQL Server's error for ``text`` (comments blanked) that the grammar refused."""
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END":
        # the batch's last token: where SQL Server says the batch broke off
        tail = deque(_TOKEN.finditer(text), maxlen=1)
        if not tail:
            return TSqlError(102, "Incorrect syntax near ''.", severity=15)
        last = tail[0]
        return _near(last.group(), text.count("\n", 0, last.start()) + 1)
    line: int = exc.line if isinstance(exc.line, int) and exc.line > 0 else 1
    pos: int = exc.pos_in_stream if isinstance(exc.pos_in_stream, int) else 0
    if isinstance(exc, UnexpectedToken):
        return _near(str(exc.token), line)
    if isinstance(exc, UnexpectedCharacters):
        near = text[pos : pos + 1]
        if near in ("'", '"', "["):  # left open (_code_of finds these first)
            return TSqlError(
                105,
                f"Unclosed quotation mark after the character string '{text[pos + 1 :]}'.",
                severity=15,
                line=line,
            )
        word = _TOKEN.match(text, pos)  # a reserved keyword the grammar has no place for
        return _near(word.group() if word else near, line)
    return TSqlError(102, "Incorrect syntax.", severity=15, line=line)


# -- the batch's shape ------------------------------------------------------------------------
MAX_NESTING = 256
"""How deep a batch may nest (Msg 191 beyond): each statement nested in another (BEGIN … END,
IF, WHILE, TRY … CATCH) counts 2, each other level of the parse (an operator, a function call,
a clause, a subquery) 1. The interpreter walks its nodes recursively, so this bounds its stack:
256 keeps the deepest batch well inside Python's default recursion limit, wherever the session
runs (a test, sqlcmd, an activated procedure)."""

_STATEMENT_NESTING = {"block", "if_statement", "while_statement", "try_catch"}
_CASES = {"simple_case", "searched_case"}
_NAMES = {"IDENT": "", "VARIABLE": "", "BRACKETED": "]", "QUOTED": '"'}


def _check_limits(tree: Tree[Token]) -> None:
    """SQL Server's limits on the shape of a batch, checked without recursion (the tree of a
    hostile batch may be thousands deep).

    Raises:
        TSqlError: Msg 191 nested too deeply (:data:`MAX_NESTING`), Msg 125 CASE nested
            beyond 10, Msg 103 a name longer than 128 characters, Msg 1007 a number of more
            than 38 digits, Msg 168 a float constant beyond FLOAT.
    """
    stack: list[tuple[Tree[Token], int, int]] = [(tree, 0, 0)]
    while stack:
        node, depth, cases = stack.pop()
        rule = str(node.data)
        line = node.meta.line if not node.meta.empty else 1
        depth += 2 if rule in _STATEMENT_NESTING else 1
        if depth > MAX_NESTING:
            raise TSqlError(
                191,
                "Some part of your SQL statement is nested too deeply. Rewrite the query or "
                "break it up into smaller queries.",
                severity=15,
                line=line,
            )
        if rule in _CASES:
            cases += 1
            if cases > 10:
                raise TSqlError(
                    125, "Case expressions may only be nested to level 10.", severity=15, line=line
                )
        for child in node.children:
            if isinstance(child, Tree):
                stack.append((child, depth, cases))
            elif isinstance(child, Token):
                _check_token(child)


def _check_token(token: Token) -> None:
    text = str(token)
    line = token.line or 1
    if token.type in _NAMES:
        close = _NAMES[token.type]
        name = text[1:-1].replace(close * 2, close) if close else text
        if len(name) > 128:
            raise TSqlError(
                103,
                f"The identifier that starts with '{name[:128]}' is too long. Maximum length "
                f"is 128.",
                severity=15,
                line=line,
            )
    elif token.type in ("INT", "DECIMAL"):
        whole, _, fraction = text.partition(".")
        if len(whole.lstrip("0")) + len(fraction) > 38:
            raise TSqlError(
                1007,
                f"The number '{text}' is out of the range for numeric representation (maximum "
                f"precision 38).",
                severity=15,
                line=line,
            )
    elif token.type == "FLOAT" and math.isinf(float(text)):
        raise TSqlError(
            168,
            f"The floating point value '{text}' is out of the range of computer representation "
            f"(8 bytes).",
            severity=15,
            line=line,
        )
