"""kafka-console-producer.sh's line format: optional headers, optional key, value.

With ``parse.headers=true`` a line starts with headers, ended by
``headers.delimiter``; headers are separated by ``headers.separator`` and each
splits at its first ``headers.key.separator`` (no separator: a null value).
With ``parse.key=true`` the rest splits at the first ``key.separator``. A
field equal to ``null.marker`` (when set) is null. A line missing a required
delimiter is an error unless ``ignore.error=true``, which then takes the
line as headers-less / keyless. The defaults are Kafka's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from client import ProducerRecord
from tools.common import parse_bool


class LineFormatError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class LineFormat:
    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    ignore_error: bool = False
    null_marker: bytes | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LineFormat:
        def sep(name: str, default: bytes) -> bytes:
            value = props.get(name)
            if value is None:
                return default
            if not value:
                raise LineFormatError(f"{name} must not be empty")
            return value.encode()

        null_marker = props.get("null.marker")
        fmt = cls(
            parse_key=parse_bool(props.get("parse.key")),
            key_separator=sep("key.separator", b"\t"),
            parse_headers=parse_bool(props.get("parse.headers")),
            headers_delimiter=sep("headers.delimiter", b"\t"),
            headers_separator=sep("headers.separator", b","),
            headers_key_separator=sep("headers.key.separator", b":"),
            ignore_error=parse_bool(props.get("ignore.error")),
            null_marker=None if null_marker is None else null_marker.encode(),
        )
        if fmt.headers_separator == fmt.headers_key_separator:
            raise LineFormatError("headers.separator and headers.key.separator must differ")
        return fmt

    def _null(self, value: bytes) -> bytes | None:
        return None if self.null_marker is not None and value == self.null_marker else value

    def parse(self, line: bytes, line_number: int) -> ProducerRecord:
        rest = line
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            head, sep, tail = rest.partition(self.headers_delimiter)
            if sep:
                headers = self._parse_headers(head, line_number, line)
                rest = tail
            elif not self.ignore_error:
                raise LineFormatError(f"No headers delimiter found on line number {line_number}: '{_show(line)}'")
        key = None
        if self.parse_key:
            head, sep, tail = rest.partition(self.key_separator)
            if sep:
                key, rest = self._null(head), tail
            elif not self.ignore_error:
                raise LineFormatError(f"No key separator found on line number {line_number}: '{_show(line)}'")
        return ProducerRecord(value=self._null(rest), key=key, headers=headers)

    def _parse_headers(self, text: bytes, line_number: int, line: bytes) -> list[tuple[str, bytes | None]]:
        if not text:
            return []
        headers = []
        for item in text.split(self.headers_separator):
            name, sep, value = item.partition(self.headers_key_separator)
            if self.null_marker is not None and name == self.null_marker:
                raise LineFormatError(
                    f"Header keys should not be equal to the null marker '{_show(self.null_marker)}' "
                    f"as they can't be null. Line number {line_number}: '{_show(line)}'"
                )
            headers.append((name.decode("utf-8", "surrogateescape"), self._null(value) if sep else None))
        return headers


def _show(data: bytes) -> str:
    return data.decode("utf-8", "replace")
