"""Authorized-operations bitfields (Kafka's AclOperation codes) for Metadata and Describe* APIs.

pafka has no authorizer, so every operation a resource type supports is
allowed, which is what Kafka reports when no authorizer is configured.
"""

#: Kafka's "not requested" value for authorized-operations fields.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

# AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
