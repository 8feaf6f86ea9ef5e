"""Storage contract checks of what dialogs with other broker instances keep (NET-2, SEC-2): an
endpoint's dialog security columns, and the closed conversations remembered so that late copies
stay duplicates."""

from __future__ import annotations

import uuid
from dataclasses import replace

from . import support as kit
from .support import StorageOpener

__all__ = ["check_closed_conversations", "check_endpoint_security_columns"]


def check_endpoint_security_columns(open_storage: StorageOpener) -> None:
    """insert_endpoint / get_far_endpoint / update_endpoints keep the dialog security columns
    (principal ids, session key identifiers and bytes, security timestamp, the ENCRYPTION
    flag, the far certificate) byte for byte."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = kit.new_queue(conn)
        row = replace(
            kit.endpoint(queue_id, is_initiator=True),
            far_broker_instance=str(uuid.uuid4()),
            encryption_requested=1,
        )
        row.endpoint_id = kit.committed(conn, lambda: conn.insert_endpoint(row))
        key_id = str(uuid.uuid4())
        row.principal_id, row.far_principal_id = 1, 7
        row.outbound_session_key_identifier = row.inbound_session_key_identifier = key_id
        row.security_timestamp = 1_700_000_123.5
        row.session_key = bytes(range(32))
        row.far_certificate = "ab" * 20
        kit.committed(conn, lambda: conn.update_endpoints([row]))
        got = conn.get_far_endpoint(row.conversation_id, True)
        kit.equal(got, row, "get_far_endpoint after update_endpoints of the security columns")
        assert got is not None
        kit.expect(type(got.session_key) is bytes, "session_key must read back as bytes")


def check_closed_conversations(open_storage: StorageOpener) -> None:
    """remember_closed_conversations / closed_conversation / was_closed /
    forget_closed_conversations: a side is remembered once (a second remember keeps the
    first), per side, with its dialog security columns byte for byte; forgotten once ``now``
    reaches its ``forget_after`` — unless it still has rows in the transmission queue (its END
    waits to be acknowledged); a rollback keeps nothing."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = kit.new_queue(conn)
        first = kit.endpoint(queue_id, is_initiator=False)
        first.session_key, first.outbound_session_key_identifier = bytes(range(32)), "k-1"
        first.principal_id, first.far_principal_id, first.far_certificate = 1, 6, "cd" * 20
        first.security_timestamp = 1_700_000_000.25
        second = kit.endpoint(queue_id, is_initiator=False)
        waiting = kit.endpoint(queue_id, is_initiator=True)
        kit.committed(
            conn,
            lambda: conn.remember_closed_conversations(
                [(first, 2_000.0), (first, 9_000.0), (second, 3_000.0), (waiting, 1_000.0)]
            ),
        )
        kit.expect(conn.was_closed(first.conversation_id, False), "was_closed of a side kept")
        kit.expect(not conn.was_closed(first.conversation_id, True), "the other side")
        got = conn.closed_conversation(first.conversation_id, False)
        kit.equal(
            None if got is None else (got.forget_after, got.session_key, got.session_key_identifier,
                                      got.principal_id, got.far_principal_id, got.far_certificate,
                                      got.security_timestamp),
            (2_000.0, bytes(range(32)), "k-1", 1, 6, "cd" * 20, 1_700_000_000.25),
            "closed_conversation: the first remember's columns",
        )  # fmt: skip
        second_row = conn.closed_conversation(second.conversation_id, False)
        kit.expect(second_row is not None and second_row.session_key is None, "a side not secured")
        conn.begin_write()
        conn.remember_closed_conversations([(replace(first, is_initiator=True), 5_000.0)])
        conn.rollback()
        kit.expect(not conn.was_closed(first.conversation_id, True), "a rollback keeps nothing")
        pending = kit.transmission(  # the initiator's END, for another instance
            waiting.conversation_id, 5, b"", sequence=2, to_broker_instance=str(uuid.uuid4())
        )
        kit.committed(conn, lambda: conn.insert_transmissions([pending]))
        kit.committed(conn, lambda: conn.forget_closed_conversations(2_500.0))
        kit.expect(not conn.was_closed(first.conversation_id, False), "forgotten when due")
        kit.expect(conn.was_closed(second.conversation_id, False), "kept before forget_after")
        kit.expect(
            conn.was_closed(waiting.conversation_id, True),
            "kept while its messages wait in the transmission queue",
        )
