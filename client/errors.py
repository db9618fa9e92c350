"""Errors raised by pafka's Kafka client.

A broker answers most failures with an error code per topic or partition; the
client turns every non-zero code into a :class:`KafkaApiError` that carries the
:class:`~protocol.errors.ErrorCode` and where it applied, so callers can switch
on the code (or catch the few subclasses that tools handle specially).
"""

from __future__ import annotations

from protocol.errors import ErrorCode


class KafkaClientError(Exception):
    """Base of everything the client raises on its own account."""


class KafkaConnectionError(KafkaClientError):
    """The connection failed, timed out or was closed; in-flight requests are lost."""


class KafkaTimeoutError(KafkaConnectionError):
    """A request got no response in time; its connection is closed (responses come in order)."""


class CorrelationIdMismatchError(KafkaConnectionError):
    """A response answered another request than the oldest in flight.

    Kafka answers requests strictly in order on one connection, so a mismatch
    means the stream is out of step and the connection cannot be trusted.
    """


class NoCompatibleVersionError(KafkaClientError):
    """The broker and this client share no version of an API."""

    def __init__(self, api_name: str, broker_range: tuple[int, int] | None, client_range: range) -> None:
        self.api_name = api_name
        self.broker_range = broker_range
        self.client_range = client_range
        theirs = "not supported" if broker_range is None else f"v{broker_range[0]}-v{broker_range[1]}"
        super().__init__(
            f"{api_name}: broker {theirs}, client v{client_range.start}-v{client_range.stop - 1}"
        )


# Kafka marks these as RetriableException subclasses: the same request may
# succeed later (after a metadata refresh or a leader election).
RETRIABLE_ERRORS: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_ID,
    }
)


class KafkaApiError(KafkaClientError):
    """A broker answered with a non-zero error code.

    ``topic``/``partition`` say where the code applied (None for request-level
    errors); ``message`` is the broker's error message when it sent one.
    """

    def __init__(
        self,
        error_code: ErrorCode | int,
        *,
        api_name: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        message: str | None = None,
    ) -> None:
        try:
            code = ErrorCode(error_code)
        except ValueError:
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        self.error_code = code
        self.raw_error_code = int(error_code)
        self.api_name = api_name
        self.topic = topic
        self.partition = partition
        self.message = message
        super().__init__(self._describe())

    @property
    def retriable(self) -> bool:
        return self.error_code in RETRIABLE_ERRORS

    def _describe(self) -> str:
        where = []
        if self.api_name:
            where.append(self.api_name)
        if self.topic is not None:
            where.append(self.topic if self.partition is None else f"{self.topic}-{self.partition}")
        text = f"{self.error_code.name} ({self.raw_error_code})"
        if where:
            text = f"{' '.join(where)}: {text}"
        return f"{text}: {self.message}" if self.message else text


class UnknownTopicOrPartitionError(KafkaApiError):
    pass


class TopicAlreadyExistsError(KafkaApiError):
    pass


class NotLeaderOrFollowerError(KafkaApiError):
    pass


class OffsetOutOfRangeError(KafkaApiError):
    pass


class InvalidConfigError(KafkaApiError):
    pass


class InvalidPartitionsError(KafkaApiError):
    pass


_ERROR_CLASSES: dict[int, type[KafkaApiError]] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: UnknownTopicOrPartitionError,
    ErrorCode.TOPIC_ALREADY_EXISTS: TopicAlreadyExistsError,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: NotLeaderOrFollowerError,
    ErrorCode.OFFSET_OUT_OF_RANGE: OffsetOutOfRangeError,
    ErrorCode.INVALID_CONFIG: InvalidConfigError,
    ErrorCode.INVALID_PARTITIONS: InvalidPartitionsError,
}


def api_error(
    error_code: int,
    *,
    api_name: str | None = None,
    topic: str | None = None,
    partition: int | None = None,
    message: str | None = None,
) -> KafkaApiError:
    """The most specific KafkaApiError for ``error_code``."""
    cls = _ERROR_CLASSES.get(error_code, KafkaApiError)
    return cls(error_code, api_name=api_name, topic=topic, partition=partition, message=message)


def check_error(
    error_code: int,
    *,
    api_name: str | None = None,
    topic: str | None = None,
    partition: int | None = None,
    message: str | None = None,
) -> None:
    """Raise the matching KafkaApiError unless ``error_code`` is NO_ERROR."""
    if error_code:
        raise api_error(error_code, api_name=api_name, topic=topic, partition=partition, message=message)
