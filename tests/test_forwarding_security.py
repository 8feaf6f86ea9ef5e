"""Dialog security through a forwarder (SEC-2, FWD-2): the forwarder holds and passes on only
ciphertext, and a forwarder that alters, truncates, re-orders, replays or moves what it carries
gets nothing delivered — each such message is refused at the target and counted, and the
sender's intact copy, sent again (NET-4), gets through once the forwarder behaves.

Microsoft's pages: "Service Broker dialog security" (messages are encrypted end to end; "a
forwarder does not decrypt messages"), docs/database-engine/service-broker/; BEGIN DIALOG …
WITH ENCRYPTION.

The bad forwarder is the real one with its intake wrapped (``Forwarder.receive``, what it
holds in memory): the tests read and rewrite exactly the bytes it keeps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from servicebroker.dialogs import ERROR as ERROR_TYPE
from servicebroker.dialogs import error_body
from servicebroker.testing.waiting import eventually
from servicebroker.transport.dialog_security import decode_security_header, encode_security_header
from servicebroker.transport.forwarding import Forwarder
from servicebroker.transport.wire import Fragment

from .conftest import Opener
from .test_forwarding import settled, take
from .transport_sites import (
    CONTRACT,
    INITIATOR,
    TARGET,
    Site,
    first_status,
    secure_dialogs,
    through_forwarder,
)

SECRET = b"<order>the secret recipe"


@pytest.fixture
def backend() -> str:
    return "sqlite"


Tamper = Callable[[Fragment], list[Fragment]]


@pytest.fixture
def forwarder_memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Every fragment the forwarder takes into memory, and a ``tamper`` hook (default: none)
    that may rewrite, drop or repeat each before the forwarder holds it."""
    seen: dict[str, Any] = {"fragments": [], "tamper": None, "replay": None}
    original = Forwarder.receive

    def receive(self: Forwarder, fragment: Fragment, **kw: Any) -> Any:
        seen["replay"] = lambda fr: original(self, fr, **kw)  # pass a fragment on again
        tamper: Tamper | None = seen["tamper"]
        out = tamper(fragment) if tamper is not None else [fragment]
        result = None
        for f in out:
            seen["fragments"].append(f)
            result = original(self, f, **kw)
        return result

    monkeypatch.setattr(Forwarder, "receive", receive)
    yield seen


def secure_through(a: Site, f: Site, b: Site) -> None:
    """Full dialog security between the shop (a) and the warehouse (b) through f (SEC-3):
    each holds the other's certificate, owned by a user; the shop binds the warehouse."""
    through_forwarder(a, f, b)
    secure_dialogs(a, b)


def send(site: Site, bodies: list[bytes]) -> None:
    with site.broker.transaction() as tx:
        handle = tx.begin_dialog(INITIATOR, TARGET, contract=CONTRACT)
        for body in bodies:
            tx.send(handle, "Order", body)


def test_forwarder_holds_and_passes_only_ciphertext_sec2_fwd2(
    open_sites: Opener, forwarder_memory: dict[str, Any]
) -> None:
    """SEC-2, FWD-2: everything the forwarder held was sealed and none of it contains a body;
    the reply comes back sealed too; the target gets the plain bodies in order."""
    a, f, b = open_sites(3)
    secure_through(a, f, b)
    bodies = [SECRET + b" %d</order>" % i for i in range(10)]
    send(a, bodies)
    got = take(b.broker, "warehouse_q", 10)
    assert [body for _, _, body in got] == bodies
    with b.broker.transaction() as tx:
        tx.send(got[0][0], "Receipt", b"<receipt>private</receipt>")
    assert [body for _, _, body in take(a.broker, "shop_q", 1)] == [b"<receipt>private</receipt>"]
    held = forwarder_memory["fragments"]
    assert len(held) >= 11 and all(fr.header.encrypted for fr in held)
    assert not any(SECRET in fr.data or b"private" in fr.data for fr in held)
    assert held[0].header.security  # the first message carries the wrapped key and signature
    assert f.broker.transport.statistics().rejected == 0


@pytest.mark.parametrize(
    "attack",
    ["flip a bit", "truncate", "swap two messages"],
)
def test_a_tampering_forwarder_gets_nothing_delivered_sec2(
    attack: str, open_sites: Opener, forwarder_memory: dict[str, Any]
) -> None:
    """SEC-2 (bad actors at the forwarder): an altered, truncated or re-ordered (bodies swapped
    between sequence numbers) message is refused at the target (a body moved to another dialog
    fails the same check: tests/test_dialog_security.py), counted in ``statistics().rejected``, never delivered; once the forwarder stops
    tampering, the senders' intact copies arrive once each and in order (NET-2, NET-4)."""
    a, f, b = open_sites(3)
    secure_through(a, f, b)
    stash: dict[int, Fragment] = {}
    active = {"on": True}

    def tamper(fr: Fragment) -> list[Fragment]:
        h = fr.header
        if not active["on"] or not h.encrypted or not h.is_initiator or h.sequence < 0:
            return [fr]
        if attack == "flip a bit":
            data = bytearray(fr.data)
            data[len(data) // 2] ^= 0x20
            return [dataclasses.replace(fr, data=bytes(data))]
        if attack == "truncate":
            cut = fr.data[:-5]
            return [
                dataclasses.replace(
                    fr, data=cut, header=dataclasses.replace(h, message_size=len(cut))
                )
            ]
        if attack == "swap two messages":
            stash[h.sequence] = fr
            if h.sequence == 1 and 0 in stash:  # 0 with 1's body, 1 with 0's
                zero = stash[0]
                return [
                    dataclasses.replace(
                        zero,
                        data=fr.data,
                        header=dataclasses.replace(zero.header, message_size=len(fr.data)),
                    ),
                    dataclasses.replace(
                        fr,
                        data=zero.data,
                        header=dataclasses.replace(h, message_size=len(zero.data)),
                    ),
                ]
            return []
        return [fr]

    forwarder_memory["tamper"] = tamper
    bodies = [SECRET + b" %d</order>" % i for i in range(2)]
    send(a, bodies)
    eventually(lambda: b.broker.transport.statistics().rejected >= 1, "a rejected message")
    with b.broker.transaction() as tx:
        assert tx.receive("warehouse_q") == []  # nothing delivered while the forwarder tampers
    active["on"] = False
    got: list[bytes] = []

    def arrived() -> bool:
        with b.broker.transaction() as tx:
            got.extend(m.message_body for m in tx.receive("warehouse_q"))
        return len(got) >= 2

    for _ in range(6):  # NET-4: the senders' retries (a tampered copy held out of order is
        for site in (a, f, b):  # refused only when released, and retried once more)
            site.clock.advance(70)
        if settled(arrived, timeout=3.0):
            break
    assert got == bodies  # in order, once each


def test_a_replaying_forwarder_delivers_each_message_once_sec2_net2(
    open_sites: Opener, forwarder_memory: dict[str, Any]
) -> None:
    """SEC-2, NET-2 (bad actors): a forwarder that passes every message on again after it was
    delivered gets nothing delivered twice — the copies are duplicates (NET-2), acknowledged
    again and discarded, and counted."""
    a, f, b = open_sites(3)
    secure_through(a, f, b)
    bodies = [SECRET + b" %d</order>" % i for i in range(5)]
    send(a, bodies)
    assert [body for _, _, body in take(b.broker, "warehouse_q", 5)] == bodies
    before = b.broker.transport.statistics().duplicates
    for fr in list(forwarder_memory["fragments"]):
        forwarder_memory["replay"](fr)
    eventually(
        lambda: b.broker.transport.statistics().duplicates >= before + 5, "the copies refused"
    )
    with b.broker.transaction() as tx:
        assert tx.receive("warehouse_q") == []


def test_a_forged_signature_is_refused_with_its_status_sec2(
    open_sites: Opener, forwarder_memory: dict[str, Any]
) -> None:
    """SEC-2 (bad actors): a forwarder that alters the first message's signature (a forgery)
    gets the dialog refused at the target; the sender's transmission_status says the signature
    does not verify (the refusal comes back through the forwarder); nothing is delivered."""
    a, f, b = open_sites(3)
    secure_through(a, f, b)

    def forge(fr: Fragment) -> list[Fragment]:
        if not fr.header.security:
            return [fr]
        sh = decode_security_header(fr.header.security)
        signature = bytearray(sh.signature)
        signature[-1] ^= 0x01
        forged = dataclasses.replace(sh, signature=bytes(signature))
        header = dataclasses.replace(fr.header, security=encode_security_header(forged))
        return [dataclasses.replace(fr, header=header)]

    forwarder_memory["tamper"] = forge
    send(a, [SECRET + b"</order>"])
    status = eventually(lambda: first_status(a.broker), "the sender's transmission_status")
    assert "does not verify" in status
    assert b.broker.transport.statistics().rejected >= 1
    assert b.broker.views.conversation_endpoints() == []


def test_a_plain_error_cannot_end_a_secured_dialog_sec2(
    open_sites: Opener, forwarder_memory: dict[str, Any]
) -> None:
    """SEC-2 (bad actors): a forwarder that makes up an unsealed Error for a secured
    conversation does not end it: the target refuses and counts it, and the dialog goes on."""
    a, f, b = open_sites(3)
    secure_through(a, f, b)
    send(a, [SECRET + b"</order>"])
    take(b.broker, "warehouse_q", 1)
    genuine = forwarder_memory["fragments"][0]
    body = error_body(-8400, "forged by the forwarder")
    forged = Fragment(
        dataclasses.replace(
            genuine.header,
            sequence=-1,
            message_type=ERROR_TYPE,
            encrypted=False,
            security=b"",
            message_size=len(body),
            fragment_count=1,
        ),
        0,
        body,
    )
    forwarder_memory["replay"](forged)
    eventually(lambda: b.broker.transport.statistics().rejected >= 1, "the forged Error refused")
    [target] = b.broker.views.conversation_endpoints()
    assert target.state == "CO"
    with b.broker.transaction() as tx:
        assert tx.receive("warehouse_q") == []  # no Error on the queue


def test_a_closed_dialog_replayed_by_the_forwarder_delivers_nothing_net2_sec2(
    open_sites: Opener, forwarder_memory: dict[str, Any]
) -> None:
    """NET-2, SEC-2 (bad actors): after a secured dialog has ended at both sides, a forwarder
    that plays its recorded messages again starts no new dialog: the target remembers the
    closed conversation (as SQL Server keeps it half an hour) and takes the copies as
    duplicates; nothing is delivered twice."""
    a, f, b = open_sites(3)
    secure_through(a, f, b)
    bodies = [SECRET + b" %d</order>" % i for i in range(3)]
    send(a, bodies)
    got = take(b.broker, "warehouse_q", 3)
    with b.broker.transaction() as tx:
        tx.end_conversation(got[0][0])
    [(shop_handle, _, _)] = take(a.broker, "shop_q", 1)  # the warehouse's EndDialog
    with a.broker.transaction() as tx:
        tx.end_conversation(shop_handle)
    eventually(lambda: not b.broker.views.conversation_endpoints(), "the target endpoint closed")
    recorded = [fr for fr in forwarder_memory["fragments"] if fr.header.is_initiator]
    before = b.broker.transport.statistics().duplicates
    for fr in recorded:
        forwarder_memory["replay"](fr)
    eventually(lambda: b.broker.transport.statistics().duplicates >= before + 1, "the copies taken")
    assert b.broker.views.conversation_endpoints() == []
    with b.broker.transaction() as tx:
        assert tx.receive("warehouse_q") == []
