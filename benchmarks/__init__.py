"""pafka's benchmarks (not timed tests; see docs/benchmarks.md for figures and commands).

* ``benchmarks/micro/``: in-process timings of one component each (record batches, codecs,
  the log's append, lookup, open and recovery, the cleaner), against a library peer where
  one applies;
* ``benchmarks/suite/``: the suite, ``suite.py`` and its parts, which start pafka and the
  peer broker as processes and drive both with real clients.

Every script runs from the repository root as a file (``.venv/bin/python
benchmarks/suite/suite.py``); helpers shared with the tests come from ``testing/``.
"""
