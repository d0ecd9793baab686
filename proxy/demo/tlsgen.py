"""A throwaway CA and a server certificate for 127.0.0.1/localhost, made with `cryptography`."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["TlsFiles", "make_tls_files", "server_ssl_context"]


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Paths of the generated PEM files."""

    ca_pem: Path
    cert_pem: Path  # server certificate followed by the CA (full chain)
    key_pem: Path


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "brownout mock"), x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    )


def make_tls_files(directory: Path) -> TlsFiles:
    """Write a fresh CA and a server cert valid for 127.0.0.1, ::1 and localhost."""
    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(days=1), now + dt.timedelta(days=30)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("brownout mock upstream CA"))
        .issuer_name(_name("brownout mock upstream CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    # Python 3.13 verifies with VERIFY_X509_STRICT: it wants SAN, AKI and proper key usages.
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=True,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    files = TlsFiles(directory / "mock-ca.pem", directory / "mock-server.pem", directory / "mock-server-key.pem")
    files.ca_pem.write_bytes(ca_cert.public_bytes(pem))
    files.cert_pem.write_bytes(cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    files.key_pem.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return files


def server_ssl_context(files: TlsFiles) -> ssl.SSLContext:
    """A server-side context offering h1 only (the mock speaks HTTP/1.1)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(files.cert_pem, files.key_pem)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
