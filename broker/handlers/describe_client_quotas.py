"""DescribeClientQuotas (48): the quota entities matching a filter, with their values (KIP-546).

Needs DESCRIBE_CONFIGS on the cluster. A bad filter (a type twice, an unknown
type, ip with user or client-id, an exact match without a name) is answered
INVALID_REQUEST with Kafka's message and no entries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.quota.client_quota_admin import InvalidQuotaRequest
from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, broker: BrokerServices,
           request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    if not authorize_cluster(ctx, broker, AclOperation.DESCRIBE_CONFIGS):
        return _failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    assert broker.client_quota_admin is not None
    try:
        found = broker.client_quota_admin.describe(request.components, request.strict)
    except InvalidQuotaRequest as exc:
        return _failed(ErrorCode.INVALID_REQUEST, str(exc))
    entries = [EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity.components],
                         values=[ValueData(key=k, value=v) for k, v in sorted(values.items())])
               for entity, values in found]
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR, error_message=None,
                                        entries=entries)


def _failed(code: ErrorCode, message: str) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=code, error_message=message, entries=None)
