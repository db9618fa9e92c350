"""Config changes for AlterConfigs and IncrementalAlterConfigs (Kafka's ConfigAdminManager).

Both APIs compute a resource's new set of dynamic configs, validate all of it,
and (unless ``validate_only``) make it durable and live:

* TOPIC: the topic's overrides in the metadata store, applied to its open logs
  at once; unknown names and bad values answer INVALID_CONFIG.
* BROKER ("<id>" for this broker, "" for the cluster default): the dynamic
  broker configs (``broker.config.dynamic_broker_config``); read-only configs and bad values
  answer INVALID_REQUEST, as Kafka does (KAFKA-13609).
* CLIENT_METRICS: a client-metrics subscription (``broker.config.client_metrics_config``), kept
  where the broker's mode keeps it (``broker.telemetry.subscriptions``); Kafka's error codes.
* GROUP: the group's configs (``broker.config.group_config``),
  kept where the broker's mode keeps them (``broker.group_config_store``); unknown names and
  bad values answer INVALID_CONFIG.

Every function here runs on the append thread: it writes and fsyncs files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.admin_manager import AdminError, validate_topic_configs
from broker.config.client_metrics_config import CLIENT_METRICS_CONFIGS, ClientMetricsConfigError
from broker.config.config_def import apply_list_op, format_value
from broker.config.dynamic_broker_config import BrokerConfigError, validate_dynamic_configs
from broker.config.dynamic_config_sets import base_name, dynamic_config
from broker.config.group_config import GROUP_CONFIGS, GroupConfigError
from broker.config.topic_config import TOPIC_CONFIG_KEYS
from protocol.config_types import AlterConfigOp, ConfigResourceType, ConfigType
from protocol.errors import ErrorCode
from storage.log_config import LogConfig

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.group_config_store import GroupConfigAdmin
    from broker.metadata_store import TopicMetadata


@dataclass(frozen=True, slots=True)
class ConfigOp:
    name: str
    op: int
    value: str | None


class ConfigChangeError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def check_broker_resource(broker: BrokerServices, resource_name: str) -> None:
    """Only this broker's id or "" (the cluster default) name a broker resource here."""
    if resource_name == "":
        return
    try:
        broker_id = int(resource_name)
    except ValueError:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST,
                                f"Broker id must be an integer, but it is: {resource_name}") from None
    if broker_id != broker.broker_id:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST,
                                f"Unexpected broker id, expected {broker.broker_id} or empty string, "
                                f"but received {resource_name}")


def _check_no_duplicates(names: Iterable[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        seen.add(name)


def _topic_list_default(name: str) -> list[str]:
    value = LogConfig().model_dump(by_alias=True).get(name)
    return list(value) if isinstance(value, list) else []


def _apply_ops(current: Mapping[str, str], ops: Iterable[ConfigOp], types: Mapping[str, ConfigType],
               list_default: Callable[[str], list[str]]) -> dict[str, str]:
    """The configs after IncrementalAlterConfigs' SET / DELETE / APPEND / SUBTRACT."""
    result = dict(current)
    for op in ops:
        if op.op == AlterConfigOp.SET:
            if op.value is None:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {op.name}")
            result[op.name] = op.value
        elif op.op == AlterConfigOp.DELETE:
            result.pop(op.name, None)
        elif op.op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            verb = "append" if op.op == AlterConfigOp.APPEND else "subtract"
            if types.get(op.name) is not ConfigType.LIST:
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG,
                                        f"Config value {verb} is not allowed for config key: {op.name}")
            old = result[op.name].split(",") if op.name in result else list_default(op.name)
            old = [item.strip() for item in old if item.strip()]
            values = [item.strip() for item in (op.value or "").split(",") if item.strip()]
            result[op.name] = format_value(apply_list_op(old, AlterConfigOp(op.op), values)) or ""
        else:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation {op.op}")
    return result


# -- topics -------------------------------------------------------------------------------
def _existing_topic(broker: BrokerServices, name: str) -> TopicMetadata:
    topic = broker.metadata.get(name)
    if topic is None:
        raise ConfigChangeError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    return topic


def _set_topic(broker: BrokerServices, name: str, configs: Mapping[str, str | None], validate_only: bool) -> None:
    nulls = sorted(k for k, v in configs.items() if v is None)
    if nulls:
        raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: "
                                                          f"{','.join(nulls)}")
    try:
        overrides = validate_topic_configs(broker.default_log_config, configs)
    except AdminError as exc:
        raise ConfigChangeError(exc.error_code, exc.message) from None
    if not validate_only:
        broker.topic_admin.set_topic_configs_blocking(name, overrides)


def alter_topic(broker: BrokerServices, name: str, configs: list[tuple[str, str | None]], validate_only: bool) -> None:
    """AlterConfigs: the given configs become the topic's whole set of overrides."""
    _existing_topic(broker, name)
    _check_no_duplicates(n for n, _ in configs)
    _set_topic(broker, name, dict(configs), validate_only)


def incremental_alter_topic(broker: BrokerServices, name: str, ops: list[ConfigOp], validate_only: bool) -> None:
    topic = _existing_topic(broker, name)
    _check_no_duplicates(op.name for op in ops)
    unknown = [op.name for op in ops if op.name not in TOPIC_CONFIG_KEYS]
    if unknown:
        raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {unknown[0]}")
    types = {n: k.type for n, k in TOPIC_CONFIG_KEYS.items()}
    _set_topic(broker, name, _apply_ops(topic.configs, ops, types, _topic_list_default), validate_only)


# -- the broker -----------------------------------------------------------------------------
def _set_broker(broker: BrokerServices, resource_name: str, configs: Mapping[str, str | None],
                validate_only: bool) -> None:
    dynamic = broker.dynamic_config
    try:
        validated = validate_dynamic_configs(configs, per_broker=resource_name != "")
        if validate_only:
            dynamic.check(resource_name, validated)
        else:
            dynamic.replace(resource_name, validated)
    except BrokerConfigError as exc:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, str(exc)) from None


def alter_broker(broker: BrokerServices, resource_name: str, configs: list[tuple[str, str | None]],
                 validate_only: bool) -> None:
    check_broker_resource(broker, resource_name)
    _check_no_duplicates(n for n, _ in configs)
    _set_broker(broker, resource_name, dict(configs), validate_only)


def incremental_alter_broker(broker: BrokerServices, resource_name: str, ops: list[ConfigOp],
                             validate_only: bool) -> None:
    check_broker_resource(broker, resource_name)
    _check_no_duplicates(op.name for op in ops)
    current = broker.dynamic_config.current(resource_name)
    types = {op.name: definition.key.type for op in ops if (definition := dynamic_config(op.name)) is not None}

    def list_default(name: str) -> list[str]:
        """Kafka appends to the resource's own value, else to the config's Kafka default."""
        value = broker.dynamic_config.kafka_defaults().get(base_name(name))
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return list(value) if isinstance(value, list) else []

    _set_broker(broker, resource_name, _apply_ops(current, ops, types, list_default), validate_only)


# -- groups ---------------------------------------------------------------------------------
def _group_admin(broker: BrokerServices, group_id: str) -> GroupConfigAdmin:
    admin = broker.group_config_admin
    if admin is None:
        raise unsupported_resource(ConfigResourceType.GROUP)
    if group_id == "":
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    return admin


def _set_group(broker: BrokerServices, admin: GroupConfigAdmin, group_id: str, configs: Mapping[str, str | None],
               validate_only: bool) -> None:
    nulls = sorted(k for k, v in configs.items() if v is None)
    if nulls:
        raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Null value not supported for group configs: "
                                                          f"{','.join(nulls)}")
    try:
        admin.replace_blocking(group_id, {k: v for k, v in configs.items() if v is not None}, broker.config,
                               validate_only)
    except GroupConfigError as exc:
        raise ConfigChangeError(ErrorCode.INVALID_CONFIG, str(exc)) from None


def alter_group(broker: BrokerServices, group_id: str, configs: list[tuple[str, str | None]],
                validate_only: bool) -> None:
    """AlterConfigs: the given configs become the group's whole set."""
    admin = _group_admin(broker, group_id)
    _check_no_duplicates(n for n, _ in configs)
    _set_group(broker, admin, group_id, dict(configs), validate_only)


def incremental_alter_group(broker: BrokerServices, group_id: str, ops: list[ConfigOp], validate_only: bool) -> None:
    """A group's configs, checked as Kafka's GroupConfig.validate checks them (INVALID_CONFIG)."""
    admin = _group_admin(broker, group_id)
    _check_no_duplicates(op.name for op in ops)
    types = {name: definition.key.type for name, definition in GROUP_CONFIGS.items()}
    _set_group(broker, admin, group_id, _apply_ops(admin.current(group_id), ops, types, lambda name: []),
               validate_only)


# -- client-metrics subscriptions ---------------------------------------------------------------
def _set_client_metrics(broker: BrokerServices, name: str, configs: Mapping[str, str | None],
                        validate_only: bool) -> None:
    admin = broker.client_metrics_admin
    if admin is None:
        raise unsupported_resource(ConfigResourceType.CLIENT_METRICS)
    nulls = sorted(k for k, v in configs.items() if v is None)
    if nulls:
        raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Null value not supported for client metrics configs: "
                                                          f"{','.join(nulls)}")
    try:
        admin.replace_blocking(name, {k: v for k, v in configs.items() if v is not None}, validate_only)
    except ClientMetricsConfigError as exc:
        raise ConfigChangeError(exc.error_code, exc.message) from None


def alter_client_metrics(broker: BrokerServices, name: str, configs: list[tuple[str, str | None]],
                         validate_only: bool) -> None:
    """AlterConfigs: the given configs become the subscription's whole set."""
    _check_no_duplicates(n for n, _ in configs)
    _set_client_metrics(broker, name, dict(configs), validate_only)


def incremental_alter_client_metrics(broker: BrokerServices, name: str, ops: list[ConfigOp],
                                     validate_only: bool) -> None:
    """A subscription's configs, checked as Kafka's ClientMetricsConfigs.validate checks them."""
    _check_no_duplicates(op.name for op in ops)
    current = broker.client_metrics_admin.current(name) if broker.client_metrics_admin is not None else {}
    types = {key: definition[0] for key, definition in CLIENT_METRICS_CONFIGS.items()}
    _set_client_metrics(broker, name, _apply_ops(current, ops, types, lambda key: []), validate_only)


# -- per resource ------------------------------------------------------------------------------
def unsupported_resource(resource_type: int) -> ConfigChangeError:
    try:
        kind = ConfigResourceType(resource_type).name
    except ValueError:
        kind = str(resource_type)
    return ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Config changes of resource type {kind} are not "
                                                        "supported by this broker")


def duplicate_resources(resources: Iterable[tuple[int, str]]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    dupes: set[tuple[int, str]] = set()
    for key in resources:
        (dupes if key in seen else seen).add(key)
    return dupes


def alter_resources(resources: list[Any], alter_one: Callable[[Any], None],
                    response_type: Callable[..., Any]) -> list[Any]:
    """One response per resource, in order; a resource named twice is refused both times (Kafka)."""
    dupes = duplicate_resources((r.resource_type, r.resource_name) for r in resources)
    responses = []
    for resource in resources:
        response = response_type(error_code=ErrorCode.NO_ERROR, error_message=None,
                                 resource_type=resource.resource_type, resource_name=resource.resource_name)
        try:
            if (resource.resource_type, resource.resource_name) in dupes:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Duplicate resource in the request")
            alter_one(resource)
        except ConfigChangeError as exc:
            response.error_code, response.error_message = exc.error_code, exc.message
        responses.append(response)
    return responses
