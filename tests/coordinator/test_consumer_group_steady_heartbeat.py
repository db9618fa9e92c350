"""The steady-heartbeat fast path answers and writes exactly what the full path does.

Two coordinators on fake clocks run the same random sequences (fixed seeds) of consumer-protocol
heartbeats: joins by name, by regular expression and as static members (with racks), steady
heartbeats (id and epoch only, or repeating what the member sent before), heartbeats that report the
owned partitions, a member changing its client id (rack, rebalance timeout, assignor), leaving (for good or, static, for a while) and
coming back, stale epochs, topics created, deleted or given partitions, and the clock moving past
sessions and the regular expressions' refresh interval. One has the fast path, the other has it
forced off; after every step their answers, the records they appended and their groups' members (in
order) must be the same.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import pytest

from coordinator.group.consumer_group import Assignment, TopicInfo
from coordinator.group.consumer_group_requests import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResult
from protocol.errors import ErrorCode
from tests.coordinator.fakes import MemoryCoordinatorLog
from tests.coordinator.test_consumer_group_heartbeat import Harness

REFRESH_MS = 20_000
SESSION_MS = 45_000
TOPICS = {"t": TopicInfo(uuid.UUID(int=1), 6), "u": TopicInfo(uuid.UUID(int=2), 3),
          "orders-1": TopicInfo(uuid.UUID(int=3), 2), "orders-2": TopicInfo(uuid.UUID(int=4), 2)}
LATER_TOPICS = {"orders-3": TopicInfo(uuid.UUID(int=5), 2), "v": TopicInfo(uuid.UUID(int=6), 4)}


@dataclass
class Client:
    """One member as its client knows it."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    epoch: int = 0
    owned: Assignment = field(default_factory=dict)
    client_id: str = "c"


class Twins:
    """The same coordinator twice: with the fast path and without it."""

    def __init__(self) -> None:
        self.fast = Harness(session_timeout_ms=SESSION_MS, regex_refresh_max_interval_ms=REFRESH_MS)
        self.full = Harness(session_timeout_ms=SESSION_MS, regex_refresh_max_interval_ms=REFRESH_MS)
        self.full.coordinator.consumer_groups.steady_fast_path = False
        self.steady_answers = 0
        groups = self.fast.coordinator.consumer_groups
        steady_answer = groups._steady_answer

        def counted(request):  # type: ignore[no-untyped-def]
            answer = steady_answer(request)
            self.steady_answers += answer is not None
            return answer

        groups._steady_answer = counted  # type: ignore[method-assign]
        self.written = [0, 0]
        for h in (self.fast, self.full):
            h.topics.topics = dict(TOPICS)

    @staticmethod
    def _log(h: Harness) -> MemoryCoordinatorLog:
        log = h.coordinator.consumer_groups.manager.coordinator_log
        assert isinstance(log, MemoryCoordinatorLog)
        return log

    def heartbeat(self, client: Client, epoch: int, **fields: object) -> ConsumerGroupHeartbeatResult:
        answers = [_heartbeat(h, client, epoch, **fields) for h in (self.fast, self.full)]
        assert answers[0] == answers[1]
        return answers[0]

    def topics(self, change: dict[str, TopicInfo | None]) -> None:
        for h in (self.fast, self.full):
            for name, info in change.items():
                if info is None:
                    h.topics.topics.pop(name, None)
                else:
                    h.topics.topics[name] = info

    def advance(self, ms: int) -> None:
        for h in (self.fast, self.full):
            h.clock.advance(ms)

    def check(self) -> None:
        """The same records appended since the last check, the same groups."""
        logs = [self._log(h).records for h in (self.fast, self.full)]
        assert logs[0] == logs[1]
        groups = [h.coordinator.consumer_groups.groups.get("g") for h in (self.fast, self.full)]
        if groups[0] is None or groups[1] is None:
            assert groups[0] is groups[1]
            return
        assert list(groups[0].members.items()) == list(groups[1].members.items())
        assert (groups[0].group_epoch, groups[0].assignment_epoch, groups[0].target, groups[0].resolved_regexes) == (
            groups[1].group_epoch, groups[1].assignment_epoch, groups[1].target, groups[1].resolved_regexes)
        timeouts = [h.coordinator.consumer_groups.timeouts.pending for h in (self.fast, self.full)]
        assert timeouts[0] == timeouts[1]


def _heartbeat(h: Harness, client: Client, epoch: int, **fields: object) -> ConsumerGroupHeartbeatResult:
    fields.setdefault("client_id", client.client_id)
    request = ConsumerGroupHeartbeatRequest(group_id="g", member_id=client.member_id, member_epoch=epoch,
                                            client_host="/127.0.0.1", **fields)  # type: ignore[arg-type]
    answer = h.coordinator.consumer_group_heartbeat(request)
    assert answer.done()
    return answer.result()


class Driver:
    """Random steps over a few clients, most of them steady heartbeats."""

    def __init__(self, twins: Twins, rng: random.Random) -> None:
        self.twins, self.rng = twins, rng
        self.clients: dict[str, Client] = {}
        self.away: list[Client] = []  # static members gone for a while
        self.joined = 0

    def step(self) -> None:
        rng = self.rng
        kind = rng.choices(["join", "steady", "report", "change", "topic", "advance", "leave", "stale", "back"],
                           weights=[8, 50, 15, 5, 4, 12, 3, 2, 3])[0]
        if kind == "join" or not self.clients:
            self.join()
        elif kind == "topic":
            self.change_topics()
        elif kind == "advance":
            self.twins.advance(rng.choice([100, 500, 2_000, 7_000, 21_000]))
        elif kind == "back" and self.away:
            self.come_back(self.away.pop(0))
        else:
            client = self.clients[rng.choice(sorted(self.clients))]
            getattr(self, kind if kind != "back" else "steady")(client)
        self.twins.check()

    def join(self) -> None:
        rng, self.joined = self.rng, self.joined + 1
        static = rng.random() < 0.3
        client = Client(f"m{self.joined}", f"i{self.joined}" if static else None,
                        rng.choice([None, "a", "b"]))
        subscription: dict[str, object] = {"subscribed_topic_names": tuple(rng.sample(
            [*sorted(TOPICS), "v"], rng.randint(0, 2)))}
        if rng.random() < 0.35 or not subscription["subscribed_topic_names"]:
            subscription["subscribed_topic_regex"] = rng.choice(["^orders-.*", "^(t|v)$"])
        self._take(client, self.twins.heartbeat(
            client, 0, owned={}, rebalance_timeout_ms=30_000, instance_id=client.instance_id,
            rack_id=client.rack_id, server_assignor=rng.choice([None, "uniform", "range"]), **subscription))

    def come_back(self, client: Client) -> None:
        """A static member's next instance: a new member id, the same instance id."""
        self.joined += 1
        client = Client(f"m{self.joined}", client.instance_id, client.rack_id)
        self._take(client, self.twins.heartbeat(
            client, 0, owned={}, rebalance_timeout_ms=30_000, instance_id=client.instance_id,
            rack_id=client.rack_id, subscribed_topic_names=("t",)))

    def steady(self, client: Client) -> None:
        """Id and epoch, or with what the member sent before."""
        fields: dict[str, object] = {}
        if self.rng.random() < 0.3:
            fields = {"instance_id": client.instance_id, "rack_id": client.rack_id,
                      "rebalance_timeout_ms": 30_000}
        self._take(client, self.twins.heartbeat(client, client.epoch, **fields))

    def report(self, client: Client) -> None:
        self._take(client, self.twins.heartbeat(client, client.epoch, owned=client.owned))

    def change(self, client: Client) -> None:
        """A heartbeat that changes one thing: the client id, the rack, the rebalance timeout, the server
        assignor, or names an instance id that is not the member's."""
        what = self.rng.choice(["client_id", "rack_id", "rebalance_timeout_ms", "server_assignor", "instance_id"])
        fields: dict[str, object] = {}
        if what == "client_id":
            client.client_id = client.client_id + "'"
        elif what == "rack_id":
            client.rack_id = fields["rack_id"] = self.rng.choice(["a", "b", "c"])
        elif what == "rebalance_timeout_ms":
            fields["rebalance_timeout_ms"] = self.rng.choice([30_000, 40_000])
        elif what == "server_assignor":
            fields["server_assignor"] = self.rng.choice(["uniform", "range"])
        else:
            fields["instance_id"] = "someone-else"
        self._take(client, self.twins.heartbeat(client, client.epoch, **fields))

    def stale(self, client: Client) -> None:
        answer = self.twins.heartbeat(client, client.epoch + 1)
        assert answer.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID)  # or its session expired

    def leave(self, client: Client) -> None:
        temporarily = client.instance_id is not None and self.rng.random() < 0.7
        self.twins.heartbeat(client, -2 if temporarily else -1, instance_id=client.instance_id)
        del self.clients[client.member_id]
        if temporarily:
            self.away.append(client)

    def change_topics(self) -> None:
        rng = self.rng
        name = rng.choice(sorted(TOPICS) + sorted(LATER_TOPICS))
        current = self.twins.fast.topics.topics.get(name)
        if current is None:
            self.twins.topics({name: (TOPICS | LATER_TOPICS)[name]})
        elif rng.random() < 0.4:
            self.twins.topics({name: None})
        else:
            self.twins.topics({name: TopicInfo(current.topic_id, current.num_partitions + 1)})

    def _take(self, client: Client, answer: ConsumerGroupHeartbeatResult) -> None:
        if answer.error != ErrorCode.NO_ERROR:
            self.clients.pop(client.member_id, None)  # fenced or unknown: its client gives up
            return
        client.epoch = answer.member_epoch
        if answer.assignment is not None:
            client.owned = answer.assignment
        self.clients[client.member_id] = client


@pytest.mark.parametrize("seed", range(6))
def test_the_fast_path_answers_and_writes_what_the_full_path_does(seed: int) -> None:
    twins = Twins()
    driver = Driver(twins, random.Random(seed))
    for _ in range(400):
        driver.step()
    assert twins.steady_answers > 20  # the fast path was taken, not only the full one


def test_a_steady_heartbeat_takes_the_full_path_once_the_subscribed_topics_change() -> None:
    twins = Twins()
    driver = Driver(twins, random.Random(0))
    client = Client("a", None, None)
    driver._take(client, twins.heartbeat(client, 0, owned={}, rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=("t",)))
    driver.steady(client)  # the first after a join recomputes the topics' metadata
    before = twins.steady_answers
    driver.steady(client)
    assert twins.steady_answers == before + 1
    twins.topics({"t": TopicInfo(TOPICS["t"].topic_id, 8)})  # partitions added
    epoch = client.epoch
    driver.steady(client)
    assert twins.steady_answers == before + 1 and client.epoch == epoch + 1
    twins.check()
