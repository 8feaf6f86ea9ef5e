"""The statements that change the catalog: CREATE / ALTER / DROP of every Service Broker object
as functions of an open write transaction (:mod:`.changes`, :mod:`.network_changes`,
:mod:`.principal_changes`, :mod:`.database`), the Broker's catalog methods built on them
(:mod:`.statements`, :mod:`.network`, :mod:`.principals`), and Service Broker's T-SQL DDL,
parsed (:mod:`.parser`, on the T-SQL grammar of :mod:`servicebroker.syntax`) and run (:mod:`.run`). The catalog as the
engine reads it is :mod:`servicebroker.catalog`, below."""
