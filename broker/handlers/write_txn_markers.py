"""WriteTxnMarkers (27): a transaction coordinator ends a transaction on the partitions this broker leads.

Each marker becomes a COMMIT or ABORT control batch on each of its partitions
(``ReplicaManager.write_txn_markers``, ``acks=-1``), answered per partition.
pafka's own coordinator takes the same path without a request on a lone
broker; this handler serves coordinators on other brokers, and tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.auth_helper import authorize_cluster
from protocol.acl_types import AclOperation
from protocol.errors import ErrorCode
from protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from replication.replica_manager import TxnMarker

if TYPE_CHECKING:
    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext

API_KEY = 27
MIN_VERSION = 1  # Kafka 4.0 removed v0 (an inter-broker API: no client ever sent it)
# v2 (KIP-1228) tells the partition which transaction version wrote the marker; pafka's partitions
# do not keep it yet.
MAX_VERSION = 1

#: How long the markers may wait for the ISR (Kafka uses request.timeout.ms, default 30 s).
MARKER_TIMEOUT_MS = 30_000


async def handle(ctx: RequestContext, broker: BrokerServices,
                 request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not authorize_cluster(ctx, broker, AclOperation.CLUSTER_ACTION):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return WriteTxnMarkersResponse(markers=[WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            WritableTxnMarkerTopicResult(name=t.name, partitions=[
                WritableTxnMarkerPartitionResult(partition_index=p, error_code=denied) for p in t.partition_indexes])
            for t in m.topics]) for m in request.markers])
    markers = [TxnMarker(producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                         coordinator_epoch=m.coordinator_epoch, committed=m.transaction_result,
                         partitions=[(t.name, p) for t in m.topics for p in t.partition_indexes])
               for m in request.markers]
    outcome = broker.replica_manager.write_txn_markers(markers, MARKER_TIMEOUT_MS)
    answers = outcome if isinstance(outcome, list) else await outcome
    results = []
    for marker, errors in zip(request.markers, answers, strict=True):
        results.append(WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
            WritableTxnMarkerTopicResult(name=t.name, partitions=[
                WritableTxnMarkerPartitionResult(partition_index=p, error_code=errors[(t.name, p)])
                for p in t.partition_indexes])
            for t in marker.topics]))
    return WriteTxnMarkersResponse(markers=results)
