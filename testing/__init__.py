"""Support shared by ``tests/`` and ``benchmarks/``; not part of the installed broker.

* :mod:`testing.broker_process`: a real ``pafka broker`` process on loopback (start, SIGTERM,
  SIGKILL, restart on the same data dir and port, its log, cleanup by PID);
* :mod:`testing.sockets`: a free loopback port, waiting for a listener, reading exactly
  n bytes or one size-prefixed frame from a blocking socket, one request on a fresh connection;
* :mod:`testing.topics`: create topics and wait until every partition has a leader.

``pyproject.toml`` ships only the broker's packages, so this one stays in the checkout.
Benchmark scripts put the repository root on ``sys.path`` to import it; pytest runs from there.
"""
