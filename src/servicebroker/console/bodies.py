"""How the console shows a message body: the message type's validation (DLG-3) decides — a JSON
body (validation J, or any body that parses as JSON) pretty-printed, a WELL_FORMED_XML body (X)
indented, a body that is not UTF-8 as hex, anything else as its text."""

from __future__ import annotations

import json
import xml.dom.minidom
from dataclasses import dataclass

__all__ = ["BodyPreview", "preview"]

MAX_PREVIEW_BYTES = 4096
"""Bytes of a body a preview shows (the rest is cut, and the preview says so)."""


@dataclass(frozen=True)
class BodyPreview:
    """A body as the console shows it: ``kind`` "json", "xml", "hex", "text" or "empty";
    ``text`` what to show (pretty-printed JSON, indented XML, hex bytes by 16 a line, or the
    text); ``size`` the body's length in bytes; ``truncated`` True when only a part is shown
    (the first :data:`MAX_PREVIEW_BYTES` bytes or characters; twice as many for the
    indented JSON and XML)."""

    kind: str
    text: str
    size: int
    truncated: bool


def _hex(data: bytes) -> str:
    rows = (data[i : i + 16] for i in range(0, len(data), 16))
    return "\n".join(f"{i * 16:08x}  {row.hex(' ')}" for i, row in enumerate(rows))


def _pretty_xml(text: str) -> str | None:
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        return None  # entities could expand without bound (any sender writes bodies): as text
    try:
        pretty = xml.dom.minidom.parseString(text).toprettyxml(indent="  ")
    except Exception:  # expat errors: not well formed (a NONE body need not be)
        return None
    lines = [line for line in pretty.splitlines() if line.strip()]
    if lines and lines[0].startswith("<?xml") and not text.lstrip().startswith("<?xml"):
        lines = lines[1:]  # minidom adds a declaration the body did not have
    return "\n".join(lines)


def preview(body: bytes, validation: str) -> BodyPreview:
    """The preview of ``body`` (bytes) of a message type with ``validation`` (the one-letter
    code a queue row shows: E, N, X or J; unknown codes are treated as N).

    A JSON body that parses is pretty-printed (2 spaces, keys in their order); a
    WELL_FORMED_XML body is indented (a NONE body that is well-formed XML too); a body that is
    not UTF-8 is shown as hex; else as text. Never raises."""
    size = len(body)
    truncated = size > MAX_PREVIEW_BYTES
    if not body:
        return BodyPreview("empty", "", 0, False)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return BodyPreview("hex", _hex(body[:MAX_PREVIEW_BYTES]), size, truncated)
    stripped = text.lstrip()
    if validation == "J" or stripped[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            shown = json.dumps(value, indent=2, ensure_ascii=False)
            cut = truncated or len(shown) > MAX_PREVIEW_BYTES * 2
            return BodyPreview("json", shown[: MAX_PREVIEW_BYTES * 2], size, cut)
    if validation == "X" or stripped.startswith("<"):
        pretty = _pretty_xml(text) if size <= 1_000_000 else None
        if pretty is not None:
            cut = truncated or len(pretty) > MAX_PREVIEW_BYTES * 2
            return BodyPreview("xml", pretty[: MAX_PREVIEW_BYTES * 2], size, cut)
    return BodyPreview("text", text[:MAX_PREVIEW_BYTES], size, len(text) > MAX_PREVIEW_BYTES)
