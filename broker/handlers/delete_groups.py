"""DeleteGroups (42): remove Empty groups and their offsets (tombstones in __consumer_offsets)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.security.auth_helper import authorized_names
from protocol.acl_types import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages.delete_groups import DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, broker: BrokerServices, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    future: asyncio.Future[dict[str, ErrorCode]] = asyncio.get_running_loop().create_future()

    def done(result: dict[str, ErrorCode]) -> None:
        if not future.done():
            future.set_result(result)

    names = list(dict.fromkeys(request.groups_names))
    deletable = authorized_names(ctx, broker, AclOperation.DELETE, ResourceType.GROUP, names)
    errors = {g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in names if g not in deletable}
    if deletable:
        broker.group_coordinator.handle_delete_groups([g for g in names if g in deletable], done)
        errors.update(await future)
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeletableGroupResult(group_id=g, error_code=errors[g]) for g in names])
