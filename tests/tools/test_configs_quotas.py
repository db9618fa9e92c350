"""``pafka configs`` for client quotas, kafka-configs.sh style, against a broker process.

Quotas are set for users, clients, a user's client, defaults and IPs through the tool, described
through it (kafka-configs.sh's lines, word for word) and checked on the wire with
DescribeClientQuotas; deletions, refusals by the tool and refusals by the broker end in an error exit.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from client.connection import BrokerConnection
from pytest_pafka.broker_process import BrokerProcess
from tests.broker.test_client_quotas_api import describe
from tools.cli import main
from tools.configs_command import _NAME_ORDER, configs_command
from tools.quota_configs import java_double_text


def configs(broker: BrokerProcess, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["configs", "--bootstrap-server", broker.bootstrap, *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def on_the_wire(broker: BrokerProcess) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """Every stored quota, as DescribeClientQuotas answers."""
    with BrokerConnection(broker.host, broker.port) as connection:
        return describe(connection, [])


RATES = "producer_byte_rate=1048576,consumer_byte_rate=2097152"


def test_users_clients_and_a_users_client(pafka_broker: BrokerProcess) -> None:
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", RATES) == (
        0, "Completed updating config for user alice.\n", "")
    assert configs(pafka_broker, "--alter", "--entity-type", "clients", "--entity-name", "app",
                   "--add-config", "request_percentage=12.5") == (0, "Completed updating config for client app.\n", "")
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                   "--entity-name", "app", "--add-config", "producer_byte_rate=20971520") == (
        0, "Completed updating config for user alice.\n", "")
    # The shorthands name the same entities; the client comes first, so the line names it.
    assert configs(pafka_broker, "--alter", "--client", "app", "--user", "bob", "--add-config",
                   "controller_mutation_rate=10") == (0, "Completed updating config for client app.\n", "")
    assert on_the_wire(pafka_broker) == {
        (("user", "alice"),): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
        (("client-id", "app"),): {"request_percentage": 12.5},
        (("user", "alice"), ("client-id", "app")): {"producer_byte_rate": 20971520.0},
        (("user", "bob"), ("client-id", "app")): {"controller_mutation_rate": 10.0},
    }
    # A name matches exactly and strictly: alice's line only, not alice's client's.
    assert configs(pafka_broker, "--describe", "--entity-type", "users", "--entity-name", "alice") == (
        0, "Quota configs for user-principal 'alice' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n",
        "")
    assert configs(pafka_broker, "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
                   "clients", "--entity-name", "app")[1] == (
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=2.097152E7\n")
    assert configs(pafka_broker, "--describe", "--client", "app")[1] == (
        "Quota configs for client-id 'app' are request_percentage=12.5\n")
    # A type without a name: every named entity of exactly these types.
    assert configs(pafka_broker, "--describe", "--entity-type", "users", "--entity-type", "clients")[1] == (
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=2.097152E7\n"
        "Quota configs for user-principal 'bob', client-id 'app' are controller_mutation_rate=10.0\n")
    assert configs(pafka_broker, "--describe", "--entity-type", "users", "--entity-name", "bob", "--entity-type",
                   "clients")[1] == (
        "Quota configs for user-principal 'bob', client-id 'app' are controller_mutation_rate=10.0\n")


def test_defaults(pafka_broker: BrokerProcess) -> None:
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-default",
                   "--add-config", "producer_byte_rate=4096") == (
        0, "Completed updating default config for users in the cluster.\n", "")
    assert configs(pafka_broker, "--alter", "--client-defaults", "--add-config", "consumer_byte_rate=8192") == (
        0, "Completed updating default config for clients in the cluster.\n", "")
    # --entity-default and --entity-name pair with the types in command-line order.
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-type", "clients", "--entity-default",
                   "--entity-name", "app", "--add-config", "request_percentage=50") == (
        0, "Completed updating default config for users in the cluster.\n", "")
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                   "--entity-default", "--add-config", "producer_byte_rate=1024") == (
        0, "Completed updating config for user alice.\n", "")
    assert on_the_wire(pafka_broker) == {
        (("user", None),): {"producer_byte_rate": 4096.0},
        (("client-id", None),): {"consumer_byte_rate": 8192.0},
        (("user", None), ("client-id", "app")): {"request_percentage": 50.0},
        (("user", "alice"), ("client-id", None)): {"producer_byte_rate": 1024.0},
    }
    # The default user is asked for by default match, and no SCRAM credentials are listed for it.
    assert configs(pafka_broker, "--describe", "--entity-type", "users", "--entity-default") == (
        0, "Quota configs for the default user-principal are producer_byte_rate=4096.0\n", "")
    assert configs(pafka_broker, "--describe", "--user-defaults")[1] == (
        "Quota configs for the default user-principal are producer_byte_rate=4096.0\n")
    assert configs(pafka_broker, "--describe", "--entity-type", "clients", "--entity-default")[1] == (
        "Quota configs for the default client-id are consumer_byte_rate=8192.0\n")
    assert configs(pafka_broker, "--describe", "--entity-type", "users", "--entity-default", "--entity-type", "clients",
                   "--entity-name", "app")[1] == (
        "Quota configs for the default user-principal, client-id 'app' are request_percentage=50.0\n")
    assert configs(pafka_broker, "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
                   "clients", "--entity-default")[1] == (
        "Quota configs for user-principal 'alice', the default client-id are producer_byte_rate=1024.0\n")
    # Named entities only, when no name is given: the defaults are left out.
    assert configs(pafka_broker, "--describe", "--entity-type", "clients") == (0, "", "")


def test_ips(pafka_broker: BrokerProcess) -> None:
    assert configs(pafka_broker, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.9",
                   "--add-config", "connection_creation_rate=5") == (0, "Completed updating config for ip 127.0.0.9.\n", "")
    assert configs(pafka_broker, "--alter", "--ip-defaults", "--add-config", "connection_creation_rate=100") == (
        0, "Completed updating default config for ips in the cluster.\n", "")
    assert on_the_wire(pafka_broker) == {(("ip", "127.0.0.9"),): {"connection_creation_rate": 5.0},
                                   (("ip", None),): {"connection_creation_rate": 100.0}}
    assert configs(pafka_broker, "--describe", "--entity-type", "ips") == (
        0, "Quota configs for ip '127.0.0.9' are connection_creation_rate=5.0\n", "")
    assert configs(pafka_broker, "--describe", "--ip-defaults")[1] == (
        "Quota configs for the default ip are connection_creation_rate=100.0\n")
    code, out, err = configs(pafka_broker, "--alter", "--ip", "127.0.0.9", "--add-config", "producer_byte_rate=5")
    assert (code, out, err) == (1, "", ("Only connection quota configs can be added for 'ips' using "
                                       "--bootstrap-server. Unexpected config names: producer_byte_rate\n"))
    assert configs(pafka_broker, "--alter", "--ip", "127.0.0.9", "--delete-config", "connection_creation_rate")[0] == 0
    assert on_the_wire(pafka_broker) == {(("ip", None),): {"connection_creation_rate": 100.0}}


def test_delete(pafka_broker: BrokerProcess, tmp_path: Path) -> None:
    added = tmp_path / "quotas.properties"
    added.write_text("# Kafka's --add-config-file: a properties file\nproducer_byte_rate = 1048576\n"
                     "consumer_byte_rate=2097152\n")
    assert configs(pafka_broker, "--alter", "--user", "alice", "--add-config-file", str(added)) == (
        0, "Completed updating config for user alice.\n", "")
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-name", "alice",
                   "--delete-config", "producer_byte_rate") == (0, "Completed updating config for user alice.\n", "")
    assert on_the_wire(pafka_broker) == {(("user", "alice"),): {"consumer_byte_rate": 2097152.0}}
    # A key that is not set is refused before anything is sent, as kafka-configs.sh does.
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-name", "alice",
                   "--delete-config", "producer_byte_rate,consumer_byte_rate") == (
        1, "", "Invalid config(s): producer_byte_rate\n")
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-name", "alice",
                   "--delete-config", "consumer_byte_rate")[0] == 0
    assert on_the_wire(pafka_broker) == {}
    assert configs(pafka_broker, "--describe", "--entity-type", "users", "--entity-name", "alice") == (0, "", "")


def test_refusals(pafka_broker: BrokerProcess) -> None:
    alice = ("--alter", "--entity-type", "users", "--entity-name", "alice")
    assert configs(pafka_broker, *alice, "--add-config", "bogus_rate=1") == (
        1, "", ("Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. "
               "Unexpected config names: Set(bogus_rate)\n"))
    assert configs(pafka_broker, "--alter", "--client", "app", "--add-config", "SCRAM-SHA-256=[password=secret]") == (
        1, "", ("Only quota configs can be added for 'clients' using --bootstrap-server. "
               "Unexpected config names: Set(SCRAM-SHA-256)\n"))
    assert configs(pafka_broker, *alice, "--add-config", "producer_byte_rate=1024,SCRAM-SHA-256=[password=secret]") == (
        1, "", ("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
               "--bootstrap-server.\n"))
    assert configs(pafka_broker, "--alter", "--user-defaults", "--add-config", "SCRAM-SHA-256=[password=secret]") == (
        1, "", ("The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using "
               "--bootstrap-server.\n"))
    assert configs(pafka_broker, *alice, "--add-config", "producer_byte_rate=fast") == (
        1, "", "Cannot parse quota configuration value for producer_byte_rate: fast\n")
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-type", "clients", "--entity-name", "alice",
                   "--add-config", "producer_byte_rate=1024") == (
        1, "", "An entity name must be specified for every entity type\n")
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-type", "ips", "--entity-name", "a",
                   "--entity-name", "1.2.3.4", "--add-config", "producer_byte_rate=1024") == (
        1, "", "Only 'users' and 'clients' entity types may be specified together\n")
    assert configs(pafka_broker, "--alter", "--user", "alice", "--entity-type", "clients", "--entity-name", "app",
                   "--add-config", "producer_byte_rate=1024")[2] == (
        "--entity-{type,name,default} should not be used in conjunction with specific entity flags\n")
    # The broker's refusals (INVALID_REQUEST) come back with its message.
    code, out, err = configs(pafka_broker, *alice, "--add-config", "producer_byte_rate=10.5")
    assert (code, out) == (1, "")
    assert err == ("Error while executing config command with args '--entity-type users --entity-name alice': "
                   "AlterClientQuotas: INVALID_REQUEST (42): Configuration producer_byte_rate must be a Long value\n")
    code, _, err = configs(pafka_broker, *alice, "--add-config", "producer_byte_rate=-1")
    assert code == 1 and "AlterClientQuotas: INVALID_REQUEST (42)" in err
    assert on_the_wire(pafka_broker) == {}


def test_a_users_quotas_and_scram_credentials(pafka_broker: BrokerProcess) -> None:
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-name", "carol",
                   "--add-config", "SCRAM-SHA-512=[password=carol-secret]")[0] == 0
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-name", "carol",
                   "--add-config", "producer_byte_rate=1024")[0] == 0
    assert configs(pafka_broker, "--alter", "--entity-type", "users", "--entity-name", "dave",
                   "--add-config", "consumer_byte_rate=2048")[0] == 0
    assert configs(pafka_broker, "--describe", "--entity-type", "users", "--entity-name", "carol") == (
        0, ("Quota configs for user-principal 'carol' are producer_byte_rate=1024.0\n"
           "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096\n"), "")
    assert configs(pafka_broker, "--describe", "--entity-type", "users") == (
        0, ("Quota configs for user-principal 'carol' are producer_byte_rate=1024.0\n"
           "Quota configs for user-principal 'dave' are consumer_byte_rate=2048.0\n"
           "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096\n"), "")
    # Deleting the credential leaves the quota, and the other way round.
    assert configs(pafka_broker, "--alter", "--user", "carol", "--delete-config", "SCRAM-SHA-512")[0] == 0
    assert on_the_wire(pafka_broker)[(("user", "carol"),)] == {"producer_byte_rate": 1024.0}
    assert configs(pafka_broker, "--describe", "--user", "carol")[1] == (
        "Quota configs for user-principal 'carol' are producer_byte_rate=1024.0\n")


def test_doubles_are_printed_as_java_prints_them() -> None:
    assert [java_double_text(v) for v in (1048576.0, 12.5, 1e7, 20971520.0, 9999999.0, 0.001, 1e-4, 0.0, 1e16)] == [
        "1048576.0", "12.5", "1.0E7", "2.097152E7", "9999999.0", "0.001", "1.0E-4", "0.0", "1.0E16"]


def test_names_and_defaults_pair_with_the_types_in_command_line_order() -> None:
    context = configs_command.make_context("configs", [
        "--bootstrap-server", "h:1", "--describe", "--entity-type", "users", "--entity-default",
        "--entity-type", "clients", "--entity-name=--entity-default"])
    assert context.meta[_NAME_ORDER] == ["default", "name"]
    assert context.params["entity_names"] == ("--entity-default",)
