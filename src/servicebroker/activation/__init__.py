"""Activation (ACT-1..9): queue monitors that start readers only when a new one would have useful
work.

- :mod:`.monitor`: the monitor's decisions, pure (state, inputs, ``now`` in; state, actions out);
- :mod:`.service`: the shell that gathers inputs and carries actions out;
- :mod:`.tasks`: the task handlers that run those actions (TICK-2b);
- :mod:`.notifications`: event notifications (QUEUE_ACTIVATION, BROKER_QUEUE_DISABLED);
- :mod:`.activator`: the external activator (``servicebroker activator CONFIG.toml``).

Import each from its module (the package itself imports nothing, so that importing the pure
monitor never loads the service).
"""
