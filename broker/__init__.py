"""pafka broker: asyncio wiring, the network layer, API routing and handlers, configuration.

- ``kafka_server``: start-up, background duties, shutdown; builds the components.
- ``broker_services``: what a request handler may call.
- ``network/``: listeners, connections and their quotas, frames in and responses out;
  ``kafka_apis`` routes each request to ``handlers/<api>.py`` (decode → one call into the
  owning component → encode) with its ``request_context``.
- ``config/``: static properties, Kafka's ConfigDef vocabulary, dynamic broker configs, topic
  configs, AlterConfigs.
- ``admin_manager``, ``metadata_store``, ``producer_id_manager``, ``fetch_session``: the
  broker's own state; ``coordinator_wiring``: the coordinators' interfaces to the broker.
- ``security/``: TLS, SASL, principals, ACLs and the handlers' authorization helpers.
- ``quota/``: client quotas and their throttles.
- ``cluster/``: a broker's membership of a ZooKeeper-mode cluster and the modules only it uses.
- ``broker_command``: ``pafka broker``, the process that runs a broker (the rest of the ``pafka``
  command lives in the top-level ``tools`` package).
"""
