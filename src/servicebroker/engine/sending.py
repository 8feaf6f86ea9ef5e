"""What a SEND sends, checked before any conversation is touched: the message type (known, not a
system type, DLG-2) and the body as bytes, valid for its type (DLG-3)."""

from __future__ import annotations

from typing import Any

from ..catalog import SYSTEM_MESSAGE_TYPES, CatalogSnapshot, MessageTypeDef
from ..errors import MessageValidationError
from ..messages import coerce_body, validate_body

__all__ = ["handle_names", "sendable"]


def handle_names(handles: list[Any]) -> str:
    """The conversation handles of a statement as an error message names them."""
    return ", ".join(str(h) for h in handles)


def sendable(
    catalog: CatalogSnapshot, message_type: str, body: bytes | str, handles: list[Any]
) -> tuple[MessageTypeDef, bytes]:
    """The message type and the body as bytes of a SEND on ``handles``, checked.

    Args:
        catalog: the transaction's catalog snapshot.
        message_type: the message type's name.
        body: bytes, or str (UTF-8 encoded).
        handles: the conversations the SEND names (only for the error messages).

    Raises:
        CatalogError: an unknown message type.
        MessageValidationError: a system message type (DLG-2), a body that is neither bytes
            nor str, or one its type's validation refuses (DLG-3); naming ``handles``.
    """
    mt = catalog.message_type(message_type)
    if mt.name in SYSTEM_MESSAGE_TYPES:
        raise MessageValidationError(
            f"SEND on {handle_names(handles)}: system message type {mt.name!r} cannot be sent"
        )
    data = body if type(body) is bytes else coerce_body(body, where=handle_names(handles))
    if mt.validation != "NONE":
        try:
            validate_body(mt.validation, data, message_type_name=mt.name, schema=mt.xml_collection)
        except MessageValidationError as exc:
            raise MessageValidationError(f"SEND on {handle_names(handles)}: {exc}") from None
    return mt, data
