"""DeleteShareGroupOffsets (92): delete an empty share group's state for some topics.

Served only when ``group.coordinator.rebalance.protocols`` lists ``share``
(``REBALANCE_PROTOCOL``), at v0 as Kafka 4.2. As Kafka's KafkaApis: DELETE on
the group, else GROUP_AUTHORIZATION_FAILED at the top; READ on each topic, else
that topic is TOPIC_AUTHORIZATION_FAILED. A group with members is
NON_EMPTY_GROUP, an unknown group GROUP_ID_NOT_FOUND, both at the top.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_group, authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0
REBALANCE_PROTOCOL = "share"
TOPIC_AUTHORIZATION_MESSAGE = "Topic authorization failed."


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    if not authorize_group(ctx, broker, AclOperation.DELETE, request.group_id):
        return DeleteShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                               error_message="Group authorization failed.")
    names = list(dict.fromkeys(t.topic_name for t in request.topics))
    allowed = authorized_names(ctx, broker, AclOperation.READ, ResourceType.TOPIC, names)
    answer = await broker.group_coordinator.share_offsets.delete(request.group_id,
                                                                  [n for n in names if n in allowed])
    if answer.error != ErrorCode.NO_ERROR:
        return DeleteShareGroupOffsetsResponse(error_code=answer.error, error_message=answer.error_message)
    responses = [DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=t.topic_id,
                                                      error_code=t.error, error_message=t.error_message)
                 for t in answer.topics]
    responses += [DeleteShareGroupOffsetsResponseTopic(topic_name=n, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                       error_message=TOPIC_AUTHORIZATION_MESSAGE)
                  for n in names if n not in allowed]
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, responses=responses)
