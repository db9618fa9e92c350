"""AlterUserScramCredentials (51): upsert and delete users' SCRAM credentials (KIP-554).

An upsertion carries a salt, an iteration count (Kafka's 4096..16384) and the
salted password the client computed; the broker stores the derived keys (see
``broker.security.scram_credentials_manager``). One result per user named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    if not authorize_cluster(ctx, broker, AclOperation.ALTER):
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            AlterUserScramCredentialsResult(user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                            error_message="Cluster authorization failed.") for user in users])
    results = await broker.scram_credentials.alter(request.deletions, request.upsertions)
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        AlterUserScramCredentialsResult(user=r.user, error_code=r.error_code, error_message=r.error_message)
        for r in results])
