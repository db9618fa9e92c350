"""pafka broker: asyncio wiring, the socket server, API routing and handlers, configuration, the CLI.

- ``kafka_server``: start-up, background duties, shutdown; builds the components.
- ``broker_services``: what a request handler may call.
- ``socket_server``, ``response_writer``, ``kafka_apis``: the wire, and routing each request to
  ``handlers/<api>.py`` (decode → one call into the owning component → encode).
- ``config/``: static properties, Kafka's ConfigDef vocabulary, dynamic broker configs, topic
  configs, AlterConfigs.
- ``admin_manager``, ``metadata_store``, ``producer_id_manager``, ``fetch_session``: the
  broker's own state; ``coordinator_wiring``: the coordinators' interfaces to the broker.
- ``tools/`` and ``cli``: the ``pafka`` command, built on pafka's client (``client/``).
"""
