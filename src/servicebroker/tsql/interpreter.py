"""The T-SQL interpreter: a session runs batches of typed statements (:mod:`.nodes`) against the
instance's brokers through their public seams — :meth:`Broker.transaction` for the
conversation statements, the DDL runner for Service Broker DDL, the views for catalog queries.

Semantics kept from SQL Server (docs/tsql.md):

- Variables live for one batch; a DECLARE inside a loop declares once.
- Outside BEGIN TRAN each statement is its own transaction (autocommit); BEGIN TRAN nests
  (@@TRANCOUNT), COMMIT commits at the outermost level, ROLLBACK ends everything. A transaction
  left open at the end of a batch stays open for the next batch of the session; the session's
  end rolls it back.
- An error ends its statement and the batch goes on, except the errors that end the batch
  (conversions, unknown objects, THROW, severity 20 and above) and any error under
  SET XACT_ABORT ON, which also rolls the transaction back. Inside BEGIN TRY any error of
  severity 11 and above goes to the CATCH block instead, with ERROR_NUMBER() and the rest.
- ``RECEIVE @v = column`` assigns from the last row and leaves the variables unchanged when no
  row comes; a RECEIVE without assignments returns a result set.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Protocol

from ..broker import Broker
from ..clock import Clock
from ..engine.transaction import Transaction
from ..errors import BrokerError, StorageError, TSqlError
from . import nodes as n
from .build import build_batch
from .calls import CALL_STATEMENTS
from .catalog_rows import CatalogRows
from .conversations import CONVERSATION_STATEMENTS
from .cursors import CURSOR_STATEMENTS, Cursors
from .databases import DATABASE_STATEMENTS
from .evaluate import evaluate, is_true, test
from .procedures import ProcedureStore
from .queries import RowSource, run_query
from .results import Results, ResultSet
from .savepoints import SAVEPOINT_STATEMENTS, rolled_back_to_savepoint, savepoint_name
from .scope import ErrorContext, Scope, to_type
from .select_routing import reads_application_tables
from .signals import SIGNAL_STATEMENTS
from .sqlerrors import broker_error
from .system_procedures import SYSTEM_STATEMENTS
from .table_dml import TABLE_STATEMENTS, StatementRows
from .table_variables import TABLE_VARIABLE_STATEMENTS, TableVariable, VariableSources
from .tables import query_rows, run_select
from .trigger_runs import TriggerRunner
from .triggers import TRIGGER_STATEMENTS, TriggerStore
from .types import INT, SqlType, Typed
from .variables import Variables, system_variable
from .xml_schema_sources import XML_SCHEMA_STATEMENTS

__all__ = ["InstanceSeam", "Session"]

_BATCH_ENDING = frozenset(
    {245, 8114, 8169, 241, 208, 2812, 137, 134, 128, 9400, 911, 529, 402, 263, 141, 207}
)
"""Errors that end the batch, as SQL Server's compile and conversion errors do."""

MAX_NESTLEVEL = 32
"""How deep procedures and dynamic SQL may call each other (@@NESTLEVEL; Msg 217 beyond)."""

_ROWCOUNT_ZERO = (
    n.Print,
    n.SetOption,
    n.BeginTran,
    n.CommitTran,
    n.RollbackTran,
    n.SaveTran,
    n.Use,
)
"""Statements that set @@ROWCOUNT to 0 (rowcount-transact-sql.md: USE, SET option, PRINT,
BEGIN / COMMIT TRANSACTION, …)."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value: int = 0) -> None:
        self.value = value


class _BatchAbort(Exception):
    pass


class _ToCatch(Exception):
    def __init__(self, error: TSqlError) -> None:
        self.error = error


class InstanceSeam(Protocol):
    """What a session needs of its instance (:class:`~servicebroker.tsql.Instance`)."""

    clock: Clock

    def database(self, name: str) -> Broker: ...
    def database_names(self) -> list[str]: ...
    def databases_view(self) -> RowSource: ...
    def database_id(self, name: str) -> int | None: ...
    def database_name(self, database_id: int) -> str | None: ...
    def create_database(self, name: str) -> None: ...
    def drop_database(self, name: str) -> None: ...
    def set_option(self, database: str, key: str, value: str) -> None: ...
    def procedures(self, database: str) -> ProcedureStore: ...
    def triggers(self, database: str) -> TriggerStore: ...


class Session:
    """One connection to an instance: its current database, its open transaction, its SET
    options, and the batches it runs (module docstring). ``on_event`` sees each result set,
    message, row count and error as it happens (sqlcmd prints them so)."""

    def __init__(
        self,
        instance: InstanceSeam,
        database: str = "master",
        *,
        on_event: Callable[[ResultSet | str | int | TSqlError], None] | None = None,
        principal: str | None = None,
    ) -> None:
        self.instance = instance
        self.principal = principal
        self.broker: Broker = instance.database(database)
        self.database = next(
            d for d in instance.database_names() if d.casefold() == database.casefold()
        )
        self.results = Results()
        self._on_event = on_event
        self.nocount = False
        self.xact_abort = False
        self.trancount = 0
        self.tran_name: str | None = None  # the outermost BEGIN TRAN's name
        self._tx: Transaction | None = None
        self._doomed = False
        self.rowcount = 0
        self.error = 0
        self.variables = Variables()
        self.table_variables: dict[str, TableVariable] = {}  # the batch's (or procedure's)
        self.cursors = Cursors()
        self._caught: list[ErrorContext] = []
        self._try_depth = 0
        self._line = 1
        self._procedure: str | None = None
        self._nesting = 0
        self._captured: list[ResultSet] | None = None
        self.triggers = TriggerRunner(self)

    # -- events -----------------------------------------------------------------------------
    def emit(self, event: ResultSet | str | int | TSqlError) -> None:
        if self._captured is not None and isinstance(event, ResultSet):
            self._captured.append(event)  # INSERT … EXEC takes it
            return
        self.results.events.append(event)
        if self._on_event is not None:
            self._on_event(event)

    # -- the Scope of evaluation ------------------------------------------------------------
    @property
    def line(self) -> int:
        return self._line

    def variable(self, name: str, line: int) -> Typed:
        return self.variables.value(name, line)

    def global_variable(self, name: str) -> Typed:
        return system_variable(self, name, self._line)

    def cursor_counters(self) -> tuple[int, int]:
        """@@FETCH_STATUS and @@CURSOR_ROWS."""
        return self.cursors.fetch_status, self.cursors.cursor_rows

    def column(self, parts: tuple[str, ...]) -> Typed:
        raise TSqlError(207, f"Invalid column name '{parts[-1]}'.", line=self._line)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.instance.clock.now())

    def utc_now(self) -> datetime:
        return datetime.fromtimestamp(self.instance.clock.now(), UTC).replace(tzinfo=None)

    def caught(self) -> ErrorContext | None:
        return self._caught[-1] if self._caught else None

    def xact_state(self) -> int:
        if self.trancount == 0:
            return 0
        return -1 if self._doomed else 1

    def subquery(self, select: n.SelectCore, outer: Scope | None = None) -> list[list[Typed]]:
        """A subquery's rows; ``outer`` (the row of the query around it) for its outer
        references (a correlated subquery)."""
        if self._on_tables(select):
            return query_rows(self, select, self._line, outer=outer)
        return run_query(select, outer if outer is not None else self, self._sources()).rows

    def rows_elsewhere(self, select: n.SelectCore) -> list[list[Typed]] | None:
        """The rows of an INSERT's SELECT when it reads views, queues or table variables
        (None: it reads the application's tables, and is translated with the INSERT).

        Raises:
            TSqlError: what :mod:`.select_routing` refuses (a mixed join, Msg 40000 / 208),
                and the query's own errors."""
        if self._on_tables(select):
            return None
        return run_query(select, self, self._sources()).rows

    def rows_of_call(self, call: n.Execute) -> list[list[Typed]]:
        """The rows of every result set procedure ``call`` returns (INSERT … EXEC,
        insert-transact-sql.md), kept from the client.

        Raises:
            TSqlError: Msg 8164, an INSERT … EXEC inside another; the procedure's errors."""
        if self._captured is not None:
            raise TSqlError(8164, "An INSERT EXEC statement cannot be nested.", line=self._line)
        self._captured = []
        try:
            self._execute(call)
            return [row for result in self._captured for row in result.rows]
        finally:
            self._captured = None

    def _on_tables(self, select: n.SelectCore) -> bool:
        """Whether a SELECT reads the application's tables (:mod:`.select_routing`)."""
        return reads_application_tables(select, self._sources(), self, self._line)

    @property
    def clock(self) -> Clock:
        """The broker's clock (every database of an instance reads the instance's)."""
        return self.instance.clock

    @property
    def postgres(self) -> bool:
        """Whether the current database is on PostgreSQL (else SQLite)."""
        return self.broker.paramstyle != "qmark"

    def object_id(self, name: str) -> int | None:
        return self._sources().object_id(name)

    def database_id(self, name: str | None) -> int | None:
        return self.instance.database_id(name if name is not None else self.database)

    def database_name(self, database_id: int | None) -> str | None:
        if database_id is None:
            return self.database
        return self.instance.database_name(database_id)

    def aggregate(self, call: n.FunctionCall) -> Typed:
        raise TSqlError(
            147,
            "An aggregate may not appear here (a select list with a FROM is needed).",
            line=self._line,
            severity=15,
        )

    def _sources(self) -> VariableSources:
        return VariableSources(
            self._rows_of(self.database), self.table_variables, self.triggers.tables
        )

    def table_variable(self, name: str) -> TableVariable:
        """The table variable ``name`` (Msg 1087 when the batch did not declare it)."""
        return self._sources().table(name, self._line)

    def cursor_status(self, kind: str, name: str) -> int:
        return self.cursors.status(kind, name)

    def column_updated(self, column: str) -> bool:
        """UPDATE (``column``): :meth:`.trigger_runs.TriggerRunner.column_updated`."""
        return self.triggers.column_updated(column)

    def _rows_of(self, database: str) -> CatalogRows:
        return CatalogRows(
            self.instance.database(database),
            database,
            self.instance.databases_view,
            self._rows_of,
            self._modules(database),
        )

    # -- batches ----------------------------------------------------------------------------
    def run_batch(self, text: str) -> None:
        """Parse and run one batch (its errors become events; none is raised)."""
        self.variables = Variables()
        self.table_variables, self.cursors.local = {}, {}  # a LOCAL cursor is the batch's
        try:
            statements = build_batch(text)
            self._declare_all(statements)
        except TSqlError as exc:  # a compile error: nothing of the batch runs
            self.error = exc.number
            self.emit(exc)
            return
        self._run_top(statements)

    def _run_top(self, statements: tuple[n.Statement, ...] | list[n.Statement]) -> None:
        """Run a batch's (or an activated procedure's call's) statements: an error that ends
        the batch, a RETURN, a stray BREAK / CONTINUE end them here, as events."""
        with contextlib.suppress(_Return, _BatchAbort, _Break, _Continue):
            self._run_block(statements)

    def close(self) -> None:
        """End the session: an open transaction is rolled back."""
        if self._tx is not None:
            self.rollback_all()

    # -- statements -------------------------------------------------------------------------
    def _run_block(self, statements: tuple[n.Statement, ...] | list[n.Statement]) -> None:
        for statement in statements:
            self._run(statement)

    def _run(self, statement: n.Statement) -> None:
        self._line = statement.line
        try:
            self._execute(statement)
            if not isinstance(statement, n.If | n.While | n.Block | n.TryCatch):
                self.error = 0
            if isinstance(statement, n.SetVariable):
                self.rowcount = 1  # rowcount-transact-sql.md: SET @v = … sets it to 1
            elif isinstance(statement, _ROWCOUNT_ZERO):
                self.rowcount = 0
        except TSqlError as exc:
            self._fail(exc)
        except StorageError as exc:
            # the database underneath failed the statement and rolled its transaction back
            # (PostgreSQL aborts a transaction whose statement failed): the session's goes too
            self._tx = None
            self.trancount = 0
            self._doomed = False
            self._fail(broker_error(exc, self._line, self.database))
        except BrokerError as exc:
            self._fail(broker_error(exc, self._line, self.database))
        except ArithmeticError:  # a value beyond what Python's types hold (1e308 * 10, …)
            self._fail(
                TSqlError(
                    8115,
                    "Arithmetic overflow error converting expression to data type float.",
                    line=self._line,
                )
            )

    def _fail(self, exc: TSqlError) -> None:
        """An error reached the statement level: to CATCH, or reported (and the batch ended,
        and the transaction rolled back, where SQL Server does so)."""
        if exc.line == 1 and self._line != 1 and not exc.procedure:
            exc.line = self._line
        if exc.procedure is None and self._procedure is not None:
            exc.procedure = self._procedure
        self.error = exc.number
        self._autocommit_failed()
        if self._try_depth > 0 and exc.severity >= 11 and exc.severity < 20:
            if self.xact_abort and self.trancount > 0:
                self._doomed = True
            raise _ToCatch(exc)
        self.emit(exc)
        if (
            self.xact_abort
            and self.trancount > 0
            and exc.severity >= 11
            and not getattr(exc, "raiserror", False)  # XACT_ABORT does not apply to RAISERROR
        ):
            self.rollback_all()
            raise _BatchAbort
        if exc.number in _BATCH_ENDING or exc.severity >= 20 or getattr(exc, "ends_batch", False):
            raise _BatchAbort

    def _execute(self, s: n.Statement) -> None:
        conversation = (
            CONVERSATION_STATEMENTS.get(type(s))
            or CALL_STATEMENTS.get(type(s))
            or TRIGGER_STATEMENTS.get(type(s))
            or TABLE_STATEMENTS.get(type(s))
            or TABLE_VARIABLE_STATEMENTS.get(type(s))
            or CURSOR_STATEMENTS.get(type(s))
            or SAVEPOINT_STATEMENTS.get(type(s))
            or SIGNAL_STATEMENTS.get(type(s))
            or DATABASE_STATEMENTS.get(type(s))
            or SYSTEM_STATEMENTS.get(type(s))
            or XML_SCHEMA_STATEMENTS.get(type(s))
        )
        if conversation is not None:
            conversation(self, s)
            return
        method = getattr(self, "_x_" + type(s).__name__)
        method(s)

    # control of flow
    def _x_Block(self, s: n.Block) -> None:
        self._run_block(s.body)

    def _x_If(self, s: n.If) -> None:
        outcome = is_true(test(s.cond, self))
        self.error = 0  # the IF is a statement: it reset @@ERROR once its condition is read
        if outcome:
            self._run(s.then)
        elif s.otherwise is not None:
            self._run(s.otherwise)

    def _x_While(self, s: n.While) -> None:
        while is_true(test(s.cond, self)):
            self.error = 0
            try:
                self._run(s.body)
            except _Break:
                break
            except _Continue:
                continue

    def _x_Break(self, s: n.Break) -> None:
        raise _Break

    def _x_Continue(self, s: n.Continue) -> None:
        raise _Continue

    def _x_Return(self, s: n.Return) -> None:
        value = 0
        if s.expr is not None:
            result = to_type(evaluate(s.expr, self), INT, self)
            value = result if isinstance(result, int) else 0
        raise _Return(value)

    def _x_TryCatch(self, s: n.TryCatch) -> None:
        self._try_depth += 1
        try:
            self._run_block(s.body)
        except _ToCatch as caught:
            self._try_depth -= 1
            error = caught.error
            self._caught.append(
                ErrorContext(
                    error.number,
                    error.message,
                    error.severity,
                    error.state,
                    error.line,
                    error.procedure,
                )
            )
            try:
                self._run_block(s.handler)
            finally:
                self._caught.pop()
            return
        except BaseException:
            self._try_depth -= 1
            raise
        self._try_depth -= 1

    # variables and options
    def _x_Declare(self, s: n.Declare) -> None:
        # declared when the batch was compiled (_declare_all): running a DECLARE only assigns
        # its initial values, so one inside a loop declares once and keeps the value
        for name, _, value in s.items:
            if value is not None:
                self.assign(name, evaluate(value, self))

    def _declare_all(self, statements: tuple[n.Statement, ...] | list[n.Statement]) -> None:
        """Declare every variable the statements DECLARE, wherever (a DECLARE in an IF that
        does not run still declares: T-SQL's variables are the batch's, fixed when it is
        compiled).

        Raises:
            TSqlError: Msg 134, a name declared twice.
        """
        for declare in n.declarations(statements):
            self._line = declare.line
            for name, type_, _ in declare.items:
                self.declare(name, type_)
            for table in declare.tables:
                self.declare(table.name, SqlType("TABLE"))  # its name taken (Msg 134 twice)
                self.table_variables[table.name.casefold()] = TableVariable(table)

    def declare(self, name: str, type_: SqlType) -> None:
        """DECLARE ``name`` (with its ``@``) of ``type_``, NULL (Msg 134 the second time)."""
        self.variables.declare(name, type_, self._line)

    @contextmanager
    def frame(self, procedure: str | None = None) -> Iterator[None]:
        """Run what follows with variables of its own — a procedure's or trigger's (named
        ``procedure``, which its errors then carry) or dynamic SQL's — and the caller's
        variables and SET options back after."""
        if self._nesting >= MAX_NESTLEVEL:
            raise TSqlError(
                217,
                f"Maximum stored procedure, function, trigger, or view nesting level exceeded "
                f"(limit {MAX_NESTLEVEL}).",
                line=self._line,
            )
        saved = (self.variables, self._procedure)
        outer = (self.table_variables, self.cursors.local)
        # set-statements-transact-sql.md: a SET option set in a procedure, trigger or dynamic
        # SQL is restored when control returns from it
        options = (self.nocount, self.xact_abort)
        self.table_variables, self.cursors.local = {}, {}
        self._nesting += 1
        self.variables = Variables()
        if procedure is not None:
            self._procedure = procedure
        try:
            yield
        finally:
            self._nesting -= 1
            self.variables, self._procedure = saved
            self.table_variables, self.cursors.local = outer
            self.nocount, self.xact_abort = options

    def run_body(self, statements: tuple[n.Statement, ...] | list[n.Statement]) -> int:
        """Run a procedure's (or dynamic SQL's) statements; the value its RETURN gave (0).

        Raises:
            TSqlError: Msg 134, a variable declared twice (or a parameter declared again).
        """
        self._declare_all(statements)
        try:
            self._run_block(statements)
        except _Return as returned:
            return returned.value
        return 0

    def open_transaction(self) -> Transaction | None:
        """The session's broker transaction when one is open (begun by a statement), else
        None: the database's stored modules are read in it, never in a transaction of their
        own, which would wait for the write lock this one may hold."""
        return self._tx

    def _modules(self, database: str) -> Callable[[], list[tuple[str, str]]]:
        """The stored procedures and triggers of ``database`` for the catalog views, as
        (name, type) — ``P`` or ``TR`` — read in the open transaction when it is that
        database's."""

        def listed() -> list[tuple[str, str]]:
            tx = self._tx if database.casefold() == self.database.casefold() else None
            return [
                *((name, "P") for name in self.instance.procedures(database).names(tx)),
                *((name, "TR") for name in self.instance.triggers(database).names(tx)),
            ]

        return listed

    def procedures_here(self) -> ProcedureStore:
        """The stored procedures of the session's current database."""
        return self.instance.procedures(self.database)

    def triggers_here(self) -> TriggerStore:
        """The DML triggers of the session's current database."""
        return self.instance.triggers(self.database)

    def triggers_on(self, tx: Transaction, table: str, event: str) -> list[n.CreateTrigger]:
        """:meth:`.trigger_runs.TriggerRunner.on`."""
        return self.triggers.on(tx, table, event)

    def fire_triggers(self, triggers: list[n.CreateTrigger], rows: StatementRows) -> None:
        """:meth:`.trigger_runs.TriggerRunner.fire`."""
        self.triggers.fire(triggers, rows)

    def trigger_table(self, name: str) -> str | None:
        """:meth:`.trigger_runs.TriggerRunner.database_table`."""
        return self.triggers.database_table(name)

    def forget_triggers(self, tx: Transaction, table: str) -> None:
        """DROP TABLE ``table``: its triggers go with it, in ``tx``."""
        self.triggers_here().drop_table(tx, table)

    def call_procedure(self, name: str) -> None:
        """EXEC ``name`` with no arguments, as activation runs a queue's procedure; errors
        become events of this session."""
        self._run_top([n.Execute(1, name)])

    def assign(self, name: str, value: Typed) -> None:
        self.variables.assign(name, value, self)

    def _x_SetVariable(self, s: n.SetVariable) -> None:
        value = evaluate(s.expr, self)
        if s.op != "=":
            current = self.variable(s.variable, s.line)
            value = evaluate(
                n.Binary(
                    s.op[0],
                    n.Literal(current.value, current.type),
                    n.Literal(value.value, value.type),
                ),
                self,
            )
        self.assign(s.variable, value)

    def _x_SetOption(self, s: n.SetOption) -> None:
        on = s.value == "ON"
        for name in s.names:
            if name == "NOCOUNT":
                self.nocount = on
            elif name == "XACT_ABORT":
                self.xact_abort = on
            # ANSI_NULLS, QUOTED_IDENTIFIER, ANSI_PADDING, ARITHABORT, CONCAT_NULL_YIELDS_NULL,
            # DEADLOCK_PRIORITY, LOCK_TIMEOUT, …: accepted; the interpreter behaves as their
            # defaults say (docs/tsql.md)

    # transactions
    @property
    def tx(self) -> Transaction:
        """The broker transaction of the current statement (begun on first use)."""
        if self._tx is None:
            self._tx = self.broker.transaction(principal=self.principal)
        return self._tx

    def _autocommit(self) -> None:
        if self.trancount == 0 and self._tx is not None:
            tx, self._tx = self._tx, None
            tx.commit()

    def _autocommit_failed(self) -> None:
        if self.trancount == 0 and self._tx is not None:
            tx, self._tx = self._tx, None
            with suppress(BrokerError):
                tx.rollback()

    @contextmanager
    def statement_transaction(self) -> Iterator[Transaction]:
        tx = self.tx
        yield tx
        self._autocommit()

    def rollback_all(self) -> None:
        """Roll back the session's transaction whole (@@TRANCOUNT 0), if one is open."""
        tx, self._tx = self._tx, None
        self.trancount = 0
        self._doomed = False
        if tx is not None:
            with suppress(BrokerError):
                tx.rollback()

    def _x_BeginTran(self, s: n.BeginTran) -> None:
        if self.trancount == 0:
            self.tran_name = savepoint_name(self, s.name) if s.name else None
        self.trancount += 1

    def _x_CommitTran(self, s: n.CommitTran) -> None:
        if self.trancount == 0:
            raise TSqlError(
                3902,
                "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION.",
                line=s.line,
            )
        if self._doomed:
            raise TSqlError(
                3930,
                "The current transaction cannot be committed and cannot support operations that write to the log file. Roll back the transaction.",
                line=s.line,
            )
        self.trancount -= 1
        if self.trancount == 0 and self._tx is not None:
            tx, self._tx = self._tx, None
            tx.commit()

    def _x_RollbackTran(self, s: n.RollbackTran) -> None:
        if self.trancount == 0:
            raise TSqlError(
                3903,
                "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION.",
                line=s.line,
            )
        if rolled_back_to_savepoint(self, s):  # @@TRANCOUNT and the group locks stay
            return
        self.rollback_all()

    # databases
    # queries
    def _x_Select(self, s: n.Select) -> None:
        if self._on_tables(s.core):
            run_select(self, s.core, s.line)
            return
        query = run_query(s.core, self, self._sources())
        if query.assigns:
            for name, value in query.assignments:
                self.assign(name, value)
            self.rowcount = len(query.assignments) // max(
                1, sum(isinstance(i, n.Assign) for i in s.core.items)
            )
            return
        self.rowcount = len(query.rows)
        self.emit(ResultSet(query.columns, query.rows))
        if not self.nocount:
            self.emit(len(query.rows))
