"""Micro-benchmarks: one component timed in-process, no broker started (``.venv/bin/python
benchmarks/micro/NAME.py``)."""
