"""Kafka's SslPrincipalMapper: ``ssl.principal.mapping.rules`` turn a certificate's subject into a name.

The rules are a list, separated by commas or newlines, of ``DEFAULT`` (the
distinguished name as it is) and ``RULE:pattern/replacement/`` with an optional
``L`` or ``U`` after the last slash (lower- or upper-case the result). The first
rule whose pattern matches the whole RFC 2253 name gives the principal's name;
when none does, the client's authentication fails, as in Kafka. Patterns are
regular expressions and replacements use Java's ``$1`` group references, as
written in a Kafka configuration; a pattern may contain commas, so the list is
split by the rule grammar rather than at every comma.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: One rule: DEFAULT | RULE:pattern/replacement/[LU] (anything after that is an error) | other text.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:[,\n]\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No rule applies to a distinguished name: the client is not authenticated."""


@dataclass(frozen=True, slots=True)
class Rule:
    """DEFAULT (``pattern`` None) or RULE:pattern/replacement/[LU]."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    to_lower_case: bool = False
    to_upper_case: bool = False

    def apply(self, distinguished_name: str) -> str | None:
        """The mapped name, or None when the pattern does not match the whole name."""
        if self.pattern is None:
            return distinguished_name
        match = self.pattern.fullmatch(distinguished_name)
        if match is None:
            return None
        # Java's replaceAll, as Kafka calls it: every match of the pattern in the name is replaced.
        result = self.pattern.sub(lambda m: _expand(self.replacement, m), distinguished_name)
        if self.to_lower_case:
            return result.lower()
        return result.upper() if self.to_upper_case else result


class SslPrincipalMapper:
    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules

    @classmethod
    def from_rules(cls, text: str | None) -> SslPrincipalMapper:
        """Parse ``ssl.principal.mapping.rules``; ValueError names a rule that is not valid."""
        return cls(parse_rules(split_rules(text or "DEFAULT")))

    def get_name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {[r.pattern for r in self.rules]}")


def split_rules(text: str) -> list[str]:
    return [match.group(1) for match in _RULE_SPLITTER.finditer(text.strip())]


def parse_rules(texts: list[str]) -> list[Rule]:
    rules = []
    for text in texts:
        match = _RULE_PARSER.match(text)
        if match is None:
            raise ValueError(f"Invalid rule: {text}")
        if match.end() != len(text):
            raise ValueError(f"Invalid rule: `{text}`, unmatched substring: `{text[match.end():]}`")
        if match.group(1) is not None:
            rules.append(Rule())
        elif match.group(2) is not None:
            try:
                pattern = re.compile(match.group(2))
            except re.error as exc:
                raise ValueError(f"Invalid rule: `{text}`: {exc}") from None
            flag = match.group(4)
            rules.append(Rule(pattern, match.group(3), flag == "L", flag == "U"))
        # An empty rule (two separators in a row, a trailing comma) is ignored, as in Kafka.
    return rules


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's Matcher replacement: ``$n`` / ``${name}`` are groups, a backslash quotes the next
    character; a ``$n`` beyond the pattern's groups stays literal (Kafka escapes it so)."""
    out: list[str] = []
    i, groups = 0, match.re.groups
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif char == "$" and replacement[i + 1:i + 2] == "{" and "}" in replacement[i:]:
            end = replacement.index("}", i)
            out.append(match.group(replacement[i + 2:end]) or "")
            i = end + 1
        elif char == "$" and replacement[i + 1:i + 2].isdigit():
            i, text = _group_reference(replacement, i + 1, groups, match)
            out.append(text)
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _group_reference(replacement: str, start: int, groups: int, match: re.Match[str]) -> tuple[int, str]:
    """Java reads the longest number that is still a group (``$12`` is group 1 then ``2`` when
    there are fewer than 12 groups); a first digit beyond the groups is literal text."""
    number = int(replacement[start])
    if number > groups:
        return start + 1, "$" + replacement[start]
    end = start + 1
    while end < len(replacement) and replacement[end].isdigit() and int(replacement[start:end + 1]) <= groups:
        number = int(replacement[start:end + 1])
        end += 1
    return end, match.group(number) or ""
