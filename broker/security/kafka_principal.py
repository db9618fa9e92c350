"""Kafka's KafkaPrincipal: who a connection acts as, ``<type>:<name>`` (``User:alice``)."""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


#: A PLAINTEXT connection, or an SSL one whose client sent no certificate.
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
