"""Regular-expression subscriptions of consumer-protocol groups, resolved on the broker (KIP-848).

A member may subscribe with ``SubscribedTopicRegex`` instead of (or besides)
topic names. As in Kafka, the broker resolves the expression against its
topics: RE2 syntax (Kafka compiles with RE2/J; here the ``google-re2`` binding
of the same engine), the whole topic name must match (RE2/J's ``matches``),
and the internal topics are never matched. A pattern that does not compile
answers INVALID_REGULAR_EXPRESSION with Kafka's message, whose description is
the one RE2/J gives for the same mistake.

:class:`RegexResolver` is the coordinator's, shared by its groups: each
distinct expression is compiled once and resolved once, then kept up to date
as topics are created or deleted. Why this never stalls the event loop with
thousands of topics:

- the topic image is compared with the last snapshot at most once per
  ``TOPIC_IMAGE_CHECK_INTERVAL_MS`` (a set of names: about 40 microseconds per
  thousand topics);
- a change is applied incrementally: the deleted names leave every resolution
  at once, and only the created names are matched, against each expression in
  use;
- matching (the whole image for a new expression, the created names for a
  change) does at most ``RESOLUTION_CHUNK`` names per turn of the event loop,
  about a millisecond, whatever the number of topics or expressions. The first
  chunk is matched at once (the new expression's first), so a small image is
  resolved before the group's next heartbeat; a large one
  continues in later turns, as Kafka resolves in an executor off its event
  thread. Until its first resolution completes an expression gives its members
  nothing; each completed resolution that matches other topics moves the group
  to a new epoch at its next heartbeat. As in Kafka, the heartbeat that brings an
  expression new to its group is answered without the expression's topics (the
  group takes the resolution from its next heartbeat on), even when it is already
  resolved here.

What a group takes of a resolution is its own (:class:`ResolvedRegularExpression`):
as in Kafka, only the topics the principal of the member whose heartbeat
refreshes it may DESCRIBE (a ``TopicAuthorizer`` the broker passes down with
the request; none when no authorizer is configured). A group refreshes an
expression when the broker-wide resolution changed, and every
``group.consumer.regex.refresh.interval.ms`` anyway, so that ACLs granted or
removed later are followed. Each refresh is written to ``__consumer_offsets``
as a ConsumerGroupRegularExpression record and reloaded with the group, so a
coordinator that takes the group over starts from the topics it had.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import re2

from coordinator.common.internal_topics import INTERNAL_TOPICS
from coordinator.common.scheduler import Scheduler, Timer

log = logging.getLogger(__name__)

#: How often the topic image is compared with the resolver's snapshot (a regex group's heartbeat asks).
TOPIC_IMAGE_CHECK_INTERVAL_MS = 500
#: How many topic names one step of a new expression's resolution matches.
RESOLUTION_CHUNK = 500
#: An expression no group asked for in this long is forgotten.
UNUSED_EXPIRY_MS = 10 * 60_000
#: A group refreshes its expressions at least this often, to follow ACL changes
#: (Kafka's ``group.consumer.regex.refresh.interval.ms``).
DEFAULT_REFRESH_MAX_INTERVAL_MS = 10 * 60_000

#: RE2's error texts → RE2/J's descriptions (what Kafka's message quotes).
_RE2J_DESCRIPTIONS = {
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
    "invalid named capture group": "invalid named capture",
}


#: The topics, among those given, the member may DESCRIBE (its principal's ACLs).
TopicAuthorizer = Callable[[frozenset[str]], Collection[str]]


@dataclass(frozen=True)
class RefreshContext:
    """The consumer-protocol heartbeat that may refresh its group's expressions (Kafka's request context).

    A classic member's request in a consumer group carries none: as in Kafka, only a consumer-protocol
    heartbeat refreshes them."""

    #: The topics its member may describe (None: no authorizer, every topic).
    authorizer: TopicAuthorizer | None = None


@dataclass(frozen=True)
class ResolvedRegularExpression:
    """What one expression of a group resolved to (Kafka's ResolvedRegularExpression)."""

    topics: frozenset[str]
    #: The version of the topic image it was resolved against (``RegexResolver.image_version``).
    version: int
    timestamp_ms: int
    #: The broker-wide resolution ``topics`` were taken from (None when loaded from the records).
    matched: frozenset[str] | None = field(default=None, compare=False)


class Pattern(Protocol):
    """A compiled expression (RE2's)."""

    def fullmatch(self, text: str) -> object: ...


class InvalidRegularExpression(Exception):
    """A SubscribedTopicRegex that does not compile; ``message`` is Kafka's."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _description(error: re2.error) -> str:
    """RE2/J's description of RE2's error (``<code text>: <offending part>``)."""
    raw = error.args[0] if error.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    code, _, _ = text.partition(": ")
    return _RE2J_DESCRIPTIONS.get(code, code)


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error is answered to the member; RE2 would also print it to stderr


@functools.lru_cache(maxsize=1024)
def _compile(regex: str) -> Pattern | str:
    """The compiled expression, or RE2/J's description of why it does not compile (cached either way)."""
    try:
        pattern: Pattern = re2.compile(regex, _OPTIONS)
        return pattern
    except re2.error as e:
        return _description(e)


def compile_regex(regex: str) -> Pattern:
    """The compiled expression; InvalidRegularExpression with Kafka's message when it does not compile."""
    compiled = _compile(regex)
    if isinstance(compiled, str):
        raise InvalidRegularExpression(
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {compiled}.")
    return compiled


@dataclass
class _Resolution:
    pattern: Pattern
    #: The topics matched so far (ahead of ``topics`` while names are pending).
    matched: set[str] = field(default_factory=set)
    #: Names still to match: the whole image for a new expression, the created topics for a refresh.
    pending: list[str] = field(default_factory=list)
    #: The topics as the groups read them: the last complete resolution (None before the first).
    topics: frozenset[str] | None = None
    used_ms: int = 0


def drop_unused(resolved: dict[str, ResolvedRegularExpression], regexes: set[str]) -> None:
    """Forget the resolutions of the expressions no member subscribes with any more (``regexes``: those used)."""
    for regex in [r for r in resolved if r not in regexes]:
        del resolved[regex]


class RegexResolver:
    """Every expression the coordinator's groups subscribe to, resolved against the broker's topics.

    ``topic_names`` lists the broker's topics (its metadata, read only)."""

    def __init__(self, topic_names: Callable[[], Iterable[str]], scheduler: Scheduler) -> None:
        self._topic_names = topic_names
        self._scheduler = scheduler
        self._resolutions: dict[str, _Resolution] = {}
        self._names: frozenset[str] | None = None
        self._checked_ms = 0
        self._image_version = 0
        self._step: Timer | None = None

    def resolved(self, regex: str) -> frozenset[str] | None:
        """The topics ``regex`` matches (None until its first resolution completes; it must compile)."""
        now = self._scheduler.now_ms()
        self._check_image(now)
        resolution = self._resolutions.get(regex)
        if resolution is None:
            resolution = _Resolution(compile_regex(regex), pending=list(self._snapshot()))
            self._resolutions[regex] = resolution
            self._match_pending(first=regex)
        resolution.used_ms = now
        return resolution.topics

    @property
    def image_version(self) -> int:
        """The version of the topic image the resolutions follow: when (ms) this coordinator first saw it.

        Kafka uses the offset of its metadata image; a broker here has no metadata log, and the time
        keeps the versions written before a restart below the ones written after it."""
        return self._image_version

    # -- a group's own resolutions ---------------------------------------------------------
    def refresh(self, resolved: dict[str, ResolvedRegularExpression], regexes: set[str],
                context: RefreshContext | None, max_interval_ms: int, later: str | None = None) -> bool:
        """Bring a group's ``resolved`` expressions to ``regexes``: drop those no member uses, and take the
        broker-wide resolution of the others, filtered by ``context``'s authorizer, when it changed since the
        group took it or when the group's last refresh is older than ``max_interval_ms`` (never without a
        ``context``). ``later``, an expression the group has no resolution of yet, is only asked for: the
        group takes it at a later refresh. True when one of them matches other topics now (a new group
        epoch)."""
        drop_unused(resolved, regexes)
        if context is None:
            return False
        authorizer = context.authorizer
        now = self._scheduler.now_ms()
        changed = False
        for regex, matched in self._to_take(resolved, regexes, now, max_interval_ms, later):
            current = resolved.get(regex)
            topics = matched if authorizer is None else frozenset(authorizer(matched))
            resolved[regex] = ResolvedRegularExpression(topics, self._image_version, now, matched)
            changed |= topics != (frozenset() if current is None else current.topics)
        return changed

    def refresh_due(self, resolved: dict[str, ResolvedRegularExpression], regexes: set[str],
                    max_interval_ms: int) -> bool:
        """Whether ``refresh`` with a context (and no ``later``) would change a group's ``resolved``
        expressions now: one to drop, or one to take (``_to_take``)."""
        if any(regex not in regexes for regex in resolved):
            return True
        return any(True for _ in self._to_take(resolved, regexes, self._scheduler.now_ms(), max_interval_ms))

    def _to_take(self, resolved: dict[str, ResolvedRegularExpression], regexes: set[str], now: int,
                 max_interval_ms: int, later: str | None = None) -> Iterator[tuple[str, frozenset[str]]]:
        """The expressions of ``regexes`` whose broker-wide resolution a group with ``resolved`` takes now, with
        that resolution: one the group lacks (``later`` excepted: only asked for), one resolved otherwise since
        the group took it, or every one once the group's last refresh is older than ``max_interval_ms``.
        Each expression's resolution is asked for as it is reached (which keeps it in use)."""
        due = bool(resolved) and now - max(r.timestamp_ms for r in resolved.values()) >= max_interval_ms
        for regex in regexes:
            matched = self.resolved(regex)
            current = resolved.get(regex)
            if regex == later and current is None:
                continue
            if matched is not None and (current is None or current.matched is not matched or due):
                yield regex, matched

    # -- following the topic image -------------------------------------------------------
    def _snapshot(self) -> frozenset[str]:
        if self._names is None:
            self._names = frozenset(self._topic_names()) - INTERNAL_TOPICS
            if self._image_version == 0:
                self._image_version = self._scheduler.now_ms()
        return self._names

    def _check_image(self, now: int) -> None:
        """Created or deleted topics since the last look: every resolution follows them."""
        if self._names is not None and now - self._checked_ms < TOPIC_IMAGE_CHECK_INTERVAL_MS:
            return
        self._checked_ms = now
        for regex in [r for r, res in self._resolutions.items() if now - res.used_ms > UNUSED_EXPIRY_MS]:
            del self._resolutions[regex]
        old = self._names
        self._names = None
        new = self._snapshot()
        if old is None or old == new:
            return
        self._image_version = max(now, self._image_version + 1)
        created, deleted = list(new - old), old - new
        for regex, resolution in self._resolutions.items():
            resolution.matched -= deleted
            if resolution.topics is not None and resolution.topics & deleted:
                self._publish(regex, resolution, resolution.topics - deleted)
            resolution.pending = [n for n in resolution.pending if n not in deleted] + created
        self._match_pending()

    # -- matching, a chunk per turn of the event loop ---------------------------------------------
    def _match_pending(self, first: str | None = None) -> None:
        """Match up to ``RESOLUTION_CHUNK`` pending names (``first``'s before the others'); the rest in a later turn."""
        budget = RESOLUTION_CHUNK
        order = sorted(self._resolutions, key=lambda r: r != first)
        for regex in order:
            resolution = self._resolutions[regex]
            if budget == 0:
                break
            if not resolution.pending:
                continue
            chunk = resolution.pending[:budget]
            del resolution.pending[:budget]
            budget -= len(chunk)
            resolution.matched.update(n for n in chunk if resolution.pattern.fullmatch(n))
            if not resolution.pending:
                self._publish(regex, resolution, frozenset(resolution.matched))
        if self._step is None and any(r.pending for r in self._resolutions.values()):
            self._step = self._scheduler.schedule(0, self._next_step)

    def _next_step(self) -> None:
        self._step = None
        self._match_pending()

    @staticmethod
    def _publish(regex: str, resolution: _Resolution, topics: frozenset[str]) -> None:
        if topics != resolution.topics:
            resolution.topics = topics
            log.info("Regular expression %r resolves to %d topics.", regex, len(topics))

    def shutdown(self) -> None:
        if self._step is not None:
            self._step.cancel()
            self._step = None
        self._resolutions.clear()
