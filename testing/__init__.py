"""Support shared by ``tests/`` and ``benchmarks/``; not part of the installed broker.

* :mod:`testing.sockets`: reading exactly n bytes or one size-prefixed frame from a blocking
  socket, one request on a fresh connection;
* :mod:`testing.topics`: create topics and wait until every partition has a leader.

Real broker processes, ZooKeeper and clusters come from the pytest plugin that ships with
pafka (:mod:`pytest_pafka`), the same one applications test with.
``pyproject.toml`` ships only the broker's packages and the plugin, so this one stays in the checkout.
Benchmark scripts put the repository root on ``sys.path`` to import it; pytest runs from there.
"""
