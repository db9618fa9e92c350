"""Client metrics pushed to the broker (KIP-714).

``subscriptions``: the client-metrics subscriptions (resource type CLIENT_METRICS) and where each mode
keeps them; ``client_metrics_manager``: the client instances GetTelemetrySubscriptions hands out and
PushTelemetry checks; ``otlp``: the pushed OTLP payloads decoded; ``collector``: the pushed metrics as
the Prometheus endpoint serves them, labelled with the client that pushed them.
"""
