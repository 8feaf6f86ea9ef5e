"""Dialog security's cryptography, pure (SEC-2): session keys wrapped for a certificate, the
sender's signature, and bodies sealed end to end so that an altered, cut, moved or replayed-into-
another-dialog body is refused. The broker's use of it is in test_dialog_security_sites.py.

Microsoft: docs/database-engine/service-broker/ ("Service Broker dialog security": a session key
per conversation, encrypted for the remote certificate; messages signed and encrypted end to end).
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from servicebroker.errors import DialogSecurityError
from servicebroker.transport.certificates import load_private_key_file, make_self_signed
from servicebroker.transport.dialog_security import (
    SEAL_OVERHEAD,
    SecurityHeader,
    decode_security_header,
    encode_security_header,
    new_session_key,
    open_body,
    seal_body,
    sign_header,
    unwrap_key,
    verify_header,
    wrap_key,
)
from servicebroker.transport.wire import Fragment, MessageHeader, decode_fragment, encode_fragment

HEADER = MessageHeader(
    conversation_id=uuid.uuid4().bytes,
    is_initiator=True,
    sequence=3,
    message_id=uuid.uuid4().bytes,
    from_service="//shop/Orders",
    to_service="//warehouse/Orders",
    contract="//orders/Contract",
    message_type="Order",
    validation="X",
    from_broker_instance=uuid.uuid4(),
    to_broker_instance=None,
    priority=5,
    lifetime=None,
    message_size=0,
    fragment_count=1,
)


@pytest.fixture(scope="module")
def ec_key(tmp_path_factory: pytest.TempPathFactory) -> object:
    _, key = make_self_signed("dialog", tmp_path_factory.mktemp("certs"))
    return load_private_key_file(key)


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def test_sealed_body_opens_with_its_key_and_header_only_sec2() -> None:
    """SEC-2: a sealed body is not the plain one, opens with the dialog's key and header, and
    fails when anything it is bound to differs."""
    key = new_session_key()
    body = b"<order id='42'>secret</order>"
    sealed = seal_body(key, HEADER, body)
    assert body not in sealed and len(sealed) == len(body) + SEAL_OVERHEAD
    assert open_body(key, HEADER, sealed) == body
    for change in (
        {"sequence": 4},  # re-ordered: another message's number
        {"is_initiator": False},
        {"conversation_id": uuid.uuid4().bytes},  # moved to another dialog
        {"message_id": uuid.uuid4().bytes},
        {"message_type": "Receipt"},
        {"to_service": "//elsewhere"},
    ):
        moved = dataclasses.replace(HEADER, **change)  # type: ignore[arg-type]
        with pytest.raises(DialogSecurityError, match="fails its integrity check"):
            open_body(key, moved, sealed)
    with pytest.raises(DialogSecurityError, match="integrity"):
        open_body(new_session_key(), HEADER, sealed)
    with pytest.raises(DialogSecurityError, match="too short"):
        open_body(key, HEADER, sealed[:10])


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=0), st.integers(min_value=1, max_value=255))
def test_any_altered_or_truncated_body_is_refused_sec2(body: bytes, where: int, flip: int) -> None:
    """SEC-2 (bad actors): flipping any bit of a sealed body, or cutting it, is refused."""
    key = new_session_key()
    sealed = bytearray(seal_body(key, HEADER, body))
    i = where % len(sealed)
    sealed[i] ^= flip
    with pytest.raises(DialogSecurityError):
        open_body(key, HEADER, bytes(sealed))
    with pytest.raises(DialogSecurityError):
        open_body(key, HEADER, seal_body(key, HEADER, body)[: max(0, len(sealed) - 1 - i)])


@pytest.mark.parametrize("kind", ["ec", "rsa"])
def test_key_unwraps_only_with_the_certificates_private_key_sec2(
    kind: str, ec_key: object, rsa_key: rsa.RSAPrivateKey
) -> None:
    """SEC-2: the session key travels wrapped for the receiver's certificate: its private key
    unwraps it, another key does not (a key wrapped for someone else)."""
    private = ec_key if kind == "ec" else rsa_key
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key = new_session_key()
    wrapped = wrap_key(private.public_key(), key)  # type: ignore[attr-defined]
    assert key.key not in wrapped
    assert unwrap_key(private, key.key_id, wrapped) == key  # type: ignore[arg-type]
    with pytest.raises(DialogSecurityError, match="not wrapped for this certificate"):
        unwrap_key(other, key.key_id, wrapped)
    with pytest.raises(DialogSecurityError):
        unwrap_key(private, key.key_id, wrapped[:-1] + bytes([wrapped[-1] ^ 1]))  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["ec", "rsa"])
def test_signature_proves_the_sender_and_covers_the_wrapped_key_sec2(
    kind: str, ec_key: object, rsa_key: rsa.RSAPrivateKey
) -> None:
    """SEC-2: the first message's header is signed by the sender's certificate: it verifies
    with that certificate only, and not once the dialog's names or the wrapped key change."""
    private = ec_key if kind == "ec" else rsa_key
    sh = SecurityHeader(uuid.uuid4(), 12.5, "ab" * 20, b"wrapped-key-bytes")
    signed = sign_header(private, HEADER, sh, signer="cd" * 20)  # type: ignore[arg-type]
    verify_header(private.public_key(), HEADER, signed)  # type: ignore[attr-defined]
    with pytest.raises(DialogSecurityError, match="does not verify"):
        verify_header(
            rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key(),
            HEADER,
            signed,
        )
    with pytest.raises(DialogSecurityError, match="does not verify"):
        verify_header(
            private.public_key(), dataclasses.replace(HEADER, from_service="//evil"), signed
        )  # type: ignore[attr-defined]
    forged = dataclasses.replace(signed, wrapped_key=b"another key")
    with pytest.raises(DialogSecurityError, match="does not verify"):
        verify_header(private.public_key(), HEADER, forged)  # type: ignore[attr-defined]
    with pytest.raises(DialogSecurityError, match="no signature"):
        verify_header(private.public_key(), HEADER, sh)  # type: ignore[attr-defined]


def test_security_header_round_trips_on_the_wire_and_bad_bytes_are_refused() -> None:
    """The security header rides in the message header (MESSAGE frames) byte for byte; bytes
    that are not one are refused naming what is wrong."""
    sh = SecurityHeader(uuid.uuid4(), 1.5, "ab" * 20, b"w" * 100, "cd" * 20, b"s" * 70)
    data = encode_security_header(sh)
    assert decode_security_header(data) == sh
    header = dataclasses.replace(HEADER, encrypted=True, security=data, message_size=3)
    assert decode_fragment(encode_fragment(Fragment(header, 0, b"abc"))).header == header
    with pytest.raises(DialogSecurityError, match="ends inside"):
        decode_security_header(data[:-1])
    with pytest.raises(DialogSecurityError, match="left over"):
        decode_security_header(data + b"x")
    with pytest.raises(DialogSecurityError, match="unknown format"):
        decode_security_header(b"\x09" + data[1:])


def test_session_key_repr_hides_the_key() -> None:
    """A session key never shows in logs or tracebacks."""
    key = new_session_key()
    assert key.key.hex() not in repr(key) and str(key.key_id) in repr(key)


def test_a_message_sealed_again_is_the_same_bytes_and_nonces_differ_per_message_sec2() -> None:
    """SEC-2, NET-5: a message sent again (after a lost connection) is sealed to the same bytes,
    so its fragments match those the receiver already holds; two messages never share a nonce
    (AES-GCM's one rule)."""
    key = new_session_key()
    body = b"x" * 1000
    assert seal_body(key, HEADER, body) == seal_body(key, HEADER, body)
    other = dataclasses.replace(HEADER, message_id=uuid.uuid4().bytes)
    assert seal_body(key, other, body)[:12] != seal_body(key, HEADER, body)[:12]
