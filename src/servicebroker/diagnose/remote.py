"""What a dialog to a service in another broker instance needs, checked from the initiating
side (``diagnose CONFIGURATION … TO SERVICE`` a service not in this database): a live route
(RTE-1..3), the Service Broker endpoint STARTED with a certificate that has its private key
(SEC-1), dialog security as ENCRYPTION asks — a remote service binding whose user owns a valid
certificate of the target, and for full security a certificate the beginning user signs with
(SEC-2, SEC-3) — and what the remote broker must grant (an info: it is checked there); and, at
the target's side, what dialogs from other brokers need here (:func:`inbound_findings`). Pure:
the catalog snapshot and the clocks in, findings out.
"""

from __future__ import annotations

import time

from ..catalog import DBO, PUBLIC, CatalogSnapshot
from ..catalog.routing import RouteChoice, choose_route
from ..storage.rows import CertificateRow
from .findings import Finding, finding

__all__ = ["inbound_findings", "missing_principal", "remote_target_findings"]


def route_to(
    snap: CatalogSnapshot, service: str, broker_instance: str | None, now: float
) -> RouteChoice | None:
    """The route messages to ``service`` (at ``broker_instance``, if given) take at ``now``
    (broker seconds), as the transport chooses it (RTE-1..3), or None."""
    return choose_route(
        snap.routes.values(),
        service_name=service,
        broker_instance=broker_instance,
        local_services=snap.services,
        now=now,
    )


def missing_principal(name: str) -> Finding:
    """The finding for a user to begin the dialog that does not exist."""
    return finding(
        "SBD-CFG-PERMISSION-SEND",
        f"User {name!r}, who is to begin the dialog, does not exist.",
        f"CREATE USER [{name}] and GRANT SEND on the target service to it.",
        user=name,
    )


def remote_target_findings(
    snap: CatalogSnapshot,
    name: str,
    contract: str,
    *,
    encryption: str,
    principal: str,
    broker_instance: str | None = None,
    now: float,
    wall_now: float,
) -> list[Finding]:
    """The checks of a target service ``name`` that is not in this database.

    Args:
        snap: the catalog.
        name: the target service (TO SERVICE).
        contract: the contract's name (for the fixes' text).
        encryption: ``"ON"``, ``"OFF"`` or ``"ANONYMOUS"`` (ssbdiagnose's ENCRYPTION).
        principal: the user beginning the dialog (signs a fully secured dialog).
        broker_instance: the target's broker instance (canonical GUID text), or None for any.
        now: broker-clock seconds (route lifetimes, RTE-1).
        wall_now: seconds since the epoch (certificate validity, as dialog security checks).

    Returns:
        The findings: an expired route, then no route, a LOCAL route to a missing service, or
        the remote target (info) with the endpoint's and dialog security's findings and what the
        remote broker must grant (info).
    """
    out = []
    expired = [
        r.name
        for r in snap.routes.values()
        if r.service_name == name and r.expiry is not None and r.expiry <= now
    ]
    if expired:
        out.append(
            finding(
                "SBD-CFG-ROUTE-EXPIRED",
                f"Route(s) {', '.join(expired)} to service {name!r} have passed their LIFETIME "
                "and are ignored (RTE-1).",
                f"ALTER ROUTE [{expired[0]}] WITH LIFETIME = <seconds>, or create a new route.",
                service=name,
                routes=", ".join(expired),
            )
        )
    route = route_to(snap, name, broker_instance, now)
    if route is None:
        out.append(
            finding(
                "SBD-CFG-NO-ROUTE",
                f"No route matches service {name!r}"
                + (f" at broker instance {broker_instance}" if broker_instance else "")
                + ", which is not in this database: its messages wait in the transmission "
                "queue (RTE-2).",
                f"CREATE ROUTE [{name}_route] WITH SERVICE_NAME = '{name}', ADDRESS = "
                "'TCP://host:port' — broker.create_route(…).",
                service=name,
            )
        )
        return out
    if route.is_local:
        out.append(
            finding(
                "SBD-CFG-TO-SERVICE-MISSING",
                f"Target service {name!r} does not exist in this database, and route "
                f"{route.route_name!r} keeps its messages here (LOCAL): they wait in the "
                "transmission queue until it is created.",
                f"CREATE SERVICE [{name}] ON QUEUE <queue> ([{contract}]), or CREATE "
                "ROUTE to the broker that holds it.",
                service=name,
                route=route.route_name,
            )
        )
        return out
    out.append(
        finding(
            "SBD-CFG-REMOTE-TARGET",
            f"Target service {name!r} is reached through route {route.route_name!r} at "
            f"{route.address}"
            + (f" (broker instance {route.broker_instance})" if route.broker_instance else "")
            + ". Its contract, message types, queue and activation are checked at that broker.",
            "Run `servicebroker diagnose CONFIGURATION TO SERVICE …` on the target's database.",
            service=name,
            route=route.route_name,
            address=route.address,
        )
    )
    out.extend(_endpoint_checks(snap, wall_now))
    out.extend(_dialog_security_checks(snap, name, encryption, principal, wall_now))
    return out


def _endpoint_checks(snap: CatalogSnapshot, wall_now: float) -> list[Finding]:
    """SEC-1: the transport runs while a STARTED endpoint has a certificate with its key."""
    endpoint = snap.service_broker_endpoint
    if endpoint is None:
        return [
            finding(
                "SBD-CFG-NO-ENDPOINT",
                "This database has no Service Broker endpoint: the transport does not run and "
                "messages to other brokers stay in the transmission queue.",
                "CREATE ENDPOINT … FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE …) — "
                "broker.create_endpoint(name, authentication_certificate=…).",
            )
        ]
    out = []
    if endpoint.state != "STARTED":
        out.append(
            finding(
                "SBD-CFG-ENDPOINT-NOT-STARTED",
                f"Endpoint {endpoint.name!r} is {endpoint.state}: the transport does not run.",
                f"ALTER ENDPOINT [{endpoint.name}] STATE = STARTED — "
                f"broker.alter_endpoint({endpoint.name!r}, state='STARTED').",
                endpoint=endpoint.name,
            )
        )
    cert = snap.certificates_by_id.get(endpoint.certificate_id)
    if cert is not None:
        out.extend(_certificate_checks(cert, f"endpoint {endpoint.name!r}", wall_now, key=True))
    if not snap.endpoint_grants:
        out.append(_no_connect(endpoint.name))
    return out


def _no_connect(endpoint: str) -> Finding:
    return finding(
        "SBD-CFG-ENDPOINT-NO-CONNECT",
        f"No login has CONNECT on endpoint {endpoint!r}: every other broker's connection is "
        "refused (SEC-1), so their messages and acknowledgements do not arrive here.",
        f"GRANT CONNECT ON ENDPOINT::[{endpoint}] TO <the other broker's certificate's login> — "
        f"broker.grant_connect({endpoint!r}, certificate=<its certificate>).",
        endpoint=endpoint,
    )


def inbound_findings(snap: CatalogSnapshot, service: str) -> list[Finding]:
    """What dialogs from other brokers to the local ``service`` need here, when this database
    has a Service Broker endpoint (none: no other broker reaches it; nothing to check): CONNECT
    granted to some login (SEC-1), and SEND on the service for the principal a remote initiator
    is mapped to — ``public`` for anonymous and unsecured dialogs, else a user owning a
    certificate (SEC-2, SEC-4).

    Args:
        snap: the catalog.
        service: the target service's name (in this database).

    Returns:
        ``SBD-CFG-ENDPOINT-NO-CONNECT`` and ``SBD-CFG-REMOTE-SEND-NOT-GRANTED`` when they apply.
    """
    endpoint = snap.service_broker_endpoint
    if endpoint is None:
        return []
    out = [] if snap.endpoint_grants else [_no_connect(endpoint.name)]
    securable = f"SERVICE::{service}"
    remote_users = {
        c.principal_id
        for c in snap.certificates_by_id.values()
        if c.principal_id is not None and c.principal_id != DBO
    }
    if not any(snap.has_permission(p, "SEND", securable) for p in {PUBLIC, *remote_users}):
        out.append(
            finding(
                "SBD-CFG-REMOTE-SEND-NOT-GRANTED",
                f"Neither public nor a user owning a certificate has SEND on service {service!r}: "
                "a dialog from another broker is answered with an Error (-229) and nothing is "
                "enqueued (SEC-4).",
                f"GRANT SEND ON SERVICE::[{service}] TO [public] (unsecured or anonymous "
                "dialogs) or TO the user owning the initiating broker's certificate.",
                service=service,
                endpoint=endpoint.name,
            )
        )
    return out


def _certificate_checks(
    cert: CertificateRow, user: str, wall_now: float, *, key: bool
) -> list[Finding]:
    out = []
    if key and not cert.private_key_file:
        out.append(
            finding(
                "SBD-CFG-CERTIFICATE-NO-KEY",
                f"Certificate {cert.name!r} of the {user} has no private key.",
                f"CREATE CERTIFICATE [{cert.name}] … WITH PRIVATE KEY (FILE = …) again.",
                certificate=cert.name,
            )
        )
    if not cert.start_date <= wall_now <= cert.expiry_date:
        out.append(
            finding(
                "SBD-CFG-CERTIFICATE-EXPIRED",
                f"Certificate {cert.name!r} of the {user} is not valid now (valid from "
                f"{_utc(cert.start_date)} to {_utc(cert.expiry_date)} UTC).",
                "Make a new certificate, create it here and at the other broker, and point "
                "the endpoint, user or binding at it.",
                certificate=cert.name,
            )
        )
    return out


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


def _dialog_security_checks(
    snap: CatalogSnapshot, name: str, encryption: str, principal: str, wall_now: float
) -> list[Finding]:
    """SEC-2, SEC-3 as ``encryption`` asks; what the remote broker must grant."""
    binding = snap.binding_for(name)
    out = []
    if binding is None:
        if encryption != "OFF":
            out.append(
                finding(
                    "SBD-CFG-NO-BINDING",
                    f"No remote service binding for service {name!r}: a dialog begun WITH "
                    "ENCRYPTION = ON (the default) waits in the transmission queue, 'Dialog "
                    "security is unavailable' (SEC-2).",
                    f"CREATE REMOTE SERVICE BINDING … TO SERVICE '{name}' WITH USER = <user "
                    "owning the target's certificate> — or begin the dialog with "
                    "encryption=False.",
                    service=name,
                )
            )
    else:
        names = {"service": name, "binding": binding.name}
        if encryption == "OFF":
            out.append(
                finding(
                    "SBD-CFG-BINDING-OVERRIDES-OFF",
                    f"Remote service binding {binding.name!r} secures dialogs to {name!r} even "
                    "when begun WITH ENCRYPTION = OFF (SEC-2).",
                    f"Nothing to do, or DROP REMOTE SERVICE BINDING [{binding.name}] for "
                    "unsecured dialogs.",
                    **names,
                )
            )
        elif bool(binding.is_anonymous_on) != (encryption == "ANONYMOUS"):
            out.append(
                finding(
                    "SBD-CFG-BINDING-ANONYMOUS",
                    f"Remote service binding {binding.name!r} has ANONYMOUS = "
                    f"{'ON' if binding.is_anonymous_on else 'OFF'}, but ENCRYPTION "
                    f"{encryption} was asked.",
                    f"ALTER the binding (drop and create it) with ANONYMOUS = "
                    f"{'ON' if encryption == 'ANONYMOUS' else 'OFF'}.",
                    **names,
                )
            )
        theirs = snap.certificates_owned_by(binding.principal_id)
        user = snap.principals_by_id.get(binding.principal_id)
        user_name = user.name if user else str(binding.principal_id)
        if not theirs:
            out.append(
                finding(
                    "SBD-CFG-BINDING-NO-CERTIFICATE",
                    f"Remote service binding {binding.name!r} names user {user_name!r}, who "
                    "owns no certificate: the session key cannot be wrapped for the target.",
                    f"CREATE CERTIFICATE … FROM FILE = <the target's certificate>; CREATE USER "
                    f"[{user_name}] FROM CERTIFICATE … (or AUTHORIZATION [{user_name}]).",
                    **names,
                    user=user_name,
                )
            )
        elif not any(c.start_date <= wall_now <= c.expiry_date for c in theirs):
            newest = max(theirs, key=lambda c: c.expiry_date)
            out.extend(_certificate_checks(newest, f"user {user_name!r}", wall_now, key=False))
        if not binding.is_anonymous_on:
            out.extend(_signing_checks(snap, principal, wall_now))
    out.append(
        finding(
            "SBD-CFG-REMOTE-PERMISSION",
            f"At the broker holding {name!r}: GRANT SEND ON SERVICE::[{name}] to the user owning "
            "this broker's certificate (full dialog security) or to public (anonymous or "
            "unsecured dialogs), and GRANT CONNECT ON ENDPOINT to this endpoint's "
            "certificate's login.",
            "Check them there: `servicebroker diagnose CONFIGURATION TO SERVICE …` on its "
            "database.",
            service=name,
        )
    )
    return out


def _signing_checks(snap: CatalogSnapshot, principal_name: str, wall_now: float) -> list[Finding]:
    """Full dialog security: the beginning principal signs with a certificate it owns."""
    principal = snap.principals.get(principal_name)
    if principal is None:
        return [missing_principal(principal_name)]
    owned = [c for c in snap.certificates_owned_by(principal.principal_id) if c.private_key_file]
    if any(c.start_date <= wall_now <= c.expiry_date for c in owned):
        return []
    if owned:
        newest = max(owned, key=lambda c: c.expiry_date)
        return _certificate_checks(newest, f"user {principal_name!r}", wall_now, key=True)
    return [
        finding(
            "SBD-CFG-NO-DIALOG-CERTIFICATE",
            f"User {principal_name!r} owns no certificate with a private key: a dialog it "
            "begins WITH ENCRYPTION = ON cannot be signed and waits in the transmission queue.",
            f"CREATE CERTIFICATE … AUTHORIZATION [{principal_name}] FROM FILE = … WITH PRIVATE "
            "KEY (…), or an ANONYMOUS binding, or encryption=False.",
            user=principal_name,
        )
    ]
