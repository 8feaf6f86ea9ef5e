"""The demo's closing report: the per-carrier table, the receive order by priority level, the
broker's (and the transport's) figures, and the verdict."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["print_report"]


def print_report(
    console: Console,
    *,
    carrier_rows: list[Any],
    order_rows: list[tuple[int, str, int, int, float, float]],
    figures: list[tuple[str, str]],
    problems: list[str],
    flights: int,
    output: str,
) -> None:
    """Print the report's tables and its verdict on ``console``.

    Args:
        carrier_rows: Spark rows of the per-carrier figures (from the messages).
        order_rows: per level (level, contract, flights, expected, mean position, share in
            the first quarter), as :func:`.flights.receive_order` gives them.
        figures: (figure, value) rows of the broker table, values already formatted.
        problems: the counts that did not match (empty when all did).
        flights: how many flights the run took.
        output: the folder holding the results.
    """
    table = Table(title="Per carrier (from the messages, checked against the raw flights)")
    for col in (
        "carrier",
        "flights",
        "cancelled",
        "arrived",
        "arrival missing",
        "on time",
        "on-time %",
    ):
        table.add_column(col, justify="right")
    for r in carrier_rows:
        judged = r["arrived"] or 0
        table.add_row(
            r["carrier"],
            f"{r['flights']:,}",
            f"{r['cancelled']:,}",
            f"{r['arrived']:,}",
            f"{r['arrival_missing']:,}",
            f"{r['on_time']:,}",
            f"{100 * r['on_time'] / judged:.1f}" if judged else "-",
        )
    console.print(table)
    order = Table(
        title="Receive order by priority level (carrier queues; 0 % = first received in its month)"
    )
    for col in ("level", "contract", "flights", "expected", "mean position", "in first quarter"):
        order.add_column(col, justify="right")
    for level, contract, n, expected, mean_pos, first_q in order_rows:
        order.add_row(
            str(level), contract, f"{n:,}", f"{expected:,}", f"{mean_pos:.0%}", f"{first_q:.0%}"
        )
    console.print(order)
    broker_table = Table(title="Broker")
    broker_table.add_column("figure")
    broker_table.add_column("value", justify="right")
    for name, value in figures:
        broker_table.add_row(name, value)
    console.print(broker_table)
    if problems:
        for p in problems:
            console.print(f"[red]MISMATCH[/red] {p}")
    else:
        console.print(
            f"[green]every count matches[/green]: {flights:,} flights, nothing lost, nothing "
            f"duplicated; results in {output}"
        )
