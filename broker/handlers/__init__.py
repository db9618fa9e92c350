"""One module per Kafka API; each declares API_KEY, MIN_VERSION, MAX_VERSION and handle()."""

from broker.handlers import (
    api_versions,
    create_topics,
    fetch,
    list_offsets,
    metadata,
    produce,
)

MODULES = (
    api_versions,
    create_topics,
    fetch,
    list_offsets,
    metadata,
    produce,
)
