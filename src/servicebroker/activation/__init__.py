"""Activation (ACT-1..9): queue monitors that start readers only when a new one would have useful
work.

- :mod:`.monitor`: the monitor's decisions, pure (state, inputs, ``now`` in; state, actions out);
- :mod:`.service`: the shell that gathers inputs and carries actions out;
- :mod:`.tasks`: the task handlers that run those actions (TICK-2b);
- :mod:`.notifications`: event notifications (QUEUE_ACTIVATION, BROKER_QUEUE_DISABLED);
- :mod:`.activator`: the external activator (``servicebroker activator CONFIG.toml``).

The pure names are re-exported here; the service is imported from its module.
"""

from __future__ import annotations

from .monitor import (
    EMPTY_RECEIVE_WINDOW,
    Actions,
    CheckInputs,
    MonitorInputs,
    MonitorState,
    Reason,
    Trigger,
    activation_necessary,
    decide,
    external_notification_due,
    internal_activation_occurs,
    monitor_state,
)

__all__ = [
    "EMPTY_RECEIVE_WINDOW",
    "Actions",
    "CheckInputs",
    "MonitorInputs",
    "MonitorState",
    "Reason",
    "Trigger",
    "activation_necessary",
    "decide",
    "external_notification_due",
    "internal_activation_occurs",
    "monitor_state",
]
