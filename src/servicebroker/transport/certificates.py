"""Certificates for the transport's authentication (SEC-1): read a PEM certificate and its
private key (CREATE CERTIFICATE … FROM FILE … WITH PRIVATE KEY (FILE = …)), and make the pairs
the demo and the tests use — self-signed, or signed by a CA of their own — with
``cryptography``. EC P-256 keys; every certificate made here names ``CN=<name>`` and carries a
subjectAltName for ``localhost`` and ``127.0.0.1``.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificateIssuerPrivateKeyTypes,
    PrivateKeyTypes,
)
from cryptography.x509.oid import NameOID

from ..errors import CertificateError

__all__ = [
    "CertificateInfo",
    "check_key_matches",
    "granted_by",
    "load_certificate",
    "load_certificate_file",
    "load_private_key_file",
    "make_ca",
    "make_self_signed",
    "make_signed",
    "thumbprint",
]


@dataclass(frozen=True)
class CertificateInfo:
    """What ``sys.certificates`` shows of a certificate.

    Attributes:
        pem: the certificate as PEM text (one certificate).
        subject, issuer: the names as RFC 4514 text (``CN=name``).
        thumbprint: the SHA-1 of the DER encoding, lower-case hex (40 characters).
        cert_serial_number: the serial number, hex.
        start_date, expiry_date: validity, seconds since the epoch (UTC).
    """

    pem: str
    subject: str
    issuer: str
    thumbprint: str
    cert_serial_number: str
    start_date: float
    expiry_date: float


def thumbprint(der: bytes) -> str:
    """A certificate's thumbprint as sys.certificates gives it: the SHA-1 of its DER encoding
    (``der``, bytes), lower-case hex (40 characters). SEC-1 compares peers by it."""
    return hashlib.sha1(der).hexdigest()


def granted_by(der: bytes, granted: tuple[str, ...]) -> bool:
    """Whether the certificate ``der`` (DER bytes, as a peer presented it) is still trusted by
    the ``granted`` certificates (PEM): one of them, or directly signed by one of them (a
    granted CA, as ``VERIFY_X509_PARTIAL_CHAIN`` admits it; SEC-1). A granted PEM that does
    not parse trusts nothing."""
    try:
        peer = x509.load_der_x509_certificate(der)
    except ValueError:
        return False
    if thumbprint(der) in {_thumbprint_of(pem) for pem in granted}:
        return True
    for pem in granted:
        try:
            peer.verify_directly_issued_by(x509.load_pem_x509_certificate(pem.encode()))
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def _thumbprint_of(pem: str) -> str | None:
    try:
        cert = x509.load_pem_x509_certificate(pem.encode())
    except ValueError:
        return None
    return thumbprint(cert.public_bytes(serialization.Encoding.DER))


def load_certificate(pem: str | bytes, *, source: str = "certificate") -> CertificateInfo:
    """Parse one PEM certificate.

    Args:
        pem: the PEM text (``-----BEGIN CERTIFICATE-----``…).
        source: what to name in an error (a file path).

    Raises:
        CertificateError: not PEM, or not a certificate ``cryptography.x509`` can read.
    """
    data = pem.encode("ascii", "replace") if isinstance(pem, str) else pem
    try:
        cert = x509.load_pem_x509_certificate(data)
    except ValueError as exc:
        raise CertificateError(f"{source}: not a PEM X.509 certificate ({exc})") from None
    der = cert.public_bytes(serialization.Encoding.DER)
    return CertificateInfo(
        pem=cert.public_bytes(serialization.Encoding.PEM).decode("ascii"),
        subject=cert.subject.rfc4514_string(),
        issuer=cert.issuer.rfc4514_string(),
        thumbprint=thumbprint(der),
        cert_serial_number=format(cert.serial_number, "x"),
        start_date=cert.not_valid_before_utc.timestamp(),
        expiry_date=cert.not_valid_after_utc.timestamp(),
    )


def _read(path: str | Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CertificateError(f"{what} file {str(path)!r} cannot be read: {exc}") from None


def load_certificate_file(path: str | Path) -> CertificateInfo:
    """Read and parse the PEM certificate in the file ``path``.

    Raises:
        CertificateError: the file cannot be read or holds no PEM certificate (naming it).
    """
    return load_certificate(_read(path, "certificate"), source=f"certificate file {str(path)!r}")


def load_private_key_file(path: str | Path) -> PrivateKeyTypes:
    """Read the unencrypted PEM private key in the file ``path`` (the key is read when the
    endpoint starts, not stored in the database).

    Raises:
        CertificateError: the file cannot be read, or holds no unencrypted PEM private key.
    """
    data = _read(path, "private key")
    try:
        return serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(
            f"private key file {str(path)!r}: not an unencrypted PEM private key ({exc})"
        ) from None


def check_key_matches(info: CertificateInfo, key: PrivateKeyTypes, *, key_file: str) -> None:
    """Check that ``key`` is the private key of the certificate ``info`` (CREATE CERTIFICATE …
    WITH PRIVATE KEY; an endpoint authenticates with it, SEC-1).

    Raises:
        CertificateError: it is not (naming ``key_file`` and the certificate's subject).
    """
    cert = x509.load_pem_x509_certificate(info.pem.encode("ascii"))
    fmt = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    if cert.public_key().public_bytes(enc, fmt) != key.public_key().public_bytes(enc, fmt):
        raise CertificateError(
            f"private key file {key_file!r} does not match the certificate {info.subject!r}"
        )


def _start(not_before: float | datetime.datetime | None) -> datetime.datetime:
    if not_before is None:
        return datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    if isinstance(not_before, datetime.datetime):
        return not_before
    return datetime.datetime.fromtimestamp(not_before, datetime.UTC)


def _check_days(days: object) -> int:
    if isinstance(days, bool) or not isinstance(days, int) or days <= 0:
        raise CertificateError(f"days must be a whole number above 0, got {days!r}")
    return days


def _build(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    signer: CertificateIssuerPrivateKeyTypes,
    *,
    days: int,
    not_before: float | datetime.datetime | None,
    ca: bool,
) -> x509.Certificate:
    start = _start(not_before)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=_check_days(days)))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
    return builder.sign(signer, hashes.SHA256())


def _write(
    name: str, directory: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> tuple[Path, Path]:
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        cert_path = directory / f"{name}.pem"
        key_path = directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        key_path.chmod(0o600)
    except OSError as exc:
        raise CertificateError(
            f"certificate {name!r}: cannot write to {str(directory)!r}: {exc}"
        ) from None
    return cert_path, key_path


def _check_file_name(name: object) -> str:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        raise CertificateError(
            f"certificate name must be a non-empty string usable as a file name, got {name!r}"
        )
    return name


def _self_signed(
    name: str,
    directory: Path,
    days: int,
    not_before: float | datetime.datetime | None,
    *,
    ca: bool,
) -> tuple[Path, Path]:
    _check_file_name(name)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = _build(name, key, subject, key, days=days, not_before=not_before, ca=ca)
    return _write(name, Path(directory), cert, key)


def make_self_signed(
    name: str,
    directory: Path,
    *,
    days: int = 365,
    not_before: float | datetime.datetime | None = None,
) -> tuple[Path, Path]:
    """Make a self-signed certificate ``CN=name`` (EC P-256, SHA-256, subjectAltName
    ``localhost`` and ``127.0.0.1``) and write ``directory/name.pem`` and
    ``directory/name.key`` (PKCS#8, unencrypted, mode 0600).

    Args:
        name: the common name and the files' stem.
        directory: where to write (created if missing).
        days: validity in days from ``not_before``.
        not_before: start of validity, seconds since the epoch or an aware datetime (default:
            five minutes before now, the wall clock: a certificate's dates are calendar time).

    Returns:
        ``(certificate_path, key_path)``.

    Raises:
        CertificateError: a bad name or ``days``, or the files cannot be written.
    """
    return _self_signed(name, directory, days, not_before, ca=False)


def make_ca(
    name: str,
    directory: Path,
    *,
    days: int = 3650,
    not_before: float | datetime.datetime | None = None,
) -> tuple[Path, Path]:
    """Make a self-signed CA certificate ``CN=name`` (BasicConstraints CA) and its key, written
    as in :func:`make_self_signed`; sign others with :func:`make_signed`.

    Returns:
        ``(certificate_path, key_path)``.

    Raises:
        CertificateError: a bad name or ``days``, or the files cannot be written.
    """
    return _self_signed(name, directory, days, not_before, ca=True)


def make_signed(
    name: str,
    directory: Path,
    ca_cert: Path,
    ca_key: Path,
    *,
    days: int = 365,
    not_before: float | datetime.datetime | None = None,
) -> tuple[Path, Path]:
    """Make a certificate ``CN=name`` signed by the CA in the PEM files ``ca_cert`` and
    ``ca_key`` (from :func:`make_ca`), written as in :func:`make_self_signed`.

    Returns:
        ``(certificate_path, key_path)``.

    Raises:
        CertificateError: a bad name or ``days``; a CA file that cannot be read or parsed, or
            whose key does not match; the files cannot be written.
    """
    _check_file_name(name)
    info = load_certificate_file(ca_cert)
    signer = load_private_key_file(ca_key)
    check_key_matches(info, signer, key_file=str(ca_key))
    if not isinstance(signer, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise CertificateError(f"CA key file {str(ca_key)!r}: an EC or RSA key is needed")
    issuer = x509.load_pem_x509_certificate(info.pem.encode("ascii")).subject
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _build(name, key, issuer, signer, days=days, not_before=not_before, ca=False)
    return _write(name, Path(directory), cert, key)
