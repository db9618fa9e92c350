"""Users' SCRAM credentials as the admin APIs see them: Kafka's describe/alterUserScramCredentials.

AlterUserScramCredentials carries, per user and mechanism, a salt and the
client-computed salted password (never the password); the broker derives the
stored and server keys and keeps Kafka's credential string. A lone broker
writes its :class:`~broker.security.credential_cache.ScramCredentialsFile`; a
cluster member writes ZooKeeper's ``/config/users/<user>`` with a change
notification (``writer``), from which every broker's cache follows. A user
whose alterations include a bad one gets that error and none of its changes,
as in Kafka; other users' changes still apply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from broker.security.credential_cache import CredentialCache, ScramCredentialsFile
from client.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, ScramMechanism
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import ScramCredentialDeletion, ScramCredentialUpsertion
from protocol.messages.describe_user_scram_credentials import CredentialInfo, DescribeUserScramCredentialsResult

#: (user, {mechanism name: credential string, or None to delete}) -> the user's new config, in ZooKeeper.
UserCredentialsWriter = Callable[[str, Mapping[str, str | None]], Awaitable[dict[str, str]]]


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error_code: int = ErrorCode.NO_ERROR
    error_message: str | None = None


class ScramCredentialsManager:
    def __init__(self, cache: CredentialCache, file: ScramCredentialsFile | None) -> None:
        self.cache = cache
        self._file = file
        #: Set for a cluster member: changes go to ZooKeeper instead of the file.
        self.writer: UserCredentialsWriter | None = None
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """A lone broker's credentials from its file (blocking: called off the event loop)."""
        if self._file is not None:
            for user, config in self._file.load().items():
                self.cache.update_user(user, config)

    # -- DescribeUserScramCredentials -----------------------------------------------------
    def describe(self, users: Sequence[str] | None) -> list[DescribeUserScramCredentialsResult]:
        known = self.cache.users()
        if not users:
            return [_described(user, known[user]) for user in sorted(known)]
        results = []
        for user in dict.fromkeys(users):
            if users.count(user) > 1:
                results.append(DescribeUserScramCredentialsResult(
                    user=user, error_code=ErrorCode.DUPLICATE_RESOURCE, credential_infos=[],
                    error_message="Cannot describe SCRAM credentials for the same user twice in a single request"))
            elif user not in known:
                results.append(DescribeUserScramCredentialsResult(
                    user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND, credential_infos=[],
                    error_message="Attempt to describe a user credential that does not exist"))
            else:
                results.append(_described(user, known[user]))
        return results

    # -- AlterUserScramCredentials ---------------------------------------------------------
    async def alter(self, deletions: Sequence[ScramCredentialDeletion],
                    upsertions: Sequence[ScramCredentialUpsertion]) -> list[UserResult]:
        users = list(dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions]))
        async with self._lock:  # one change at a time: each reads the state the last one left
            errors = {user: error for user in users
                      if (error := self._check(user, deletions, upsertions)) is not None}
            changes: dict[str, dict[str, str | None]] = {}
            for user in users:
                if user not in errors:
                    changes[user] = _changes_of(user, deletions, upsertions)
            await self._write(changes)
        return [errors.get(user) or UserResult(user) for user in users]

    def _check(self, user: str, deletions: Sequence[ScramCredentialDeletion],
               upsertions: Sequence[ScramCredentialUpsertion]) -> UserResult | None:
        pairs = [(d.name, d.mechanism) for d in deletions] + [(u.name, u.mechanism) for u in upsertions]
        mine = [mechanism for name, mechanism in pairs if name == user]
        if len(mine) != len(set(mine)):
            return UserResult(user, ErrorCode.DUPLICATE_RESOURCE,
                              "A user credential cannot be altered twice in the same request")
        if any(ScramMechanism.for_type(m) is None for m in mine):
            return UserResult(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        if not user:
            return UserResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        for upsertion in (u for u in upsertions if u.name == user):
            if upsertion.iterations < MIN_ITERATIONS:
                return UserResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            if upsertion.iterations > MAX_ITERATIONS:
                return UserResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        for deletion in (d for d in deletions if d.name == user):
            scram = ScramMechanism.for_type(deletion.mechanism)
            assert scram is not None
            if self.cache.get(scram, user) is None:
                return UserResult(user, ErrorCode.RESOURCE_NOT_FOUND,
                                  "Attempt to delete a user credential that does not exist")
        return None

    async def _write(self, changes: Mapping[str, Mapping[str, str | None]]) -> None:
        if self.writer is not None:
            for user, change in changes.items():
                self.cache.update_user(user, await self.writer(user, change))
            return
        assert self._file is not None
        configs = self.cache.users()
        updated = {user: self.cache.user_config(user) for user in configs}
        for user, change in changes.items():
            config = updated.setdefault(user, {})
            for mechanism, credential in change.items():
                if credential is None:
                    config.pop(mechanism, None)
                else:
                    config[mechanism] = credential
        await asyncio.to_thread(self._file.save, {u: c for u, c in updated.items() if c})
        for user in changes:
            self.cache.update_user(user, updated[user])


def _changes_of(user: str, deletions: Sequence[ScramCredentialDeletion],
                upsertions: Sequence[ScramCredentialUpsertion]) -> dict[str, str | None]:
    change: dict[str, str | None] = {}
    for deletion in (d for d in deletions if d.name == user):
        scram = ScramMechanism.for_type(deletion.mechanism)
        assert scram is not None
        change[scram.mechanism_name] = None
    for upsertion in (u for u in upsertions if u.name == user):
        scram = ScramMechanism.for_type(upsertion.mechanism)
        assert scram is not None
        credential = ScramCredential.from_salted_password(scram, upsertion.salt, upsertion.salted_password,
                                                          upsertion.iterations)
        change[scram.mechanism_name] = credential.to_config_string()
    return change


def _described(user: str, credentials: Mapping[ScramMechanism, ScramCredential]) -> DescribeUserScramCredentialsResult:
    infos = [CredentialInfo(mechanism=m.type_id, iterations=c.iterations)
             for m, c in sorted(credentials.items(), key=lambda item: item[0].type_id)]
    return DescribeUserScramCredentialsResult(user=user, error_code=ErrorCode.NO_ERROR, error_message=None,
                                              credential_infos=infos)
