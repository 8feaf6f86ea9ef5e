"""T-SQL on servicebroker (docs/tsql.md): an :class:`Instance` of named databases (each a
:class:`~servicebroker.Broker`), sessions that run batches of T-SQL on it (:mod:`.interpreter`:
the procedural core, the conversation statements, the Service Broker DDL, queries on the
catalog views and queues), and the sqlcmd script reader (:mod:`.script`) and output
(:mod:`.output`) behind ``servicebroker sqlcmd``.

The layer sits on the broker's public seams: it opens brokers, runs their transactions and
DDL, and reads their views; it never reads storage.
"""

from __future__ import annotations

from .instance import Instance
from .interpreter import Session
from .results import Results, ResultSet

__all__ = ["Instance", "ResultSet", "Results", "Session"]
