"""DescribeUserScramCredentials (50): which SCRAM mechanisms each user has, and their iterations.

Never a salt or key. No users named (or null) lists every user with a
credential; a user named twice, or without any credential, gets Kafka's
DUPLICATE_RESOURCE / RESOURCE_NOT_FOUND result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, broker: BrokerServices,
           request: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    if not authorize_cluster(ctx, broker, AclOperation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(throttle_time_ms=0,
                                                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                    error_message="Cluster authorization failed.", results=[])
    users = None if request.users is None else [user.name for user in request.users]
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=ErrorCode.NO_ERROR, error_message=None,
                                                results=broker.scram_credentials.describe(users))
