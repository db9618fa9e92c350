"""Emitting straight-line decode and encode functions for one struct at one version.

Every (struct, version) gets its own function: field presence, nullability,
compactness and tags are all resolved here, at generation time, so the emitted
code is a flat run of ``struct`` calls and length checks with no per-field
dispatch. Consecutive fixed-width fields share one precompiled ``Struct``.
"""

from __future__ import annotations

from protocol.codegen.schema import PRIMITIVE_WIDTHS, FieldSpec, StructSpec, parse_default

_NULL_INT16 = repr(b"\xff\xff")
_NULL_INT32 = repr(b"\xff\xff\xff\xff")

FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
    "uuid": "16s",
}


def default_expr(field: FieldSpec, fresh: bool) -> str:
    """Python source for a field's default; ``fresh`` builds new mutable values."""
    value = parse_default(field)
    if value == "STRUCT":
        assert field.struct is not None  # parse_default says STRUCT only for struct fields
        return f"{field.struct.name}()" if fresh else f"_DEFAULT_{field.struct.name}"
    if value == "UUID_ZERO":
        return "UUID_ZERO"
    if isinstance(value, list):
        return "[]"
    return repr(value)


def _tag(field: FieldSpec) -> int:
    """A tagged field's tag, the order tagged fields go on the wire in."""
    assert field.tag is not None  # Kafka's schemas give every tagged field a tag
    return field.tag


class ModuleEmitter:
    """Accumulates the functions and Struct constants of one generated module."""

    def __init__(self) -> None:
        self.structs: dict[str, str] = {}  # format -> constant name
        self.functions: list[str] = []
        self.by_body: dict[tuple[str, str], str] = {}  # (kind, body) -> canonical name
        self.names: dict[str, str] = {}  # requested name -> canonical name
        self.struct_defaults: set[str] = set()  # struct classes needing a _DEFAULT_ constant
        self._temp = 0

    # -- helpers -----------------------------------------------------------
    def fmt(self, codes: str) -> str:
        name = self.structs.get(codes)
        if name is None:
            name = "_s_" + codes.replace("?", "o")  # "?" (bool) is not an identifier character
            self.structs[codes] = name
        return name

    def temp(self, prefix: str) -> str:
        self._temp += 1
        return f"{prefix}{self._temp}"

    def _register(self, kind: str, name: str, lines: list[str]) -> str:
        body = "\n".join(lines[1:])
        key = (kind, body)
        if key in self.by_body:
            canonical = self.by_body[key]
        else:
            canonical = name
            self.by_body[key] = name
            self.functions.append("\n".join(lines))
        self.names[name] = canonical
        return canonical

    # -- decoding ----------------------------------------------------------
    def decoder(self, struct: StructSpec, version: int, flexible: bool) -> str:
        name = f"_d_{struct.name}_v{version}"
        if name in self.names:
            return self.names[name]
        present = [f for f in struct.fields if version in f.versions]
        tagged = [f for f in present if flexible and version in f.tagged]
        regular = [f for f in present if f not in tagged]
        children = {id(f): self.decoder(f.struct, version, flexible) for f in present if f.struct is not None}
        self._temp = 0
        lines = [f"def {name}(buf, pos):"]
        body: list[str] = []
        i = 0
        while i < len(regular):
            run = []
            while i < len(regular) and not regular[i].is_array and regular[i].type in FORMATS:
                run.append(regular[i])
                i += 1
            if run:
                body += self._read_fixed_run(run)
                continue
            body += self._read_field(regular[i], version, flexible, children, "    ")
            i += 1
        if flexible:
            body += self._read_tagged(tagged, version, children)
        # object.__new__ plus slot stores is about twice as fast as calling the
        # keyword constructor, and decoding builds many small objects.
        body.append(f"    o = _new({struct.name})")
        for f in struct.fields:
            value = f"f_{f.attr}" if f in present else default_expr(f, fresh=True)
            body.append(f"    o.{f.attr} = {value}")
        body.append("    return o, pos")
        return self._register("d", name, lines + body)

    def _read_fixed_run(self, run: list[FieldSpec]) -> list[str]:
        codes = "".join(FORMATS[f.type] for f in run)
        width = sum(PRIMITIVE_WIDTHS[f.type] for f in run)
        targets = ", ".join(f"f_{f.attr}" for f in run) + ("," if len(run) == 1 else "")
        out = [f"    {targets} = {self.fmt(codes)}.unpack_from(buf, pos)", f"    pos += {width}"]
        out += [f"    f_{f.attr} = UUID_ZERO if f_{f.attr} == ZERO16 else UUID(bytes=f_{f.attr})" for f in run if f.type == "uuid"]
        return out

    def _read_length(self, var: str, compact: bool, legacy_code: str, ind: str) -> list[str]:
        """Read a length into ``var``; -1 means null."""
        if compact:
            return [
                f"{ind}{var} = buf[pos]",
                f"{ind}pos += 1",
                f"{ind}if {var} & 0x80:",
                f"{ind}    {var}, pos = read_uvarint_tail(buf, pos, {var})",
                f"{ind}{var} -= 1",
            ]
        width = 2 if legacy_code == "h" else 4
        return [f"{ind}{var}, = {self.fmt(legacy_code)}.unpack_from(buf, pos)", f"{ind}pos += {width}"]

    def _read_field(
        self, f: FieldSpec, version: int, flexible: bool, children: dict[int, str], ind: str, target: str | None = None
    ) -> list[str]:
        target = target or f"f_{f.attr}"
        nullable = version in f.nullable
        compact = flexible if f.flexible_override is None else version in f.flexible_override
        if f.is_array:
            n = self.temp("n")
            out = self._read_length(n, compact, "i", ind)
            out += self._null_check(n, target, nullable, f.name, ind)
            inner = ind + "    "
            out += [
                f"{inner}if {n} > len(buf) - pos:",
                f"{inner}    raise truncated({f.name!r})",
            ]
            elem = f.element_type
            if elem in FORMATS and elem != "uuid":
                width = PRIMITIVE_WIDTHS[elem]
                out += [
                    f"{inner}{target} = list(unpack_from('>%d{FORMATS[elem]}' % {n}, buf, pos))",
                    f"{inner}pos += {n} * {width}",
                ]
                return out
            item = self.temp("item")
            out += [f"{inner}{target} = []", f"{inner}for _ in range({n}):"]
            if f.struct is not None:
                out.append(f"{inner}    {item}, pos = {children[id(f)]}(buf, pos)")
            else:
                out += self._read_scalar(elem, item, compact, False, f.name, inner + "    ")
            out.append(f"{inner}    {target}.append({item})")
            return out
        if f.struct is not None:
            if nullable:
                return [
                    f"{ind}if buf[pos] & 0x80:",
                    f"{ind}    {target} = None",
                    f"{ind}    pos += 1",
                    f"{ind}else:",
                    f"{ind}    {target}, pos = {children[id(f)]}(buf, pos + 1)",
                ]
            return [f"{ind}{target}, pos = {children[id(f)]}(buf, pos)"]
        return self._read_scalar(f.type, target, compact, nullable, f.name, ind)

    def _null_check(self, n: str, target: str, nullable: bool, name: str, ind: str) -> list[str]:
        if nullable:
            return [f"{ind}if {n} < 0:", f"{ind}    {target} = None", f"{ind}else:"]
        return [f"{ind}if {n} < 0:", f"{ind}    raise ProtocolError('non-nullable field {name} is null')", f"{ind}else:"]

    def _read_scalar(self, typ: str, target: str, compact: bool, nullable: bool, name: str, ind: str) -> list[str]:
        if typ in FORMATS:
            width = PRIMITIVE_WIDTHS[typ]
            out = [f"{ind}{target}, = {self.fmt(FORMATS[typ])}.unpack_from(buf, pos)", f"{ind}pos += {width}"]
            if typ == "uuid":
                out.append(f"{ind}{target} = UUID_ZERO if {target} == ZERO16 else UUID(bytes={target})")
            return out
        n = self.temp("n")
        end = self.temp("e")
        out = self._read_length(n, compact, "h" if typ == "string" else "i", ind)
        out += self._null_check(n, target, nullable, name, ind)
        inner = ind + "    "
        convert = {"string": "str(buf[pos:{e}], 'utf-8')", "bytes": "bytes(buf[pos:{e}])", "records": "buf[pos:{e}]"}
        out += [
            f"{inner}{end} = pos + {n}",
            f"{inner}if {end} > len(buf):",
            f"{inner}    raise truncated({name!r})",
            f"{inner}{target} = {convert[typ].format(e=end)}",
            f"{inner}pos = {end}",
        ]
        return out

    def _read_tagged(self, tagged: list[FieldSpec], version: int, children: dict[int, str]) -> list[str]:
        out = [f"    f_{f.attr} = {default_expr(f, fresh=True)}" for f in tagged]
        out += [
            "    nt = buf[pos]",
            "    pos += 1",
            "    if nt:",
            "        if nt & 0x80:",
            "            nt, pos = read_uvarint_tail(buf, pos, nt)",
            "        if nt > len(buf) - pos:",
            "            raise truncated('tagged fields')",
            "        for _ in range(nt):",
            "            tag, pos = read_uvarint(buf, pos)",
            "            size, pos = read_uvarint(buf, pos)",
            "            end = pos + size",
            "            if end > len(buf):",
            "                raise truncated('tagged field')",
        ]
        keyword = "if"
        for f in sorted(tagged, key=_tag):
            out.append(f"            {keyword} tag == {f.tag}:")
            out += self._read_field(f, version, True, children, "                ")
            out += [
                "                if pos != end:",
                f"                    raise ProtocolError('tagged field {f.name} has the wrong size')",
            ]
            keyword = "elif"
        if tagged:
            out += ["            else:", "                pos = end"]
        else:
            out.append("            pos = end")
        return out

    # -- encoding ----------------------------------------------------------
    def encoder(self, struct: StructSpec, version: int, flexible: bool) -> str:
        name = f"_e_{struct.name}_v{version}"
        if name in self.names:
            return self.names[name]
        self._temp = 0
        present = [f for f in struct.fields if version in f.versions]
        absent = [f for f in struct.fields if version not in f.versions and not f.ignorable]
        tagged = [f for f in present if flexible and version in f.tagged]
        regular = [f for f in present if f not in tagged]
        children = {id(f): self.encoder(f.struct, version, flexible) for f in present if f.struct is not None}
        self._temp = 0
        lines = [f"def {name}(o, b, chunks):"]
        body: list[str] = []
        for f in absent:
            check = self.temp("x")
            body += self._not_default(f, check)
            body += [
                f"    if {check}:",
                f"        raise UnsupportedVersionError('{struct.name}.{f.attr} cannot be sent at this version')",
            ]
        i = 0
        while i < len(regular):
            run = []
            while i < len(regular) and not regular[i].is_array and regular[i].type in FORMATS:
                run.append(regular[i])
                i += 1
            if run:
                codes = "".join(FORMATS[f.type] for f in run)
                args = ", ".join(f"o.{f.attr}.bytes" if f.type == "uuid" else f"o.{f.attr}" for f in run)
                body.append(f"    b += {self.fmt(codes)}.pack({args})")
                continue
            body += self._write_field(regular[i], f"o.{regular[i].attr}", version, flexible, children, "b", "    ")
            i += 1
        if flexible:
            body += self._write_tagged(tagged, version, children)
        body.append("    return b")
        return self._register("e", name, lines + body)

    def _write_length(self, expr: str, compact: bool, legacy_code: str, buf: str, ind: str) -> list[str]:
        if compact:
            n = self.temp("n")
            return [
                f"{ind}{n} = {expr} + 1",
                f"{ind}if {n} < 0x80:",
                f"{ind}    {buf}.append({n})",
                f"{ind}else:",
                f"{ind}    {buf} += uvarint({n})",
            ]
        return [f"{ind}{buf} += {self.fmt(legacy_code)}.pack({expr})"]

    def _write_null(self, compact: bool, legacy_code: str, buf: str, ind: str) -> list[str]:
        if compact:
            return [f"{ind}{buf}.append(0)"]
        marker = _NULL_INT16 if legacy_code == "h" else _NULL_INT32
        return [f"{ind}{buf} += {marker}"]

    def _write_field(
        self, f: FieldSpec, expr: str, version: int, flexible: bool, children: dict[int, str], buf: str, ind: str
    ) -> list[str]:
        nullable = version in f.nullable
        compact = flexible if f.flexible_override is None else version in f.flexible_override
        if f.is_array:
            v = self.temp("a")
            out = [f"{ind}{v} = {expr}"]
            inner = ind
            if nullable:
                out += [f"{ind}if {v} is None:"]
                out += self._write_null(compact, "i", buf, ind + "    ")
                out += [f"{ind}else:"]
                inner = ind + "    "
            out += self._write_length(f"len({v})", compact, "i", buf, inner)
            elem = f.element_type
            if elem in FORMATS and elem != "uuid":
                out.append(f"{inner}{buf} += pack('>%d{FORMATS[elem]}' % len({v}), *{v})")
                return out
            item = self.temp("item")
            out.append(f"{inner}for {item} in {v}:")
            if f.struct is not None:
                out.append(f"{inner}    {buf} = {children[id(f)]}({item}, {buf}, chunks)")
            else:
                out += self._write_scalar(elem, item, compact, False, buf, inner + "    ")
            return out
        if f.struct is not None:
            if nullable:
                v = self.temp("s")
                return [
                    f"{ind}{v} = {expr}",
                    f"{ind}if {v} is None:",
                    f"{ind}    {buf}.append(0xFF)",
                    f"{ind}else:",
                    f"{ind}    {buf}.append(1)",
                    f"{ind}    {buf} = {children[id(f)]}({v}, {buf}, chunks)",
                ]
            return [f"{ind}{buf} = {children[id(f)]}({expr}, {buf}, chunks)"]
        return self._write_scalar(f.type, expr, compact, nullable, buf, ind)

    def _write_scalar(self, typ: str, expr: str, compact: bool, nullable: bool, buf: str, ind: str) -> list[str]:
        if typ in FORMATS:
            arg = f"{expr}.bytes" if typ == "uuid" else expr
            return [f"{ind}{buf} += {self.fmt(FORMATS[typ])}.pack({arg})"]
        legacy = "h" if typ == "string" else "i"
        v = self.temp("v")
        out = [f"{ind}{v} = {expr}"]
        inner = ind
        if nullable:
            out += [f"{ind}if {v} is None:"]
            out += self._write_null(compact, legacy, buf, ind + "    ")
            out += [f"{ind}else:"]
            inner = ind + "    "
        if typ == "records":
            # Fast path inline for the usual case, a large memoryview slice of
            # a segment read; put_records handles every other shape.
            length = self.temp("n")
            size = f"uvarint({length} + 1)" if compact else f"{self.fmt('i')}.pack({length})"
            out += [
                f"{inner}if {v}.__class__ is memoryview and {v}.itemsize == 1 and ({length} := {v}.nbytes) >= INLINE_RECORDS_LIMIT:",
                f"{inner}    {buf} += {size}",
                f"{inner}    chunks.append({buf})",
                f"{inner}    chunks.append({v})",
                f"{inner}    {buf} = bytearray()",
                f"{inner}else:",
                f"{inner}    {buf} = put_records({buf}, chunks, {v}, {compact})",
            ]
            return out
        if typ == "string":
            out.append(f"{inner}{v} = {v}.encode()")
        out += self._write_length(f"len({v})", compact, legacy, buf, inner)
        out.append(f"{inner}{buf} += {v}")
        return out

    def _not_default(self, f: FieldSpec, target: str) -> list[str]:
        """Lines setting ``target`` to whether ``o.<field>`` differs from its default.

        A struct default is compared field by field inline: calling the
        struct's ``__eq__`` for every tagged field of every partition would
        dominate the cost of encoding a FetchResponse.
        """
        if parse_default(f) != "STRUCT" or not f.nullable.empty:
            return [f"    {target} = o.{f.attr} != {default_expr(f, fresh=False)}"]
        assert f.struct is not None  # parse_default says STRUCT only for struct fields
        var = self.temp("d")
        checks = []
        for sub in f.struct.fields:
            if parse_default(sub) == "STRUCT":
                assert sub.struct is not None
                self.struct_defaults.add(sub.struct.name)
            checks.append(f"{var}.{sub.attr} != {default_expr(sub, fresh=False)}")
        return [f"    {var} = o.{f.attr}", f"    {target} = {' or '.join(checks) or 'False'}"]

    def _write_tagged(self, tagged: list[FieldSpec], version: int, children: dict[int, str]) -> list[str]:
        if not tagged:
            return ["    b.append(0)"]
        ordered = sorted(tagged, key=_tag)
        out = []
        for f in ordered:
            out += self._not_default(f, f"t{f.tag}")
        count = " + ".join(f"t{f.tag}" for f in ordered)
        out.append(f"    b.append({count})")
        for f in ordered:
            out += [f"    if t{f.tag}:", "        tb = bytearray()"]
            out += self._write_field(f, f"o.{f.attr}", version, True, children, "tb", "        ")
            out += [f"        b += uvarint({f.tag})", "        b += uvarint(len(tb))", "        b += tb"]
        return out
