"""One T-SQL batch's text → typed statement nodes (:mod:`.nodes`), through the one T-SQL grammar
(:mod:`servicebroker.syntax`); Service Broker DDL statements are built by the DDL parser
(:func:`servicebroker.ddl.parser.ddl_statement`), so a statement reads the same in
``execute_ddl`` and in a batch.

A syntax error is SQL Server's Msg 102 ("Incorrect syntax near 'x'.") or, at a reserved keyword,
Msg 156 ("Incorrect syntax near the keyword 'x'."), level 15, with the batch line; the other
errors of a batch's text and shape (an unclosed string or comment, a name too long, a constant
out of range, nesting too deep) are found with the parse, before anything runs
(:func:`servicebroker.syntax.parse_batch`).
"""

from __future__ import annotations

from dataclasses import replace

from lark import Token, Tree

from ..ddl.parser import BROKER_DATABASE_OPTIONS, DDL_RULES, ddl_statement
from ..errors import CatalogError, TSqlError
from ..syntax import parse_batch
from . import build_variables as v
from . import nodes as n
from .build_expressions import ExpressionBuilder, line_of, name_of, string_of
from .build_security import SECURITY_RULES, build_security
from .unsupported import not_supported

__all__ = ["build_batch", "name_of", "string_of"]


def build_batch(text: str) -> list[n.Statement]:
    """The statements of one batch (GO already split off).

    Raises:
        TSqlError: what the parse refuses (a syntax error, Msg 102 / 156, and the rest of
            :func:`~servicebroker.syntax.parse_batch`'s, level 15); a DDL value this broker
            refuses (Msg 102 with the DDL parser's text); an unknown type name (Msg 2715).
    """
    tree = parse_batch(text)
    return [_Builder(text).statement(child) for child in tree.children if isinstance(child, Tree)]


class _Builder:
    """Parse tree → nodes for one batch's ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.x = ExpressionBuilder(text)

    # -- statements ------------------------------------------------------------------------
    def statement(self, tree: Tree[Token]) -> n.Statement:
        rule = str(tree.data)
        line = line_of(tree)
        if rule == "use":
            return n.Use(line, name_of(tree.children[0]))
        if rule == "alter_database":
            return self.alter_database(tree, line)
        if rule in DDL_RULES:
            try:
                ddl = ddl_statement(tree, self.text)
            except CatalogError as exc:
                raise TSqlError(102, str(exc), severity=15, line=line) from None
            if "variable" in ddl.options:  # XML SCHEMA COLLECTION … AS | ADD @variable
                return n.XmlSchemaSource(line, ddl, ddl.options["variable"])
            return n.Ddl(line, ddl)
        if rule in SECURITY_RULES:
            return build_security(tree, line, self.x)
        method = getattr(self, "s_" + rule, None)
        if method is None:  # a grammar rule without a builder is a defect of this module
            raise AssertionError(f"no node for statement rule {rule}")
        result: n.Statement = method(tree, line)
        return result

    def alter_database(self, tree: Tree[Token], line: int) -> n.Statement:
        """ALTER DATABASE … SET: the Service Broker options run as DDL; TRUSTWORTHY and the
        options a broker has nothing to do with are the instance's (docs/tsql.md)."""
        broker_options = []
        others: list[tuple[str, str]] = []
        for child in tree.children:
            if isinstance(child, Tree) and child.data == "database_option":
                key = str(child.children[0]).upper()
                if key in BROKER_DATABASE_OPTIONS:
                    broker_options.append(child)
                    continue
                value = " ".join(str(c).upper() for c in child.children[1:])
                others.append((key, value))
        if not others:
            try:
                return n.Ddl(line, ddl_statement(tree, self.text))
            except CatalogError as exc:
                raise TSqlError(102, str(exc), severity=15, line=line) from None
        broker = None
        if broker_options:
            kept = [
                c
                for c in tree.children
                if not (isinstance(c, Tree) and c.data == "database_option") or c in broker_options
            ]
            try:
                broker = ddl_statement(Tree(tree.data, kept, tree.meta), self.text)
            except CatalogError as exc:
                raise TSqlError(102, str(exc), severity=15, line=line) from None
        return n.DatabaseOptions(line, name_of(tree.children[0]), tuple(others), broker)

    def body(self, children: list[Tree[Token] | Token]) -> tuple[n.Statement, ...]:
        return tuple(self.statement(c) for c in children if isinstance(c, Tree))

    def s_declare(self, tree: Tree[Token], line: int) -> n.Declare:
        items = []
        tables = []
        for decl in tree.children:
            assert isinstance(decl, Tree)
            if decl.data == "table_variable":
                tables.append(v.table_definition(decl, self.x, line))
                continue
            var, type_tree, *value = decl.children
            assert isinstance(type_tree, Tree)
            items.append(
                (str(var), self.x.data_type(type_tree), self.x.expr(value[0]) if value else None)
            )
        return n.Declare(line, tuple(items), tuple(tables))

    def s_set_variable(self, tree: Tree[Token], line: int) -> n.SetVariable:
        var, op, value = tree.children
        return n.SetVariable(line, str(var), str(op), self.x.expr(value))

    def s_set_option(self, tree: Tree[Token], line: int) -> n.SetOption:
        words = [str(c).upper() for c in tree.children]
        return n.SetOption(line, tuple(words[:-1]), words[-1])

    def s_select_statement(self, tree: Tree[Token], line: int) -> n.Select:
        return n.Select(line, self.x.select_core(tree.children[0]))  # type: ignore[arg-type]

    def s_xmlnamespaces_select(self, tree: Tree[Token], line: int) -> n.Select:
        return n.Select(line, self.x.with_namespaces(tree))

    def s_if_statement(self, tree: Tree[Token], line: int) -> n.If:
        cond, then, *otherwise = tree.children
        return n.If(
            line,
            self.x.cond(cond),
            self.statement(then),  # type: ignore[arg-type]
            self.statement(otherwise[0]) if otherwise else None,  # type: ignore[arg-type]
        )

    def s_while_statement(self, tree: Tree[Token], line: int) -> n.While:
        cond, body = tree.children
        return n.While(line, self.x.cond(cond), self.statement(body))  # type: ignore[arg-type]

    def s_break_statement(self, tree: Tree[Token], line: int) -> n.Break:
        return n.Break(line)

    def s_continue_statement(self, tree: Tree[Token], line: int) -> n.Continue:
        return n.Continue(line)

    def s_return_statement(self, tree: Tree[Token], line: int) -> n.Return:
        return n.Return(line, self.x.expr(tree.children[0]) if tree.children else None)

    def s_block(self, tree: Tree[Token], line: int) -> n.Block:
        return n.Block(line, self.body(tree.children))

    def s_try_catch(self, tree: Tree[Token], line: int) -> n.TryCatch:
        children = list(tree.children)
        split = next(
            i for i, c in enumerate(children) if isinstance(c, Token) and c.type == "CATCH"
        )
        return n.TryCatch(line, self.body(children[:split]), self.body(children[split + 1 :]))

    def s_print_statement(self, tree: Tree[Token], line: int) -> n.Print:
        return n.Print(line, self.x.expr(tree.children[0]))

    def s_raiserror(self, tree: Tree[Token], line: int) -> n.RaisError:
        exprs = [
            self.x.expr(c)
            for c in tree.children
            if not (isinstance(c, Token) and c.type == "IDENT")
        ]
        options = tuple(
            str(c).upper() for c in tree.children if isinstance(c, Token) and c.type == "IDENT"
        )
        return n.RaisError(line, exprs[0], exprs[1], exprs[2], tuple(exprs[3:]), options)

    def s_throw(self, tree: Tree[Token], line: int) -> n.Throw:
        if not tree.children:
            return n.Throw(line)
        number, message, state = (self.x.expr(c) for c in tree.children)
        return n.Throw(line, number, message, state)

    def s_waitfor_delay(self, tree: Tree[Token], line: int) -> n.WaitforDelay:
        kind, value = tree.children
        return n.WaitforDelay(line, str(kind).upper(), self.x.expr(value))

    def _tran_name(self, tree: Tree[Token]) -> str | None:
        for c in tree.children:
            if isinstance(c, Tree):
                first = c.children[0]
                return str(first) if c.data == "variable" else name_of(c)
        return None

    def s_begin_tran(self, tree: Tree[Token], line: int) -> n.BeginTran:
        return n.BeginTran(line, self._tran_name(tree))

    def s_commit_tran(self, tree: Tree[Token], line: int) -> n.CommitTran:
        return n.CommitTran(line)

    def s_rollback_tran(self, tree: Tree[Token], line: int) -> n.RollbackTran:
        return n.RollbackTran(line, self._tran_name(tree))

    def s_save_tran(self, tree: Tree[Token], line: int) -> n.SaveTran:
        return n.SaveTran(line, self._tran_name(tree) or "")

    def s_create_procedure(self, tree: Tree[Token], line: int) -> n.CreateProcedure:
        verb, name_tree, *rest = tree.children
        assert isinstance(verb, Tree) and isinstance(name_tree, Tree)
        mode = {"proc_create": "CREATE", "proc_alter": "ALTER"}.get(
            str(verb.data), "CREATE OR ALTER"
        )
        parameters: list[n.Parameter] = []
        execute_as = None
        body: list[Tree[Token] | Token] = []
        for c in rest:
            if isinstance(c, Tree) and c.data == "proc_params":
                for p in c.children:
                    assert isinstance(p, Tree)
                    parameters.append(self.parameter(p))
            elif isinstance(c, Tree) and c.data == "proc_options":
                for option in c.children:
                    if isinstance(option, Tree) and option.data == "proc_execute_as":
                        who = option.children[0]
                        assert isinstance(who, Token)
                        execute_as = string_of(who) if who.type == "STRING" else str(who).upper()
            else:
                body.append(c)
        return n.CreateProcedure(
            line,
            ".".join(self.x.qname(name_tree)),
            tuple(parameters),
            self.body(body),
            self.text,
            mode,
            execute_as,
        )

    def parameter(self, tree: Tree[Token]) -> n.Parameter:
        var, type_tree, *rest = tree.children
        assert isinstance(type_tree, Tree)
        default = None
        output = False
        for c in rest:
            if isinstance(c, Token) and c.type == "OUTPUT_KW":
                output = True
            else:
                default = self.x.expr(c)
        return n.Parameter(str(var), self.x.data_type(type_tree), default, output)

    def s_create_trigger(self, tree: Tree[Token], line: int) -> n.CreateTrigger:
        """CREATE / ALTER TRIGGER (create-trigger-transact-sql.md): a DML trigger AFTER (or
        FOR) INSERT, UPDATE, DELETE on a table; INSTEAD OF, DDL and logon triggers and NOT FOR
        REPLICATION are refused by name."""
        verb, name_tree, _on, target, *rest = tree.children
        assert isinstance(verb, Tree) and isinstance(name_tree, Tree)
        if isinstance(target, Token):  # ALL SERVER
            raise not_supported("A DDL or logon trigger (ON DATABASE, ON ALL SERVER)", line)
        mode = {"proc_create": "CREATE", "proc_alter": "ALTER"}.get(
            str(verb.data), "CREATE OR ALTER"
        )
        if target.data in ("trigger_on_database", "trigger_on_server"):
            raise not_supported("A DDL or logon trigger (ON DATABASE, ON ALL SERVER)", line)
        execute_as = None
        events: set[str] = set()
        body: list[Tree[Token] | Token] = []
        for c in rest:
            if not isinstance(c, Tree):
                continue
            if c.data == "proc_options":
                for option in c.children:
                    if isinstance(option, Tree) and option.data == "proc_execute_as":
                        who = option.children[0]
                        assert isinstance(who, Token)
                        execute_as = string_of(who) if who.type == "STRING" else str(who).upper()
                    elif isinstance(option, Tree):
                        flag = str(option.children[0]).upper()
                        raise not_supported(f"A trigger's WITH {flag}", line)
            elif c.data == "trigger_timing":
                word = str(c.children[0]).upper() if c.children else "FOR"
                if word == "INSTEAD":
                    raise not_supported("An INSTEAD OF trigger", line)
                if word not in ("FOR", "AFTER"):
                    raise TSqlError(
                        102, f"Incorrect syntax near '{c.children[0]}'.", severity=15, line=line
                    )
            elif c.data == "trigger_other":
                raise not_supported(f"A trigger for {str(c.children[0]).upper()}", line)
            elif c.data in ("trigger_insert", "trigger_update", "trigger_delete"):
                events.add(str(c.data).removeprefix("trigger_").upper())
            elif c.data == "not_for_replication":
                raise not_supported("NOT FOR REPLICATION", line)
            else:
                body.append(c)
        return n.CreateTrigger(
            line,
            ".".join(self.x.qname(name_tree)),
            tuple(self.x.qname(target)),
            frozenset(events),
            self.body(body),
            self.text,
            mode,
            execute_as,
        )

    def s_drop_trigger(self, tree: Tree[Token], line: int) -> n.DropTrigger:
        if any(isinstance(c, Token) and c.type == "ALL" for c in tree.children) or any(
            isinstance(c, Token) and c.type == "ON" for c in tree.children
        ):
            raise not_supported("A DDL or logon trigger (ON DATABASE, ON ALL SERVER)", line)
        return n.DropTrigger(line, *self._dropped(tree))

    def s_drop_procedure(self, tree: Tree[Token], line: int) -> n.DropProcedure:
        return n.DropProcedure(line, *self._dropped(tree))

    def _dropped(self, tree: Tree[Token]) -> tuple[tuple[str, ...], bool]:
        """A DROP PROCEDURE / TRIGGER's names (``[schema.]name``) and whether IF EXISTS."""
        names = tuple(
            ".".join(self.x.qname(c))
            for c in tree.children
            if isinstance(c, Tree) and c.data == "qname"
        )
        return names, any(isinstance(c, Tree) and c.data == "if_exists" for c in tree.children)

    def s_execute(self, tree: Tree[Token], line: int) -> n.Execute:
        return_variable = None
        procedure = ""
        arguments: list[n.Argument] = []
        for c in tree.children:
            assert isinstance(c, Tree)
            if c.data == "exec_return":
                return_variable = str(c.children[0])
            elif c.data == "qname":
                procedure = ".".join(self.x.qname(c))
            elif c.data == "exec_args":
                for arg in c.children:
                    assert isinstance(arg, Tree)
                    arguments.append(self.argument(arg))
        return n.Execute(line, procedure, tuple(arguments), return_variable)

    s_bare_call = s_execute  # a procedure called without EXEC, first in its batch

    def argument(self, tree: Tree[Token]) -> n.Argument:
        items = list(tree.children)
        output = bool(items) and isinstance(items[-1], Token) and items[-1].type == "OUTPUT_KW"
        if output:
            items = items[:-1]
        name = None
        if len(items) == 2:
            name = str(items[0])
            items = items[1:]
        value_node = items[0]
        if isinstance(value_node, Token) and value_node.type == "DEFAULT":
            return n.Argument(name, None, output)
        return n.Argument(name, self.x.expr(value_node), output)

    def s_execute_string(self, tree: Tree[Token], line: int) -> n.ExecuteString:
        return n.ExecuteString(line, self.x.expr(tree.children[0]))

    def _table_statement(self, tree: Tree[Token], line: int, kind: str) -> n.TableStatement:
        names = [
            c for c in tree.children if isinstance(c, Tree) and c.data in ("qname", "table_ref")
        ]
        first = names[0]
        qname = first if first.data == "qname" else first.children[0]
        assert isinstance(qname, Tree)
        if_exists = any(isinstance(c, Tree) and c.data == "if_exists" for c in tree.children)
        return n.TableStatement(line, kind, self.x.qname(qname), self.x.span(tree), if_exists)

    def s_insert_statement(self, tree: Tree[Token], line: int) -> n.Statement:
        if v.names_table_variable(tree, self.x):
            return v.insert_variable(tree, self.x, line, lambda c: self.s_execute(c, line))
        plain = self._table_statement(tree, line, "INSERT")
        execute = next(
            (
                self.s_execute(c, line)
                for c in tree.children
                if isinstance(c, Tree) and c.data == "execute"
            ),
            None,
        )
        columns = next(
            (
                tuple(name_of(name) for name in c.children if isinstance(name, Tree))
                for c in tree.children
                if isinstance(c, Tree) and c.data == "insert_columns"
            ),
            None,
        )
        select = next(
            (
                self.x.select_core(c)
                for c in tree.children
                if isinstance(c, Tree) and c.data == "select_core"
            ),
            None,
        )
        return replace(plain, columns=columns, select=select, execute=execute)

    def s_update_statement(self, tree: Tree[Token], line: int) -> n.Statement:
        if v.names_table_variable(tree, self.x):
            return v.update_variable(tree, self.x, line)
        return self._table_statement(tree, line, "UPDATE")

    def s_delete_statement(self, tree: Tree[Token], line: int) -> n.Statement:
        if v.names_table_variable(tree, self.x):
            return v.delete_variable(tree, self.x, line)
        return self._table_statement(tree, line, "DELETE")

    # cursors (build_variables.py)
    def s_declare_cursor(self, tree: Tree[Token], line: int) -> n.DeclareCursor:
        return v.declare_cursor(tree, self.x, line)

    def s_open_cursor(self, tree: Tree[Token], line: int) -> n.CursorStatement:
        return v.cursor_statement(tree, "OPEN", line)

    def s_close_cursor(self, tree: Tree[Token], line: int) -> n.CursorStatement:
        return v.cursor_statement(tree, "CLOSE", line)

    def s_deallocate_cursor(self, tree: Tree[Token], line: int) -> n.CursorStatement:
        return v.cursor_statement(tree, "DEALLOCATE", line)

    def s_fetch_cursor(self, tree: Tree[Token], line: int) -> n.FetchCursor:
        return v.fetch_cursor(tree, self.x, line)

    def s_create_table(self, tree: Tree[Token], line: int) -> n.TableStatement:
        return self._table_statement(tree, line, "CREATE TABLE")

    def s_drop_table(self, tree: Tree[Token], line: int) -> n.TableStatement:
        return self._table_statement(tree, line, "DROP TABLE")

    def s_create_database(self, tree: Tree[Token], line: int) -> n.CreateDatabase:
        return n.CreateDatabase(line, name_of(tree.children[0]))

    def s_drop_database(self, tree: Tree[Token], line: int) -> n.DropDatabase:
        names = tuple(name_of(c) for c in tree.children if isinstance(c, Tree) and c.data == "name")
        if_exists = any(isinstance(c, Tree) and c.data == "if_exists" for c in tree.children)
        return n.DropDatabase(line, names, if_exists)

    def s_begin_dialog(self, tree: Tree[Token], line: int) -> n.BeginDialog:
        variable = str(tree.children[0])
        names = [c for c in tree.children if isinstance(c, Tree) and c.data == "name"]
        exprs = [
            c
            for c in tree.children[1:]
            if isinstance(c, Tree | Token)
            and not (isinstance(c, Tree) and c.data in ("name", "dialog_options"))
            and not (isinstance(c, Token) and c.type == "ON")
        ]
        contract = name_of(names[1]) if len(names) > 1 else None
        options: list[tuple[str, n.Expr]] = []
        encryption = True
        for c in tree.children:
            if isinstance(c, Tree) and c.data == "dialog_options":
                for option in c.children:
                    assert isinstance(option, Tree)
                    if option.data == "dialog_encryption":
                        encryption = str(option.children[0].children[0]).upper() == "ON"  # type: ignore[union-attr]
                    else:
                        key, value = option.children
                        options.append((str(key).upper(), self.x.expr(value)))
        return n.BeginDialog(
            line,
            variable,
            name_of(names[0]),
            self.x.expr(exprs[0]),
            self.x.expr(exprs[1]) if len(exprs) > 1 else None,
            contract,
            tuple(options),
            encryption,
        )

    def s_send(self, tree: Tree[Token], line: int) -> n.Send:
        children = [c for c in tree.children if not (isinstance(c, Token) and c.type == "ON")]
        handles_tree = children[0]
        assert isinstance(handles_tree, Tree)
        handles = tuple(self.x.expr(c) for c in handles_tree.children)
        message_type = None
        body = None
        for c in children[1:]:
            if isinstance(c, Tree) and c.data == "name":
                message_type = name_of(c)
            else:
                body = self.x.expr(c)
        return n.Send(line, handles, message_type, body)

    def s_receive_statement(self, tree: Tree[Token], line: int) -> n.Receive:
        receive = tree.children[0]
        assert isinstance(receive, Tree)
        waitfor = (
            len(tree.children) > 1
            or self.text[tree.meta.start_pos :].lstrip()[:7].upper() == "WAITFOR"
        )
        timeout = None
        if len(tree.children) > 1:
            timeout_tree = tree.children[1]
            assert isinstance(timeout_tree, Tree)
            timeout = self.x.expr(timeout_tree.children[0])
        top = None
        items: tuple[n.SelectItem, ...] = ()
        queue: tuple[str, ...] = ()
        into = None
        where = None
        for c in receive.children:
            assert isinstance(c, Tree)
            if c.data == "top":
                top = self.x.top(c)
            elif c.data == "select_list":
                items = self.x.select_list(c)
            elif c.data == "qname":
                queue = self.x.qname(c)
            elif c.data == "into_table":
                into = str(c.children[0])
            elif c.data == "where_clause":
                where = self.x.cond(c.children[0])
        return n.Receive(line, items, queue, top, into, where, waitfor, timeout)

    def s_get_group_statement(self, tree: Tree[Token], line: int) -> n.GetConversationGroup:
        get = tree.children[0]
        assert isinstance(get, Tree)
        waitfor = self.text[tree.meta.start_pos :].lstrip()[:7].upper() == "WAITFOR"
        timeout = None
        if len(tree.children) > 1:
            timeout_tree = tree.children[1]
            assert isinstance(timeout_tree, Tree)
            timeout = self.x.expr(timeout_tree.children[0])
        variable, queue = get.children
        return n.GetConversationGroup(line, str(variable), self.x.qname(queue), waitfor, timeout)  # type: ignore[arg-type]

    def s_end_conversation(self, tree: Tree[Token], line: int) -> n.EndConversation:
        handle = self.x.expr(tree.children[0])
        if len(tree.children) == 1:
            return n.EndConversation(line, handle)
        option = tree.children[1]
        assert isinstance(option, Tree)
        if option.data == "end_with_cleanup":
            return n.EndConversation(line, handle, cleanup=True)
        error, description = (self.x.expr(c) for c in option.children)
        return n.EndConversation(line, handle, error, description)

    def s_begin_timer(self, tree: Tree[Token], line: int) -> n.BeginTimer:
        handle, timeout = (self.x.expr(c) for c in tree.children)
        return n.BeginTimer(line, handle, timeout)

    def s_move_conversation(self, tree: Tree[Token], line: int) -> n.MoveConversation:
        handle, group = (self.x.expr(c) for c in tree.children)
        return n.MoveConversation(line, handle, group)
