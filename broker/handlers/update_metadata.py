"""UpdateMetadata (6): the controller's view of the cluster, pushed to every broker.

Only a broker in a cluster serves it (a lone broker does not advertise it). The
metadata cache takes the live brokers, the controller and the partition states
(``broker.cluster.metadata_cache``); a request from a deposed controller answers
STALE_CONTROLLER_EPOCH, one meant for an earlier registration of this broker
STALE_BROKER_EPOCH, and neither changes anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 6
MIN_VERSION = 0
MAX_VERSION = 8
#: Served only with zookeeper.connect: the controller's request to brokers.
CLUSTER_ONLY = True


def handle(ctx: RequestContext, broker: BrokerServices, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
    if not authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION):
        return UpdateMetadataResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return UpdateMetadataResponse(error_code=broker.membership.update_metadata(request, ctx.api_version))
