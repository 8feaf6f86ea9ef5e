"""Transport security (SEC-1) with the standard library's ``ssl``: mutual TLS between two broker
endpoints, each authenticated by the certificate of its Service Broker endpoint
(``AUTHENTICATION = CERTIFICATE``) and accepted only when that certificate is one this
database holds and a login made from it has been granted CONNECT on the endpoint (CREATE
LOGIN … FROM CERTIFICATE; GRANT CONNECT ON ENDPOINT::…).

:func:`security_from_catalog` builds both sides' :class:`ssl.SSLContext` from the catalog: the
endpoint's certificate (stored in the database at CREATE CERTIFICATE) and private key (read
from its file now, so an unreadable key fails the transport's start, retried by TICK-4c); the
trust anchors are exactly the granted certificates — a self-signed peer certificate is its own
anchor, a CA-signed one is accepted when its own certificate or its CA's is granted
(``VERIFY_X509_PARTIAL_CHAIN``). Host names are not checked: the certificate is the identity,
as in SQL Server. An expired or not-yet-valid certificate fails the handshake.

The contexts follow this endpoint's own ENCRYPTION (:data:`CIPHERS`): REQUIRED offers only
encrypting (AES-GCM) cipher suites, TLS 1.2 or 1.3; DISABLED only NULL cipher suites, TLS 1.2
(:data:`INTEGRITY_ONLY_CIPHERS`: both certificates are exchanged and verified as before, every
record carries its HMAC, but the data goes in the clear); SUPPORTED offers both, encrypting
first. So the TLS handshake — whose negotiation the Finished messages protect — reaches the
outcome of the pure ENCRYPTION matrix (:func:`.adjacent.negotiate_encryption`, decided from the
HELLOs, which travel in the clear), and :func:`check_cipher` refuses the connection when it did
not: a HELLO altered on the way (SUPPORTED turned into DISABLED, to have the data sent in the
clear) fails the login instead of downgrading it. :func:`handshake_failure` turns a failed
handshake into the status text and the Audit Broker Login subclass.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from dataclasses import dataclass

from ..catalog import CatalogSnapshot
from ..errors import TransportError
from .audit import AuditBrokerLogin, LoginFailure, handshake_status
from .certificates import thumbprint

__all__ = [
    "CIPHERS",
    "INTEGRITY_ONLY_CIPHERS",
    "EndpointSecurity",
    "check_cipher",
    "granted_certificates",
    "handshake_failure",
    "peer_thumbprint",
    "same_identity",
    "security_from_catalog",
]

INTEGRITY_ONLY_CIPHERS = "ECDHE-ECDSA-NULL-SHA:ECDHE-RSA-NULL-SHA:NULL-SHA256:@SECLEVEL=0"
"""The TLS 1.2 cipher suites of an unencrypted connection (ENCRYPTION DISABLED on one side):
authenticated key exchange and an HMAC on every record, no encryption. ECDHE-ECDSA-NULL-SHA is
the one for the EC certificates :mod:`.certificates` makes; the RSA ones serve RSA certificates.
``@SECLEVEL=0`` because OpenSSL counts a NULL cipher as security level 0 (which also admits
weaker keys in the certificates; only granted certificates are trusted all the same)."""

CIPHERS = {
    "REQUIRED": "ECDH+AESGCM",
    "SUPPORTED": f"ECDH+AESGCM:{INTEGRITY_ONLY_CIPHERS}",
    "DISABLED": INTEGRITY_ONLY_CIPHERS,
}
"""The TLS 1.2 cipher suites each ENCRYPTION setting offers (TLS 1.3's are OpenSSL's AES-GCM
ones first, by the server's preference); DISABLED also stops at TLS 1.2, which has NULL
ciphers."""


@dataclass(frozen=True)
class EndpointSecurity:
    """The endpoint's TLS contexts and settings.

    Attributes:
        server: the context of accepted connections (client certificate required).
        client: the context of connections this endpoint makes (server certificate verified).
        encryption: the endpoint's ENCRYPTION (DISABLED, SUPPORTED, REQUIRED).
        certificate_pem: the endpoint's own certificate (PEM).
        private_key_file: the file its private key was read from.
        granted: the certificates (PEM) trusted: those of the logins granted CONNECT on the
            endpoint (:func:`granted_certificates`).

    Both contexts offer the cipher suites of ``encryption`` (:data:`CIPHERS`).
    """

    server: ssl.SSLContext
    client: ssl.SSLContext
    encryption: str
    certificate_pem: str = ""
    private_key_file: str = ""
    granted: tuple[str, ...] = ()


def granted_certificates(catalog: CatalogSnapshot) -> tuple[str, ...]:
    """The certificates (PEM, sorted) of the logins granted CONNECT on this broker's endpoint:
    exactly what its TLS contexts trust (SEC-1); a dropped certificate, a dropped login or a
    REVOKE CONNECT leaves this list."""
    pems = set()
    for login in catalog.logins.values():
        if login.login_id in catalog.endpoint_grants:
            peer = catalog.certificates_by_id.get(login.certificate_id)
            if peer is not None:
                pems.add(peer.certificate_pem)
    return tuple(sorted(pems))


def same_identity(security: EndpointSecurity, catalog: CatalogSnapshot) -> bool:
    """Whether ``catalog``'s endpoint still has ``security``'s ENCRYPTION, certificate and
    private key file (the connections made with it stand); False when the endpoint is gone."""
    endpoint = catalog.service_broker_endpoint
    if endpoint is None:
        return False
    cert = catalog.certificates_by_id.get(endpoint.certificate_id)
    return (
        cert is not None
        and endpoint.encryption == security.encryption
        and cert.certificate_pem == security.certificate_pem
        and cert.private_key_file == security.private_key_file
    )


def security_from_catalog(catalog: CatalogSnapshot) -> EndpointSecurity:
    """The TLS contexts of this broker's Service Broker endpoint (SEC-1).

    Raises:
        TransportError: no endpoint; its certificate has no private key file, or the key
            cannot be read or does not load with the certificate (the message names the
            file); the message names the endpoint.
    """
    endpoint = catalog.service_broker_endpoint
    if endpoint is None:
        raise TransportError("this broker has no Service Broker endpoint (CREATE ENDPOINT)")
    cert = catalog.certificates_by_id.get(endpoint.certificate_id)
    if cert is None or not cert.private_key_file:
        raise TransportError(
            f"endpoint {endpoint.name!r}: its certificate has no private key (CREATE "
            f"CERTIFICATE … WITH PRIVATE KEY (FILE = …))"
        )
    granted_pems = granted_certificates(catalog)
    contexts = []
    for purpose in (ssl.PROTOCOL_TLS_SERVER, ssl.PROTOCOL_TLS_CLIENT):
        ctx = ssl.SSLContext(purpose)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if endpoint.encryption == "DISABLED":
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers(CIPHERS[endpoint.encryption])
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        _load_chain(ctx, cert.certificate_pem, cert.private_key_file, endpoint.name)
        if granted_pems:
            ctx.load_verify_locations(cadata="\n".join(granted_pems))
        contexts.append(ctx)
    return EndpointSecurity(
        contexts[0],
        contexts[1],
        endpoint.encryption,
        cert.certificate_pem,
        cert.private_key_file,
        granted_pems,
    )


def _load_chain(ctx: ssl.SSLContext, pem: str, key_file: str, endpoint: str) -> None:
    """``load_cert_chain`` wants files: the stored certificate goes through a private
    temporary file, removed at once."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        ctx.load_cert_chain(path, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise TransportError(
            f"endpoint {endpoint!r}: its certificate and private key file {key_file!r} do not "
            f"load: {exc}"
        ) from exc
    finally:
        os.unlink(path)


def peer_thumbprint(sock: ssl.SSLSocket) -> str | None:
    """The thumbprint (SHA-1 of the DER, lower-case hex) of the certificate the peer of TLS
    socket ``sock`` presented (SEC-1: ``dm_broker_connections().peer_certificate``), or None
    when it presented none."""
    der = sock.getpeercert(binary_form=True)
    return None if der is None else thumbprint(der)


def check_cipher(sock: ssl.SSLSocket, *, encrypt: bool, address: str) -> None:
    """Check that the handshake on ``sock`` chose what the ENCRYPTION matrix said (SEC-1): an
    AES cipher when the connection is to be encrypted, a NULL one when it is not. Since the
    contexts offer the ciphers of each side's own setting, a mismatch means a HELLO was altered
    on the way (or the peer runs other code).

    Raises:
        LoginFailure: it did not (NEGOTIATE_FAILURE), naming the cipher and ``address``.
    """
    cipher = sock.cipher()
    name = cipher[0] if cipher else "none"
    as_said = ("AES" in name and "NULL" not in name) if encrypt else ("NULL" in name)
    if not as_said:
        raise LoginFailure(
            handshake_status(
                f"The TLS handshake chose the cipher {name}, but the connection is "
                f"{'' if encrypt else 'not '}to be encrypted",
                address,
            ),
            AuditBrokerLogin.NEGOTIATE_FAILURE,
        )


# X509_V_ERR_* codes of OpenSSL (ssl.SSLCertVerificationError.verify_code)
_NOT_YET_VALID, _EXPIRED = 9, 10
_NOT_TRUSTED = {
    2,  # unable to get issuer certificate
    18,  # self-signed certificate (not a granted one)
    19,  # self-signed certificate in the chain
    20,  # unable to get local issuer certificate
    21,  # unable to verify the first certificate
}
# TLS alerts the peer sent, as OpenSSL names them (ssl.SSLError.reason, after "_ALERT_")
_REFUSED = "The certificate used by this endpoint was refused by the peer:"
_ALERTS = {
    "CERTIFICATE_EXPIRED": f"{_REFUSED} Certificate expired.",
    "UNKNOWN_CA": f"{_REFUSED} it is not granted CONNECT on the peer's endpoint.",
    "BAD_CERTIFICATE": f"{_REFUSED} it is not granted CONNECT on the peer's endpoint.",
    "CERTIFICATE_UNKNOWN": f"{_REFUSED} it is not granted CONNECT on the peer's endpoint.",
    "CERTIFICATE_REQUIRED": "The peer requires a certificate and this endpoint presented none.",
}


def handshake_failure(exc: OSError, address: str) -> LoginFailure:
    """The :class:`LoginFailure` of a TLS handshake that failed with ``exc`` on the connection
    with ``address`` (SEC-1): the status text, in the style of SQL Server's "Connection handshake
    failed." messages, and the Audit Broker Login subclass.

    - this side refused the peer's certificate (``SSLCertVerificationError``): "The certificate
      used by the peer is invalid due to the following reason: Certificate expired." (or not yet
      valid: AUTHENTICATION_FAILURE), "…: Certificate not granted CONNECT on this endpoint."
      (a certificate, or a CA, that is not granted: AUTHORIZATION_FAILURE);
    - the peer presented no certificate: AUTHENTICATION_FAILURE;
    - the peer refused this side's certificate (a TLS alert): "The certificate used by this
      endpoint was refused by the peer: …" naming the alert;
    - anything else (a reset, the peer closing, a timeout): the error as the OS or OpenSSL
      says it.
    """
    if isinstance(exc, ssl.SSLCertVerificationError):
        code, message = exc.verify_code, exc.verify_message
        if code in (_EXPIRED, _NOT_YET_VALID):
            why = "Certificate expired." if code == _EXPIRED else "Certificate not yet valid."
            subclass = AuditBrokerLogin.AUTHENTICATION_FAILURE
        elif code in _NOT_TRUSTED:
            why = f"Certificate not granted CONNECT on this endpoint ({message})."
            subclass = AuditBrokerLogin.AUTHORIZATION_FAILURE
        else:
            why = f"{message}."
            subclass = AuditBrokerLogin.AUTHENTICATION_FAILURE
        return LoginFailure(
            handshake_status(
                f"The certificate used by the peer is invalid due to the following reason: {why}",
                address,
            ),
            subclass,
        )
    reason = getattr(exc, "reason", None) or ""
    if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
        return LoginFailure(
            handshake_status("The peer presented no certificate", address),
            AuditBrokerLogin.AUTHENTICATION_FAILURE,
        )
    alert = reason.partition("_ALERT_")[2] if "_ALERT_" in reason else ""
    if alert:
        why = _ALERTS.get(alert, "The peer refused the handshake.")
        return LoginFailure(
            handshake_status(f"{why} (TLS alert: {alert.lower().replace('_', ' ')})", address),
            AuditBrokerLogin.AUTHENTICATION_FAILURE,
        )
    detail = reason or getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return LoginFailure(
        handshake_status(f"An error occurred during the TLS handshake: {detail}", address),
        AuditBrokerLogin.AUTHENTICATION_FAILURE,
    )
