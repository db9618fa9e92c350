"""Topic metadata in single-broker mode: topics, their ids, partitions and configs.

Kafka keeps this in ZooKeeper (``/brokers/topics``, ``/config/topics``) or in
the KRaft metadata log. The embedded single broker has neither, so it keeps the
same facts in one JSON document in the first log dir, replaced atomically
(write to a temp file, fsync, rename, fsync the directory) on every change: a
crash leaves either the old or the new document, never a mix.

File: ``<log.dirs[0]>/pafka-metadata.json``::

    {"version": 1, "cluster_id": "...",
     "topics": {"name": {"topic_id": "uuid", "partitions": {"0": [0]},
                         "configs": {"cleanup.policy": "compact"}}}}
"""

from __future__ import annotations

import base64
import json
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from storage.checkpoints import write_atomically

FILE_NAME = "pafka-metadata.json"
FORMAT_VERSION = 1


class TopicDocument(TypedDict):
    """One topic in the metadata file."""

    topic_id: str
    #: partition index (as a JSON key) -> replica broker ids
    partitions: dict[str, list[int]]
    configs: NotRequired[dict[str, str]]


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    #: partition index -> replica broker ids (the first is the preferred leader)
    partitions: dict[int, list[int]]
    #: per-topic config overrides, under Kafka's topic config names
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    def to_json(self) -> TopicDocument:
        return {
            "topic_id": str(self.topic_id),
            "partitions": {str(p): replicas for p, replicas in sorted(self.partitions.items())},
            "configs": dict(sorted(self.configs.items())),
        }

    @classmethod
    def from_json(cls, name: str, doc: TopicDocument) -> TopicMetadata:
        return cls(
            name=name,
            topic_id=uuid.UUID(doc["topic_id"]),
            partitions={int(p): list(r) for p, r in doc["partitions"].items()},
            configs=dict(doc.get("configs", {})),
        )


def new_cluster_id() -> str:
    """Kafka's cluster ids are a random UUID in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def new_topic_id() -> uuid.UUID:
    # Kafka never hands out the zero UUID or one whose first 8 bytes are zero
    # (reserved for metadata topics).
    while True:
        candidate = uuid.uuid4()
        if candidate.bytes[:8] != bytes(8):
            return candidate


class MetadataStore:
    """The durable topic registry of a broker without ZooKeeper."""

    def __init__(self, log_dir: str | os.PathLike[str] | None) -> None:
        self.path = Path(log_dir) / FILE_NAME if log_dir is not None else None
        self._lock = threading.Lock()
        self.topics: dict[str, TopicMetadata] = {}
        #: Bumped by every change of ``topics`` (TopicRegistry's).
        self.topics_version = 0
        self.cluster_id = ""
        self._load()

    @classmethod
    def detached(cls, cluster_id: str) -> MetadataStore:
        """An empty store kept nowhere: a cluster member's topics live in ZooKeeper, so its local
        admin manager holds this one, which nothing writes (cluster admin goes through ZooKeeper)."""
        store = cls(None)
        store.cluster_id = cluster_id
        return store

    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            self.cluster_id = new_cluster_id()
            return
        doc = json.loads(self.path.read_text())
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unsupported metadata format {doc.get('version')!r}")
        self.cluster_id = doc["cluster_id"]
        self.topics = {name: TopicMetadata.from_json(name, t) for name, t in doc["topics"].items()}

    def _save(self) -> None:
        if self.path is None:
            raise RuntimeError("a detached metadata store is never written: cluster topics live in ZooKeeper")
        doc = {
            "version": FORMAT_VERSION,
            "cluster_id": self.cluster_id,
            "topics": {name: t.to_json() for name, t in sorted(self.topics.items())},
        }
        write_atomically(self.path, json.dumps(doc, indent=1))

    def save(self) -> None:
        """Persist the current state (the cluster id is fixed at first start)."""
        with self._lock:
            self._save()

    # -- queries ----------------------------------------------------------
    def get(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def configs_of(self, name: str) -> dict[str, str]:
        """A topic's config overrides ({} for an unknown topic)."""
        meta = self.topics.get(name)
        return meta.configs if meta is not None else {}

    def by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def __iter__(self) -> Iterator[TopicMetadata]:
        return iter(list(self.topics.values()))

    def __contains__(self, name: str) -> bool:
        return name in self.topics

    # -- changes (each one durable before it returns) ---------------------
    def create_topic(self, name: str, partitions: dict[int, list[int]], configs: dict[str, str]) -> TopicMetadata:
        with self._lock:
            if name in self.topics:
                raise KeyError(name)
            topic = TopicMetadata(name, new_topic_id(), partitions, dict(configs))
            self.topics[name] = topic
            self.topics_version += 1
            self._save()
            return topic

    def delete_topic(self, name: str) -> TopicMetadata:
        with self._lock:
            topic = self.topics.pop(name)
            self.topics_version += 1
            self._save()
            return topic

    def add_partitions(self, name: str, new: dict[int, list[int]]) -> TopicMetadata:
        with self._lock:
            topic = self.topics[name]
            topic.partitions.update(new)
            self.topics_version += 1
            self._save()
            return topic

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata:
        """Replace the topic's overrides (AlterConfigs semantics)."""
        with self._lock:
            topic = self.topics[name]
            topic.configs = dict(configs)
            self._save()
            return topic
