"""Opening storage: URLs, errors, migrations."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from servicebroker import Broker, BrokerError, StorageError


def test_sqlite_url_and_plain_path_are_the_same_database(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    with Broker.open(f"sqlite:///{path}") as b:
        b.create_queue("q")
    with Broker.open(str(path)) as b:
        assert "q" in b.catalog.queues


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "required"),
        ("mysql://localhost/x", "unsupported storage URL scheme 'mysql'"),
        ("postgresql://127.0.0.1:1/x", "cannot open the PostgreSQL broker"),
        ("sqlite://relative.db", "three slashes"),
        (":memory:", "file path"),
        ("/no/such/folder/b.db", "does not exist"),
    ],
)
def test_bad_urls_are_named(url: str, message: str) -> None:
    with pytest.raises(StorageError, match=message):
        Broker.open(url)


def test_unknown_setting(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="unknown broker setting"):
        Broker.open(str(tmp_path / "b.db"), colour="blue")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    Broker.open(str(path)).close()
    with sqlite3.connect(path) as c:
        c.execute("INSERT INTO schema_migrations VALUES (999, '0999_future.sql')")
    with pytest.raises(StorageError, match="schema version 999"):
        Broker.open(str(path))


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StorageError, match="not a usable servicebroker database"):
        Broker.open(str(path))


def test_closed_broker_refuses_transactions(tmp_path: Path) -> None:
    b = Broker.open(str(tmp_path / "b.db"))
    b.close()
    with pytest.raises(BrokerError, match="closed"):
        b.transaction()


def test_held_groups_are_read_again_only_after_new_messages() -> None:
    # rule RCV-2, rule PRI-9: a transaction's held groups rank by what is left in them; a head
    # once read is not read again until the transaction received it or a message arrived in it
    from servicebroker.storage.named import HeldHeads, held_best

    heads: dict[bytes, tuple[int, int] | None] = {b"a": None, b"b": (3, 7)}
    reads: list[bytes] = []
    arrivals: set[bytes] = set()
    mark = [10]
    skip: dict[bytes, list[int]] = {}  # per group, the queuing orders received from it

    def head_of(group: bytes) -> tuple[int, int] | None:
        reads.append(group)
        return heads[group]

    known: HeldHeads = {}

    def best() -> tuple[int, int, bytes] | None:
        return held_best([b"a", b"b"], known, lambda: mark[0], head_of, lambda _: arrivals, skip)

    assert best() == (-3, 7, b"b") and reads == [b"a", b"b"]
    reads.clear()
    assert best() == (-3, 7, b"b") and reads == []  # nothing received, nothing new anywhere
    mark[0] = 11  # a message arrived, in another group
    reads.clear()
    assert best() == (-3, 7, b"b") and reads == []
    skip[b"b"] = [7]  # the transaction received b's head: b is read again
    heads[b"b"] = (3, 8)
    reads.clear()
    assert best() == (-3, 8, b"b") and reads == [b"b"]
    mark[0], heads[b"a"], arrivals = 12, (9, 11), {b"a"}  # one arrived in a
    reads.clear()
    assert best() == (-9, 11, b"a") and reads == [b"a"]
