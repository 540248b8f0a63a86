"""Real X.509 material for the TLS tests: a CA, a server certificate for 127.0.0.1, client certificates."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path

    @property
    def cert_pem(self) -> bytes:
        return self.cert.read_bytes()

    @property
    def key_pem(self) -> bytes:
        return self.key.read_bytes()

    def take_over(self, other: Issued) -> None:
        """Write ``other``'s certificate and key over these files: a rotation in place."""
        self.cert.write_bytes(other.cert_pem)
        self.key.write_bytes(other.key_pem)


_A_DAY = datetime.timedelta(days=1)


class CertificateAuthority:
    """A self-signed CA that writes what it issues as PEM files into ``folder``."""

    def __init__(self, folder: Path, name: str = "sessiontodo test CA") -> None:
        self.folder = folder
        self.name = name
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self._subject = subject
        self._certificate = (
            self._builder(subject, self._key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert = folder / f"{_slug(name)}.pem"
        self.cert.write_bytes(self._certificate.public_bytes(serialization.Encoding.PEM))

    @property
    def cert_pem(self) -> bytes:
        return self.cert.read_bytes()

    def _builder(
        self, subject: x509.Name, public_key: ec.EllipticCurvePublicKey, valid_for: datetime.timedelta = _A_DAY
    ) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(min(now, now + valid_for) - datetime.timedelta(minutes=5))
            .not_valid_after(now + valid_for)
        )

    def issue(self, common_name: str, *, server: bool, valid_for: datetime.timedelta = _A_DAY) -> Issued:
        """A leaf certificate: for a server on 127.0.0.1/localhost, or for a client; a negative
        ``valid_for`` makes one that has expired."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        builder = self._builder(subject, key.public_key(), valid_for)
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        issued = Issued(self.folder / f"{_slug(common_name)}.crt", self.folder / f"{_slug(common_name)}.key")
        issued.cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        issued.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return issued


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name)


def auth_toml(*tokens: tuple[str, str, str], name: str = "") -> str:
    """An auth file for ``(token, tenant, role)`` entries; only the hashes are written."""
    return "".join(
        f'[[token]]\nsha256 = "{hashlib.sha256(token.encode()).hexdigest()}"\ntenant = "{tenant}"\n'
        f'role = "{role}"\n' + (f'name = "{name}-{role}"\n' if name else "")
        for token, tenant, role in tokens
    )
