"""A certificate's subject as Kafka names it: the RFC 2253 string of Java's X500Principal.

Kafka's principal for a TLS client is built from
``X500Principal.getName(RFC2253)``: the subject's relative distinguished names
last-encoded first, joined by commas; attributes RFC 2253 names by keyword
(CN, L, ST, O, OU, C, STREET, DC, UID), any other as its dotted OID with the
value's DER encoding in hex (``1.2.840.113549.1.9.1=#1611...``); the characters
``,=+<>#;"\\`` and leading or trailing blanks escaped with a backslash.

Python's ``getpeercert()`` dictionary loses the value types and the original
order of multi-valued names, so the subject is read here from the DER
certificate itself (only the few structures on the way to the subject).
"""

from __future__ import annotations

#: OIDs RFC 2253 (and so Java's X500Principal) writes by keyword.
_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
#: DER string types and how their bytes decode.
_STRING_TYPES = {0x0C: "utf-8", 0x13: "ascii", 0x16: "ascii", 0x1A: "ascii", 0x14: "latin-1",
                 0x1E: "utf-16-be", 0x1C: "utf-32-be"}
_SEQUENCE, _SET, _OID, _VERSION = 0x30, 0x31, 0x06, 0xA0
_ESCAPED = ',=+<>#;"\\'


class _Tlv:
    """One DER element of ``data``: its tag, where its content lies, and where it ends."""

    __slots__ = ("end", "header_start", "start", "tag")

    def __init__(self, data: bytes, pos: int) -> None:
        if pos + 2 > len(data):
            raise ValueError("truncated DER element")
        self.header_start = pos
        self.tag = data[pos]
        length = data[pos + 1]
        pos += 2
        if length & 0x80:  # long form: the next (length & 0x7F) bytes hold the length
            count = length & 0x7F
            length = int.from_bytes(data[pos:pos + count], "big")
            pos += count
        self.start, self.end = pos, pos + length
        if self.end > len(data):
            raise ValueError("truncated DER element")


def _children(data: bytes, parent: _Tlv) -> list[_Tlv]:
    children, pos = [], parent.start
    while pos < parent.end:
        child = _Tlv(data, pos)
        children.append(child)
        pos = child.end
    return children


def _oid(content: bytes) -> str:
    first = content[0]
    parts = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    value = 0
    for byte in content[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def _subject(certificate: bytes) -> _Tlv:
    """The certificate's subject Name element."""
    tbs = _children(certificate, _Tlv(certificate, 0))[0]
    fields = _children(certificate, tbs)
    if fields[0].tag == _VERSION:
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    return fields[4]


def _value_text(data: bytes, value: _Tlv, keyword: str | None) -> str:
    encoding = _STRING_TYPES.get(value.tag)
    if keyword is None or encoding is None:
        return "#" + data[value.header_start:value.end].hex()
    text = data[value.start:value.end].decode(encoding, errors="replace")
    # Java escapes every one of the leading and trailing blanks, and writes NUL as \00.
    lead = len(text) - len(text.lstrip(" \r"))
    trail = len(text.rstrip(" \r"))
    return "".join("\\00" if c == "\0" else "\\" + c if c in _ESCAPED or not lead <= i < trail else c
                   for i, c in enumerate(text))


def _attribute(data: bytes, element: _Tlv) -> str:
    oid_element, value = _children(data, element)[:2]
    if oid_element.tag != _OID:
        raise ValueError("attribute without an OID")
    oid = _oid(data[oid_element.start:oid_element.end])
    keyword = _KEYWORDS.get(oid)
    return f"{keyword or oid}={_value_text(data, value, keyword)}"


def rfc2253_name(certificate: bytes) -> str:
    """The subject of a DER certificate as Java's ``X500Principal.getName("RFC2253")`` writes it."""
    try:
        rdns = [rdn for rdn in _children(certificate, _subject(certificate)) if rdn.tag == _SET]
        return ",".join("+".join(_attribute(certificate, a) for a in _children(certificate, rdn))
                        for rdn in reversed(rdns))
    except (IndexError, ValueError) as exc:
        raise ValueError(f"cannot read the certificate's subject: {exc}") from None
