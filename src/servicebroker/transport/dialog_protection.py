"""Which certificates and principals a secured dialog uses, and what a message needs to leave or
to be taken (SEC-2, SEC-3, SEC-4): the decisions around :mod:`.dialog_security`'s cryptography.

Sending (:func:`protect_outgoing`): a message for another broker instance is secured unless its
dialog was begun WITH ENCRYPTION = OFF and no remote service binding names its target service
(SEC-2). A secured dialog's initiator makes the session key (:func:`new_dialog_key`: the binding
gives the target's certificate — the one its user owns — and the principal that began the
dialog must own a certificate with a private key to sign, unless the binding is ANONYMOUS,
SEC-3); without them the message waits in the transmission queue with a status saying what is
missing (NET-7) and never leaves in clear. Every body is sealed; the first message each way
carries the :class:`~.dialog_security.SecurityHeader`.

Taking (:func:`open_incoming`): a sealed body is opened with its dialog's key — for a new
dialog, the key unwrapped with the private key of the certificate it is wrapped for, owned by
the target service's owner (dbo); the initiator's signature names the user at the target that
owns its certificate, who becomes the dialog's far principal (ANONYMOUS: ``public``), and the
far side's first message is verified against the certificates its principal owns. A message
that fails raises :class:`~servicebroker.errors.DialogSecurityError` whose text is the status
the sender shows; it is never delivered.

Certificates' validity is checked against the wall clock (``wall_now``, seconds since the
epoch), as TLS checks it: a certificate's dates are the world's, not the broker clock's.
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
import uuid
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

from ..catalog import DBO, PUBLIC, CatalogSnapshot
from ..errors import CertificateError, DialogSecurityError
from ..storage.rows import CertificateRow, ClosedConversationRow, EndpointRow
from .certificates import load_private_key_file
from .dialog_security import (
    SecurityHeader,
    SessionKey,
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
from .wire import MessageHeader

__all__ = [
    "DialogKey",
    "KeyRing",
    "Opened",
    "dialog_key_of",
    "is_secured",
    "keep_dialog_key",
    "new_dialog_key",
    "open_incoming",
    "protect_outgoing",
]


@dataclass(frozen=True, slots=True)
class DialogKey:
    """One side's dialog security state, as its endpoint row keeps it.

    Attributes:
        key: the session key.
        timestamp: when the key was made or taken (broker-clock seconds).
        principal_id: this side's principal (whose certificate signs this side's first
            message): the initiator, the one who began the dialog; the target, dbo.
        far_principal_id: the far side's principal here: the binding's user at the initiator;
            at the target the user owning the initiator's certificate, or public (anonymous).
        far_certificate: the thumbprint of the far side's certificate: the one the key was
            wrapped for (initiator), the one that signed (target); "" when anonymous.
    """

    key: SessionKey
    timestamp: float
    principal_id: int
    far_principal_id: int
    far_certificate: str


def dialog_key_of(row: EndpointRow | ClosedConversationRow) -> DialogKey | None:
    """The dialog security state an endpoint row keeps — or, once it has closed, the row that
    remembers it (its END may still wait to be acknowledged) — or None (not secured)."""
    key_id = (
        row.session_key_identifier
        if isinstance(row, ClosedConversationRow)
        else row.outbound_session_key_identifier
    )
    if row.session_key is None or key_id is None:
        return None
    return DialogKey(
        SessionKey(uuid.UUID(key_id), bytes(row.session_key)),
        row.security_timestamp or 0.0,
        row.principal_id if row.principal_id is not None else DBO,
        row.far_principal_id if row.far_principal_id is not None else PUBLIC,
        row.far_certificate or "",
    )


class KeyRing:
    """Private and public keys of the catalog's certificates, read once and kept (a private key
    is read from its file, as the endpoint's is, SEC-1). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._private: dict[str, PrivateKeyTypes] = {}
        self._public: dict[str, PublicKeyTypes] = {}

    def private_key(self, cert: CertificateRow) -> PrivateKeyTypes:
        """The private key of ``cert``.

        Raises:
            DialogSecurityError: it has none, or its file cannot be read.
        """
        if cert.private_key_file is None:
            raise DialogSecurityError(f"certificate {cert.name!r} has no private key here")
        with self._lock:
            key = self._private.get(cert.private_key_file)
        if key is None:
            try:
                key = load_private_key_file(cert.private_key_file)
            except CertificateError as exc:
                raise DialogSecurityError(f"certificate {cert.name!r}: {exc}") from None
            with self._lock:
                self._private[cert.private_key_file] = key
        return key

    def public_key(self, cert: CertificateRow) -> PublicKeyTypes:
        """The public key of ``cert`` (from the PEM kept in the database)."""
        with self._lock:
            key = self._public.get(cert.thumbprint)
        if key is None:
            try:
                pem = x509.load_pem_x509_certificate(cert.certificate_pem.encode())
            except ValueError as exc:
                raise DialogSecurityError(
                    f"certificate {cert.name!r} does not parse: {exc}"
                ) from None
            key = pem.public_key()
            with self._lock:
                self._public[cert.thumbprint] = key
        return key


def _when(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _check_valid(cert: CertificateRow, wall_now: float) -> None:
    """Raise :class:`DialogSecurityError` naming ``cert`` when ``wall_now`` (seconds since
    the epoch) is outside its validity."""
    if wall_now > cert.expiry_date:
        raise DialogSecurityError(
            f"The certificate {cert.name!r} (thumbprint {cert.thumbprint}) that dialog security "
            f"needs expired at {_when(cert.expiry_date)} UTC."
        )
    if wall_now < cert.start_date:
        raise DialogSecurityError(
            f"The certificate {cert.name!r} (thumbprint {cert.thumbprint}) that dialog security "
            f"needs is not valid before {_when(cert.start_date)} UTC."
        )


def _signing_certificate(
    catalog: CatalogSnapshot, principal_id: int, wall_now: float
) -> CertificateRow:
    """The certificate principal ``principal_id`` signs with: of those it owns with a private
    key, the valid one that expires last."""
    owned = [c for c in catalog.certificates_owned_by(principal_id) if c.private_key_file]
    if not owned:
        raise DialogSecurityError(
            "Dialog security is unavailable for this conversation because there is no security "
            f"certificate bound to the database principal (Id: {principal_id}). Either create a "
            "certificate for the principal, or specify ENCRYPTION = OFF when beginning the "
            "conversation."
        )
    valid = [c for c in owned if c.start_date <= wall_now <= c.expiry_date]
    if not valid:
        _check_valid(max(owned, key=lambda c: c.expiry_date), wall_now)
    return max(valid, key=lambda c: c.expiry_date)


def keep_dialog_key(row: EndpointRow, key: DialogKey) -> None:
    """Write ``key`` into ``row``'s dialog security columns (the session key, its id as both
    the outbound and the inbound identifier — one key serves both ways — the time, the
    principals and the far certificate), so a restart reuses it."""
    key_id = str(key.key.key_id)
    row.session_key = key.key.key
    row.outbound_session_key_identifier = key_id
    row.inbound_session_key_identifier = key_id
    row.security_timestamp = key.timestamp
    row.principal_id = key.principal_id
    row.far_principal_id = key.far_principal_id
    row.far_certificate = key.far_certificate
    row.encryption_requested = 1


def is_secured(row: EndpointRow) -> bool:
    """SEC-2: a dialog with another instance is secured unless it was begun WITH ENCRYPTION =
    OFF while no remote service binding named its far service (BEGIN DIALOG decides it and
    keeps it as ``encryption_requested``, so a binding made later changes no dialog begun)."""
    return bool(row.encryption_requested)


def new_dialog_key(
    row: EndpointRow, catalog: CatalogSnapshot, now: float, wall_now: float
) -> DialogKey:
    """The session key an initiator makes for its secured dialog (SEC-2, SEC-3), after checking
    that it has what the first message needs: a remote service binding for the target service
    whose user owns a valid certificate, and — unless the binding is ANONYMOUS — a valid
    certificate with a private key owned by the principal that began the dialog.

    Raises:
        DialogSecurityError: what is missing, as the transmission_status text (NET-7).
    """
    binding = catalog.binding_for(row.far_service)
    if binding is None:
        raise DialogSecurityError(
            "Dialog security is unavailable for this conversation because there is no remote "
            f"service binding for the target service {row.far_service!r}. Create a remote "
            "service binding, or specify ENCRYPTION = OFF when beginning the conversation."
        )
    theirs = [c for c in catalog.certificates_owned_by(binding.principal_id)]
    if not theirs:
        user = catalog.principals_by_id.get(binding.principal_id)
        raise DialogSecurityError(
            f"Dialog security is unavailable for this conversation because the remote service "
            f"binding {binding.name!r} names user {user.name if user else binding.principal_id!r}"
            ", who owns no certificate for the target service."
        )
    valid = [c for c in theirs if c.start_date <= wall_now <= c.expiry_date]
    if not valid:
        _check_valid(max(theirs, key=lambda c: c.expiry_date), wall_now)
    target_cert = max(valid, key=lambda c: c.expiry_date)
    principal = row.principal_id if row.principal_id is not None else DBO
    if not binding.is_anonymous_on:
        _signing_certificate(catalog, principal, wall_now)
    return DialogKey(
        new_session_key(), now, principal, binding.principal_id, target_cert.thumbprint
    )


def protect_outgoing(
    header: MessageHeader,
    body: bytes,
    key: DialogKey,
    catalog: CatalogSnapshot,
    keys: KeyRing,
    wall_now: float,
) -> tuple[MessageHeader, bytes]:
    """``header`` and ``body`` as a secured message leaves (SEC-2): the body sealed with the
    dialog's key; the first message each way (sequence 0, or an unsequenced Error) with its
    security header — the initiator's with the key wrapped for the target's certificate and,
    unless anonymous, its signature; the target's signed.

    Raises:
        DialogSecurityError: a certificate missing or expired (the status text).
    """
    security = b""
    if header.sequence <= 0:
        sh = SecurityHeader(key.key.key_id, key.timestamp)
        anonymous = False
        if header.is_initiator:
            target = next(
                (c for c in catalog.certificates.values() if c.thumbprint == key.far_certificate),
                None,
            )
            if target is None:
                raise DialogSecurityError(
                    f"The certificate {key.far_certificate} the session key of conversation "
                    f"{header.conversation_id.hex()} is wrapped for is no longer here."
                )
            _check_valid(target, wall_now)
            sh = SecurityHeader(
                sh.key_id,
                sh.timestamp,
                target.thumbprint,
                wrap_key(keys.public_key(target), key.key),
            )
            binding = catalog.binding_for(header.to_service)
            anonymous = binding is not None and bool(binding.is_anonymous_on)
        if not anonymous:
            mine = _signing_certificate(catalog, key.principal_id, wall_now)
            sh = sign_header(keys.private_key(mine), header, sh, signer=mine.thumbprint)
        security = encode_security_header(sh)
    sealed = seal_body(key.key, header, body)
    out = dataclasses.replace(header, message_size=len(sealed), encrypted=True, security=security)
    return out, sealed


@dataclass(frozen=True, slots=True)
class Opened:
    """A secured message opened: its plain ``body`` and, for a dialog's first message at the
    target, the :class:`DialogKey` the new endpoint keeps (else None)."""

    body: bytes
    new_key: DialogKey | None = None


def open_incoming(
    header: MessageHeader,
    body: bytes,
    key: DialogKey | None,
    catalog: CatalogSnapshot,
    keys: KeyRing,
    now: float,
    wall_now: float,
    *,
    new_dialog: bool = False,
) -> Opened:
    """Open a message from another instance against its endpoint's dialog ``key`` (None: the
    endpoint is not secured; or, with ``new_dialog``, does not exist yet) (SEC-2, SEC-3).

    A plain message on a dialog that is not secured passes as it is. A dialog's first message
    at the target (``key`` None, sequence 0 from the initiator, sealed) brings the session key:
    unwrapped with the private key of the certificate it names (owned by dbo here), the
    signature verified against the certificate of the user here that owns it (that user is
    the far principal; none: anonymous, public). The far side's first message each way must be
    signed by a certificate its principal owns.

    Raises:
        DialogSecurityError: the status text for the sender: a plain message on a secured
            dialog or a sealed one on a dialog that is not, a key wrapped for a certificate
            not here, a signature that does not verify or by a certificate no user here owns,
            an expired certificate, a body that fails its integrity check.
    """
    conversation = header.conversation_id.hex()
    if not header.encrypted:
        if key is not None:
            raise DialogSecurityError(
                f"A message of secured conversation {conversation} arrived unsealed; it is refused."
            )
        return Opened(body)
    sh = decode_security_header(header.security) if header.security else None
    new_key: DialogKey | None = None
    if key is None:
        if not new_dialog:
            raise DialogSecurityError(
                f"A sealed message arrived for conversation {conversation}, which is not "
                "secured here; it is refused."
            )
        if not header.is_initiator or sh is None or not sh.wrapped_key:
            raise DialogSecurityError(
                f"A sealed message of conversation {conversation} arrived for a dialog that "
                "has no session key here."
            )
        mine = next(
            (
                c
                for c in catalog.certificates_owned_by(DBO)
                if c.thumbprint == sh.recipient_thumbprint and c.private_key_file
            ),
            None,
        )
        if mine is None:
            raise DialogSecurityError(
                f"The session key of conversation {conversation} is wrapped for certificate "
                f"{sh.recipient_thumbprint}, which this database does not hold with its "
                "private key."
            )
        _check_valid(mine, wall_now)
        try:
            session = unwrap_key(keys.private_key(mine), sh.key_id, sh.wrapped_key)
        except DialogSecurityError as exc:
            raise DialogSecurityError(
                f"The session key of conversation {conversation} could not be unwrapped with "
                f"certificate {mine.name!r}: {exc}"
            ) from None
        far_principal, far_cert = PUBLIC, ""
        if sh.signer_thumbprint:
            user = catalog.principal_of_thumbprint(sh.signer_thumbprint)
            if user is None:
                raise DialogSecurityError(
                    f"No user in this database owns the initiator's certificate "
                    f"{sh.signer_thumbprint} (conversation {conversation}): create one FROM "
                    "CERTIFICATE, or have the initiator's binding use ANONYMOUS = ON."
                )
            _verify(catalog, keys, header, sh, user.principal_id, wall_now)
            far_principal, far_cert = user.principal_id, sh.signer_thumbprint
        new_key = key = DialogKey(session, now, DBO, far_principal, far_cert)
    elif header.sequence <= 0 and not header.is_initiator:
        if sh is None:
            raise DialogSecurityError(
                f"The target's first message of conversation {conversation} carries no signature."
            )
        _verify(catalog, keys, header, sh, key.far_principal_id, wall_now)
    if sh is not None and sh.key_id != key.key.key_id:
        raise DialogSecurityError(
            f"A message of conversation {conversation} names session key {sh.key_id}, not the "
            f"dialog's {key.key.key_id}."
        )
    return Opened(open_body(key.key, header, body), new_key)


def _verify(
    catalog: CatalogSnapshot,
    keys: KeyRing,
    header: MessageHeader,
    sh: SecurityHeader,
    principal_id: int,
    wall_now: float,
) -> None:
    """Check that ``sh`` is signed by a valid certificate ``principal_id`` owns here (SEC-2).

    Raises:
        DialogSecurityError: no such certificate, an expired one, or a bad signature.
    """
    cert = next(
        (
            c
            for c in catalog.certificates_owned_by(principal_id)
            if c.thumbprint == sh.signer_thumbprint
        ),
        None,
    )
    if cert is None:
        raise DialogSecurityError(
            f"The message of conversation {header.conversation_id.hex()} is signed by "
            f"certificate {sh.signer_thumbprint or '(none)'}, which its far principal "
            f"(Id: {principal_id}) does not own here."
        )
    _check_valid(cert, wall_now)
    verify_header(keys.public_key(cert), header, sh)
