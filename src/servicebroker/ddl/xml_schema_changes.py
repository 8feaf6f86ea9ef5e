"""CREATE / ALTER / DROP XML SCHEMA COLLECTION (create-xml-schema-collection-transact-sql.md,
alter-xml-schema-collection-transact-sql.md, drop-xml-schema-collection-transact-sql.md), each
a function of an open write transaction and the catalog snapshot it checks against, as the other
catalog statements (:mod:`.changes`). The schemas are split, checked and compiled by
:func:`~servicebroker.catalog.xml_schemas.prepare_documents` before anything is written.
"""

from __future__ import annotations

from ..catalog.model import CatalogSnapshot, check_name
from ..catalog.xml_schemas import SchemaDocument, prepare_documents
from ..errors import CatalogError
from ..storage.base import StorageConnection

__all__ = [
    "alter_xml_schema_collection",
    "create_xml_schema_collection",
    "drop_xml_schema_collection",
]


def _insert(
    conn: StorageConnection,
    collection_id: int,
    documents: tuple[SchemaDocument, ...],
    first: int,
) -> None:
    for ordinal, document in enumerate(documents, first):
        conn.catalog_write(
            "insert_xml_schema_document",
            (collection_id, ordinal, document.target_namespace, document.text),
        )


def create_xml_schema_collection(
    conn: StorageConnection, snap: CatalogSnapshot, name: str, schemas: object, *, now: float
) -> None:
    """CREATE XML SCHEMA COLLECTION ``name`` AS ``schemas``: one or more ``<xsd:schema>``
    documents side by side (a str, or bytes of XML), compiled together; ``now`` (broker-clock
    seconds) is its create and modify date.

    Raises:
        CatalogError: a bad or taken name; schemas that are not a string, not XML, not XML
            schemas, or that do not compile (libxml2's first error, with its line); a
            component declared twice.
    """
    check_name("XML schema collection", name)
    if name in snap.xml_schema_collections:
        raise CatalogError(f"XML schema collection {name!r} already exists")
    documents = prepare_documents(name, schemas)
    collection_id = conn.catalog_write("insert_xml_schema_collection", (name, now, now))
    _insert(conn, collection_id, documents, 1)


def alter_xml_schema_collection(
    conn: StorageConnection, snap: CatalogSnapshot, name: str, add: object, *, now: float
) -> None:
    """ALTER XML SCHEMA COLLECTION ``name`` ADD ``add``: new namespaces, or new components of
    namespaces it has ("Use the ALTER XML SCHEMA COLLECTION to add new XML schemas whose
    namespaces are not already in the XML schema collection, or add new components to existing
    namespaces"); the collection compiled with them; ``now`` its modify date. Message types
    validating against it use the new components from the next message on; queued messages
    are not checked again.

    Raises:
        CatalogError: an unknown collection; a component it has already (an existing component
            is never altered); schemas refused as by CREATE.
    """
    collection = snap.xml_schema_collection(name)
    documents = prepare_documents(name, add, collection.documents)
    _insert(conn, collection.xml_collection_id, documents, len(collection.documents) + 1)
    conn.catalog_write("touch_xml_schema_collection", (now, collection.xml_collection_id))


def drop_xml_schema_collection(conn: StorageConnection, snap: CatalogSnapshot, name: str) -> None:
    """DROP XML SCHEMA COLLECTION ``name``: the collection and all its components. "You can't
    drop an XML schema collection when it's in use": here, while a message type validates
    against it.

    Raises:
        CatalogError: an unknown collection, or one a message type uses.
    """
    collection = snap.xml_schema_collection(name)
    users = sorted(
        mt.name
        for mt in snap.message_types.values()
        if mt.xml_collection is not None
        and mt.xml_collection.xml_collection_id == collection.xml_collection_id
    )
    if users:
        raise CatalogError(
            f"cannot drop XML schema collection {name!r}: it is used by message type "
            f"{users[0]!r}" + (f" and {len(users) - 1} more" if len(users) > 1 else "")
        )
    conn.catalog_write("delete_xml_schema_documents", (collection.xml_collection_id,))
    conn.catalog_write("delete_xml_schema_collection", (collection.xml_collection_id,))
