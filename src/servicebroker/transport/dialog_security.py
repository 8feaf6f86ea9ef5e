"""Dialog security's cryptography (SEC-2, SEC-3), pure: session keys, the key wrapped for the
receiver's certificate, the sender's signature, and the bodies sealed end to end.

A secured dialog has one session key (AES-256, 32 random bytes) that its initiator makes. Every
body that leaves for another broker instance is sealed with it by AES-GCM (:func:`seal_body`):
the 12-byte nonce (derived from the message's id: a message sealed again is the same bytes),
the ciphertext and the 16-byte tag travel as the body, and the message's
identity — conversation, side, sequence number, message id, message type and both services — is
the associated data, so a body that is altered, cut short, moved to another sequence number or
to another dialog fails :func:`open_body`. Forwarders pass the sealed bytes on and never hold
the key (FWD-2).

The first message each way carries a :class:`SecurityHeader`: the initiator's carries the session
key wrapped for the target's certificate (:func:`wrap_key`: RSA-OAEP with SHA-256 for an RSA
key; for an elliptic-curve key an ephemeral ECDH agreement on the same curve, HKDF-SHA256 and
AES-GCM) and, unless the remote service binding is ANONYMOUS, a signature by the initiator's
certificate over the dialog's names and the wrapped key (:func:`sign_header`: ECDSA or RSA-PSS,
SHA-256); the target's first message carries its own signature, so each end proves its identity
(SEC-2). What to do with a header — which certificates, which principal — is
:mod:`.dialog_protection`'s.

Errors are :class:`~servicebroker.errors.DialogSecurityError` naming what failed.
"""

from __future__ import annotations

import os
import struct
import uuid
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import DialogSecurityError
from .wire import MessageHeader

__all__ = [
    "KEY_BYTES",
    "SEAL_OVERHEAD",
    "SecurityHeader",
    "SessionKey",
    "decode_security_header",
    "encode_security_header",
    "new_session_key",
    "open_body",
    "seal_body",
    "sign_header",
    "signed_bytes",
    "unwrap_key",
    "verify_header",
    "wrap_key",
]

KEY_BYTES = 32
"""Bytes of a session key (AES-256)."""
_NONCE = 12
_TAG = 16
SEAL_OVERHEAD = _NONCE + _TAG
"""Bytes a sealed body has beyond the plain one."""
_WRAP_INFO = b"servicebroker dialog security: session key wrap"
_FORMAT = 1
_U16 = struct.Struct(">H")
_F64 = struct.Struct(">d")


@dataclass(frozen=True, slots=True)
class SessionKey:
    """A dialog's session key: ``key`` (32 bytes) and its ``key_id`` (shown as the endpoints'
    ``outbound_session_key_identifier`` / ``inbound_session_key_identifier``)."""

    key_id: uuid.UUID
    key: bytes

    def __repr__(self) -> str:  # never print a key
        return f"SessionKey(key_id={self.key_id})"


def new_session_key() -> SessionKey:
    """A fresh random session key (SEC-2: one per secured dialog)."""
    return SessionKey(uuid.uuid4(), os.urandom(KEY_BYTES))


@dataclass(frozen=True, slots=True)
class SecurityHeader:
    """What a secured message carries besides its sealed body (SEC-2).

    Attributes:
        key_id: the session key's id (every secured message carries it).
        timestamp: when the sender made the key or signed (broker-clock seconds); the
            endpoints' ``security_timestamp``.
        recipient_thumbprint: the certificate the key is wrapped for (hex SHA-1), or "".
        wrapped_key: the session key wrapped for that certificate, or b"" (only the
            initiator's first message carries it).
        signer_thumbprint: the certificate that signed, or "" (none: anonymous, SEC-3).
        signature: the signature over :func:`signed_bytes`, or b"".
    """

    key_id: uuid.UUID
    timestamp: float = 0.0
    recipient_thumbprint: str = ""
    wrapped_key: bytes = b""
    signer_thumbprint: str = ""
    signature: bytes = b""


def _bytes_field(data: bytes) -> bytes:
    """``data`` with its u16 length; raises DialogSecurityError beyond 65535 bytes."""
    if len(data) > 0xFFFF:
        raise DialogSecurityError(f"a security header field of {len(data)} bytes is too long")
    return _U16.pack(len(data)) + data


def encode_security_header(sh: SecurityHeader) -> bytes:
    """The bytes of ``sh`` as :class:`~.wire.MessageHeader` ``security`` carries them."""
    return b"".join(
        [
            bytes([_FORMAT]),
            sh.key_id.bytes,
            _F64.pack(sh.timestamp),
            _bytes_field(sh.recipient_thumbprint.encode("ascii")),
            _bytes_field(sh.wrapped_key),
            _bytes_field(sh.signer_thumbprint.encode("ascii")),
            _bytes_field(sh.signature),
        ]
    )


def decode_security_header(data: bytes) -> SecurityHeader:
    """The :class:`SecurityHeader` in ``data``.

    Raises:
        DialogSecurityError: the bytes are not a security header (cut short, an unknown
            format, bytes left over, a thumbprint that is not hex).
    """
    view = memoryview(data)
    pos = 0

    def take(n: int, what: str) -> bytes:
        nonlocal pos
        if pos + n > len(view):
            raise DialogSecurityError(f"the security header ends inside its {what}")
        out = bytes(view[pos : pos + n])
        pos += n
        return out

    def field(what: str) -> bytes:
        (n,) = _U16.unpack(take(2, what))
        return take(n, what)

    if take(1, "format") != bytes([_FORMAT]):
        raise DialogSecurityError("the security header has an unknown format")
    key_id = uuid.UUID(bytes=take(16, "key id"))
    (timestamp,) = _F64.unpack(take(8, "timestamp"))
    recipient, wrapped, signer, signature = (
        field(w) for w in ("recipient thumbprint", "wrapped key", "signer thumbprint", "signature")
    )
    if pos != len(view):
        raise DialogSecurityError(f"the security header has {len(view) - pos} bytes left over")
    try:
        recipient_text, signer_text = recipient.decode("ascii"), signer.decode("ascii")
        for t in (recipient_text, signer_text):
            int(t or "0", 16)
    except ValueError:
        raise DialogSecurityError(
            "the security header names a thumbprint that is not hex"
        ) from None
    return SecurityHeader(key_id, timestamp, recipient_text, wrapped, signer_text, signature)


def _associated(header: MessageHeader) -> bytes:
    """What a sealed body is bound to: the message's identity in its dialog."""
    names = "\0".join(
        (header.from_service, header.to_service, header.contract, header.message_type)
    ).encode("utf-8")
    return b"".join(
        [
            header.conversation_id,
            b"\1" if header.is_initiator else b"\0",
            struct.pack(">q", header.sequence),
            header.message_id,
            names,
        ]
    )


def _nonce(key: SessionKey, header: MessageHeader) -> bytes:
    """The message's nonce: HMAC-SHA256 of its id and sequence number under the session key,
    cut to 12 bytes — unique per message (its id is), and the same each time the message is
    sealed, so that the fragments of a message sent again match those the receiver holds from
    an earlier attempt (NET-5: only lost fragments are sent again)."""
    mac = hmac.HMAC(key.key, hashes.SHA256())
    mac.update(b"nonce\0" + header.message_id + struct.pack(">q", header.sequence))
    return mac.finalize()[:_NONCE]


def seal_body(key: SessionKey, header: MessageHeader, body: bytes) -> bytes:
    """``body`` sealed with the session key for the message ``header`` describes (AES-GCM,
    the message's own nonce): ``len(body) + SEAL_OVERHEAD`` bytes (SEC-2). Sealing the same
    message again gives the same bytes."""
    nonce = _nonce(key, header)
    return nonce + AESGCM(key.key).encrypt(nonce, body, _associated(header))


def open_body(key: SessionKey, header: MessageHeader, sealed: bytes) -> bytes:
    """The plain body of ``sealed`` (SEC-2).

    Raises:
        DialogSecurityError: the body is not the one sealed for this message with this key —
            altered, cut short, another message's body, or sealed with another key.
    """
    if len(sealed) < SEAL_OVERHEAD:
        raise DialogSecurityError(
            f"the sealed body of message {header.sequence} is {len(sealed)} bytes, too short"
        )
    try:
        return AESGCM(key.key).decrypt(sealed[:_NONCE], sealed[_NONCE:], _associated(header))
    except InvalidTag:
        raise DialogSecurityError(
            f"message {header.sequence} of conversation {header.conversation_id.hex()} fails "
            "its integrity check: it was altered, cut short, moved, or sealed with another key"
        ) from None


def _hkdf(secret: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, salt=None, info=_WRAP_INFO).derive(secret)


def wrap_key(public_key: PublicKeyTypes, key: SessionKey) -> bytes:
    """The session key wrapped for the holder of ``public_key``'s private key (SEC-2).

    Raises:
        DialogSecurityError: the certificate's key is neither RSA nor elliptic-curve.
    """
    if isinstance(public_key, rsa.RSAPublicKey):
        return public_key.encrypt(key.key, _oaep())
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        ephemeral = ec.generate_private_key(public_key.curve)
        kek = _hkdf(ephemeral.exchange(ec.ECDH(), public_key))
        point = ephemeral.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        nonce = os.urandom(_NONCE)
        return _U16.pack(len(point)) + point + nonce + AESGCM(kek).encrypt(nonce, key.key, None)
    raise DialogSecurityError(
        f"a {type(public_key).__name__} cannot wrap a session key: use an RSA or EC certificate"
    )


def unwrap_key(private_key: PrivateKeyTypes, key_id: uuid.UUID, wrapped: bytes) -> SessionKey:
    """The session key ``wrapped`` holds, unwrapped with ``private_key`` (SEC-2).

    Raises:
        DialogSecurityError: it was not wrapped for this key (or was altered).
    """
    try:
        if isinstance(private_key, rsa.RSAPrivateKey):
            raw = private_key.decrypt(wrapped, _oaep())
        elif isinstance(private_key, ec.EllipticCurvePrivateKey):
            (n,) = _U16.unpack(wrapped[:2])
            point, rest = wrapped[2 : 2 + n], wrapped[2 + n :]
            peer = ec.EllipticCurvePublicKey.from_encoded_point(private_key.curve, point)
            kek = _hkdf(private_key.exchange(ec.ECDH(), peer))
            raw = AESGCM(kek).decrypt(rest[:_NONCE], rest[_NONCE:], None)
        else:
            raise DialogSecurityError(f"a {type(private_key).__name__} cannot unwrap a session key")
    except (ValueError, InvalidTag, struct.error):
        raise DialogSecurityError(
            "the session key was not wrapped for this certificate's key (or was altered)"
        ) from None
    if len(raw) != KEY_BYTES:
        raise DialogSecurityError(f"the unwrapped session key is {len(raw)} bytes, not 32")
    return SessionKey(key_id, raw)


def _oaep() -> padding.OAEP:
    return padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None)


def signed_bytes(header: MessageHeader, sh: SecurityHeader) -> bytes:
    """What a sender signs: the dialog's conversation, side, services, contract and sending
    instance, and the security header's key id, time, recipient and wrapped key."""
    names = "\0".join((header.from_service, header.to_service, header.contract)).encode()
    return b"".join(
        [
            b"servicebroker dialog security v1\0",
            header.conversation_id,
            b"\1" if header.is_initiator else b"\0",
            header.from_broker_instance.bytes,
            names,
            sh.key_id.bytes,
            _F64.pack(sh.timestamp),
            sh.recipient_thumbprint.encode("ascii"),
            b"\0",
            sh.wrapped_key,
        ]
    )


def sign_header(
    private_key: PrivateKeyTypes, header: MessageHeader, sh: SecurityHeader, *, signer: str
) -> SecurityHeader:
    """``sh`` signed by ``private_key`` (of the certificate whose thumbprint is ``signer``).

    Raises:
        DialogSecurityError: the key is neither RSA nor elliptic-curve.
    """
    data = signed_bytes(header, sh)
    if isinstance(private_key, rsa.RSAPrivateKey):
        pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.MAX_LENGTH)
        signature = private_key.sign(data, pss, hashes.SHA256())
    elif isinstance(private_key, ec.EllipticCurvePrivateKey):
        signature = private_key.sign(data, ec.ECDSA(hashes.SHA256()))
    else:
        raise DialogSecurityError(f"a {type(private_key).__name__} cannot sign a dialog")
    return SecurityHeader(
        sh.key_id, sh.timestamp, sh.recipient_thumbprint, sh.wrapped_key, signer, signature
    )


def verify_header(public_key: PublicKeyTypes, header: MessageHeader, sh: SecurityHeader) -> None:
    """Check ``sh``'s signature with ``public_key`` (SEC-2: the sender proves its identity).

    Raises:
        DialogSecurityError: no signature, or one that does not verify (forged, altered, or
            made by another certificate).
    """
    if not sh.signature:
        raise DialogSecurityError("the message carries no signature")
    data = signed_bytes(header, sh)
    try:
        if isinstance(public_key, rsa.RSAPublicKey):
            pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.AUTO)
            public_key.verify(sh.signature, data, pss, hashes.SHA256())
        elif isinstance(public_key, ec.EllipticCurvePublicKey):
            public_key.verify(sh.signature, data, ec.ECDSA(hashes.SHA256()))
        else:
            raise DialogSecurityError(f"a {type(public_key).__name__} cannot verify a dialog")
    except InvalidSignature:
        raise DialogSecurityError(
            f"the signature of certificate {sh.signer_thumbprint} does not verify"
        ) from None
