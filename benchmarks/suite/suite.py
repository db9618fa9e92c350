"""The benchmark suite in one command: each part runs as its own process, in order.

    python benchmarks/suite/suite.py [--quick] [--repeats N] [--only PART,...] [--json-out FILE]

Parts: client_throughput, client_latency, broker_ceiling, scale, profiles (each
``benchmarks/suite/PART.py``). A part's markdown is printed as it comes; the JSON object on its
last line is collected into one object keyed by part (``--json-out``). A part whose file
does not exist is reported as missing, and a part that fails does not stop the others.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Where each part runs, as it would by hand.
REPO_ROOT = HERE.parents[1]
PARTS = ["client_throughput", "client_latency", "broker_ceiling", "scale", "profiles"]
PART_TIMEOUT_S = 3600.0


def last_json(lines: list[str]) -> dict | None:
    """The part's figures: the last non-empty output line, if it is a JSON object."""
    for line in reversed(lines):
        if line.strip():
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def run_part(part: str, quick: bool, repeats: int | None) -> dict:
    script = HERE / f"{part}.py"
    if not script.exists():
        print(f"## {part}: missing ({script.name} does not exist yet)\n", flush=True)
        return {"status": "missing"}
    command = [sys.executable, str(script)] + (["--quick"] if quick else [])
    command += ["--repeats", str(repeats)] if repeats is not None else []
    started = time.monotonic()
    lines: list[str] = []
    # stream stdout so a long part shows its tables as they come; stderr goes straight through
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT) as process:
        assert process.stdout is not None
        lines.extend(line.rstrip("\n") for line in process.stdout)
        try:
            returncode = process.wait(timeout=PART_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = process.wait()
    figures = last_json(lines)
    shown = lines[:-1] if figures is not None else lines
    print("\n".join(shown), flush=True)
    wall_s = round(time.monotonic() - started, 1)
    status = "ok" if returncode == 0 and figures is not None else "failed"
    if status != "ok":
        print(f"\n**{part} failed** (exit {returncode}, figures {'found' if figures else 'missing'})")
    print(flush=True)
    return {"status": status, "returncode": returncode, "wall_s": wall_s, "command": command[1:],
            "figures": figures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every part's small, fast variant")
    parser.add_argument("--repeats", type=int, default=None, help="passed to every part (default: theirs)")
    parser.add_argument("--only", default=None, help=f"comma-separated parts of {','.join(PARTS)}")
    parser.add_argument("--json-out", type=Path, default=None, help="write all parts' figures here")
    args = parser.parse_args(argv)
    wanted = PARTS if args.only is None else [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s): {', '.join(unknown)}; parts are {', '.join(PARTS)}")
    chosen = [part for part in PARTS if part in wanted]  # always the suite's order
    results = {part: run_part(part, args.quick, args.repeats) for part in chosen}
    print("## Suite summary\n")
    for part, result in results.items():
        print(f"- {part}: {result['status']}" + (f" ({result['wall_s']} s)" if "wall_s" in result else ""))
    combined = {"quick": args.quick, "repeats": args.repeats, "parts": results}
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(combined, indent=1) + "\n")
    print(json.dumps(combined))
    return 0 if all(r["status"] in ("ok", "missing") for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
