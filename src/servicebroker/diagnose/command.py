"""The ``servicebroker diagnose`` command: ssbdiagnose's CONFIGURATION and RUNTIME reports
(docs/tools/ssbdiagnose/ssbdiagnose-utility-service-broker.md), in ssbdiagnose's words::

    servicebroker diagnose [--url URL] [--json] CONFIGURATION [FROM SERVICE s] [TO SERVICE t[, id]]
        [ON CONTRACT c] [ENCRYPTION {ON | OFF | ANONYMOUS}]
    servicebroker diagnose [--url URL] [--json] RUNTIME

The words are case-insensitive; at least one of FROM SERVICE and TO SERVICE; ON CONTRACT
defaults to ``DEFAULT`` and ENCRYPTION to ON, as in ssbdiagnose. Exit status: 0 when nothing but
infos was found, 1 when an error or a warning was, 2 for a usage error (click's, naming what was
expected, or a database that cannot be read). Registered on the ``servicebroker`` group by :mod:`servicebroker.cli`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from ..broker import Broker
from ..catalog.routing import normalize_broker_instance
from ..command_options import existing_database, url_option
from ..errors import BrokerError
from .configuration import ENCRYPTIONS, check_configuration
from .findings import CODES, SEVERITIES, Finding, has_problems, sort_findings
from .runtime import WAITING_AFTER, check_runtime

__all__ = ["DiagnoseFailed", "Report", "diagnose", "parse_report"]

Report = tuple[str, dict[str, str]]
"""A parsed report: ``("RUNTIME", {})`` or ``("CONFIGURATION", {"from_service": …,
"to_service": …, "broker_instance": …, "contract": …, "encryption": …})`` (the services and the
broker instance only when given)."""

USAGE = (
    "CONFIGURATION [FROM SERVICE name] [TO SERVICE name[, broker_id]] [ON CONTRACT name] "
    "[ENCRYPTION {ON | OFF | ANONYMOUS}]  or  RUNTIME"
)


def _take(words: list[str], i: int, keyword: str, what: str) -> tuple[str, int]:
    """The name after ``keyword`` at ``words[i]`` (``i`` the index after the keyword)."""
    if i >= len(words):
        raise click.UsageError(f"expected {what} after {keyword}")
    return words[i], i + 1


def _broker_id(items: list[str], i: int, found: dict[str, str]) -> int:
    """TO SERVICE ``name[, broker_id]``: the optional broker instance after a comma (``t,
    GUID``, ``t,GUID``, ``t , GUID``); ``i`` is the index after the name's word. Returns the
    index after what was taken."""
    name = found["to_service"]
    rest: str | None = None
    if "," in name:
        name, _, rest = name.rpartition(",")
    elif i < len(items) and items[i].startswith(","):
        rest, i = items[i][1:], i + 1
    if rest is None:
        return i
    if not rest.strip():
        rest, i = _take(items, i, "TO SERVICE name,", "a broker_id (a service_broker_guid)")
    try:
        found["broker_instance"] = normalize_broker_instance(rest.strip())
    except BrokerError:
        raise click.UsageError(f"expected a broker_id (a GUID) after TO SERVICE {name},") from None
    found["to_service"] = name.strip()
    return i


def parse_report(words: Sequence[str]) -> Report:
    """Parse the report's words (ssbdiagnose's grammar, keywords in any case).

    Args:
        words: the command line's words after the options, e.g. ``["CONFIGURATION", "FROM",
            "SERVICE", "//a", "TO", "SERVICE", "//b", "ON", "CONTRACT", "C"]``.

    Returns:
        The :data:`Report`.

    Raises:
        click.UsageError: anything else, naming what was expected (exit status 2).
    """
    items = list(words)
    if not items:
        raise click.UsageError(f"expected a report: {USAGE}")
    head = items[0].upper()
    if head == "RUNTIME":
        if len(items) > 1:
            raise click.UsageError(f"RUNTIME takes no more words, got {' '.join(items[1:])!r}")
        return ("RUNTIME", {})
    if head != "CONFIGURATION":
        raise click.UsageError(f"expected CONFIGURATION or RUNTIME, got {items[0]!r}")
    found: dict[str, str] = {}
    i = 1
    while i < len(items):
        word = items[i].upper()
        nxt = items[i + 1].upper() if i + 1 < len(items) else ""
        if word in ("FROM", "TO") and nxt == "SERVICE":
            key = "from_service" if word == "FROM" else "to_service"
            if key in found:
                raise click.UsageError(f"{word} SERVICE given twice")
            found[key], i = _take(items, i + 2, f"{word} SERVICE", "a service name")
            if word == "TO":
                i = _broker_id(items, i, found)
        elif word == "ON" and nxt == "CONTRACT":
            if "contract" in found:
                raise click.UsageError("ON CONTRACT given twice")
            found["contract"], i = _take(items, i + 2, "ON CONTRACT", "a contract name")
        elif word == "ENCRYPTION":
            level, i = _take(items, i + 1, "ENCRYPTION", "ON, OFF or ANONYMOUS")
            if level.upper() not in ENCRYPTIONS:
                raise click.UsageError(
                    f"expected ON, OFF or ANONYMOUS after ENCRYPTION, got {level!r}"
                )
            found["encryption"] = level.upper()
        else:
            raise click.UsageError(
                f"expected FROM SERVICE, TO SERVICE, ON CONTRACT or ENCRYPTION, got {items[i]!r} "
                f"(usage: {USAGE})"
            )
    if "from_service" not in found and "to_service" not in found:
        raise click.UsageError("CONFIGURATION needs FROM SERVICE name, TO SERVICE name or both")
    found.setdefault("contract", "DEFAULT")
    found.setdefault("encryption", "ON")
    return ("CONFIGURATION", found)


class DiagnoseFailed(click.ClickException):
    """The database could not be opened or read: no report (exit status 2, like a usage error:
    1 always means problems were found)."""

    exit_code = 2


def _text(findings: list[Finding], severities: Sequence[str]) -> str:
    """Each finding as severity and code, message, fix; then the count of each of
    ``severities`` (those reported)."""
    lines = []
    for f in findings:
        lines.append(f"{f.severity.upper():<8}{f.code}")
        lines.append(f"  {f.message}")
        lines.append(f"  fix: {f.fix}")
    counts = {s: sum(f.severity == s for f in findings) for s in severities}
    summary = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items())
    lines.append(f"{summary}." if findings else "No problems found.")
    return "\n".join(lines)


@click.command()
@url_option
@click.option("--json", "as_json", is_flag=True, help="Print the findings as a JSON list.")
@click.option(
    "--level",
    type=click.Choice(SEVERITIES, case_sensitive=False),
    default="warning",
    show_default=True,
    help="Report findings of this severity and worse (ssbdiagnose's -LEVEL; info adds what "
    "applies, for the record).",
)
@click.option(
    "--ignore",
    "ignored",
    multiple=True,
    metavar="CODE",
    help="Leave out findings with this code (ssbdiagnose's -IGNORE); repeatable.",
)
@click.option(
    "--principal",
    default=None,
    help="CONFIGURATION: the user who begins the dialog (default dbo).",
)
@click.option(
    "--waiting-after",
    type=click.FloatRange(min=0),
    default=WAITING_AFTER,
    show_default=True,
    help="RUNTIME: seconds before a message on its way to another broker is reported.",
)
@click.argument("report", nargs=-1, required=True, metavar="CONFIGURATION … | RUNTIME")
def diagnose(
    url: str,
    as_json: bool,
    level: str,
    ignored: tuple[str, ...],
    principal: str | None,
    waiting_after: float,
    report: tuple[str, ...],
) -> None:
    """Report what stops dialogs, as ssbdiagnose does.

    CONFIGURATION [FROM SERVICE s] [TO SERVICE t] [ON CONTRACT c] [ENCRYPTION ON|OFF|ANONYMOUS]
    checks everything a dialog between the services needs; RUNTIME reports the problems of the
    running broker (stuck messages, disabled queues, endpoints in ERROR, …). Every finding has a
    stable code (docs/diagnose.md). Exit status 0: no errors or warnings; 1: some; 2: usage.
    """
    kind, args = parse_report(report)
    unknown = sorted(set(ignored) - set(CODES))
    if unknown:
        raise click.BadParameter(f"unknown code(s) {', '.join(unknown)}", param_hint="'--ignore'")
    existing_database(url, "diagnose")
    try:
        with Broker.open(url) as broker:
            if kind == "RUNTIME":
                found = check_runtime(broker, waiting_after=waiting_after)
            else:
                found = check_configuration(
                    broker,
                    args.get("from_service"),
                    args.get("to_service"),
                    args["contract"],
                    encryption=args["encryption"],
                    principal=principal,
                    broker_instance=args.get("broker_instance"),
                )
    except BrokerError as exc:
        raise DiagnoseFailed(str(exc)) from exc
    worst = SEVERITIES.index(level.lower())
    shown = sort_findings(
        f for f in found if SEVERITIES.index(f.severity) <= worst and f.code not in ignored
    )
    if as_json:
        click.echo(json.dumps([f.to_dict() for f in shown], indent=2))
    else:
        click.echo(_text(shown, SEVERITIES[: worst + 1]))
    raise SystemExit(1 if has_problems(shown) else 0)
