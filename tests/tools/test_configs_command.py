"""``pafka configs`` for users' SCRAM credentials, kafka-configs.sh style, against a broker process.

The broker serves PLAINTEXT and SASL_SSL (PLAIN for an admin user, SCRAM for the users the tool
creates); the tool connects over either, the SASL_SSL one through ``--command-config`` client
properties, and a real client then authenticates with what the tool set.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port
from pytest_pafka.tls import TlsCertificates
from tools.cli import main

HOST = "127.0.0.1"
ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')


@dataclass(frozen=True)
class Setup:
    broker: BrokerProcess
    certs: TlsCertificates
    sasl_ssl: str
    tmp: Path

    def command_config(self, mechanism: str, user: str, password: str) -> Path:
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        path = self.tmp / f"{user}-{mechanism}.properties"
        path.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism={mechanism}\n"
                        f"sasl.jaas.config={module} required username=\"{user}\" password=\"{password}\";\n"
                        f"ssl.truststore.type=PEM\nssl.truststore.location={self.certs.ca}\n")
        return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("configs")
    certs = TlsCertificates.create(tmp / "tls")
    plain, sasl_ssl = free_port(), free_port()
    with BrokerProcess(f"listeners=PLAINTEXT://{HOST}:{plain},SASL_SSL://{HOST}:{sasl_ssl}",
                       "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                       f"listener.name.sasl_ssl.plain.sasl.jaas.config={ADMIN_JAAS}",
                       *certs.broker_overrides(), port=plain) as broker:
        yield Setup(broker, certs, f"{HOST}:{sasl_ssl}", tmp)


def configs(bootstrap: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["configs", "--bootstrap-server", bootstrap, *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def _authenticates(setup: Setup, mechanism: str, user: str, password: str) -> bool:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": setup.sasl_ssl, "security.protocol": "SASL_SSL",
                          "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password,
                          "ssl.ca.location": str(setup.certs.ca)})
    try:
        return bool(client.list_topics(timeout=5).brokers)
    except KafkaException:
        return False


def test_alter_and_describe_over_plaintext_then_a_client_authenticates(setup: Setup) -> None:
    code, out, err = configs(setup.broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", "alice",
                             "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                                             "SCRAM-SHA-512=[password=alice-secret]")
    assert (code, out, err) == (0, "Completed updating config for user alice.\n", "")
    code, out, _ = configs(setup.broker.bootstrap, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert out == ("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
                   "SCRAM-SHA-512=iterations=4096\n")
    assert _authenticates(setup, "SCRAM-SHA-256", "alice", "alice-secret")
    assert not _authenticates(setup, "SCRAM-SHA-256", "alice", "alice-wrong")
    code, out, _ = configs(setup.broker.bootstrap, "--describe", "--entity-type", "users", "--entity-name", "nobody")
    assert (code, out) == (0, "")


def test_over_sasl_ssl_with_a_command_config(setup: Setup) -> None:
    admin = str(setup.command_config("PLAIN", "admin", "admin-secret"))
    code, out, err = configs(setup.sasl_ssl, "--command-config", admin, "--alter", "--entity-type", "users",
                             "--entity-name", "bob", "--add-config", "SCRAM-SHA-512=[password=bob-1]")
    assert (code, out) == (0, "Completed updating config for user bob.\n"), err
    assert _authenticates(setup, "SCRAM-SHA-512", "bob", "bob-1")
    # A new password takes over at once; bob, authenticated by SCRAM himself, lists the users.
    configs(setup.sasl_ssl, "--command-config", admin, "--alter", "--entity-type", "users", "--entity-name", "bob",
            "--add-config", "SCRAM-SHA-512=[iterations=4096,password=bob-2]")
    assert not _authenticates(setup, "SCRAM-SHA-512", "bob", "bob-1")
    bob = str(setup.command_config("SCRAM-SHA-512", "bob", "bob-2"))
    code, out, err = configs(setup.sasl_ssl, "--command-config", bob, "--describe", "--entity-type", "users")
    assert code == 0, err
    assert "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096\n" in out
    # Deleting a mechanism's credential refuses it from then on.
    code, out, _ = configs(setup.sasl_ssl, "--command-config", bob, "--alter", "--entity-type", "users",
                           "--entity-name", "bob", "--delete-config", "SCRAM-SHA-512")
    assert (code, out) == (0, "Completed updating config for user bob.\n")
    assert not _authenticates(setup, "SCRAM-SHA-512", "bob", "bob-2")


def test_refusals_name_no_secret(setup: Setup) -> None:
    wrong = str(setup.command_config("PLAIN", "admin", "not-the-admin-password"))
    code, out, err = configs(setup.sasl_ssl, "--command-config", wrong, "--describe", "--entity-type", "users")
    assert code != 0 and "Authentication failed: Invalid username or password" in err
    assert "not-the-admin-password" not in out + err
    code, _, err = configs(setup.broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", "carol",
                           "--add-config", "SCRAM-SHA-256=[iterations=100,password=carol-secret]")
    assert code != 0 and "Too few iterations" in err and "carol-secret" not in err
    code, _, err = configs(setup.broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", "carol",
                           "--add-config", "producer_byte_rate=1024,SCRAM-SHA-256=[password=carol-secret]")
    assert code != 0 and "Cannot alter both quota and SCRAM credential configs" in err and "carol-secret" not in err
    code, _, err = configs(setup.broker.bootstrap, "--alter", "--entity-type", "users", "--entity-name", "carol",
                           "--delete-config", "SCRAM-SHA-256")
    assert code != 0 and "Attempt to delete a user credential that does not exist" in err
