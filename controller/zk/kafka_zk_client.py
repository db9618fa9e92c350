"""Kafka's ZooKeeper operations (kafka.zk.KafkaZkClient) for asyncio, over kazoo.

The znodes and their JSON are Kafka 3.9's (zk_data); the thread, retries, watches and
session handling are ZooKeeperSession's (zk_session). Every public method is a
coroutine whose kazoo work runs on the session's one dedicated thread.

The controller's writes are fenced the way Kafka 3.9 fences them: each is a multi-op
with a check of /controller_epoch's znode version, so a deposed controller's writes
fail with :class:`ControllerMovedError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError
from kazoo.exceptions import NodeExistsError as KazooNodeExistsError

from controller.zk import zk_data as zd
from controller.zk.zk_session import (
    ControllerMovedError,
    NodeExistsError,
    TopicExistsError,
    ZkBadVersionError,
    ZkError,
    ZooKeeperSession,
    ensure_path,
    first_error,
    raise_first_error,
    split_connect,
)
from controller.zk.zk_watches import ZkWatch

__all__ = [
    "ControllerMovedError",
    "KafkaZkClient",
    "NodeExistsError",
    "TopicExistsError",
    "ZkBadVersionError",
    "ZkError",
    "ZkWatch",
    "split_connect",
]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class KafkaZkClient(ZooKeeperSession):
    """Kafka's ZooKeeper layout and operations; every public method is a coroutine."""

    # --- cluster id, broker ids, registration ------------------------------------------------------------

    async def create_or_get_cluster_id(self, proposed: str) -> str:
        def create_or_get() -> str:
            zk = self._client
            while True:
                try:
                    data, _ = self._retry(lambda: zk.get(zd.CLUSTER_ID_PATH))
                    return zd.decode_cluster_id(data)
                except NoNodeError:
                    pass
                try:
                    self._create(zd.CLUSTER_ID_PATH, zd.encode_cluster_id(proposed))
                    return proposed
                except KazooNodeExistsError:
                    continue  # another broker won: read its id
        return await self._run(create_or_get)

    async def generate_broker_sequence_id(self) -> int:
        """The next /brokers/seqid version (a broker id is it + reserved.broker.max.id)."""
        def generate() -> int:
            zk = self._client
            while True:
                try:
                    stat = self._retry(lambda: zk.set(zd.BROKER_SEQUENCE_ID_PATH, b"", -1))
                    return int(stat.version)
                except NoNodeError:
                    try:
                        self._create(zd.BROKER_SEQUENCE_ID_PATH, b"")
                    except KazooNodeExistsError:
                        pass
        return await self._run(generate)

    async def register_broker(self, info: zd.BrokerInfo) -> int:
        """Create the ephemeral /brokers/ids/N; returns the broker epoch (its czxid).

        NodeExistsError if another session holds the id (Kafka's "node already exists"),
        also after a retry whose first attempt may have created it: then the owner decides.
        """
        path = zd.broker_id_path(info.id)
        data = zd.encode_broker_info(info)
        return await self._run(lambda: self._checked_ephemeral_create(path, data))

    def _checked_ephemeral_create(self, path: str, data: bytes) -> int:
        """Kafka's CheckedEphemeral: create + set version 0 in one multi, for the czxid; ours if it already exists."""
        zk = self._client
        def create() -> list[Any]:
            tx = zk.transaction()
            tx.create(path, data, ephemeral=True)
            tx.set_data(path, data, 0)
            result: list[Any] = tx.commit()
            return result
        results = self._retry(create)
        if isinstance(results[0], KazooNodeExistsError):
            try:
                _, stat = self._retry(lambda: zk.get(path))
            except NoNodeError:
                return self._checked_ephemeral_create(path, data)  # it went away meanwhile: try again
            if stat.ephemeralOwner == self.current_session_id():
                return int(stat.czxid)  # our own earlier attempt (a retry after a connection loss)
            raise NodeExistsError(f"{path} already exists (owned by session 0x{stat.ephemeralOwner:x})")
        raise_first_error(results, path)
        return int(results[1].czxid)

    async def get_all_brokers(self) -> dict[int, zd.BrokerInfo]:
        """Every registered broker, with its epoch (czxid)."""
        def get_all() -> dict[int, zd.BrokerInfo]:
            zk = self._client
            ids = sorted(int(c) for c in self._retry(lambda: zk.get_children(zd.BROKER_IDS_PATH)))
            results = self._pipeline([lambda i=i: zk.get_async(zd.broker_id_path(i)) for i in ids])  # type: ignore[misc]
            brokers: dict[int, zd.BrokerInfo] = {}
            for broker_id, result in zip(ids, results, strict=True):
                if isinstance(result, NoNodeError):
                    continue
                if isinstance(result, Exception):
                    raise result
                data, stat = result
                brokers[broker_id] = zd.decode_broker_info(broker_id, data, epoch=int(stat.czxid))
            return brokers
        return await self._run(get_all)

    # --- controller ---------------------------------------------------------------------------------------

    async def get_controller_id(self) -> int | None:
        found = await self.get_data(zd.CONTROLLER_PATH)
        return zd.decode_controller(found[0]) if found is not None else None

    async def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, /controller_epoch's znode version), or None before the first election."""
        found = await self.get_data(zd.CONTROLLER_EPOCH_PATH)
        return (zd.decode_controller_epoch(found[0]), found[1]) if found is not None else None

    async def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """Create the ephemeral /controller and bump /controller_epoch in one multi.

        Returns (new epoch, /controller_epoch's new znode version); ControllerMovedError when
        another broker is the controller or the epoch moved under us.
        """
        return await self._run(lambda: self._register_controller(broker_id))

    def _register_controller(self, broker_id: int, attempts: int = 5) -> tuple[int, int]:
        zk = self._client
        epoch, epoch_version = self._controller_epoch_or_create()
        new_epoch = epoch + 1

        def elect() -> list[Any]:
            tx = zk.transaction()
            tx.create(zd.CONTROLLER_PATH, zd.encode_controller(broker_id), ephemeral=True)
            tx.set_data(zd.CONTROLLER_EPOCH_PATH, zd.encode_controller_epoch(new_epoch), epoch_version)
            result: list[Any] = tx.commit()
            return result
        results = self._retry(elect)
        if not any(isinstance(r, Exception) for r in results):
            log.info("broker %d registered as the controller with epoch %d", broker_id, new_epoch)
            return new_epoch, int(results[1].version)
        # Kafka's checkControllerAndEpoch: our own earlier attempt (a retry) counts as success.
        try:
            data, stat = self._retry(lambda: zk.get(zd.CONTROLLER_PATH))
            current_data, current_stat = self._retry(lambda: zk.get(zd.CONTROLLER_EPOCH_PATH))
        except NoNodeError as e:
            # The epoch moved under us but nobody holds /controller (that controller is gone already): again.
            if attempts > 1:
                return self._register_controller(broker_id, attempts - 1)
            raise ControllerMovedError(f"controller moved while broker {broker_id} was being elected") from e
        current_epoch = zd.decode_controller_epoch(current_data)
        if zd.decode_controller(data) == broker_id and stat.ephemeralOwner == self.current_session_id() and current_epoch == new_epoch:
            return new_epoch, int(current_stat.version)
        raise ControllerMovedError(
            f"broker {broker_id} could not become the controller: broker {zd.decode_controller(data)} is (epoch {current_epoch})"
        )

    def _controller_epoch_or_create(self) -> tuple[int, int]:
        zk = self._client
        while True:
            try:
                data, stat = self._retry(lambda: zk.get(zd.CONTROLLER_EPOCH_PATH))
                return zd.decode_controller_epoch(data), int(stat.version)
            except NoNodeError:
                pass
            try:
                self._retry(lambda: zk.create(
                    zd.CONTROLLER_EPOCH_PATH, zd.encode_controller_epoch(zd.INITIAL_CONTROLLER_EPOCH)))
                return zd.INITIAL_CONTROLLER_EPOCH, zd.INITIAL_CONTROLLER_EPOCH_ZK_VERSION
            except KazooNodeExistsError:
                continue

    # --- topics ---------------------------------------------------------------------------------------------

    async def get_all_topics(self) -> set[str]:
        return set(await self.get_children(zd.TOPICS_PATH))

    async def get_topic_assignments(self, topics: Iterable[str]) -> dict[str, zd.TopicAssignment]:
        names = sorted(set(topics))

        def get() -> dict[str, zd.TopicAssignment]:
            zk = self._client
            results = self._pipeline([lambda t=t: zk.get_async(zd.topic_path(t)) for t in names])  # type: ignore[misc]
            found: dict[str, zd.TopicAssignment] = {}
            for topic, result in zip(names, results, strict=True):
                if isinstance(result, NoNodeError):
                    continue
                if isinstance(result, Exception):
                    raise result
                found[topic] = zd.decode_topic_assignment(result[0])
            return found
        return await self._run(get)

    async def create_topic(self, topic: str, assignment: zd.TopicAssignment, configs: Mapping[str, str]) -> None:
        """Kafka's createTopicWithAssignment: the config znode first, then /brokers/topics/T."""
        def create() -> None:
            zk = self._client
            if self._retry(lambda: zk.exists(zd.topic_path(topic))) is not None:
                raise TopicExistsError(f"Topic '{topic}' already exists.")
            self._set_or_create(zd.config_entity_path(zd.CONFIG_TYPE_TOPIC, topic), zd.encode_config(configs))
            try:
                self._create(zd.topic_path(topic), zd.encode_topic_assignment(assignment))
            except KazooNodeExistsError as e:
                raise TopicExistsError(f"Topic '{topic}' already exists.") from e
        await self._run(create)

    async def set_topic_assignment(self, topic: str, assignment: zd.TopicAssignment,
                                   controller_epoch_zk_version: int | None = None) -> None:
        """Rewrite /brokers/topics/T (new partitions, reassignments); fenced when the controller writes it."""
        data = zd.encode_topic_assignment(assignment)
        path = zd.topic_path(topic)

        def write() -> None:
            results = self._fenced_ops(controller_epoch_zk_version, [lambda tx: tx.set_data(path, data)])
            raise_first_error(results[0], path)
        await self._run(write)

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """Each topic's overrides ({} when it has none)."""
        names = sorted(set(topics))

        def get() -> dict[str, dict[str, str]]:
            zk = self._client
            paths = [zd.config_entity_path(zd.CONFIG_TYPE_TOPIC, t) for t in names]
            results = self._pipeline([lambda p=p: zk.get_async(p) for p in paths])  # type: ignore[misc]
            configs: dict[str, dict[str, str]] = {}
            for topic, result in zip(names, results, strict=True):
                if isinstance(result, NoNodeError):
                    configs[topic] = {}
                elif isinstance(result, Exception):
                    raise result
                else:
                    configs[topic] = zd.decode_config(result[0])
            return configs
        return await self._run(get)

    async def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """Write /config/topics/T, then the change notification every broker watches."""
        await self._set_entity_configs(zd.CONFIG_TYPE_TOPIC, topic, configs)

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """/config/brokers/<entity> ("N" or "<default>") and its change notification."""
        await self._set_entity_configs(zd.CONFIG_TYPE_BROKER, entity, configs)

    async def _set_entity_configs(self, entity_type: str, entity: str, configs: Mapping[str, str]) -> None:
        def write() -> None:
            self._set_or_create(zd.config_entity_path(entity_type, entity), zd.encode_config(configs))
            notification = zd.encode_config_change_notification(zd.config_entity_change_path(entity_type, entity))
            self._create(f"{zd.CONFIG_CHANGES_PATH}/{zd.CONFIG_CHANGE_PREFIX}", notification, sequence=True)
        await self._run(write)

    async def set_group_configs(self, group_id: str, configs: Mapping[str, str]) -> None:
        """/config/groups/<group> (its whole set of configs) and its change notification."""
        await self._set_entity_configs(zd.CONFIG_TYPE_GROUP, zd.sanitize(group_id), configs)

    async def get_group_configs(self) -> dict[str, dict[str, str]]:
        """Every group's configs, by group id."""
        names = await self.get_children(zd.config_entity_type_path(zd.CONFIG_TYPE_GROUP))
        return {zd.desanitize(name): await self.get_group_config(zd.desanitize(name)) for name in names}

    async def get_group_config(self, group_id: str) -> dict[str, str]:
        return await self.get_entity_config(zd.config_entity_change_path(zd.CONFIG_TYPE_GROUP, zd.sanitize(group_id)))

    async def set_client_metrics_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """/config/client-metrics/<name> (the subscription's whole set of configs) and its change notification."""
        await self._set_entity_configs(zd.CONFIG_TYPE_CLIENT_METRICS, zd.sanitize(name), configs)

    async def get_client_metrics_configs(self) -> dict[str, dict[str, str]]:
        """Every client-metrics subscription's configs, by name."""
        names = await self.get_children(zd.config_entity_type_path(zd.CONFIG_TYPE_CLIENT_METRICS))
        return {zd.desanitize(name): await self.get_client_metrics_config(zd.desanitize(name)) for name in names}

    async def get_client_metrics_config(self, name: str) -> dict[str, str]:
        return await self.get_entity_config(
            zd.config_entity_change_path(zd.CONFIG_TYPE_CLIENT_METRICS, zd.sanitize(name)))

    async def get_user_configs(self) -> dict[str, dict[str, str]]:
        """Every /config/users/<sanitized user>'s config, by user name."""
        users = await self.get_children(zd.config_entity_type_path(zd.CONFIG_TYPE_USER))
        configs: dict[str, dict[str, str]] = {}
        for sanitized in users:
            configs[zd.desanitize(sanitized)] = await self.get_user_config(zd.desanitize(sanitized))
        return configs

    async def get_user_config(self, user: str) -> dict[str, str]:
        # A user with only <user, client-id> quotas has a znode without data (created as their parent).
        return await self.get_entity_config(zd.config_entity_change_path(zd.CONFIG_TYPE_USER, zd.sanitize(user)))

    async def alter_user_config(self, user: str, changes: Mapping[str, str | None]) -> dict[str, str]:
        """Set (or, for None, remove) keys of /config/users/<user>, keeping its other keys (quotas)."""
        return await self.alter_entity_config(
            zd.config_entity_change_path(zd.CONFIG_TYPE_USER, zd.sanitize(user)), changes)

    async def alter_entity_config(self, entity_path: str, changes: Mapping[str, str | None]) -> dict[str, str]:
        """Set (or, for None, remove) keys of /config/<entity_path> (``users/alice``,
        ``users/alice/clients/c1``, ``clients/<default>``...), keeping its other keys (a user's SCRAM
        credentials and quotas share a znode), then announce it; the entity's new config. Only
        changes made through one broker at a time are ordered here, as with Kafka's ZooKeeper-mode admin."""
        path = f"{zd.CONFIG_PATH}/{entity_path}"

        def write() -> dict[str, str]:
            try:
                data, _ = self._retry(lambda: self._client.get(path))
                config = zd.decode_config(data)
            except NoNodeError:
                config = {}
            for key, value in changes.items():
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = value
            self._set_or_create(path, zd.encode_config(config))
            notification = zd.encode_config_change_notification(entity_path)
            self._create(f"{zd.CONFIG_CHANGES_PATH}/{zd.CONFIG_CHANGE_PREFIX}", notification, sequence=True)
            return config
        return await self._run(write)

    async def get_entity_config(self, entity_path: str) -> dict[str, str]:
        found = await self.get_data(f"{zd.CONFIG_PATH}/{entity_path}")
        return zd.decode_config(found[0]) if found is not None and found[0] else {}

    async def get_quota_entity_configs(self) -> dict[str, dict[str, str]]:
        """Every entity that may hold client quotas, by entity path: users, users' clients, clients, ips."""
        paths: list[str] = []
        for entity_type in (zd.CONFIG_TYPE_USER, zd.CONFIG_TYPE_CLIENT, zd.CONFIG_TYPE_IP):
            for name in await self.get_children(zd.config_entity_type_path(entity_type)):
                paths.append(f"{entity_type}/{name}")
                if entity_type == zd.CONFIG_TYPE_USER:
                    clients = await self.get_children(f"{zd.config_entity_path(entity_type, name)}/clients")
                    paths += [f"{entity_type}/{name}/clients/{client}" for client in clients]
        return {path: await self.get_entity_config(path) for path in paths}

    async def get_broker_configs(self, entity: str) -> dict[str, str]:
        found = await self.get_data(zd.config_entity_path(zd.CONFIG_TYPE_BROKER, entity))
        return zd.decode_config(found[0]) if found is not None else {}

    async def create_delete_topic_marker(self, topic: str) -> bool:
        """/admin/delete_topics/T; False if the topic was already marked (Kafka swallows that case too)."""
        def create() -> bool:
            try:
                self._create(zd.delete_topic_path(topic), b"")
                return True
            except KazooNodeExistsError:
                return False
        return await self._run(create)

    async def get_delete_topic_markers(self) -> set[str]:
        return set(await self.get_children(zd.DELETE_TOPICS_PATH))

    async def remove_delete_topic_markers(self, topics: Iterable[str]) -> None:
        await self.delete_paths([zd.delete_topic_path(t) for t in topics])

    async def delete_topic_znodes(self, topic: str, controller_epoch_zk_version: int | None = None) -> None:
        """/brokers/topics/T with its partitions subtree, then /config/topics/T (fenced when versioned)."""
        def delete() -> None:
            zk = self._client
            paths = self._subtree_post_order(zd.topic_path(topic))
            if paths:
                def ops(tx: Any) -> None:
                    for path in paths:
                        tx.delete(path)
                results = self._fenced_ops(controller_epoch_zk_version, [ops])
                raise_first_error(results[0], zd.topic_path(topic), ignore=(NoNodeError,))
            try:
                self._retry(lambda: zk.delete(zd.config_entity_path(zd.CONFIG_TYPE_TOPIC, topic)))
            except NoNodeError:
                pass
        await self._run(delete)

    # --- partition state ----------------------------------------------------------------------------------

    async def get_partition_states(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, zd.LeaderIsrAndControllerEpoch]:
        """The state znodes that exist; partition_epoch is each znode's version."""
        tps = sorted(set(partitions))

        def get() -> dict[TopicPartition, zd.LeaderIsrAndControllerEpoch]:
            zk = self._client
            results = self._pipeline([lambda tp=tp: zk.get_async(zd.topic_partition_state_path(*tp)) for tp in tps])  # type: ignore[misc]
            states: dict[TopicPartition, zd.LeaderIsrAndControllerEpoch] = {}
            for tp, result in zip(tps, results, strict=True):
                if isinstance(result, NoNodeError):
                    continue
                if isinstance(result, Exception):
                    raise result
                data, stat = result
                states[tp] = zd.decode_partition_state(data, int(stat.version))
            return states
        return await self._run(get)

    async def create_partition_states(self, states: Mapping[TopicPartition, zd.LeaderIsrAndControllerEpoch],
                                      controller_epoch_zk_version: int) -> dict[TopicPartition, Exception]:
        """Create .../partitions/P/state (and its parents), each fenced by the controller epoch.

        Returns the partitions that failed (NodeExistsError: already initialised);
        ControllerMovedError if this controller was deposed.
        """
        items = sorted(states.items())

        def create() -> dict[TopicPartition, Exception]:
            zk = self._client
            parents = sorted({zd.topic_partitions_path(t) for (t, _), _ in items}) + [
                zd.topic_partition_path(t, p) for (t, p), _ in items
            ]
            existing = self._pipeline([lambda path=path: zk.exists_async(path) for path in parents])  # type: ignore[misc]
            missing = [path for path, stat in zip(parents, existing, strict=True) if stat is None]
            parent_results = self._fenced_ops(controller_epoch_zk_version, [
                (lambda tx, path=path: tx.create(path, b"")) for path in missing
            ])
            for path, result in zip(missing, parent_results, strict=True):
                raise_first_error(result, path, ignore=(KazooNodeExistsError,))
            results = self._fenced_ops(controller_epoch_zk_version, [
                (lambda tx, tp=tp, st=st: tx.create(zd.topic_partition_state_path(*tp), zd.encode_partition_state(st)))
                for tp, st in items
            ])
            failed: dict[TopicPartition, Exception] = {}
            for (tp, _), result in zip(items, results, strict=True):
                error = first_error(result)
                if error is not None:
                    failed[tp] = NodeExistsError(str(error)) if isinstance(error, KazooNodeExistsError) else ZkError(repr(error))
            return failed
        return await self._run(create)

    async def update_leader_and_isr(
        self, states: Mapping[TopicPartition, zd.LeaderAndIsr], controller_epoch: int, controller_epoch_zk_version: int,
    ) -> tuple[dict[TopicPartition, zd.LeaderAndIsr], dict[TopicPartition, Exception]]:
        """Conditional writes of partition states: each on its znode version (== partition_epoch) and on
        /controller_epoch's version. Returns (written, with their new partition_epoch; failed: a
        BadVersion means someone else wrote the partition first). ControllerMovedError if deposed."""
        items = sorted(states.items())

        def update() -> tuple[dict[TopicPartition, zd.LeaderAndIsr], dict[TopicPartition, Exception]]:
            multis = [
                (lambda tx, tp=tp, lai=lai: tx.set_data(
                    zd.topic_partition_state_path(*tp),
                    zd.encode_partition_state(zd.LeaderIsrAndControllerEpoch(lai, controller_epoch)),
                    lai.partition_epoch,
                ))
                for tp, lai in items
            ]
            results = self._fenced_ops(controller_epoch_zk_version, multis)
            written: dict[TopicPartition, zd.LeaderAndIsr] = {}
            failed: dict[TopicPartition, Exception] = {}
            for (tp, lai), result in zip(items, results, strict=True):
                error = first_error(result)
                if error is None:
                    written[tp] = lai.with_partition_epoch(int(result[0].version))
                elif isinstance(error, BadVersionError):
                    failed[tp] = ZkBadVersionError(f"partition state of {tp[0]}-{tp[1]} moved past version {lai.partition_epoch}")
                else:
                    failed[tp] = ZkError(f"partition state of {tp[0]}-{tp[1]}: {error!r}")
            return written, failed
        return await self._run(update)

    async def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """/isr_change_notification/isr_change_<seq> (what a Kafka broker writes after an ISR change)."""
        data = zd.encode_isr_change_notification(sorted(partitions))
        path = f"{zd.ISR_CHANGE_NOTIFICATION_PATH}/{zd.ISR_CHANGE_PREFIX}"
        created: str = await self._run(lambda: self._create(path, data, sequence=True))
        return created

    # --- ACLs: /kafka-acl, /kafka-acl-extended/prefixed and their change notifications ----------------------

    async def propagate_log_dir_event(self, broker_id: int) -> str:
        """/log_dir_event_notification/log_dir_event_<seq>: a log directory of ``broker_id`` went offline."""
        data = zd.encode_log_dir_event(broker_id)
        path = f"{zd.LOG_DIR_EVENT_NOTIFICATION_PATH}/{zd.LOG_DIR_EVENT_PREFIX}"
        created: str = await self._run(lambda: self._create(path, data, sequence=True))
        return created

    async def create_acl_paths(self) -> None:
        """Kafka's createAclPaths: both stores' roots and change roots (an authorizer's start-up)."""
        def create() -> None:
            for path in (zd.LITERAL_ACL_PATH, zd.LITERAL_ACL_CHANGES_PATH, zd.PREFIXED_ACL_PATH,
                         zd.PREFIXED_ACL_CHANGES_PATH):
                self._retry(lambda p=path: ensure_path(self._client, p))  # type: ignore[misc]
        await self._run(create)

    async def get_acl_znodes(self, store_root: str) -> dict[str, bytes]:
        """Every ``<store_root>/<ResourceType>/<name>`` znode's data, by path."""
        def get() -> dict[str, bytes]:
            zk = self._client
            found: dict[str, bytes] = {}
            try:
                types = self._retry(lambda: zk.get_children(store_root))
            except NoNodeError:
                return found
            for resource_type in types:
                type_path = f"{store_root}/{resource_type}"
                try:
                    names = self._retry(lambda p=type_path: zk.get_children(p))  # type: ignore[misc]
                except NoNodeError:
                    continue
                for name in names:
                    path = f"{type_path}/{name}"
                    try:
                        found[path] = self._retry(lambda p=path: zk.get(p))[0]  # type: ignore[misc]
                    except NoNodeError:
                        continue
            return found
        return await self._run(get)

    async def update_acl_znode(self, path: str, change: Callable[[bytes | None], bytes | None],
                               changes_root: str, notification: bytes) -> bytes | None:
        """Kafka's updateResourceAcls: read ``path`` (None: absent), write ``change(data)`` conditionally on
        the version read (None: delete the znode), again on a concurrent change; then announce it under
        ``changes_root``. ``change`` runs on the ZooKeeper thread and must be pure. The data written."""
        def update() -> bytes | None:
            zk = self._client
            while True:
                try:
                    data, stat = self._retry(lambda: zk.get(path))
                    current: bytes | None = data
                    version = int(stat.version)
                except NoNodeError:
                    current, version = None, -1
                new = change(current)
                if new == current:
                    return new
                try:
                    if new is None:
                        self._retry(lambda: zk.delete(path, version=version))  # noqa: B023 (called at once)
                    elif version < 0:
                        self._create(path, new)
                    else:
                        self._retry(lambda: zk.set(path, new, version))  # noqa: B023 (called at once)
                except (BadVersionError, NoNodeError, KazooNodeExistsError):
                    continue
                self._create(f"{changes_root}/{zd.ACL_CHANGE_PREFIX}", notification, sequence=True)
                return new
        return await self._run(update)

    # --- producer ids ----------------------------------------------------------------------------------------

    async def claim_producer_id_block(self, broker_id: int, block_size: int = zd.PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
        """Claim the next block of producer ids: (first, last), inclusive.

        Read /latest_producer_id_block and its version, write the following block conditionally
        on that version; another broker's write in between makes it BadVersion: read again.
        """
        def claim() -> tuple[int, int]:
            zk = self._client
            while True:
                try:
                    data, stat = self._retry(lambda: zk.get(zd.PRODUCER_ID_BLOCK_PATH))
                except NoNodeError:
                    try:
                        self._create(zd.PRODUCER_ID_BLOCK_PATH, b"")
                    except KazooNodeExistsError:
                        pass
                    continue
                if data:
                    block = zd.decode_producer_id_block(data).next_block(broker_id, block_size)
                else:
                    block = zd.first_producer_id_block(broker_id, block_size)
                data, version = zd.encode_producer_id_block(block), int(stat.version)
                try:
                    self._retry(lambda: zk.set(zd.PRODUCER_ID_BLOCK_PATH, data, version))  # noqa: B023 (called at once)
                except BadVersionError:
                    continue
                log.info("broker %d claimed producer ids %d-%d", broker_id, block.first_producer_id, block.last_producer_id)
                return block.first_producer_id, block.last_producer_id
        return await self._run(claim)


