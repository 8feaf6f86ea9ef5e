"""The queue monitor's decision as a pure function: state, inputs and ``now`` in, new state and
actions out (ACT-4..9). No broker, no storage, no threads."""

from __future__ import annotations

from dataclasses import replace

from servicebroker.activation.monitor import (
    CheckInputs,
    MonitorState,
    Reason,
    Trigger,
    decide,
    on_altered,
    on_exit,
    on_received,
)

NOW = 1_000.0


def inputs(**changes: object) -> CheckInputs:
    base = CheckInputs(
        trigger=Trigger.TICK,
        has_unread=True,
        arrived_on_empty=False,
        waiting=0,
        last_empty_rowset_time=None,
        message_sequence=None,
        last_receive=None,
        internal=True,
        external=False,
        max_queue_readers=2,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_new_work_starts_a_reader_and_reserves_its_slot() -> None:
    # rule ACT-5a, rule ACT-7
    state, actions = decide(
        MonitorState(), inputs(trigger=Trigger.MESSAGE_ARRIVED, arrived_on_empty=True), NOW
    )
    assert actions.start_reader and actions.reason is Reason.NEW_WORK
    assert (state.running, state.peak, state.activations, state.last_activated) == (1, 1, 1, NOW)


def test_accumulating_messages_add_one_reader_per_interval_up_to_max() -> None:
    # rule ACT-5b, rule ACT-7
    state, actions = decide(MonitorState(), inputs(), NOW)
    assert actions.start_reader and actions.reason is Reason.ACCUMULATING
    state, actions = decide(state, inputs(), NOW + 1)  # within the 5-second interval
    assert not actions.start_reader and state.running == 1
    state, actions = decide(state, inputs(), NOW + 5)
    assert actions.start_reader and state.running == 2
    state, actions = decide(state, inputs(), NOW + 10)  # MAX_QUEUE_READERS = 2
    assert not actions.start_reader and state.running == 2


def test_a_waiting_reader_or_a_recent_empty_receive_means_no_activation() -> None:
    # rule ACT-5b, rule ACT-6
    _, actions = decide(MonitorState(), inputs(waiting=1), NOW)
    assert actions.reason is None and not actions.start_reader
    _, actions = decide(MonitorState(), inputs(last_empty_rowset_time=NOW - 4.9), NOW)
    assert actions.reason is None
    _, actions = decide(MonitorState(), inputs(last_empty_rowset_time=NOW - 5), NOW)
    assert actions.reason is Reason.ACCUMULATING


def test_a_procedure_that_received_nothing_suppresses_until_new_work() -> None:
    # rule ACT-9
    state, _ = decide(MonitorState(), inputs(), NOW)
    state = on_exit(state, useful=False, message_sequence=40)
    assert state.suppressed and state.suppressed_at == 40 and state.running == 0
    state, actions = decide(state, inputs(message_sequence=40), NOW + 10)
    assert actions.reason is Reason.ACCUMULATING and not actions.start_reader
    # messages committed since (by any process) lift it
    state, actions = decide(state, inputs(message_sequence=41), NOW + 20)
    assert not state.suppressed and actions.start_reader
    # so does ALTER QUEUE (ACT-4e), and a new arrival
    suppressed = on_exit(state, useful=False, message_sequence=41)
    assert not on_altered(suppressed).suppressed
    state, actions = decide(suppressed, inputs(trigger=Trigger.MESSAGE_ARRIVED), NOW + 30)
    assert not state.suppressed and actions.start_reader


def test_a_useful_procedure_does_not_suppress() -> None:
    # rule ACT-9
    state, _ = decide(MonitorState(), inputs(), NOW)
    state = on_exit(on_received(state), useful=True, message_sequence=None)
    assert not state.suppressed and state.running == 0


def test_unread_messages_after_an_empty_look_count_as_new_work() -> None:
    # rule ACT-4a (another process's commit, seen by polling)
    state, actions = decide(MonitorState(), inputs(has_unread=False), NOW)
    assert state.seen_unread is False and actions.reason is None
    state, actions = decide(state, inputs(waiting=1), NOW + 1)  # someone waits: 5b cannot hold
    assert actions.reason is Reason.NEW_WORK and actions.start_reader


def test_external_activation_is_spaced_and_rearmed_by_a_receive() -> None:
    # rule ACT-8
    external = inputs(internal=False, external=True)
    state, actions = decide(MonitorState(), external, NOW)
    assert actions.raise_notification and not actions.start_reader
    assert state.last_notified == NOW and not state.rearmed
    state, actions = decide(state, external, NOW + 30)
    assert not actions.raise_notification  # within external_activation_timeout (60 s)
    state, actions = decide(on_received(state), external, NOW + 31)
    assert actions.raise_notification  # a RECEIVE in this process re-armed it
    state, actions = decide(state, replace(external, last_receive=NOW + 40), NOW + 41)
    assert actions.raise_notification  # a RECEIVE seen from another process
    state, actions = decide(state, external, NOW + 41 + 60)
    assert actions.raise_notification  # the time-out expired
