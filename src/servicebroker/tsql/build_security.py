"""Parse trees of the security statements and RECONFIGURE → their nodes
(:mod:`.security_nodes`), for :mod:`.build`: the grammar's ``security_statement`` rules
(syntax/tsql.lark).

Permission names are read from the statement's text (``VIEW DEFINITION``, ``ALTER ANY USER``),
so that every permission T-SQL has reads without a keyword of its own in the grammar.
"""

from __future__ import annotations

import re

from lark import Token, Tree

from ..errors import TSqlError
from .build_expressions import ExpressionBuilder, name_of, string_of
from .security_nodes import (
    AlterAuthorization,
    CreateCertificateWithSubject,
    ExecuteAs,
    MasterKey,
    Permission,
    Reconfigure,
    Revert,
    Role,
    SecurityStatement,
)

__all__ = ["SECURITY_RULES", "build_security"]

SECURITY_RULES = frozenset(
    {
        "create_master_key", "regenerate_master_key", "add_master_key_encryption",
        "drop_master_key_encryption", "open_master_key", "close_master_key", "drop_master_key",
        "create_certificate_subject", "execute_as_user", "execute_as_login",
        "execute_as_caller", "revert", "alter_authorization", "grant_statement",
        "deny_statement", "revoke_statement", "create_role", "add_role_member",
        "drop_role_member", "rename_role", "drop_role", "reconfigure",
    }
)  # fmt: skip
"""The grammar's rule names (after aliases) that :func:`build_security` builds."""


def _syntax(near: str, line: int) -> TSqlError:
    return TSqlError(102, f"Incorrect syntax near '{near}'.", severity=15, line=line)


def _words(x: ExpressionBuilder, tree: Tree[Token]) -> str:
    return " ".join(x.span(tree).split()).upper()


def _trees(tree: Tree[Token], data: str) -> list[Tree[Token]]:
    return [c for c in tree.children if isinstance(c, Tree) and c.data == data]


def _password(tokens: list[Token], line: int) -> str:
    """``PASSWORD = 'text'`` (the last IDENT and STRING of ``tokens``)."""
    word = next(t for t in reversed(tokens) if t.type == "IDENT")
    if str(word).upper() != "PASSWORD":
        raise _syntax(str(word), line)
    return string_of(next(t for t in reversed(tokens) if t.type == "STRING"))


def build_security(tree: Tree[Token], line: int, x: ExpressionBuilder) -> SecurityStatement:
    """The node of one security statement's parse ``tree`` (a rule of :data:`SECURITY_RULES`).

    Raises:
        TSqlError: Msg 102, a word the statement does not take where the grammar takes any
            word (``ENCRYPTION BY SECRET``, ``EXECUTE AS SELF`` outside a module).
    """
    rule = str(tree.data)
    tokens = [c for c in tree.children if isinstance(c, Token)]
    if rule.endswith("master_key") or rule.endswith("master_key_encryption"):
        return _master_key(rule, tree, tokens, line)
    if rule == "create_certificate_subject":
        return _certificate(tree, line)
    if rule.startswith("execute_as_"):
        return _execute_as(rule, tree, tokens, line, x)
    if rule == "revert":
        cookie = [t for t in tokens if t.type == "VARIABLE"]
        if tokens and str(tokens[0]).upper() != "COOKIE":
            raise _syntax(str(tokens[0]), line)
        return Revert(line, str(cookie[0]) if cookie else None)
    if rule == "alter_authorization":
        securable_class, name = _securable(_trees(tree, "auth_securable")[0], x)
        target = [c for c in tree.children if isinstance(c, Tree) and c.data == "name"]
        if not target and str(tokens[-1]).upper() != "OWNER":
            raise _syntax(str(tokens[-1]), line)
        principal = name_of(target[0]) if target else None
        return AlterAuthorization(line, securable_class or "OBJECT", name, principal)
    if rule in ("grant_statement", "deny_statement", "revoke_statement"):
        return _permission(rule, tree, line, x)
    if rule == "reconfigure":
        if tokens and str(tokens[0]).upper() != "OVERRIDE":
            raise _syntax(str(tokens[0]), line)
        return Reconfigure(line, bool(tokens))
    return _role(rule, tree, tokens, line)


def _master_key(rule: str, tree: Tree[Token], tokens: list[Token], line: int) -> MasterKey:
    if rule == "create_master_key":
        return MasterKey(line, "CREATE", _password(tokens, line))
    if rule == "regenerate_master_key":
        words = [str(t).upper() for t in tokens if t.type == "IDENT"]
        if words[-2] != "REGENERATE" or (len(words) == 4 and words[0] != "FORCE"):
            raise _syntax(str(tokens[0]), line)
        return MasterKey(line, "REGENERATE", _password(tokens, line), force=len(words) == 4)
    if rule in ("add_master_key_encryption", "drop_master_key_encryption"):
        encryptor = _trees(tree, "key_encryptor")[0]
        inner = [c for c in encryptor.children if isinstance(c, Token)]
        password = _password(inner, line) if inner else None
        return MasterKey(line, "ADD" if rule.startswith("add") else "DROP ENCRYPTION", password)
    if rule == "open_master_key":
        if str(tokens[0]).upper() != "DECRYPTION":
            raise _syntax(str(tokens[0]), line)
        return MasterKey(line, "OPEN", _password(tokens, line))
    return MasterKey(line, "CLOSE" if rule == "close_master_key" else "DROP")


def _certificate(tree: Tree[Token], line: int) -> CreateCertificateWithSubject:
    name = name_of(tree.children[0])
    owner = None
    password = None
    options: list[tuple[str, str]] = []
    active = True
    for child in tree.children[1:]:
        if not isinstance(child, Tree):
            continue
        tokens = [c for c in child.children if isinstance(c, Token)]
        if child.data == "authorization":
            owner = name_of(child.children[0])
        elif child.data == "cert_encryption":
            password = _password(tokens, line)
        elif child.data == "cert_option":
            key = str(tokens[0]).upper()
            if key not in ("SUBJECT", "START_DATE", "EXPIRY_DATE"):
                raise _syntax(str(tokens[0]), line)
            options.append((key, string_of(tokens[1])))
        elif child.data == "cert_active":
            if (str(tokens[0]).upper(), str(tokens[1]).upper()) != ("ACTIVE", "BEGIN_DIALOG"):
                raise _syntax(str(tokens[0]), line)
            onoff = child.children[-1]
            assert isinstance(onoff, Tree)
            active = str(onoff.children[0]).upper() == "ON"
    if "SUBJECT" not in dict(options):
        raise _syntax(name, line)
    return CreateCertificateWithSubject(line, name, owner, password, tuple(options), active)


def _execute_as(
    rule: str, tree: Tree[Token], tokens: list[Token], line: int, x: ExpressionBuilder
) -> ExecuteAs:
    if rule == "execute_as_caller":
        if str(tokens[0]).upper() != "CALLER":
            raise _syntax(str(tokens[0]), line)
        return ExecuteAs(line, "CALLER")
    kind = "USER" if rule == "execute_as_user" else "LOGIN"
    value = next(c for c in tree.children if isinstance(c, Tree) and c.data not in _WITH_RULES)
    no_revert = False
    cookie = None
    for option in tree.children:
        if isinstance(option, Tree) and option.data in _WITH_RULES:
            word, *rest = option.children
            expected = "NO" if option.data == "no_revert" else "COOKIE"
            if str(word).upper() != expected:
                raise _syntax(str(word), line)
            no_revert = option.data == "no_revert"
            cookie = str(rest[0]) if option.data == "cookie_into" else None
    return ExecuteAs(line, kind, x.expr(value), no_revert, cookie)


_WITH_RULES = ("no_revert", "cookie_into")


def _securable(tree: Tree[Token], x: ExpressionBuilder) -> tuple[str | None, str]:
    """``[class::]name`` → (CLASS or None, name without database and schema)."""
    qname = _trees(tree, "qname")[0]
    classes = _trees(tree, "securable_class")
    name = x.qname(qname)[-1]
    return (_joined(classes[0]) if classes else None), name


def _joined(tree: Tree[Token]) -> str:
    """The words of a rule that keeps its keywords (``!rule``), upper case."""
    return " ".join(str(c).upper() for c in tree.children if isinstance(c, Token))


def _permission(rule: str, tree: Tree[Token], line: int, x: ExpressionBuilder) -> Permission:
    action = rule.split("_")[0].upper()
    lists = _trees(tree, "permission_list")
    if lists:
        permissions = tuple(
            " ".join(_joined(w) for w in _trees(words, "permission_word"))
            for words in _trees(lists[0], "permission_words")
        )
    else:
        permissions = ("CONNECT",)
    permissions = tuple(p if p != "EXEC" else "EXECUTE" for p in permissions)
    securable_class: str | None = None
    securable: str | None = None
    found = _trees(tree, "auth_securable")
    if found:
        securable_class, securable = _securable(found[0], x)
        securable_class = securable_class or "OBJECT"
    principals = tuple(
        name_of(c) for c in tree.children if isinstance(c, Tree) and c.data == "name"
    )
    if action == "GRANT" and _AS_GRANTOR.search(_words(x, tree)):
        principals = principals[:-1]  # GRANT … AS grantor: the last name is the grantor's
    return Permission(line, action, permissions, securable_class, securable, principals)


_AS_GRANTOR = re.compile(r"\bAS\s+\S+$")


def _role(rule: str, tree: Tree[Token], tokens: list[Token], line: int) -> Role:
    names = [name_of(c) for c in tree.children if isinstance(c, Tree) and c.data == "name"]
    if rule == "create_role":
        owners = _trees(tree, "authorization")
        owner = name_of(owners[0].children[0]) if owners else None
        return Role(line, "CREATE", names[0], owner)
    if rule in ("add_role_member", "drop_role_member"):
        if str(tokens[0]).upper() != "MEMBER":
            raise _syntax(str(tokens[0]), line)
        return Role(line, "ADD MEMBER" if rule[0] == "a" else "DROP MEMBER", names[0], names[1])
    if rule == "rename_role":
        if str(tokens[0]).upper() != "NAME":
            raise _syntax(str(tokens[0]), line)
        return Role(line, "RENAME", names[0], names[1])
    return Role(line, "DROP", names[0], if_exists=bool(_trees(tree, "if_exists")))
