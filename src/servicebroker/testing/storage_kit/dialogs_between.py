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
    """remember_closed_conversations / was_closed / forget_closed_conversations: a side is
    remembered once (a second remember keeps it), per side, and forgotten once ``now`` reaches
    its ``forget_after``; a rollback keeps nothing."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        first, second = kit.new_id(), kit.new_id()
        kit.committed(
            conn,
            lambda: conn.remember_closed_conversations(
                [(first, False, 2_000.0), (first, False, 9_000.0), (second, False, 3_000.0)]
            ),
        )
        kit.expect(conn.was_closed(first, False), "was_closed of a side remembered")
        kit.expect(not conn.was_closed(first, True), "was_closed of the other side")
        conn.begin_write()
        conn.remember_closed_conversations([(first, True, 5_000.0)])
        conn.rollback()
        kit.expect(not conn.was_closed(first, True), "a rolled-back remember keeps nothing")
        kit.committed(conn, lambda: conn.forget_closed_conversations(2_500.0))
        kit.expect(not conn.was_closed(first, False), "forgotten at its forget_after")
        kit.expect(conn.was_closed(second, False), "kept before its forget_after")
