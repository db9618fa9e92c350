"""A lone broker with the ACL authorizer: PLAINTEXT (User:ANONYMOUS) and SASL_PLAINTEXT with PLAIN users
admin (a super user), alice, bob and carol; and connections authenticated as each."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from client.connection import BrokerConnection
from client.sasl import SaslSettings
from protocol.acl_types import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.messages.create_acls import AclCreation, CreateAclsRequest
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.plugin import BrokerFactory
from pytest_pafka.ports import free_port
from pytest_pafka.waiting import wait_until

HOST = "127.0.0.1"
USERS = ("admin", "alice", "bob", "carol", "erin")
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def plain_jaas() -> str:
    users = " ".join(f'user_{u}="{u}-secret"' for u in USERS)
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            f'password="admin-secret" {users};')


@dataclass(frozen=True)
class AclBroker:
    broker: BrokerProcess
    sasl_port: int

    def wait_ready(self, timeout_s: float = 10.0) -> AclBroker:
        """The broker is reported up once its PLAINTEXT port accepts; the SASL one may open just after."""
        wait_until(lambda: socket.create_connection((HOST, self.sasl_port), timeout=1).close() or True, timeout_s,
                   f"the SASL port {self.sasl_port} accepting", ignoring=(OSError,))
        return self

    @property
    def sasl_bootstrap(self) -> str:
        return f"{HOST}:{self.sasl_port}"

    @contextmanager
    def connect(self, user: str | None) -> Iterator[BrokerConnection]:
        """A connection as ``user`` over SASL PLAIN, or as User:ANONYMOUS over PLAINTEXT for None."""
        if user is None:
            connection = BrokerConnection(HOST, self.broker.port)
        else:
            connection = BrokerConnection(HOST, self.sasl_port, sasl=SaslSettings("PLAIN", user, f"{user}-secret"))
        with connection:
            yield connection

    def confluent_config(self, user: str) -> dict[str, Any]:
        return {"bootstrap.servers": self.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"}

    def allow(self, principal: str, operation: AclOperation, resource_type: ResourceType, name: str,
              pattern: PatternType = PatternType.LITERAL, permission: AclPermissionType = AclPermissionType.ALLOW
              ) -> None:
        creation = AclCreation(resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
                               principal=principal, host="*", operation=operation, permission_type=permission)
        with self.connect("admin") as admin:
            response = admin.request(CreateAclsRequest(creations=[creation]))
        assert response is not None and [r.error_code for r in response.results] == [0], response


def acl_broker_process(factory: BrokerFactory, *overrides: str) -> tuple[BrokerProcess, int]:
    """A started broker with a PLAINTEXT listener (its ``port``) and a SASL_PLAINTEXT one (the returned port)
    under the ACL authorizer; ``factory`` (the plugin's) ends it."""
    plain, sasl = free_port(), free_port()
    broker = factory(
        f"listeners=PLAINTEXT://{HOST}:{plain},SASL_PLAINTEXT://{HOST}:{sasl}",
        "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={plain_jaas()}",
        f"authorizer.class.name={AUTHORIZER}", "super.users=User:admin", *overrides, port=plain)
    return broker, sasl
