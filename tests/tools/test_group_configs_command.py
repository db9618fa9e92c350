"""``pafka configs --entity-type groups``: its checks, and the lines it prints, over a stand-in admin client."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from client.admin import ConfigEntry
from protocol.config_types import AlterConfigOp, ConfigResourceType, ConfigSource
from tools import group_configs
from tools.cli import main


class StandInAdmin:
    """Answers DescribeConfigs of group g and records IncrementalAlterConfigs."""

    altered: ClassVar[list[tuple[ConfigResourceType, str, list[tuple[str, AlterConfigOp, str | None]]]]] = []

    def __init__(self, client: Any, timeout_ms: int = 0) -> None:
        pass

    def describe_configs(self, resource_type: ConfigResourceType, name: str) -> dict[str, ConfigEntry]:
        assert resource_type == ConfigResourceType.GROUP
        return {"consumer.session.timeout.ms": ConfigEntry("consumer.session.timeout.ms", "60000",
                                                           ConfigSource.GROUP_CONFIG, False, False),
                "consumer.heartbeat.interval.ms": ConfigEntry("consumer.heartbeat.interval.ms", "5000",
                                                              ConfigSource.DEFAULT_CONFIG, False, False)}

    def incremental_alter_configs(self, resource_type: ConfigResourceType, name: str,
                                  operations: list[tuple[str, AlterConfigOp, str | None]]) -> None:
        self.altered.append((resource_type, name, operations))


@pytest.fixture(autouse=True)
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(group_configs, "AdminClient", StandInAdmin)
    StandInAdmin.altered = []


def test_describe_prints_the_groups_own_configs(capsys: pytest.CaptureFixture[str]) -> None:
    group_configs.describe_group_configs(object(), 1000, "g", describe_all=False)  # type: ignore[arg-type]
    assert capsys.readouterr().out.splitlines() == [
        "Dynamic configs for group g are:",
        "  consumer.session.timeout.ms=60000 sensitive=false synonyms={GROUP_CONFIG:consumer.session.timeout.ms=60000}"]


def test_describe_all_prints_the_defaults_too(capsys: pytest.CaptureFixture[str]) -> None:
    group_configs.describe_group_configs(object(), 1000, "g", describe_all=True)  # type: ignore[arg-type]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "All configs for group g are:"
    assert ("  consumer.heartbeat.interval.ms=5000 sensitive=false "
            "synonyms={DEFAULT_CONFIG:consumer.heartbeat.interval.ms=5000}") in lines


def test_alter_sets_and_deletes(capsys: pytest.CaptureFixture[str]) -> None:
    group_configs.alter_group_configs(object(), 1000, "g", {"consumer.heartbeat.interval.ms": "6000"},  # type: ignore[arg-type]
                                      ["consumer.session.timeout.ms"])
    assert StandInAdmin.altered == [(ConfigResourceType.GROUP, "g", [
        ("consumer.heartbeat.interval.ms", AlterConfigOp.SET, "6000"),
        ("consumer.session.timeout.ms", AlterConfigOp.DELETE, None)])]
    assert capsys.readouterr().out == "Completed updating config for group g.\n"


def test_deleting_a_config_the_group_does_not_set_is_refused() -> None:
    with pytest.raises(SystemExit):
        group_configs.alter_group_configs(object(), 1000, "g", {},  # type: ignore[arg-type]
                                          ["consumer.heartbeat.interval.ms"])
    assert StandInAdmin.altered == []


@pytest.mark.parametrize("args, message", [
    (["--alter", "--entity-type", "groups", "--add-config", "consumer.session.timeout.ms=50000"],
     "an entity-name must be specified with --alter of groups"),
    (["--alter", "--entity-type", "groups", "--entity-default", "--add-config", "consumer.session.timeout.ms=1"],
     "The default entity is not allowed for entity type groups"),
    (["--describe", "--entity-type", "groups", "--entity-type", "users"],
     "Only 'users' and 'clients' entity types may be specified together"),
])
def test_checked_before_connecting(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["configs", "--bootstrap-server", "127.0.0.1:1", *args])
    assert result.exit_code == 1
    assert message in result.output
