"""Run one fuzz target under atheris: ``python -m fuzz.run <target> [libFuzzer flags] [corpus dirs]``.

The modules that parse are instrumented for coverage (``atheris.instrument_imports``); the
target's seeds live in ``fuzz/corpus/<target>/``. Give a scratch directory first: libFuzzer
writes the inputs it finds into the first corpus directory it is given.
"""

from __future__ import annotations

import sys

import atheris  # type: ignore[import-untyped]


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    name = argv[1]
    with atheris.instrument_imports(include=["protocol", "broker", "controller", "client", "fuzz"]):
        from fuzz.targets import TARGETS
    target = TARGETS[name]
    atheris.Setup([argv[0], *argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
