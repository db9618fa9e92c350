"""A test cluster whose every connection is SASL_SSL: clients and brokers alike authenticate with SCRAM over TLS.

    security = SaslSslSecurity.create(root / "tls")       # a CA and a broker certificate (pytest_pafka.tls)
    security.credential_znodes()     # /config/users/<user> -> Kafka's SCRAM credential JSON, to write first
    security.broker_overrides(host, port)                 # one SASL_SSL listener, inter-broker included
    security.client_properties()     # Kafka client properties (pafka's own KafkaClient, tools)
    security.confluent_config()      # the same for confluent-kafka (librdkafka's names)

As Kafka's docs bootstrap SCRAM in a ZooKeeper cluster, the credentials of the brokers' own user and
the tests' client user are written to ZooKeeper (``/config/users/<user>``, the string
``kafka-configs --zookeeper --add-config SCRAM-SHA-512=[...]`` writes) before any broker starts: a
broker must authenticate to the others from its first request on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from client.scram import ScramCredential, ScramMechanism
from pytest_pafka.tls import TlsCertificates

#: A confluent-kafka (librdkafka) configuration, as its stubs type it.
ConfluentConfig = dict[str, str | int | float | bool]

LISTENER = "SASL_SSL"
MECHANISM = ScramMechanism.SCRAM_SHA_512
BROKER_USER = ("broker", "broker-secret")
CLIENT_USER = ("client", "client-secret")
#: Kafka's minimum for SCRAM, as kafka-configs writes by default.
ITERATIONS = 4096


def scram_jaas(username: str, password: str) -> str:
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{username}" '
            f'password="{password}";')


@dataclass(frozen=True)
class SaslSslSecurity:
    """The settings of an all-SASL_SSL cluster (see the module docstring)."""

    certificates: TlsCertificates

    @classmethod
    def create(cls, directory: Path) -> SaslSslSecurity:
        return cls(TlsCertificates.create(directory))

    def credential_znodes(self) -> dict[str, bytes]:
        """ZooKeeper path (under the cluster's chroot) -> data, for the broker and the client user."""
        znodes = {}
        for username, password in (BROKER_USER, CLIENT_USER):
            credential = ScramCredential.generate(MECHANISM, password, ITERATIONS)
            config = {"version": 1, "config": {MECHANISM.mechanism_name: credential.to_config_string()}}
            znodes[f"/config/users/{username}"] = json.dumps(config).encode()
        return znodes

    def broker_overrides(self, host: str, port: int) -> list[str]:
        """A single SASL_SSL listener on the broker's address, used between brokers too; the broker's
        own credentials in its JAAS entry (Kafka reads them there for inter-broker connections)."""
        prefix = f"listener.name.{LISTENER.lower()}."
        return [f"listeners={LISTENER}://{host}:{port}",
                f"listener.security.protocol.map={LISTENER}:SASL_SSL",
                f"inter.broker.listener.name={LISTENER}",
                f"sasl.enabled.mechanisms={MECHANISM.mechanism_name}",
                f"sasl.mechanism.inter.broker.protocol={MECHANISM.mechanism_name}",
                f"{prefix}{MECHANISM.mechanism_name.lower()}.sasl.jaas.config={scram_jaas(*BROKER_USER)}",
                *self.certificates.broker_overrides()]

    def client_properties(self) -> dict[str, str]:
        """Kafka's client properties (``--command-config``; ``ClientSecurity.from_properties``)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM.mechanism_name,
                "sasl.jaas.config": scram_jaas(*CLIENT_USER), "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.certificates.ca)}

    def confluent_config(self) -> ConfluentConfig:
        """The same client for confluent-kafka; librdkafka checks the broker's IP SANs (127.0.0.1..4)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanisms": MECHANISM.mechanism_name,
                "sasl.username": CLIENT_USER[0], "sasl.password": CLIENT_USER[1],
                "ssl.ca.location": str(self.certificates.ca)}
