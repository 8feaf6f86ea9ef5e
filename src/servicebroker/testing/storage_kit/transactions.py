"""Contract checks of what write transactions do: the transmission queue, the catalog and its
version, the poison counter, rollback, what reads see, the application's SQL, a connection's
life."""

from __future__ import annotations

import uuid
from dataclasses import replace

from ...errors import StorageError
from ...storage.queries import portable_sql
from ...storage.rows import (
    ContractRow,
    MessageTypeRow,
    QueueRow,
    ServiceRow,
    TransmissionListRow,
    TransmissionRow,
    TransportMark,
    TransportRow,
)
from . import support as kit
from .support import NOW, ContractViolation, StorageOpener

__all__ = [
    "check_application_sql",
    "check_catalog_conflict",
    "check_catalog_rows_and_version",
    "check_connection_lifecycle",
    "check_poison_counter",
    "check_reads_see_committed_rows",
    "check_rollback_discards_writes",
    "check_transmission_queue",
]


def check_transmission_queue(open_storage: StorageOpener) -> None:
    """insert_transmissions, transmission_pending (each level's oldest ``limit``, levels 10 down
    to 1), TransmissionRow fields, transmission_exists / _count / _waiting,
    set_transmission_status, list_transmission (priority, then id), delete_transmission and
    delete_transmission_of_endpoint; the transport's rows: transmission_remote (per level,
    after an id, large bodies left out), transmission_remote_body, transmission_remote_ids, transmission_remote_mark,
    transmission_exists_of, delete_transmission_messages, set_transmission_message_statuses."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        kit.expect(
            not conn.transmission_exists(), "run on a fresh database: transmission rows exist"
        )
        first, second, third = kit.new_id(), kit.new_id(), kit.new_id()

        rows = [
            kit.transmission(first, 5, b"a"),
            kit.transmission(first, 5, b"b"),
            kit.transmission(second, 9, b"c"),
            kit.transmission(third, 1, b"d"),
        ]
        kit.committed(conn, lambda: conn.insert_transmissions(rows))
        pending = conn.transmission_pending(10)
        kit.typed(pending, TransmissionRow, "transmission_pending")
        kit.equal(
            [r.message_body for r in pending], [b"c", b"a", b"b", b"d"], "transmission_pending"
        )
        kit.equal(
            [r.message_body for r in conn.transmission_pending(1)],
            [b"c", b"a", b"d"],
            "transmission_pending(1): each level's oldest",
        )
        ids = {r.message_body: r.transmission_id for r in pending}
        kit.expect(ids[b"a"] < ids[b"b"] < ids[b"c"] < ids[b"d"], f"ids in insert order: {ids}")
        kit.equal(
            pending[1],
            TransmissionRow(ids[b"a"], *rows[0]),
            "TransmissionRow fields as inserted",
        )
        kit.equal(conn.transmission_exists(), True, "transmission_exists")
        kit.equal(conn.transmission_count(), 4, "transmission_count")
        kit.equal(conn.transmission_waiting(first, True), True, "transmission_waiting")
        kit.equal(conn.transmission_waiting(first, False), False, "transmission_waiting other side")
        kit.committed(conn, lambda: conn.set_transmission_status(ids[b"a"], "queue disabled"))
        listed = conn.list_transmission()
        kit.typed(listed, TransmissionListRow, "list_transmission")
        kit.equal(
            [(r.message_body, r.transmission_status) for r in listed],
            [(b"c", ""), (b"a", "queue disabled"), (b"b", ""), (b"d", "")],
            "list_transmission (priority descending, then id) and set_transmission_status",
        )
        kit.committed(conn, lambda: conn.delete_transmission(ids[b"c"]))
        kit.committed(conn, lambda: conn.delete_transmission_of_endpoint(first, True))
        kit.equal([r.message_body for r in conn.transmission_pending(10)], [b"d"], "deletes")
        kit.committed(conn, lambda: conn.delete_transmission(ids[b"d"]))
        kit.equal(conn.transmission_exists(), False, "transmission_exists when empty")
        kit.equal(conn.transmission_count(), 0, "transmission_count when empty")

        # the transport's rows (NET-3, NET-7): apart from the local ones, by message
        far = "6f9619ff-8b86-d011-b42d-00c04fc964ff"
        remote = [
            kit.transmission(first, 5, b"r0", sequence=0, to_broker_instance=far),
            kit.transmission(first, 5, b"r1", sequence=1, to_broker_instance=far),
        ]
        local = kit.transmission(second, 5, b"l")
        kit.committed(conn, lambda: conn.insert_transmissions([*remote, local]))
        kit.equal(conn.transmission_exists_of(remote=True), True, "transmission_exists_of remote")
        remote_rows = conn.transmission_remote(10, inline_bytes=2)
        kit.typed(remote_rows, TransportRow, "transmission_remote")
        kit.equal(
            [(r.message_body, r.message_size, r.to_broker_instance) for r in remote_rows],
            [(b"r0", 2, far), (b"r1", 2, far)],
            "transmission_remote: each level's oldest, the transport's rows only",
        )
        r0, r1 = (r.transmission_id for r in remote_rows)
        kit.equal(
            [r.message_body for r in conn.transmission_remote(10, inline_bytes=1, after=r0)],
            [None],
            "transmission_remote(after=id): the rows above it; a body over inline_bytes left out",
        )
        kit.equal(conn.transmission_remote_body(r1), b"r1", "transmission_remote_body")
        kit.equal(conn.transmission_remote_ids(r0, r1), {r0, r1}, "transmission_remote_ids")
        kit.equal(conn.transmission_remote_ids(r1 + 1, r1 + 9), set(), "transmission_remote_ids")
        kit.equal(conn.transmission_remote_body(-1), None, "transmission_remote_body of no row")
        kit.equal(
            conn.transmission_remote_mark(r0), TransportMark(r1, 1), "transmission_remote_mark"
        )
        kit.equal(
            [r.message_body for r in conn.transmission_pending(10)], [b"l"], "local rows only"
        )
        kit.committed(
            conn, lambda: conn.set_transmission_message_statuses([((first, True, 1), "refused")])
        )
        kit.committed(
            conn, lambda: conn.delete_transmission_messages([(first, True, 0), (second, True, 0)])
        )
        kit.equal(
            [
                (r.message_body, r.transmission_status, r.to_broker_instance)
                for r in conn.list_transmission()
            ],
            [(b"r1", "refused", far), (b"l", "", None)],
            "delete_transmission_messages / set_transmission_message_statuses (remote rows only)",
        )
        kit.committed(conn, lambda: conn.delete_transmission_of_endpoint(first, True))
        kit.committed(conn, lambda: conn.delete_transmission_of_endpoint(second, True))
        kit.equal(conn.transmission_exists_of(remote=False), False, "transmission_exists_of")


# -- catalog -----------------------------------------------------------------------------------
def check_catalog_rows_and_version(open_storage: StorageOpener) -> None:
    """catalog_write (ids of inserts), bump_catalog_version (+1, seen by another storage),
    load_catalog (named rows, the built-in rows, the HONOR_BROKER_PRIORITY setting, the
    service_broker_guid) and
    catalog_count (endpoints using a service; queue and transmission rows carrying a message
    type), catalog_version_later (read with the next statement, or alone)."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        other = bench.connect(bench.storage())
        before = conn.catalog_version()
        tag = uuid.uuid4().hex[:12]

        def create() -> dict[str, int]:
            ids = {
                "type": conn.catalog_write("insert_message_type", (f"T{tag}", "NONE")),
                "contract": conn.catalog_write("insert_contract", (f"C{tag}",)),
                "queue": conn.catalog_write(
                    "insert_queue", (f"Q{tag}", 1, 1, 0, 1, "proc", 3, NOW)
                ),
            }
            usage = conn.catalog_write(
                "insert_contract_usage", (ids["contract"], ids["type"], "ANY")
            )
            kit.equal(usage, 0, "catalog_write of a statement that is not an insert of an id")
            ids["service"] = conn.catalog_write("insert_service", (f"S{tag}", ids["queue"]))
            conn.catalog_write("insert_service_contract", (ids["service"], ids["contract"]))
            conn.catalog_write("put_setting", ("honor_broker_priority", "1"))
            conn.bump_catalog_version()
            return ids

        ids = kit.committed(conn, create)
        for kind, value in ids.items():
            kit.expect(isinstance(value, int) and value > 0, f"catalog_write id of the {kind}")
        kit.equal(other.catalog_version(), before + 1, "catalog_version after bump (elsewhere)")
        later = other.catalog_version_later()
        kit.equal(other.get_endpoint(kit.new_id()), None, "a statement after catalog_version_later")
        kit.equal(later(), before + 1, "catalog_version_later, read with that statement")
        kit.equal(other.catalog_version_later()(), before + 1, "catalog_version_later alone")
        rows = other.load_catalog()
        kit.equal(rows.version, before + 1, "load_catalog version")
        kit.equal(rows.honor_broker_priority, True, "load_catalog honor_broker_priority")
        kit.equal(len(str(uuid.UUID(rows.service_broker_guid))), 36, "load_catalog guid")
        kit.typed(rows.message_types, MessageTypeRow, "load_catalog message_types")
        kit.typed(rows.contracts, ContractRow, "load_catalog contracts")
        kit.typed(rows.queues, QueueRow, "load_catalog queues")
        kit.typed(rows.services, ServiceRow, "load_catalog services")
        kit.catalog_has(rows, "the built-in", message_types="DEFAULT", contracts="DEFAULT")
        kit.catalog_has(rows, "the built-in", queues="sys_event_notifications")
        kit.catalog_has(rows, "the new", message_types=f"T{tag}", contracts=f"C{tag}")
        kit.catalog_has(rows, "the new", queues=f"Q{tag}", services=f"S{tag}")
        queue = next(q for q in rows.queues if q.queue_id == ids["queue"])
        kit.equal(
            queue,
            QueueRow(ids["queue"], f"Q{tag}", 1, 1, 0, 1, "proc", 3, NOW),
            "QueueRow fields as written",
        )
        kit.expect(
            (ids["contract"], ids["type"], "ANY") in rows.contract_usages,
            "load_catalog contract_usages",
        )
        kit.expect(
            (ids["service"], ids["contract"]) in rows.service_contracts,
            "load_catalog service_contracts",
        )
        for name, key in (
            ("endpoints_using_service", "service"),
            ("messages_using_message_type", "type"),
        ):
            kit.equal(conn.catalog_count(name, (ids[key],)), 0, name)
        endpoint = replace(kit.endpoint(ids["queue"]), service_id=ids["service"])
        kit.committed(conn, lambda: conn.insert_endpoint(endpoint))
        kit.equal(conn.catalog_count("endpoints_using_service", (ids["service"],)), 1, "a user")
        carried = kit.message(ids["queue"], kit.new_id(), kit.new_id())._replace(
            message_type_id=ids["type"]
        )
        held = kit.transmission(kit.new_id(), 5, b"", message_type_id=ids["type"])

        def carry() -> None:
            conn.insert_messages([carried])
            conn.insert_transmissions([held])

        kit.committed(conn, carry)
        kit.equal(
            conn.catalog_count("messages_using_message_type", (ids["type"],)),
            2,
            "messages_using_message_type (a queue row and a transmission row)",
        )

        def clean_up() -> None:
            conn.delete_queue_messages(ids["queue"])
            conn.delete_transmission_of_endpoint(held[1], True)

        kit.committed(conn, clean_up)
        kit.committed(
            conn, lambda: conn.catalog_write("put_setting", ("honor_broker_priority", "0"))
        )


def check_catalog_conflict(open_storage: StorageOpener) -> None:
    """catalog_write of a duplicate name raises IntegrityConflict; after the rollback the
    connection writes again and nothing of the failed transaction was kept."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        name = f"dup_{uuid.uuid4().hex[:12]}"
        kit.committed(conn, lambda: conn.catalog_write("insert_message_type", (name, "NONE")))
        version = conn.catalog_version()

        def bump_and_duplicate() -> None:
            conn.bump_catalog_version()
            conn.catalog_write("insert_message_type", (name, "EMPTY"))

        kit.refused(conn, bump_and_duplicate, "catalog_write of a duplicate name")
        kit.equal(conn.in_write, False, "in_write after rollback")
        kit.equal(conn.catalog_version(), version, "the failed transaction's bump is gone")
        types = [r for r in conn.load_catalog().message_types if r.name == name]
        kit.equal([r.validation for r in types], ["NONE"], "the first row stays, alone")
        kit.committed(conn, lambda: conn.catalog_write("insert_message_type", (name + "x", "NONE")))


def check_poison_counter(open_storage: StorageOpener) -> None:
    """add_rollback counts up, reset_rollbacks sets 0, disable_queue turns the queue off and
    bumps the catalog version."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = kit.new_queue(conn)
        kit.equal(kit.committed(conn, lambda: conn.add_rollback(queue_id)), 1, "add_rollback")
        kit.equal(kit.committed(conn, lambda: conn.add_rollback(queue_id)), 2, "add_rollback again")
        kit.committed(conn, lambda: conn.reset_rollbacks(queue_id))
        kit.equal(
            kit.committed(conn, lambda: conn.add_rollback(queue_id)), 1, "after reset_rollbacks"
        )
        version = conn.catalog_version()
        kit.committed(conn, lambda: conn.disable_queue(queue_id, NOW + 9))
        rows = conn.load_catalog()
        queue = next(q for q in rows.queues if q.queue_id == queue_id)
        kit.equal((queue.is_receive_enabled, queue.modify_date), (0, NOW + 9), "disable_queue")
        kit.equal(rows.version, version + 1, "disable_queue bumps the catalog version")
        kit.equal(
            kit.committed(conn, lambda: conn.add_rollback(queue_id)), 1, "disable_queue resets"
        )


# -- transactions ------------------------------------------------------------------------------
def check_rollback_discards_writes(open_storage: StorageOpener) -> None:
    """Everything written between begin_write and rollback is gone (endpoints, messages, the
    transmission queue, the catalog); in_write and begin_write's idempotence."""
    with kit.Bench(open_storage) as bench:
        conn = bench.connect(bench.storage())
        queue_id = kit.new_queue(conn)
        version = conn.catalog_version()
        endpoint = kit.endpoint(queue_id)
        name = f"gone_{uuid.uuid4().hex[:12]}"
        kit.equal(conn.in_write, False, "in_write before begin_write")
        conn.begin_write()
        conn.begin_write()  # already open: nothing
        kit.equal(conn.in_write, True, "in_write after begin_write")
        conn.insert_endpoint(endpoint)
        conn.insert_messages([kit.message(queue_id, endpoint.conversation_group_id, kit.new_id())])
        conn.insert_transmissions([kit.transmission(endpoint.conversation_id, 5, b"")])
        conn.catalog_write("insert_queue", (name, 1, 0, 1, 0, None, 0, NOW))
        conn.bump_catalog_version()
        kit.expect(conn.get_endpoint(endpoint.conversation_handle) is not None, "own write unseen")
        kit.equal(len(conn.peek(queue_id, -1)), 1, "the write transaction sees its own messages")
        conn.rollback()
        kit.equal(conn.in_write, False, "in_write after rollback")
        conn.rollback()  # nothing open: nothing
        kit.equal(conn.get_endpoint(endpoint.conversation_handle), None, "endpoint rolled back")
        kit.equal(conn.peek(queue_id, -1), [], "messages rolled back")
        kit.equal(conn.queue_has_ready(queue_id), False, "queue_has_ready after rollback")
        kit.equal(
            conn.transmission_waiting(endpoint.conversation_id, True),
            False,
            "transmission row rolled back",
        )
        kit.equal(conn.catalog_version(), version, "catalog version rolled back")
        kit.expect(
            all(q.name != name for q in conn.load_catalog().queues), "catalog row rolled back"
        )
        conn.commit()  # nothing open: nothing


def check_reads_see_committed_rows(open_storage: StorageOpener) -> None:
    """Reads outside a write transaction, on another connection of the storage or on another
    storage, see only committed rows; the writer sees its own; after commit everyone does,
    and lock_next_group finds the new group."""
    with kit.Bench(open_storage) as bench:
        storage = bench.storage()
        writer, reader = bench.connect(storage), bench.connect(storage)
        elsewhere = bench.connect(bench.storage())
        queue_id = kit.new_queue(writer)
        endpoint = kit.endpoint(queue_id)
        group, handle = endpoint.conversation_group_id, endpoint.conversation_handle
        writer.begin_write()
        writer.insert_endpoint(endpoint)
        writer.insert_messages([kit.message(queue_id, group, handle, body=b"new")])
        kit.equal(kit.bodies(writer.group_messages(group, -1)), [b"new"], "the writer's own rows")
        for name, conn in (("another connection", reader), ("another storage", elsewhere)):
            kit.equal(conn.get_endpoint(handle), None, f"{name} sees an uncommitted endpoint")
            kit.equal(conn.group_messages(group, -1), [], f"{name} sees uncommitted messages")
            kit.equal(conn.queue_has_ready(queue_id), False, f"{name}: queue_has_ready uncommitted")
            kit.equal(
                conn.lock_next_group(queue_id, {}), None, f"{name} locks an uncommitted group"
            )
        writer.commit({queue_id})
        for name, conn in (("another connection", reader), ("another storage", elsewhere)):
            kit.expect(conn.get_endpoint(handle) is not None, f"{name} misses a committed endpoint")
            kit.equal(
                kit.bodies(conn.group_messages(group, -1)), [b"new"], f"{name}: committed rows"
            )
        kit.equal(elsewhere.lock_next_group(queue_id, {}), group, "lock_next_group after commit")


def check_application_sql(open_storage: StorageOpener) -> None:
    """execute_app / executemany_app run in the write transaction (opened on first use), in the
    storage's paramstyle, are rolled back with it, and a constraint refusing a row raises
    IntegrityConflict."""
    with kit.Bench(open_storage) as bench:
        storage = bench.storage()
        conn = bench.connect(storage)
        table = f"kit_app_{uuid.uuid4().hex[:12]}"

        def sql(text: str) -> str:
            return portable_sql(text, storage.paramstyle)

        conn.execute_app(sql(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, body BLOB)"), ())
        kit.equal(conn.in_write, True, "execute_app opens the write transaction")
        conn.executemany_app(sql(f"INSERT INTO {table} VALUES (?, ?)"), [(1, b"a"), (2, b"b")])
        kit.equal(
            conn.execute_app(sql(f"SELECT id, body FROM {table} WHERE id > ? ORDER BY id"), (0,)),
            [(1, b"a"), (2, b"b")],
            "execute_app rows",
        )
        conn.commit()
        conn.execute_app(sql(f"INSERT INTO {table} VALUES (?, ?)"), (3, b"c"))
        conn.rollback()
        kit.equal(
            [r[0] for r in conn.execute_app(sql(f"SELECT id FROM {table} ORDER BY id"), ())],
            [1, 2],
            "execute_app rolled back",
        )
        conn.rollback()
        insert = sql(f"INSERT INTO {table} VALUES (?, ?)")
        kit.refused(conn, lambda: conn.execute_app(insert, (1, b"x")), "execute_app of a used key")
        kit.refused(conn, lambda: conn.executemany_app(insert, [(2, b"x")]), "executemany_app too")
        conn.execute_app(f"DROP TABLE {table}", ())
        conn.commit()


def check_connection_lifecycle(open_storage: StorageOpener) -> None:
    """Storage.connection() / release: the write transaction is rolled back and the group
    locks released when a connection is given back; connect raises StorageError once the
    storage is closed."""
    storage = open_storage()
    try:
        with storage.connection() as conn:
            queue_id = kit.new_queue(conn)
            endpoint = kit.endpoint(queue_id)
            group = kit.new_id()
            kit.expect(conn.try_lock_group(group), "try_lock_group of a new group")
            conn.begin_write()
            conn.insert_endpoint(endpoint)
        with storage.connection() as conn:
            kit.equal(conn.in_write, False, "a connection comes outside a write transaction")
            kit.equal(conn.held_groups(), frozenset(), "a connection comes holding no group")
            kit.equal(conn.get_endpoint(endpoint.conversation_handle), None, "release rolls back")
            kit.equal(conn.try_lock_group(group), True, "release releases the group locks")
    finally:
        storage.close()
    try:
        storage.connect()
    except StorageError:
        pass
    else:
        raise ContractViolation("connect on a closed storage must raise StorageError")


# -- what every process shares ----------------------------------------------------------------
