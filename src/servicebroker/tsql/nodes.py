"""A T-SQL batch as typed nodes (built from the parse tree by :mod:`.build`, run by
:mod:`.interpreter`): the statements, each with the batch ``line`` it starts on (errors name it,
as SQL Server's do), and — from :mod:`.expression_nodes`, re-exported here — the expressions,
conditions and queries they hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ddl.parser import DdlStatement
from .expression_nodes import (
    Assign,
    Between,
    Binary,
    Case,
    Cast,
    Column,
    ColumnUpdated,
    Compare,
    Cond,
    Exists,
    Expr,
    ExprItem,
    ForXml,
    FunctionCall,
    GlobalVariable,
    InList,
    InQuery,
    IsNull,
    Join,
    Like,
    Literal,
    Logical,
    Negate,
    Not,
    SelectCore,
    SelectItem,
    Star,
    Subquery,
    Variable,
    XmlApply,
    XmlMethod,
)
from .security_nodes import SecurityStatement
from .types import SqlType

__all__ = [
    "Argument",
    "Assign",
    "BeginDialog",
    "BeginTimer",
    "BeginTran",
    "Between",
    "Binary",
    "Block",
    "Break",
    "Case",
    "Cast",
    "Column",
    "ColumnDef",
    "ColumnUpdated",
    "CommitTran",
    "Compare",
    "Cond",
    "Continue",
    "CreateDatabase",
    "CreateProcedure",
    "CreateTrigger",
    "CursorStatement",
    "DatabaseOptions",
    "Ddl",
    "Declare",
    "DeclareCursor",
    "DeleteVariable",
    "DropDatabase",
    "DropProcedure",
    "DropTrigger",
    "EndConversation",
    "Execute",
    "ExecuteString",
    "Exists",
    "Expr",
    "ExprItem",
    "FetchCursor",
    "ForXml",
    "FunctionCall",
    "GetConversationGroup",
    "GlobalVariable",
    "If",
    "InList",
    "InQuery",
    "InsertVariable",
    "IsNull",
    "Join",
    "Like",
    "Literal",
    "Logical",
    "MoveConversation",
    "Negate",
    "Not",
    "Parameter",
    "Print",
    "RaisError",
    "Receive",
    "Return",
    "RollbackTran",
    "SaveTran",
    "Select",
    "SelectCore",
    "SelectItem",
    "Send",
    "SetOption",
    "SetVariable",
    "Star",
    "Statement",
    "Subquery",
    "TableDef",
    "TableStatement",
    "Throw",
    "TryCatch",
    "UpdateVariable",
    "Use",
    "Variable",
    "WaitforDelay",
    "While",
    "XmlApply",
    "XmlMethod",
    "XmlSchemaSource",
    "declarations",
]


# -- statements -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Declare:
    """DECLARE @a type [= value] [, …] and DECLARE @t TABLE (…) (``tables``)."""

    line: int
    items: tuple[tuple[str, SqlType, Expr | None], ...]
    tables: tuple[TableDef, ...] = ()


@dataclass(frozen=True)
class ColumnDef:
    """A table variable's column: NULL / NOT NULL, PRIMARY KEY, UNIQUE, IDENTITY (seed,
    increment), DEFAULT (declare-local-variable-transact-sql.md, the table form)."""

    name: str
    type: SqlType
    nullable: bool = True
    identity: tuple[int, int] | None = None
    default: Expr | None = None


@dataclass(frozen=True)
class TableDef:
    """DECLARE @name TABLE (columns …): ``keys`` the PRIMARY KEY's and each UNIQUE's columns."""

    name: str
    columns: tuple[ColumnDef, ...]
    keys: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class InsertVariable:
    """INSERT [INTO] @t [(columns)] VALUES (…), … | SELECT … | EXEC procedure | DEFAULT VALUES."""

    line: int
    table: str
    columns: tuple[str, ...] | None
    rows: tuple[tuple[Expr | None, ...], ...] = ()
    select: SelectCore | None = None
    execute: Execute | None = None


@dataclass(frozen=True)
class UpdateVariable:
    """UPDATE [TOP (n)] @t SET column = expr, … [WHERE …]."""

    line: int
    table: str
    sets: tuple[tuple[str, Expr], ...]
    where: Cond | None = None
    top: Expr | None = None


@dataclass(frozen=True)
class DeleteVariable:
    """DELETE [TOP (n)] [FROM] @t [WHERE …]."""

    line: int
    table: str
    where: Cond | None = None
    top: Expr | None = None


@dataclass(frozen=True)
class DeclareCursor:
    """DECLARE name [INSENSITIVE] [SCROLL] CURSOR [LOCAL | GLOBAL] [FORWARD_ONLY | SCROLL]
    [STATIC | KEYSET | DYNAMIC | FAST_FORWARD] [READ_ONLY | …] FOR select
    (declare-cursor-transact-sql.md): ``local`` None when neither LOCAL nor GLOBAL is said."""

    line: int
    name: str
    select: SelectCore
    scroll: bool = False
    local: bool | None = None


@dataclass(frozen=True)
class CursorStatement:
    """OPEN, CLOSE or DEALLOCATE (``kind``) [GLOBAL] name."""

    line: int
    kind: str
    name: str
    global_: bool = False


@dataclass(frozen=True)
class FetchCursor:
    """FETCH [NEXT | PRIOR | FIRST | LAST | ABSOLUTE n | RELATIVE n] [FROM] [GLOBAL] name
    [INTO @v, …] (fetch-transact-sql.md)."""

    line: int
    name: str
    direction: str = "NEXT"
    offset: Expr | None = None
    into: tuple[str, ...] = ()
    global_: bool = False


@dataclass(frozen=True)
class SetVariable:
    """SET @v = expr (``op`` ``=`` or a compound ``+=``, ``-=``, …)."""

    line: int
    variable: str
    op: str
    expr: Expr


@dataclass(frozen=True)
class SetOption:
    """SET NOCOUNT ON, SET XACT_ABORT OFF, … (``names`` upper case, ``value`` ON/OFF or a
    word or number, upper case)."""

    line: int
    names: tuple[str, ...]
    value: str


@dataclass(frozen=True)
class Select:
    """A SELECT statement: a result set, or variables assigned."""

    line: int
    core: SelectCore


@dataclass(frozen=True)
class If:
    """IF cond statement [ELSE statement]."""

    line: int
    cond: Cond
    then: Statement
    otherwise: Statement | None = None


@dataclass(frozen=True)
class While:
    """WHILE cond statement."""

    line: int
    cond: Cond
    body: Statement


@dataclass(frozen=True)
class Break:
    line: int


@dataclass(frozen=True)
class Continue:
    line: int


@dataclass(frozen=True)
class Return:
    """RETURN [expr]: leaves the batch or procedure."""

    line: int
    expr: Expr | None = None


@dataclass(frozen=True)
class Block:
    """BEGIN … END."""

    line: int
    body: tuple[Statement, ...]


@dataclass(frozen=True)
class TryCatch:
    """BEGIN TRY … END TRY BEGIN CATCH … END CATCH."""

    line: int
    body: tuple[Statement, ...]
    handler: tuple[Statement, ...]


@dataclass(frozen=True)
class Print:
    line: int
    expr: Expr


@dataclass(frozen=True)
class RaisError:
    """RAISERROR (message, severity, state [, argument …]) [WITH LOG | NOWAIT | SETERROR]."""

    line: int
    message: Expr
    severity: Expr
    state: Expr
    args: tuple[Expr, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Throw:
    """THROW [number, message, state] (none: re-raise inside CATCH)."""

    line: int
    number: Expr | None = None
    message: Expr | None = None
    state: Expr | None = None


@dataclass(frozen=True)
class BeginTran:
    line: int
    name: str | None = None


@dataclass(frozen=True)
class CommitTran:
    line: int


@dataclass(frozen=True)
class RollbackTran:
    line: int
    name: str | None = None


@dataclass(frozen=True)
class SaveTran:
    line: int
    name: str


@dataclass(frozen=True)
class BeginDialog:
    """BEGIN DIALOG [CONVERSATION] @handle FROM SERVICE s TO SERVICE 'x' [, 'instance']
    [ON CONTRACT c] [WITH RELATED_CONVERSATION = … | RELATED_CONVERSATION_GROUP = …,
    LIFETIME = …, ENCRYPTION = ON | OFF] (begin-dialog-conversation-transact-sql.md)."""

    line: int
    variable: str
    from_service: str
    to_service: Expr
    broker_instance: Expr | None
    contract: str | None
    options: tuple[tuple[str, Expr], ...] = ()
    encryption: bool = True


@dataclass(frozen=True)
class Send:
    """SEND ON CONVERSATION h | (h1, h2, …) [MESSAGE TYPE t] [(body)] (send-transact-sql.md)."""

    line: int
    handles: tuple[Expr, ...]
    message_type: str | None
    body: Expr | None


@dataclass(frozen=True)
class Receive:
    """[WAITFOR (] RECEIVE [TOP (n)] columns FROM queue [INTO @table] [WHERE
    conversation_handle | conversation_group_id = …] [), TIMEOUT ms]
    (receive-transact-sql.md). ``timeout`` None with ``waitfor``: wait for ever."""

    line: int
    items: tuple[SelectItem, ...]
    queue: tuple[str, ...]
    top: Expr | None = None
    into: str | None = None
    where: Cond | None = None
    waitfor: bool = False
    timeout: Expr | None = None


@dataclass(frozen=True)
class GetConversationGroup:
    """[WAITFOR (] GET CONVERSATION GROUP @g FROM queue [), TIMEOUT ms]."""

    line: int
    variable: str
    queue: tuple[str, ...]
    waitfor: bool = False
    timeout: Expr | None = None


@dataclass(frozen=True)
class EndConversation:
    """END CONVERSATION h [WITH ERROR = n DESCRIPTION = 'text' | WITH CLEANUP]."""

    line: int
    handle: Expr
    error: Expr | None = None
    description: Expr | None = None
    cleanup: bool = False


@dataclass(frozen=True)
class BeginTimer:
    """BEGIN CONVERSATION TIMER (h) TIMEOUT = seconds."""

    line: int
    handle: Expr
    timeout: Expr


@dataclass(frozen=True)
class MoveConversation:
    """MOVE CONVERSATION h TO group."""

    line: int
    handle: Expr
    group: Expr


@dataclass(frozen=True)
class WaitforDelay:
    """WAITFOR DELAY 'hh:mm:ss[.mmm]' | TIME 'hh:mm:ss' (``kind`` DELAY | TIME)."""

    line: int
    kind: str
    expr: Expr


@dataclass(frozen=True)
class Use:
    line: int
    database: str


@dataclass(frozen=True)
class CreateDatabase:
    line: int
    name: str


@dataclass(frozen=True)
class DropDatabase:
    line: int
    names: tuple[str, ...]
    if_exists: bool = False


@dataclass(frozen=True)
class Ddl:
    """A Service Broker DDL statement (CREATE QUEUE, ALTER DATABASE, GRANT SEND, …), as the
    DDL parser reads it (:class:`~servicebroker.ddl.parser.DdlStatement`)."""

    line: int
    statement: DdlStatement = field(compare=False)


@dataclass(frozen=True)
class XmlSchemaSource:
    """CREATE XML SCHEMA COLLECTION name AS @variable, ALTER XML SCHEMA COLLECTION name ADD
    @variable: the DDL statement, whose schemas are the ``variable``'s value when it runs."""

    line: int
    statement: DdlStatement = field(compare=False)
    variable: str = ""


@dataclass(frozen=True)
class DatabaseOptions:
    """ALTER DATABASE name SET options that are not Service Broker's (alter-database-transact-sql-
    set-options.md): ``options`` as (OPTION, value) pairs, upper case (``("TRUSTWORTHY",
    "ON")``, ``("RECOVERY", "SIMPLE")``, ``("SINGLE_USER", "")``); ``broker`` the statement's
    Service Broker options, run as DDL, when it also has some."""

    line: int
    database: str
    options: tuple[tuple[str, str], ...]
    broker: DdlStatement | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Parameter:
    """A stored procedure's parameter: ``@name type [= default] [OUTPUT]``."""

    name: str
    type: SqlType
    default: Expr | None = None
    output: bool = False


@dataclass(frozen=True)
class CreateProcedure:
    """CREATE [OR ALTER] | ALTER PROCEDURE name [params] [WITH options] AS body
    (create-procedure-transact-sql.md): the whole batch. ``source`` is the batch's text (what
    is stored and shown by OBJECT_DEFINITION); ``mode`` CREATE, ALTER or CREATE OR ALTER."""

    line: int
    name: str
    parameters: tuple[Parameter, ...]
    body: tuple[Statement, ...]
    source: str = field(compare=False)
    mode: str = "CREATE"
    execute_as: str | None = None


@dataclass(frozen=True)
class CreateTrigger:
    """CREATE [OR ALTER] | ALTER TRIGGER name ON table [WITH EXECUTE AS …] {FOR | AFTER}
    {INSERT, UPDATE, DELETE} AS body (create-trigger-transact-sql.md): the whole batch, a DML
    trigger on one of the application's tables. ``events`` the DML verbs it fires for;
    ``source`` the batch's text (what is stored); ``mode`` CREATE, ALTER or CREATE OR ALTER."""

    line: int
    name: str
    table: tuple[str, ...]
    events: frozenset[str]
    body: tuple[Statement, ...]
    source: str = field(compare=False)
    mode: str = "CREATE"
    execute_as: str | None = None


@dataclass(frozen=True)
class DropTrigger:
    """DROP TRIGGER [IF EXISTS] name [, …] (drop-trigger-transact-sql.md, the DML form)."""

    line: int
    names: tuple[str, ...]
    if_exists: bool = False


@dataclass(frozen=True)
class DropProcedure:
    """DROP PROCEDURE [IF EXISTS] name [, …]."""

    line: int
    names: tuple[str, ...]
    if_exists: bool = False


@dataclass(frozen=True)
class Argument:
    """An EXEC argument: ``[@parameter =] value | DEFAULT [OUTPUT]`` (``value`` None for
    DEFAULT)."""

    name: str | None
    value: Expr | None
    output: bool = False


@dataclass(frozen=True)
class Execute:
    """EXEC[UTE] [@return =] procedure [arguments] (execute-transact-sql.md)."""

    line: int
    procedure: str
    arguments: tuple[Argument, ...] = ()
    return_variable: str | None = None


@dataclass(frozen=True)
class ExecuteString:
    """EXEC (expr): dynamic SQL, run as a batch of its own in the session."""

    line: int
    text: Expr


@dataclass(frozen=True)
class TableStatement:
    """A statement on the application's own tables — CREATE TABLE, DROP TABLE, INSERT, UPDATE,
    DELETE (``kind``) — on ``table`` (its name's parts), kept as its ``text``: it is translated
    to the database underneath when it runs (:mod:`servicebroker.tsql.tables`)."""

    line: int
    kind: str
    table: tuple[str, ...]
    text: str = field(compare=False)
    if_exists: bool = False
    columns: tuple[str, ...] | None = None
    """An INSERT's column list, as written (None: none)."""
    select: SelectCore | None = None
    """An INSERT … SELECT's query: run by the interpreter when it reads views, queues or table
    variables, its rows then inserted (translated with the statement when it reads the
    application's tables)."""
    execute: Execute | None = None
    """An INSERT … EXEC's procedure call, whose result sets' rows are inserted."""


Statement = (
    Declare
    | SetVariable
    | SetOption
    | Select
    | If
    | While
    | Break
    | Continue
    | Return
    | Block
    | TryCatch
    | Print
    | RaisError
    | Throw
    | BeginTran
    | CommitTran
    | RollbackTran
    | SaveTran
    | BeginDialog
    | Send
    | Receive
    | GetConversationGroup
    | EndConversation
    | BeginTimer
    | MoveConversation
    | WaitforDelay
    | Use
    | CreateDatabase
    | DropDatabase
    | Ddl
    | XmlSchemaSource
    | CreateProcedure
    | CreateTrigger
    | DropTrigger
    | DropProcedure
    | Execute
    | ExecuteString
    | TableStatement
    | DatabaseOptions
    | InsertVariable
    | UpdateVariable
    | DeleteVariable
    | DeclareCursor
    | CursorStatement
    | FetchCursor
    | SecurityStatement
)
"""A statement of a batch."""


def declarations(statements: tuple[Statement, ...] | list[Statement]) -> list[Declare]:
    """The DECLARE statements among ``statements`` and the blocks they hold, in order (a
    variable is declared for the whole batch from where its DECLARE is written)."""
    found: list[Declare] = []
    for statement in statements:
        if isinstance(statement, Declare):
            found.append(statement)
        elif isinstance(statement, Block):
            found.extend(declarations(statement.body))
        elif isinstance(statement, TryCatch):
            found.extend(declarations(statement.body))
            found.extend(declarations(statement.handler))
        elif isinstance(statement, If):
            found.extend(declarations([statement.then]))
            if statement.otherwise is not None:
                found.extend(declarations([statement.otherwise]))
        elif isinstance(statement, While):
            found.extend(declarations([statement.body]))
    return found
