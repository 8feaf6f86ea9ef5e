"""The commands that send and read messages: ``send`` (BEGIN DIALOG and SEND, or SEND on a
conversation), ``receive`` (RECEIVE, with END CONVERSATION) and ``peek``; messages printed as
a table or one JSON object each."""

from __future__ import annotations

import json
import uuid
from typing import Any

import click
from rich.table import Table

from ..command_options import url_option
from ..errors import BrokerError
from ..messages import Message
from .shared import InputFile, console, opened

__all__ = ["peek", "receive", "send"]


def _body_text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + body.hex()


def _message_dict(m: Message) -> dict[str, Any]:
    return {
        "queuing_order": m.queuing_order,
        "conversation_handle": str(m.conversation_handle),
        "conversation_group_id": str(m.conversation_group_id),
        "message_sequence_number": m.message_sequence_number,
        "message_type_name": m.message_type_name,
        "service_name": m.service_name,
        "service_contract_name": m.service_contract_name,
        "status": m.status,
        "priority": m.priority,
        "validation": m.validation,
        "message_body": _body_text(m.message_body),
        "message_enqueue_time": (
            None if m.message_enqueue_time is None else m.message_enqueue_time.isoformat()
        ),
    }


def _print_messages(messages: list[Message], as_json: bool) -> None:
    if as_json:
        for m in messages:
            click.echo(json.dumps(_message_dict(m)))
        return
    table = Table()
    for col in (
        "queuing_order",
        "conversation_handle",
        "seq",
        "message_type_name",
        "status",
        "priority",
        "message_body",
    ):
        table.add_column(col)
    for m in messages:
        table.add_row(
            str(m.queuing_order),
            str(m.conversation_handle),
            str(m.message_sequence_number),
            m.message_type_name,
            str(m.status),
            str(m.priority),
            _body_text(m.message_body)[:60],
        )
    console.print(table)


@click.command()
@url_option
@click.option("--from-service", help="FROM SERVICE of a new dialog.")
@click.option("--to-service", help="TO SERVICE of a new dialog.")
@click.option("--contract", default="DEFAULT", show_default=True)
@click.option(
    "--conversation", "conversation", help="Send on this existing conversation handle instead."
)
@click.option("--message-type", default="DEFAULT", show_default=True)
@click.option("--body", default="", help="Message body (UTF-8 text).")
@click.option("--body-file", type=InputFile(), help="Read the body from a file ('-' for stdin).")
@click.option("--end", "end", is_flag=True, help="END CONVERSATION after sending.")
def send(
    url: str,
    from_service: str | None,
    to_service: str | None,
    contract: str,
    conversation: str | None,
    message_type: str,
    body: str,
    body_file: Any,
    end: bool,
) -> None:
    """SEND one message, on a new dialog (--from-service/--to-service) or an existing one
    (--conversation). Prints the conversation handle."""
    if conversation is None and not (from_service and to_service):
        raise click.UsageError("give --conversation, or both --from-service and --to-service")
    if conversation is not None and (from_service or to_service):
        raise click.UsageError("--conversation cannot be combined with --from-service/--to-service")
    data = body_file.read() if body_file is not None else _body_bytes(body)
    with opened(url) as broker:
        try:
            with broker.transaction() as tx:
                if conversation is None:
                    assert from_service and to_service
                    handle = tx.begin_dialog(from_service, to_service, contract=contract)
                else:
                    handle = (
                        uuid.UUID(conversation)
                        if _is_uuid(conversation)
                        else _bad_handle(conversation)
                    )
                tx.send(handle, message_type, data)
                if end:
                    tx.end_conversation(handle)
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
    click.echo(str(handle))


def _body_bytes(body: str) -> bytes:
    """``--body`` as UTF-8; an argument that is not valid UTF-8 (Python hands its bytes over as
    lone surrogates) is a usage error, not a traceback."""
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise click.BadParameter(
            f"the body is not valid UTF-8 text (byte 0x{ord(body[exc.start]) & 0xFF:02X} at "
            f"position {exc.start}); give a binary body with --body-file",
            param_hint="--body",
        ) from None


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _bad_handle(text: str) -> uuid.UUID:
    raise click.BadParameter(
        f"{text!r} is not a conversation handle (a UUID)", param_hint="--conversation"
    )


@click.command()
@click.argument("queue")
@url_option
@click.option("--top", type=click.IntRange(min=0), help="RECEIVE TOP (n).")
@click.option(
    "--timeout",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds to wait; -1 waits forever.",
)
@click.option("--end", "end", is_flag=True, help="END CONVERSATION on every conversation received.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
def receive(
    queue: str, url: str, top: int | None, timeout: float, end: bool, as_json: bool
) -> None:
    """RECEIVE from QUEUE (one conversation group) and commit."""
    with opened(url) as broker:
        try:
            with broker.transaction() as tx:
                messages = tx.receive(queue, top=top, timeout=None if timeout == -1 else timeout)
                if end:
                    for handle in dict.fromkeys(m.conversation_handle for m in messages):
                        tx.end_conversation(handle)
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
    _print_messages(messages, as_json)


@click.command()
@click.argument("queue")
@url_option
@click.option("--top", type=click.IntRange(min=0), help="At most this many rows.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
def peek(queue: str, url: str, top: int | None, as_json: bool) -> None:
    """Show QUEUE's messages without receiving them (SELECT * FROM queue)."""
    with opened(url) as broker:
        try:
            messages = broker.peek(queue, top=top)
        except BrokerError as exc:
            raise click.ClickException(str(exc)) from exc
    _print_messages(messages, as_json)
