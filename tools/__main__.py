"""``python -m tools``: the ``pafka`` command without its console script."""

from tools.cli import main

main()
