"""The system stored procedures scripts call, and RECONFIGURE: ``sp_configure``
(sp-configure-transact-sql.md, through :mod:`.configuration`), ``sp_addrolemember`` /
``sp_droprolemember`` / ``sp_addrole`` / ``sp_droprole`` (the roles of :mod:`.security`),
``sp_helptext`` (a procedure's text, sp-helptext-transact-sql.md). Any other system procedure
SQL Server has (``sp_…``, ``xp_…``) is refused by name (Msg 40000); a name SQL Server does not
have is Msg 2812, as there.

Also the hook the interpreter dispatches through: :data:`SYSTEM_STATEMENTS` (the security
statements and RECONFIGURE).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import TSqlError
from . import nodes as n
from .configuration import find, reconfigure, set_option, values, visible
from .evaluate import evaluate
from .results import ResultSet
from .scope import to_type
from .security import SECURITY_STATEMENTS, SecuritySession, add_member, drop_member
from .security_nodes import Reconfigure, Role
from .sqlerrors import sql_message
from .types import INT, NVARCHAR, SqlType, Typed
from .unsupported import not_supported

__all__ = ["SYSTEM_STATEMENTS", "run_system_procedure"]

_REFUSED_NAMES = """sp_addlogin sp_adduser sp_grantdbaccess sp_revokedbaccess sp_dropuser sp_droplogin
    sp_changedbowner sp_changeobjectowner sp_addsrvrolemember sp_dropsrvrolemember sp_helpuser
    sp_helprole sp_helprolemember sp_helprotect sp_helplogins sp_help sp_helpdb sp_helpfile
    sp_helpindex sp_helpconstraint sp_helpserver sp_who sp_who2 sp_lock sp_spaceused sp_depends
    sp_rename sp_columns sp_tables sp_stored_procedures sp_fkeys sp_pkeys sp_databases
    sp_dboption sp_addmessage sp_dropmessage sp_addextendedproperty sp_dropextendedproperty
    sp_updateextendedproperty sp_set_session_context sp_getapplock sp_releaseapplock
    sp_settriggerorder sp_procoption sp_recompile sp_refreshview sp_refreshsqlmodule
    sp_updatestats sp_xml_preparedocument sp_xml_removedocument sp_describe_first_result_set
    sp_msforeachtable sp_msforeachdb sp_send_dbmail sp_start_job sp_add_job sp_add_jobstep
    sp_add_jobschedule sp_add_jobserver sp_delete_job sp_update_job sp_oacreate sp_oamethod
    sp_oadestroy sp_oagetproperty sp_oasetproperty sp_trace_create sp_trace_setevent
    sp_trace_setstatus sp_addlinkedserver sp_addlinkedsrvlogin sp_dropserver sp_serveroption
    sp_attach_db sp_detach_db sp_resetstatus sp_readerrorlog sp_cycle_errorlog sp_password
    sp_defaultdb sp_changeuserslogin sp_addapprole sp_setapprole sp_unsetapprole sp_addumpdevice
    sp_addtype sp_droptype sp_bindrule sp_bindefault sp_unbindrule sp_unbindefault
    sp_control_dbmasterkey_password sp_add_trusted_assembly sp_flush_log sp_sequence_get_range
    sp_executesql_cursor sp_cursoropen sp_prepare sp_execute sp_unprepare sp_prepexec
    xp_cmdshell xp_logevent xp_msver xp_fixeddrives xp_regread xp_regwrite xp_instance_regread
    xp_sprintf xp_sscanf xp_loginconfig xp_logininfo xp_dirtree xp_fileexist xp_readerrorlog
    xp_sqlmaint"""
REFUSED = frozenset(_REFUSED_NAMES.split())
"""System procedures SQL Server has that the interpreter does not run: refused by name."""


def _text_arguments(session: SecuritySession, s: n.Execute) -> list[str | None]:
    """The arguments as text (a bare name, as T-SQL passes one, is its own text)."""
    out: list[str | None] = []
    for argument in s.arguments:
        value = argument.value
        if value is None:
            out.append(None)
        elif isinstance(value, n.Column) and len(value.parts) == 1:
            out.append(value.parts[0])
        else:
            text = to_type(evaluate(value, session), SqlType("NVARCHAR"), session)
            out.append(None if text is None else str(text))
    return out


def _expects(name: str, parameter: str, line: int) -> TSqlError:
    return TSqlError(
        201,
        f"Procedure or function '{name}' expects parameter '{parameter}', which was not supplied.",
        line=line,
    )


def _sp_configure(session: SecuritySession, s: n.Execute, args: list[str | None]) -> int:
    master = session.instance.database("master")
    name = args[0] if args else None
    value = args[1] if len(args) > 1 else None
    if name is not None and value is not None:
        try:
            number = int(value)
        except ValueError:
            raise TSqlError(
                8114, "Error converting data type varchar to int.", line=s.line
            ) from None
        session.emit(set_option(master, name, number, s.line))
        return 0
    shown = find(master, name, s.line) if name is not None else visible(master)
    current = values(master)
    columns = [
        ("name", SqlType("NVARCHAR", 35)),
        ("minimum", INT),
        ("maximum", INT),
        ("config_value", INT),
        ("run_value", INT),
    ]
    rows = [
        [
            Typed(o.name, columns[0][1]),
            Typed(o.minimum, INT),
            Typed(o.maximum, INT),
            Typed(current[o.name][0], INT),
            Typed(current[o.name][1], INT),
        ]
        for o in sorted(shown, key=lambda o: o.name.casefold())
    ]
    session.emit(ResultSet(columns, rows))
    return 0


def _sp_helptext(session: SecuritySession, s: n.Execute, args: list[str | None]) -> int:
    if not args or args[0] is None:
        raise _expects("sp_helptext", "@objname", s.line)
    name = args[0]
    procedure = session.instance.procedures(session.database).get(name, session.open_transaction())
    if procedure is None:
        if session.object_id(name) is not None:  # a queue: no text
            raise TSqlError(15197, sql_message(15197, name), line=s.line)
        raise TSqlError(15009, sql_message(15009, name, session.database), line=s.line)
    lines = procedure.source.splitlines(keepends=True) or [""]
    column = [("Text", SqlType("NVARCHAR", 255))]
    session.emit(ResultSet(column, [[Typed(line, NVARCHAR)] for line in lines]))
    return 0


def _roles(session: SecuritySession, s: n.Execute, args: list[str | None], name: str) -> int:
    needed = ("@rolename", "@membername") if "member" in name else ("@rolename",)
    if len(args) < len(needed) or any(a is None for a in args[: len(needed)]):
        raise _expects(name, needed[min(len(args), len(needed) - 1)], s.line)
    role = str(args[0])
    if name == "sp_addrolemember":
        add_member(session, role, str(args[1]), s.line)
    elif name == "sp_droprolemember":
        drop_member(session, role, str(args[1]), s.line)
    else:
        action = "CREATE" if name == "sp_addrole" else "DROP"
        owner = args[1] if action == "CREATE" and len(args) > 1 else None
        SECURITY_STATEMENTS[Role](session, Role(s.line, action, role, owner))
    return 0


_RUN: dict[str, Callable[[SecuritySession, n.Execute, list[str | None]], int]] = {
    "sp_configure": _sp_configure,
    "sp_helptext": _sp_helptext,
    "sp_addrolemember": lambda se, s, a: _roles(se, s, a, "sp_addrolemember"),
    "sp_droprolemember": lambda se, s, a: _roles(se, s, a, "sp_droprolemember"),
    "sp_addrole": lambda se, s, a: _roles(se, s, a, "sp_addrole"),
    "sp_droprole": lambda se, s, a: _roles(se, s, a, "sp_droprole"),
}


def run_system_procedure(session: SecuritySession, s: n.Execute) -> int | None:
    """EXEC of a system procedure: its return code, or None when ``s`` names none (the
    caller looks for the database's own procedure).

    Raises:
        TSqlError: the procedure's errors (Msg 15123, 15129, 15009, 15151, …); Msg 40000, a
            system procedure the interpreter does not run.
    """
    name = s.procedure.split(".")[-1].casefold()
    run = _RUN.get(name)
    if run is not None:
        return run(session, s, _text_arguments(session, s))
    if name in REFUSED:
        raise not_supported(f"the system procedure {name}", s.line)
    return None


def _reconfigure(session: SecuritySession, s: Reconfigure) -> None:
    reconfigure(session.instance.database("master"))


SYSTEM_STATEMENTS: dict[type[Any], Callable[[Any, Any], None]] = {
    **SECURITY_STATEMENTS,
    Reconfigure: _reconfigure,
}
"""The runner of each security statement's and RECONFIGURE's node type."""
