"""The benchmark suite: pafka against the peer broker, both started as processes in the same run.

``suite.py`` runs the parts (client_throughput, client_latency, broker_ceiling, scale, profiles)
each as its own process; consume_only and spark_read run alone. The other modules are their
pieces: ``bench_brokers`` (start and meter the brokers), ``client_common``, ``ceiling_client``,
``scale_clients``, ``scale_storage``, ``scale_wire``.
"""
