"""Support shared by ``tests/`` and ``benchmarks/``; not part of the installed broker.

* :mod:`testing.sockets`: reading exactly n bytes or one size-prefixed frame from a blocking
  socket, one request on a fresh connection;
* :mod:`testing.topics`: create topics and wait until every partition has a leader;
* :mod:`testing.process_guard`: the ``process`` marker, applied at collection and enforced;
* :mod:`testing.chaos`, :mod:`testing.handshake_fuzz`, :mod:`testing.txn_history`: the chaos run, the
  handshake fuzzer and the transactional history checker.

Real broker processes, ZooKeeper and clusters come from the pytest plugin that ships with
pafka (:mod:`pytest_pafka`), the same one applications test with.
``pyproject.toml`` ships only the broker's packages and the plugin, so this one stays in the checkout.
Benchmark scripts put the repository root on ``sys.path`` to import it; pytest runs from there.
"""
