"""Test certificates made with the ``openssl`` CLI: a CA, a broker, clients, and an untrusted CA.

    certs = TlsCertificates.create(tmp_path)          # every file below, under tmp_path
    certs.broker_keystore     # PEM: the broker's key, its certificate (IP SANs 127.0.0.1..4), the CA
    certs.ca                  # the CA clients and brokers trust
    certs.client_cert / client_key                     # signed by the CA
    certs.untrusted_ca / untrusted_client_cert / ...   # a second CA nobody trusts, and a client of it

Keys are EC P-256 (quick to make); certificates last two days.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

#: A client's subject, as ``openssl -subj`` takes it (its RFC 2253 form lists it backwards).
CLIENT_SUBJECT = "/C=US/ST=Unknown/L=Unknown/O=Unknown/OU=ServiceUsers/CN=serviceuser"
CLIENT_DN = "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=US"
BROKER_SANS = "IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3,IP:127.0.0.4,DNS:localhost"
KEY_PASSWORD = "key-secret"
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


@dataclass(frozen=True)
class TlsCertificates:
    directory: Path

    @classmethod
    def create(cls, directory: Path) -> TlsCertificates:
        directory.mkdir(parents=True, exist_ok=True)
        for ca in ("ca", "untrusted-ca"):
            _openssl("req", "-x509", *_EC, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                     "-subj", f"/CN=pafka-test-{ca}", "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
        _sign(directory, "broker", "ca", "/O=pafka/OU=Brokers/CN=broker", f"subjectAltName={BROKER_SANS}")
        _sign(directory, "client", "ca", CLIENT_SUBJECT, "extendedKeyUsage=clientAuth")
        _sign(directory, "untrusted-client", "untrusted-ca", CLIENT_SUBJECT, "extendedKeyUsage=clientAuth")
        certs = cls(directory)
        certs.broker_keystore.write_text(certs.broker_key.read_text() + (directory / "broker.crt").read_text()
                                         + certs.ca.read_text())
        _openssl("pkcs8", "-topk8", "-in", "broker.key", "-out", "broker-encrypted.key", "-v2", "aes-256-cbc",
                 "-passout", f"pass:{KEY_PASSWORD}", cwd=directory)
        return certs

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def untrusted_ca(self) -> Path:
        return self.directory / "untrusted-ca.pem"

    @property
    def broker_key(self) -> Path:
        return self.directory / "broker.key"

    @property
    def broker_cert(self) -> Path:
        return self.directory / "broker.crt"

    @property
    def broker_encrypted_key(self) -> Path:
        """The broker's key, PKCS#8-encrypted with KEY_PASSWORD."""
        return self.directory / "broker-encrypted.key"

    @property
    def broker_keystore(self) -> Path:
        """Key, certificate and CA in one PEM file: an ``ssl.keystore.location`` of type PEM."""
        return self.directory / "broker-keystore.pem"

    @property
    def client_cert(self) -> Path:
        return self.directory / "client.crt"

    @property
    def client_key(self) -> Path:
        return self.directory / "client.key"

    @property
    def untrusted_client_cert(self) -> Path:
        return self.directory / "untrusted-client.crt"

    @property
    def untrusted_client_key(self) -> Path:
        return self.directory / "untrusted-client.key"

    def broker_overrides(self, prefix: str = "") -> list[str]:
        """``--override`` items giving a listener (``prefix``: ``listener.name.<l>.``, or none for all)
        this broker key store and a trust store of the CA."""
        return [f"{prefix}ssl.keystore.type=PEM", f"{prefix}ssl.keystore.location={self.broker_keystore}",
                f"{prefix}ssl.truststore.type=PEM", f"{prefix}ssl.truststore.location={self.ca}"]


def _sign(directory: Path, name: str, ca: str, subject: str, extension: str) -> None:
    _openssl("req", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=directory)
    (directory / f"{name}.ext").write_text(extension + "\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=directory)
