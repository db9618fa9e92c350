"""ListGroups (16): every group this broker coordinates, filtered by state (v4, KIP-518) and type (v5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster, authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.messages.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5

#: KIP-848's group types.
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"
#: KIP-932's share groups: Kafka lists them with type and protocol type ``share``.
SHARE_GROUP_TYPE = "share"
#: What Kafka lists as the protocol type of a consumer-protocol group.
CONSUMER_PROTOCOL_TYPE = "consumer"


def handle(ctx: RequestContext, broker: BrokerServices, request: ListGroupsRequest) -> ListGroupsResponse:
    version = ctx.api_version
    states = set(request.states_filter) if version >= 4 else set()
    types = {t.lower() for t in request.types_filter} if version >= 5 else set()
    error, classic = broker.group_coordinator.handle_list_groups(states)
    listed = [] if types and CLASSIC_GROUP_TYPE not in types else [
        ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=str(g.state),
                    group_type=CLASSIC_GROUP_TYPE) for g in classic]
    if not types or CONSUMER_GROUP_TYPE in types:
        listed += [ListedGroup(group_id=g.group_id, protocol_type=CONSUMER_PROTOCOL_TYPE, group_state=str(g.state),
                               group_type=CONSUMER_GROUP_TYPE)
                   for g in broker.group_coordinator.list_consumer_groups(states)]
    if not types or SHARE_GROUP_TYPE in types:
        listed += [ListedGroup(group_id=g.group_id, protocol_type=SHARE_GROUP_TYPE, group_state=str(g.state),
                               group_type=SHARE_GROUP_TYPE)
                   for g in broker.group_coordinator.list_share_groups(states)]
    if not authorize_cluster(ctx, broker, AclOperation.DESCRIBE):
        described = authorized_names(ctx, broker, AclOperation.DESCRIBE, ResourceType.GROUP,
                                     (g.group_id for g in listed))
        listed = [g for g in listed if g.group_id in described]
    return ListGroupsResponse(throttle_time_ms=0, error_code=error,
                              groups=sorted(listed, key=lambda g: g.group_id))
