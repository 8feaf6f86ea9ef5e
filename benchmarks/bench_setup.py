"""The broker the SEND/RECEIVE benchmarks share (imported by the scripts beside it)."""

from __future__ import annotations

import os
import uuid

from servicebroker import Broker

TARGET_QUEUE = "tq"
"""The queue the dialogs' messages arrive on."""

POSTGRES_URL = os.environ.get(
    "SERVICEBROKER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
"""The PostgreSQL server the benchmarks use unless told (``--postgres``)."""


def postgres_schema(server: str) -> str:
    """Create a fresh schema on the PostgreSQL ``server`` (a libpq URL) and return a URL whose
    search_path is it; :func:`drop_schema` removes it."""
    import psycopg

    schema = f"sbbench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in server else "?"
    return f"{server}{sep}options=-csearch_path%3D{schema}"


def drop_schema(server: str, url: str) -> None:
    """Drop the schema of ``url``, made by :func:`postgres_schema` on ``server``."""
    import psycopg

    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f"DROP SCHEMA {url.rsplit('%3D', 1)[1]} CASCADE")


def open_dialogs(broker: Broker, count: int) -> list[uuid.UUID]:
    """Create message type ``M``, contract ``C`` (M sent by the initiator), queues ``iq`` and
    ``tq``, services ``//i`` and ``//t`` on them, and begin ``count`` dialogs from ``//i`` to
    ``//t`` — each its own conversation group — in one transaction; returns their handles."""
    broker.create_message_type("M")
    broker.create_contract("C", {"M": "INITIATOR"})
    broker.create_queue("iq")
    broker.create_queue(TARGET_QUEUE)
    broker.create_service("//i", queue="iq")
    broker.create_service("//t", queue=TARGET_QUEUE, contracts=["C"])
    with broker.transaction() as tx:
        return [tx.begin_dialog("//i", "//t", contract="C") for _ in range(count)]
