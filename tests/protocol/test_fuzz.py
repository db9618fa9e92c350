"""Garbage in, ProtocolError out: random and mutated frames through the decoders.

Seeds are valid request and response frames for every (API, version), built
from the JSON schemas with a seeded RNG. Each is mutated (bit flips,
truncation, insertion, deletion, length fields overwritten with extreme
values, splices) and decoded; pure random frames are mixed in. Any exception
other than ProtocolError fails, and a watchdog kills the run if a decoder
hangs.
"""

from __future__ import annotations

import faulthandler
import random
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

from protocol.api import APIS, decode_request, decode_response, encode_request, encode_response
from protocol.buffers import join_chunks
from protocol.errors import ProtocolError
from tests.protocol.conftest import Node, build_ours, in_range, load_schemas, snake

SCHEMAS = load_schemas()
TOTAL_FRAMES = 200_000
WATCHDOG_SECONDS = 300

_INTS = {"int8": 7, "int16": 15, "uint16": 16, "int32": 31, "uint32": 32, "int64": 63}


class RandomMessages:
    """Random valid message trees from a schema at one version (no hypothesis: fast)."""

    def __init__(self, raw: dict[str, Any], version: int, rng: random.Random) -> None:
        self.raw, self.version, self.rng = raw, version, rng
        self.common = {c["name"]: c["fields"] for c in raw.get("commonStructs", [])}
        self.defined: dict[str, list] = {}

    def message(self) -> Node:
        return self.struct(self.raw["name"], self.raw["fields"], 0)

    def struct(self, name: str, fields: list | None, depth: int) -> Node:
        fields = fields or self.defined.get(name) or self.common[name]
        self.defined.setdefault(name, fields)
        values = {}
        for field in fields:
            if in_range(field.get("versions"), self.version):
                values[snake(field["name"])] = self.field(field, depth)
        return Node(name, values)

    def field(self, field: dict, depth: int) -> Any:
        rng = self.rng
        if in_range(field.get("nullableVersions"), self.version) and rng.random() < 0.2:
            return None
        typ = field["type"]
        if typ.startswith("[]"):
            count = rng.randint(0, 3 if depth < 2 else 1)
            return [self.scalar(typ[2:], field, depth + 1) for _ in range(count)]
        return self.scalar(typ, field, depth)

    def scalar(self, typ: str, field: dict, depth: int) -> Any:
        rng = self.rng
        if typ in _INTS:
            bits = _INTS[typ]
            low = 0 if typ.startswith("u") else -(2**bits)
            high = 2**bits - 1
            return rng.choice((0, -1 if low < 0 else 1, rng.randint(low, high)))
        if typ == "bool":
            return rng.random() < 0.5
        if typ == "float64":
            return rng.uniform(-1e6, 1e6)
        if typ == "string":
            return "".join(rng.choice("abcé€xyz-") for _ in range(rng.randint(0, 6)))
        if typ in ("bytes", "records"):
            return rng.randbytes(rng.randint(0, 30))
        if typ == "uuid":
            return uuid.UUID(int=rng.getrandbits(128))
        return self.struct(typ, field.get("fields"), depth)


Seed = tuple[bytes, Callable[[bytes], Any]]


def build_seeds(rng: random.Random) -> list[Seed]:
    seeds: list[Seed] = []
    for key in sorted(APIS):
        spec = APIS[key]
        for version in spec.versions:
            request = build_ours(RandomMessages(SCHEMAS[spec.request.__name__], version, rng).message(), spec.module, spec.request.__name__)
            frame = join_chunks(encode_request(key, version, rng.getrandbits(31), "fuzz", request))[4:]
            seeds.append((frame, decode_request))
            random_response = RandomMessages(SCHEMAS[spec.response.__name__], version, rng).message()
            response = build_ours(random_response, spec.module, spec.response.__name__)
            frame = join_chunks(encode_response(key, version, rng.getrandbits(31), response))[4:]
            seeds.append((frame, lambda data, key=key, version=version: decode_response(key, version, data)))
    return seeds


_EXTREMES = [
    b"\x7f\xff\xff\xff",
    b"\xff\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff",
    b"\x7f\xff",
    b"\xff\xff\xff\xff\xff\xff",
    b"\x80\x80\x80\x80\x80\x01",
    b"\x00",
    b"\x01",
    b"\xfe",
]


def mutate(frame: bytes, rng: random.Random) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.randrange(6)
        if kind == 0 and data:  # bit flips
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1 and data:  # truncation
            del data[rng.randrange(len(data)) :]
        elif kind == 2:  # insertion
            at = rng.randint(0, len(data))
            data[at:at] = rng.randbytes(rng.randint(1, 8))
        elif kind == 3 and data:  # deletion
            at = rng.randrange(len(data))
            del data[at : at + rng.randint(1, 8)]
        elif kind == 4:  # a length field (or anything) overwritten with an extreme value
            value = rng.choice(_EXTREMES)
            at = rng.randint(0, max(0, len(data) - len(value)))
            data[at : at + len(value)] = value
        else:  # splice in a piece of itself (plausible lengths in odd places)
            if data:
                start = rng.randrange(len(data))
                piece = data[start : start + rng.randint(1, 16)]
                at = rng.randint(0, len(data))
                data[at:at] = piece
    return bytes(data)


def test_only_protocol_errors_escape() -> None:
    rng = random.Random(20240601)
    seeds = build_seeds(rng)
    started = time.monotonic()
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)  # a hang fails loudly
    outcomes = {"ok": 0, "protocol_error": 0}
    try:
        for i in range(TOTAL_FRAMES):
            frame, decode = seeds[i % len(seeds)]
            roll = rng.random()
            if roll < 0.05:
                data = rng.randbytes(rng.randint(0, 64))  # pure noise
            elif roll < 0.08:
                # Noise behind a real header prefix, so it reaches the body decoders.
                data = frame[: rng.randint(0, 12)] + rng.randbytes(rng.randint(0, 64))
            else:
                data = mutate(frame, rng)
            try:
                decode(data)
                outcomes["ok"] += 1
            except ProtocolError:
                outcomes["protocol_error"] += 1
            except Exception as exc:  # anything else is the failure this test looks for
                raise AssertionError(f"frame {i} ({data.hex()}) raised {type(exc).__name__}: {exc}") from exc
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert sum(outcomes.values()) == TOTAL_FRAMES
    # The mutations must mostly break frames, or the test would test little.
    assert outcomes["protocol_error"] > TOTAL_FRAMES // 2, outcomes
    assert time.monotonic() - started < WATCHDOG_SECONDS


def test_unmutated_seeds_decode() -> None:
    for frame, decode in build_seeds(random.Random(7)):
        decode(frame)


def test_size_prefix_is_consistent() -> None:
    rng = random.Random(3)
    spec = APIS[0]
    request = build_ours(RandomMessages(SCHEMAS["ProduceRequest"], 9, rng).message(), spec.module, "ProduceRequest")
    data = join_chunks(encode_request(0, 9, 1, "x", request))
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
