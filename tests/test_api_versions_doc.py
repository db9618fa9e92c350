"""docs/api_versions.md tells the truth: for every client API pafka serves, Kafka
3.9's range, Kafka 4.x's range (the schemas the codecs are generated from),
pafka's range (what ApiVersions advertises), and the tests that send each of
pafka's versions on the wire. Regenerate the table with
``.venv/bin/python tests/test_api_versions_doc.py`` after changing a range.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

from broker.handlers.api_versions import advertised_versions  # noqa: E402
from protocol.codegen.kafka_3_9 import KAFKA_3_9_API_VERSIONS  # noqa: E402
from protocol.codegen.schema import load_json, schema_files  # noqa: E402
from protocol.messages import API_INDEX  # noqa: E402

DOC = ROOT / "docs" / "api_versions.md"
BEGIN, END = "<!-- table: begin -->", "<!-- table: end -->"
CLUSTER_BEGIN, CLUSTER_END = "<!-- cluster table: begin -->", "<!-- cluster table: end -->"

_SWEEP = "tests/integration/test_version_sweep.py"
_GROUPS = "tests/integration/test_groups_versions.py"
_ADMIN = "tests/broker/test_admin_versions.py"
_JOIN = f"{_GROUPS}::test_join_sync_heartbeat_leave"
_TXN = "tests/integration/test_transactions_versions.py"
_TXN_CLIENT = "tests/integration/test_transactions.py"
_TXN_ADMIN = "tests/integration/test_transactions_admin_versions.py"
_ACLS = "tests/broker/test_acl_apis.py::test_create_describe_delete_at_every_version"
_CONSUMER = "tests/integration/test_consumer_group_versions.py"
_TELEMETRY = "tests/integration/test_client_telemetry.py"
_SHARE = "tests/integration/test_share_groups_processes.py"
_SHARE_WIRE = "tests/broker/test_share_handlers.py"
_SHARE_STATE = "tests/integration/test_share_group_state.py::test_state_written_through_the_apis_survives_restarts"
_SHARE_OFFSETS = "tests/integration/test_share_group_offsets_processes.py"

#: API key -> the tests that send every version pafka serves of it (each is
#: parametrized over the handler's MIN_VERSION..MAX_VERSION, or over a wider
#: range clamped to it), plus real clients where they pin old versions.
TESTS: dict[int, list[str]] = {
    0: [f"{_SWEEP}::test_produce_then_fetch_back", "tests/broker/test_produce_fetch_wire.py",
        "tests/integration/test_client_matrix.py", "tests/integration/test_sarama.py"],
    1: [f"{_SWEEP}::test_fetch", "tests/broker/test_produce_fetch_wire.py",
        "tests/integration/test_client_matrix.py", "tests/integration/test_sarama.py"],
    2: ["tests/integration/test_list_offsets_versions.py::test_earliest_and_latest_at_every_version",
        "tests/integration/test_list_offsets_versions.py::test_v0_lists_segment_starts", "tests/integration/test_sarama.py"],
    3: [f"{_SWEEP}::test_metadata", f"{_SWEEP}::test_metadata_empty_and_null_topic_lists"],
    8: [f"{_GROUPS}::test_offset_commit_and_fetch", f"{_GROUPS}::test_offset_commit_v0_v1_as_kafka_3_9",
        "tests/integration/test_sarama.py"],
    9: [f"{_GROUPS}::test_offset_commit_and_fetch", f"{_GROUPS}::test_offset_fetch_all_topics"],
    10: [f"{_GROUPS}::test_find_coordinator", f"{_TXN}::test_find_coordinator"],
    11: [_JOIN],
    12: [_JOIN],
    13: [_JOIN],
    14: [_JOIN],
    15: [f"{_GROUPS}::test_describe_groups"],
    16: [f"{_GROUPS}::test_list_groups"],
    18: [f"{_SWEEP}::test_api_versions"],
    19: [f"{_ADMIN}::test_create_topics_versions"],
    20: [f"{_ADMIN}::test_delete_topics_versions"],
    21: [f"{_ADMIN}::test_delete_records_versions"],
    22: [f"{_SWEEP}::test_init_producer_id", f"{_TXN}::test_init_producer_id_bumps_the_epoch_and_fences",
         _TXN_CLIENT],
    23: ["tests/integration/test_leader_epoch_wire.py::test_offset_for_leader_epoch_at_every_version"],
    24: [f"{_TXN}::test_add_partitions_to_txn", f"{_TXN}::test_add_partitions_to_txn_batched_and_verify_only",
         _TXN_CLIENT],
    25: [f"{_TXN}::test_add_offsets_to_txn", f"{_TXN_CLIENT}::test_send_offsets_to_transaction"],
    26: [f"{_TXN}::test_end_txn_commit_and_abort", f"{_TXN_ADMIN}::test_end_txn_v5_bumps_the_epoch", _TXN_CLIENT],
    27: [f"{_TXN}::test_write_txn_markers"],
    28: [f"{_TXN}::test_txn_offset_commit", f"{_TXN_CLIENT}::test_send_offsets_to_transaction",
         "tests/integration/test_transactions_admin_versions.py::test_txn_offset_commit_v5_adds_the_offsets_partition"],
    17: ["tests/broker/test_sasl_listeners.py::test_handshake_versions",
         "tests/integration/test_sasl_clients.py"],
    29: [_ACLS],
    30: [_ACLS],
    31: [_ACLS],
    32: [f"{_ADMIN}::test_describe_configs_versions"],
    33: [f"{_ADMIN}::test_alter_configs_versions"],
    34: ["tests/broker/test_alter_replica_log_dirs.py::test_the_answers_at_every_version"],
    35: [f"{_ADMIN}::test_describe_log_dirs_versions"],
    36: ["tests/broker/test_sasl_listeners.py::test_authenticate_versions",
         "tests/integration/test_sasl_clients.py"],
    37: [f"{_ADMIN}::test_create_partitions_versions"],
    42: [f"{_GROUPS}::test_delete_groups_and_offset_delete"],
    44: [f"{_ADMIN}::test_incremental_alter_configs_versions"],
    47: [f"{_GROUPS}::test_delete_groups_and_offset_delete"],
    48: ["tests/broker/test_client_quotas_api.py::test_set_describe_and_remove_at_every_version"],
    49: ["tests/broker/test_client_quotas_api.py::test_set_describe_and_remove_at_every_version"],
    50: ["tests/broker/test_sasl_listeners.py::test_describe_and_alter_user_scram_credentials"],
    51: ["tests/broker/test_sasl_listeners.py::test_describe_and_alter_user_scram_credentials"],
    60: [f"{_ADMIN}::test_describe_cluster_versions"],
    61: ["tests/integration/test_idempotent_producer.py::test_describe_producers_shows_the_last_sequences"],
    65: [f"{_TXN_ADMIN}::test_describe_transactions"],
    66: [f"{_TXN_ADMIN}::test_list_transactions_filters"],
    68: [f"{_CONSUMER}::test_heartbeat_joins_at_every_version", f"{_CONSUMER}::test_v1_subscribes_with_a_regular_expression",
         "tests/integration/test_consumer_protocol_default.py"],
    69: [f"{_CONSUMER}::test_describe_at_every_version", "tests/integration/test_consumer_protocol_default.py"],
    71: [f"{_TELEMETRY}::test_get_subscriptions_and_push_on_the_wire",
         f"{_TELEMETRY}::test_confluent_kafka_pushes_its_metrics_to_the_broker_endpoint"],
    72: [f"{_TELEMETRY}::test_get_subscriptions_and_push_on_the_wire",
         f"{_TELEMETRY}::test_confluent_kafka_pushes_its_metrics_to_the_broker_endpoint"],
    74: [f"{_TELEMETRY}::test_subscriptions_on_a_lone_broker_survive_a_restart"],
    75: [f"{_ADMIN}::test_describe_topic_partitions_version"],
    76: [f"{_SHARE}::test_share_group_joins_is_described_listed_reloaded_and_deleted",
         f"{_SHARE}::test_confluent_share_consumers_join_get_the_shared_partition_and_leave"],
    77: [f"{_SHARE}::test_share_group_joins_is_described_listed_reloaded_and_deleted"],
    78: [f"{_SHARE_WIRE}::test_fetch_acquire_and_acknowledge_on_the_wire",
         f"{_SHARE_WIRE}::test_v2_renew_keeps_the_records_and_a_renew_fetch_fetches_nothing",
         f"{_SHARE}::test_confluent_share_consumers_join_get_the_shared_partition_and_leave"],
    79: [f"{_SHARE_WIRE}::test_fetch_acquire_and_acknowledge_on_the_wire",
         f"{_SHARE_WIRE}::test_v2_renew_keeps_the_records_and_a_renew_fetch_fetches_nothing"],
    83: [_SHARE_STATE],
    84: [_SHARE_STATE],
    85: [_SHARE_STATE],
    86: [_SHARE_STATE],
    87: [_SHARE_STATE],
    90: [f"{_SHARE_OFFSETS}::test_offsets_are_described_reset_and_deleted_over_the_wire"],
    91: [f"{_SHARE_OFFSETS}::test_offsets_are_described_reset_and_deleted_over_the_wire"],
    92: [f"{_SHARE_OFFSETS}::test_offsets_are_described_reset_and_deleted_over_the_wire"],
}


_CLUSTER = "tests/cluster/test_cluster_handlers.py"
#: The inter-broker APIs a broker serves only in a cluster (zookeeper.connect), and their tests.
CLUSTER_TESTS: dict[int, list[str]] = {
    4: [f"{_CLUSTER}::test_leader_and_isr_versions"],
    5: [f"{_CLUSTER}::test_stop_replica_versions"],
    6: [f"{_CLUSTER}::test_update_metadata_versions"],
    7: [f"{_CLUSTER}::test_controlled_shutdown_versions"],
    43: [f"{_CLUSTER}::test_elect_leaders_versions"],
    45: [f"{_CLUSTER}::test_alter_partition_reassignments_versions",
         "tests/cluster/test_reassignment.py::test_the_cli_moves_a_partition_and_verify_reports_it_done"],
    46: [f"{_CLUSTER}::test_list_partition_reassignments_versions",
         "tests/cluster/test_reassignment.py::test_the_controller_checks_each_request"],
    56: [f"{_CLUSTER}::test_alter_partition_versions"],
}


def _range(low: int, high: int) -> str:
    return f"v{low}" if low == high else f"v{low}–v{high}"


def expected_rows() -> list[str]:
    files = schema_files()
    rows = []
    for key, low, high in advertised_versions():
        name = API_INDEX[key][1]
        spec_4x = load_json(files[f"{name}Request"])["validVersions"]
        low_4x, _, high_4x = spec_4x.partition("-")
        kafka_4x = _range(int(low_4x), int(high_4x or low_4x))
        legacy = KAFKA_3_9_API_VERSIONS.get(key)
        kafka_39 = _range(*legacy) if legacy else "—"
        tests = ", ".join(f"`{t.removeprefix('tests/')}`" for t in TESTS[key])
        rows.append(f"| {name} | {key} | {kafka_39} | {kafka_4x} | {_range(low, high)} | {tests} |")
    return rows


def cluster_rows() -> list[str]:
    files = schema_files()
    alone = {key for key, _, _ in advertised_versions()}
    rows = []
    for key, low, high in advertised_versions(cluster=True):
        if key in alone:
            continue
        name = API_INDEX[key][1]
        legacy = KAFKA_3_9_API_VERSIONS.get(key)
        if legacy is None:  # Kafka 4 dropped the schema; ours is Kafka 3.9's
            spec = load_json(files[f"{name}Request"])["validVersions"]
            low_39, _, high_39 = spec.partition("-")
            legacy = (int(low_39), int(high_39 or low_39))
        tests = ", ".join(f"`{t.removeprefix('tests/')}`" for t in CLUSTER_TESTS[key])
        rows.append(f"| {name} | {key} | {_range(*legacy)} | {_range(low, high)} | {tests} |")
    return rows


def render_cluster_table() -> str:
    head = ["| API | key | Kafka 3.9 | pafka | tests sending every pafka version |", "|---|---|---|---|---|"]
    return "\n".join(head + cluster_rows())


def render_table() -> str:
    head = ["| API | key | Kafka 3.9 | Kafka 4.x | pafka | tests sending every pafka version |",
            "|---|---|---|---|---|---|"]
    return "\n".join(head + expected_rows())


def test_the_table_matches_the_code() -> None:
    text = DOC.read_text(encoding="utf-8")
    table = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert table == render_table(), "docs/api_versions.md is stale: run tests/test_api_versions_doc.py and paste"


def test_the_cluster_table_matches_the_code() -> None:
    text = DOC.read_text(encoding="utf-8")
    table = text.split(CLUSTER_BEGIN, 1)[1].split(CLUSTER_END, 1)[0].strip()
    assert table == render_cluster_table(), "docs/api_versions.md is stale: run tests/test_api_versions_doc.py"


def test_a_lone_broker_advertises_no_inter_broker_api() -> None:
    alone = {key for key, _, _ in advertised_versions()}
    assert not alone & set(CLUSTER_TESTS)
    assert set(CLUSTER_TESTS) <= {key for key, _, _ in advertised_versions(cluster=True)}


def test_every_advertised_api_names_tests_that_exist() -> None:
    for key, _, _ in advertised_versions(cluster=True):
        refs = TESTS.get(key) or CLUSTER_TESTS.get(key)
        assert refs, f"API {key} names no test"
        for ref in refs:
            path, _, name = ref.partition("::")
            source = (ROOT / path).read_text(encoding="utf-8")
            assert not name or re.search(rf"^def {name}\(", source, re.MULTILINE), ref


if __name__ == "__main__":
    print(render_table())
    print()
    print(render_cluster_table())
