"""``servicebroker diagnose``: ssbdiagnose's reports on a broker database
(docs/tools/ssbdiagnose/ssbdiagnose-utility-service-broker.md; docs/diagnose.md).

- :mod:`.findings`: :class:`Finding` (code, severity, message, fix, objects) and every code;
- :mod:`.configuration`: CONFIGURATION, what a dialog between two services needs (pure checks
  over the catalog snapshot; :func:`check_configuration` reads a broker);
- :mod:`.runtime`: RUNTIME, the problems a running broker has now (pure checks over the views;
  :func:`check_runtime` reads a broker);
- :mod:`.command`: the click command.
"""

from __future__ import annotations

from .configuration import ConfigurationRequest, check_configuration, configuration_findings
from .findings import CODES, SEVERITIES, Finding, has_problems
from .runtime import check_runtime, runtime_findings

__all__ = [
    "CODES",
    "SEVERITIES",
    "ConfigurationRequest",
    "Finding",
    "check_configuration",
    "check_runtime",
    "configuration_findings",
    "has_problems",
    "runtime_findings",
]
