"""AlterClientQuotas (49): set or remove quota values of user / client-id / ip entities (KIP-546).

Needs ALTER_CONFIGS on the cluster (every entry CLUSTER_AUTHORIZATION_FAILED
otherwise). Each entry is answered on its own: INVALID_REQUEST with Kafka's
message for a bad entity, key or value, else applied (or only checked, with
``validate_only``). See ``broker.quota.client_quota_admin``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterClientQuotasResponseEntryData,
    EntityData,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    if not authorize_cluster(ctx, broker, AclOperation.ALTER_CONFIGS):
        return AlterClientQuotasResponse(throttle_time_ms=0, entries=[AlterClientQuotasResponseEntryData(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.",
            entity=entry.entity) for entry in request.entries])
    assert broker.client_quota_admin is not None
    results = await broker.client_quota_admin.alter(request.entries, request.validate_only)
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[AlterClientQuotasResponseEntryData(
        error_code=result.error_code, error_message=result.error_message,
        entity=[EntityData(entity_type=t, entity_name=n) for t, n in result.components]) for result in results])
