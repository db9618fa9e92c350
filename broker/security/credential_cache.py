"""Kafka's CredentialCache: every user's SCRAM credentials, as the SCRAM SaslServers look them up.

A user's credentials travel in Kafka's user-config form, a map from mechanism
name to ScramCredentialUtils' string (``{"SCRAM-SHA-256": "salt=...,stored_key=...,
server_key=...,iterations=4096"}``): the ``config`` of ZooKeeper's
``/config/users/<user>`` in a cluster, and of a lone broker's
:class:`ScramCredentialsFile` in its first log dir. Other keys of a user's
config (quotas) are not credentials and are left alone.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from client.scram import ScramCredential, ScramMechanism
from storage.checkpoints import write_atomically

log = logging.getLogger(__name__)

#: The lone broker's credentials file, in its first log dir.
CREDENTIALS_FILE = "user-scram-credentials.json"


def credentials_of(config: Mapping[str, str]) -> dict[ScramMechanism, ScramCredential]:
    """The credentials in one user's config (a malformed one is skipped, as Kafka logs and skips it)."""
    found: dict[ScramMechanism, ScramCredential] = {}
    for name, value in config.items():
        mechanism = ScramMechanism.for_name(name)
        if mechanism is None:
            continue
        try:
            found[mechanism] = ScramCredential.from_config_string(value)
        except ValueError:
            log.error("Invalid %s credential in a user's config; ignored", name)
    return found


class CredentialCache:
    def __init__(self) -> None:
        self._users: dict[str, dict[ScramMechanism, ScramCredential]] = {}

    def get(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def update_user(self, user: str, config: Mapping[str, str]) -> None:
        """Replace ``user``'s credentials with those in its (new) config; none left forgets it."""
        credentials = credentials_of(config)
        if credentials:
            self._users[user] = credentials
        else:
            self._users.pop(user, None)

    def users(self) -> dict[str, dict[ScramMechanism, ScramCredential]]:
        return {user: dict(credentials) for user, credentials in self._users.items()}

    def user_config(self, user: str) -> dict[str, str]:
        """``user``'s credentials in Kafka's user-config form."""
        return {m.mechanism_name: c.to_config_string() for m, c in self._users.get(user, {}).items()}


class ScramCredentialsFile:
    """A lone broker's users' configs: ``{"version": 1, "users": {"alice": {"SCRAM-SHA-256": "..."}}}``."""

    def __init__(self, log_dir: str) -> None:
        self.path = Path(log_dir) / CREDENTIALS_FILE

    def load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        users = data.get("users", {}) if isinstance(data, dict) else {}
        return {str(user): {str(k): str(v) for k, v in config.items()} for user, config in users.items()}

    def save(self, users: Mapping[str, Mapping[str, str]]) -> None:
        """Written atomically (and synced) before the change is acknowledged; readable by the owner only."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        content = json.dumps({"version": 1, "users": {u: dict(c) for u, c in sorted(users.items())}}, indent=1)
        write_atomically(self.path, content, mode=0o600)
