"""What the command line's commands share: the console they print to, the broker they open
for one command, and the input-file parameter type."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console

from ..broker import Broker
from ..errors import BrokerError

__all__ = ["InputFile", "console", "opened", "printable"]

console = Console()


class InputFile(click.File):
    """click's ``File("rb")`` that also turns a path the OS cannot take (a NUL in it) into a
    usage error naming the parameter, as click does for a missing file."""

    def __init__(self) -> None:
        super().__init__("rb")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except ValueError as exc:  # "embedded null byte"
            self.fail(f"{value!r}: {exc}", param, ctx)


@contextmanager
def opened(url: str) -> Iterator[Broker]:
    """Open the broker, turning every BrokerError into a clean CLI error."""
    try:
        with Broker.open(url) as broker:
            yield broker
    except BrokerError as exc:
        raise click.ClickException(str(exc)) from exc


def printable(text: str) -> str:
    """``text`` with what UTF-8 cannot print (the lone surrogates that stand for a file name's
    undecodable bytes) written as backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
