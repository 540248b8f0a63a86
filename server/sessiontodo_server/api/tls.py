"""TLS server credentials whose certificate, key and client CA reload without a restart.

gRPC asks the fetcher for a new configuration before every TLS handshake it accepts; connections
already open keep the session they negotiated, so a reload never drops a stream. Files are read
and checked (key matches certificate, CA parses) with the standard library before they replace
the served ones: a broken rotation keeps serving the previous certificate.
"""

from __future__ import annotations

import datetime
import logging
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509

log = logging.getLogger(__name__)


class TlsError(Exception):
    """The certificate, key or client CA files cannot be used."""


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    client_ca: Path | None = None
    """When set, clients must present a certificate signed by this CA (mutual TLS)."""


def _read(files: TlsFiles) -> grpc.ServerCertificateConfiguration:
    """The configuration for ``files``, checked as a TLS library would load them."""
    try:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(files.cert, files.key)
        if files.client_ca is not None:
            context.load_verify_locations(cafile=files.client_ca)
        key, chain = files.key.read_bytes(), files.cert.read_bytes()
        client_ca = files.client_ca.read_bytes() if files.client_ca is not None else None
    except (OSError, ssl.SSLError) as error:
        raise TlsError(f"cannot use TLS files {files.cert} / {files.key} / {files.client_ca}: {error}") from error
    _warn_if_not_valid_now(files.cert, chain)
    return grpc.ssl_server_certificate_configuration([(key, chain)], root_certificates=client_ca)


def _warn_if_not_valid_now(path: Path, chain: bytes) -> None:
    """A certificate outside its validity period loads, and every client then refuses the
    handshake with an error that names nothing on the server: say so when it is loaded."""
    certificate = x509.load_pem_x509_certificate(chain)  # the first of the chain: the server's own
    now = datetime.datetime.now(datetime.UTC)
    if certificate.not_valid_after_utc < now:
        log.warning(
            "the TLS certificate %s expired on %s: clients will refuse it", path, certificate.not_valid_after_utc
        )
    elif certificate.not_valid_before_utc > now:
        log.warning("the TLS certificate %s is not valid before %s", path, certificate.not_valid_before_utc)


class ReloadableTls:
    """Server credentials plus ``reload()``, which the next accepted handshake picks up."""

    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        initial = _read(files)
        self._pending: grpc.ServerCertificateConfiguration | None = None
        self._lock = threading.Lock()  # gRPC calls the fetcher from its own threads
        self.credentials = grpc.dynamic_ssl_server_credentials(
            initial, self._fetch, require_client_authentication=files.client_ca is not None
        )

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by gRPC (any thread) per handshake: the new configuration once, else None (keep)."""
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

    def reload(self) -> None:
        """Re-read the files; raises ``TlsError`` (and keeps serving the old ones) if they are unusable."""
        configuration = _read(self.files)
        with self._lock:
            self._pending = configuration
        log.info("TLS certificate reloaded from %s", self.files.cert)
