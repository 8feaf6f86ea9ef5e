"""The instance's server configuration options (sp-configure-transact-sql.md,
reconfigure-transact-sql.md, sys-configurations-transact-sql.md): ``sp_configure`` shows and
sets them, ``RECONFIGURE [WITH OVERRIDE]`` installs what was set, ``sys.configurations`` lists
them. The values are recorded in master (:mod:`.security_records`, kind ``CONFIGURATION``);
none changes what the broker does — ``show advanced options`` decides, as in SQL Server,
whether the advanced options are listed and may be set (docs/tsql.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..broker import Broker
from ..errors import TSqlError
from . import security_records as records
from .queries import RowSource
from .sqlerrors import sql_message
from .types import BIT, INT, SqlType, Typed

__all__ = ["OPTIONS", "Option", "configurations", "reconfigure", "set_option", "values"]


@dataclass(frozen=True)
class Option:
    """A configuration option: its id, name, range, default, whether it is advanced and
    dynamic, and its description (sys.configurations' columns)."""

    configuration_id: int
    name: str
    minimum: int
    maximum: int
    default: int
    advanced: bool
    dynamic: bool
    description: str


_MAX = 2147483647

OPTIONS: tuple[Option, ...] = (
    Option(101, "recovery interval (min)", 0, 32767, 0, True, True, "Maximum recovery interval in minutes"),
    Option(103, "user connections", 0, 32767, 0, True, False, "Number of user connections allowed"),
    Option(115, "nested triggers", 0, 1, 1, False, True, "Allow triggers to be invoked within triggers"),
    Option(117, "remote access", 0, 1, 1, False, False, "Allow remote access"),
    Option(518, "show advanced options", 0, 1, 0, False, True, "show advanced options"),
    Option(1538, "cost threshold for parallelism", 0, 32767, 5, True, True, "cost threshold for parallelism"),
    Option(1539, "max degree of parallelism", 0, 32767, 0, True, True, "maximum degree of parallelism"),
    Option(1541, "remote query timeout (s)", 0, _MAX, 600, False, True, "remote query timeout"),
    Option(1543, "min server memory (MB)", 0, _MAX, 0, True, True, "Minimum size of server memory (MB)"),
    Option(1544, "max server memory (MB)", 128, _MAX, _MAX, True, True, "Maximum size of server memory (MB)"),
    Option(1562, "clr enabled", 0, 1, 0, False, True, "CLR user code execution enabled in the server"),
    Option(1568, "default trace enabled", 0, 1, 1, True, True, "Enable or disable the default trace"),
    Option(1569, "blocked process threshold (s)", 0, 86400, 0, True, True, "Blocked process reporting threshold"),
    Option(1576, "remote admin connections", 0, 1, 0, False, True, "Dedicated Admin Connections are allowed from remote clients"),
    Option(1579, "backup compression default", 0, 1, 0, False, True, "Enable compression of backups by default"),
    Option(1581, "optimize for ad hoc workloads", 0, 1, 0, True, True, "When this option is set, plan cache size is further reduced for single-use adhoc OLTP workload."),
    Option(1586, "external scripts enabled", 0, 1, 0, False, False, "Allows execution of external scripts"),
    Option(1587, "clr strict security", 0, 1, 1, True, True, "CLR strict security enabled in the server"),
    Option(16384, "Agent XPs", 0, 1, 0, True, True, "Enable or disable Agent XPs"),
    Option(16386, "Database Mail XPs", 0, 1, 0, True, True, "Enable or disable Database Mail XPs"),
    Option(16388, "Ole Automation Procedures", 0, 1, 0, True, True, "Enable or disable Ole Automation Procedures"),
    Option(16390, "xp_cmdshell", 0, 1, 0, True, True, "Enable or disable command shell"),
    Option(16391, "Ad Hoc Distributed Queries", 0, 1, 0, True, True, "Enable or disable Ad Hoc Distributed Queries"),
    Option(16393, "contained database authentication", 0, 1, 0, False, True, "Enables contained databases and contained authentication"),
)  # fmt: skip
"""The options this instance knows (a subset of SQL Server's: those scripts set)."""

_KIND = "CONFIGURATION"


def values(master: Broker) -> dict[str, tuple[int, int]]:
    """Each option's (config_value, run_value) as recorded in ``master`` (else its default)."""
    stored = records.records(master, _KIND)
    out = {}
    for option in OPTIONS:
        detail = stored.get(option.name)
        pair = json.loads(detail) if detail else [option.default, option.default]
        out[option.name] = (int(pair[0]), int(pair[1]))
    return out


def visible(master: Broker) -> list[Option]:
    """The options sp_configure shows and sets: the advanced ones only while ``show advanced
    options`` runs at 1."""
    advanced = values(master)["show advanced options"][1] == 1
    return [o for o in OPTIONS if advanced or not o.advanced]


def find(master: Broker, name: str, line: int) -> list[Option]:
    """The options ``name`` names: the one of that name, else every visible option whose name
    holds it (sp_configure takes any unique part of a name).

    Raises:
        TSqlError: Msg 15123, none.
    """
    shown = visible(master)
    exact = [o for o in shown if o.name.casefold() == name.strip().casefold()]
    found = exact or [o for o in shown if name.strip().casefold() in o.name.casefold()]
    if not found:
        raise TSqlError(15123, sql_message(15123, name), line=line)
    return found


def set_option(master: Broker, name: str, value: int, line: int) -> str:
    """sp_configure ``name``, ``value``: the config_value set (RECONFIGURE installs it); the
    message SQL Server prints.

    Raises:
        TSqlError: Msg 15123, an unknown, ambiguous or hidden advanced option; Msg 15129, a
            value out of the option's range.
    """
    found = find(master, name, line)
    if len(found) != 1:
        raise TSqlError(15123, sql_message(15123, name), line=line)
    option = found[0]
    if not option.minimum <= value <= option.maximum:
        raise TSqlError(15129, sql_message(15129, value, option.name), line=line)
    config, run = values(master)[option.name]
    records.put(master, _KIND, option.name, json.dumps([value, run]))
    return sql_message(15457, option.name, config, value)


def reconfigure(master: Broker) -> None:
    """RECONFIGURE: every option's run_value becomes its config_value."""
    for name, (config, run) in values(master).items():
        if config != run:
            records.put(master, _KIND, name, json.dumps([config, config]))


def configurations(master: Broker) -> RowSource:
    """``sys.configurations``: every option, advanced or not."""
    current = values(master)
    columns: tuple[tuple[str, SqlType], ...] = (
        ("configuration_id", INT),
        ("name", SqlType("NVARCHAR", 35)),
        ("value", INT),
        ("minimum", INT),
        ("maximum", INT),
        ("value_in_use", INT),
        ("description", SqlType("NVARCHAR", 255)),
        ("is_dynamic", BIT),
        ("is_advanced", BIT),
    )
    rows = []
    for o in OPTIONS:
        config, run = current[o.name]
        cells = (o.configuration_id, o.name, config, o.minimum, o.maximum, run, o.description,
                 int(o.dynamic), int(o.advanced))  # fmt: skip
        rows.append({c: Typed(v, t) for (c, t), v in zip(columns, cells, strict=True)})
    return RowSource(columns, rows)
