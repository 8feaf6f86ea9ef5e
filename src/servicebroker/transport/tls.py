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
"""

from __future__ import annotations

import hashlib
import os
import ssl
import tempfile
from dataclasses import dataclass

from ..catalog import CatalogSnapshot
from ..errors import TransportError

__all__ = ["EndpointSecurity", "peer_thumbprint", "security_from_catalog"]


@dataclass(frozen=True)
class EndpointSecurity:
    """The endpoint's TLS contexts and settings.

    Attributes:
        server: the context of accepted connections (client certificate required).
        client: the context of connections this endpoint makes (server certificate verified).
        encryption: the endpoint's ENCRYPTION (DISABLED, SUPPORTED, REQUIRED).
        granted: the SHA-1 thumbprints (hex) of the certificates granted CONNECT.
    """

    server: ssl.SSLContext
    client: ssl.SSLContext
    encryption: str
    granted: frozenset[str]


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
    granted_pems = []
    granted = set()
    for login in catalog.logins.values():
        if login.login_id in catalog.endpoint_grants:
            peer = catalog.certificates_by_id.get(login.certificate_id)
            if peer is not None:
                granted_pems.append(peer.certificate_pem)
                granted.add(peer.thumbprint.lower())
    contexts = []
    for purpose in (ssl.PROTOCOL_TLS_SERVER, ssl.PROTOCOL_TLS_CLIENT):
        ctx = ssl.SSLContext(purpose)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        _load_chain(ctx, cert.certificate_pem, cert.private_key_file, endpoint.name)
        if granted_pems:
            ctx.load_verify_locations(cadata="\n".join(granted_pems))
        contexts.append(ctx)
    return EndpointSecurity(contexts[0], contexts[1], endpoint.encryption, frozenset(granted))


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
    """The SHA-1 thumbprint (hex) of the certificate the peer presented, if any."""
    der = sock.getpeercert(binary_form=True)
    return None if der is None else hashlib.sha1(der).hexdigest()
