"""``python -m protocol.codegen [--output DIR]``: regenerate the message modules."""

from __future__ import annotations

import argparse
from pathlib import Path

from protocol.codegen.generate import DEFAULT_OUTPUT, generate


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m protocol.codegen", description=__doc__)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="package directory to write")
    args = parser.parse_args()
    written = generate(args.output)
    print(f"wrote {len(written)} modules to {args.output}")


if __name__ == "__main__":
    main()
