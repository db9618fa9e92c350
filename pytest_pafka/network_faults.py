"""Network faults for a test cluster: a TCP proxy on every link the test may want to cut.

``Cluster(3, link_faults=True)`` gives each broker N (on 127.0.0.N) three proxies, all on 127.0.0.N:

* in front of its client listener (PLAINTEXT, advertised at the proxy): every client's link to N;
* in front of a second listener, REPLICATION, the ``inter.broker.listener.name`` (advertised at the
  proxy): every other broker's link to N, followers' fetches and the controller's requests alike.
  The proxy names the broker at the other end of each connection from the client id of its first
  request (``pytest_pafka.tcp_proxy.kafka_client_source``), so the link from broker M to broker N is
  cut on its own, in one direction or both;
* in front of ZooKeeper (N's ``zookeeper.connect``): N's session. Black-holed past
  ``zookeeper.session.timeout.ms``, the session expires while N keeps running.

Faults are the proxy's modes (``pytest_pafka.tcp_proxy.Mode``): BLACKHOLE (bytes vanish, connections stay
open: a partition), DELAY, CLOSE; PASS heals. ``isolate(N)`` cuts N from ZooKeeper and from every
other broker, both ways, but not from its clients: the leader that still believes it leads.
"""

from __future__ import annotations

import contextlib

from pytest_pafka.ports import free_port
from pytest_pafka.tcp_proxy import Direction, Mode, TcpProxy, kafka_client_source

REPLICATION_LISTENER = "REPLICATION"


class ClusterLinks:
    """The proxies on a cluster's links (see the module docstring); closed by ``close``."""

    def __init__(self, zookeeper: tuple[str, int], chroot: str) -> None:
        self.zookeeper = zookeeper
        self.chroot = chroot
        self.client_proxies: dict[int, TcpProxy] = {}
        self.broker_proxies: dict[int, TcpProxy] = {}
        self.zookeeper_proxies: dict[int, TcpProxy] = {}

    def broker_overrides(self, broker_id: int, host: str, client_port: int) -> list[str]:
        """The listeners, advertised listeners and ``zookeeper.connect`` that route broker
        ``broker_id``'s links through its proxies (made on the first call, kept across restarts)."""
        if broker_id not in self.broker_proxies:
            replication_port = free_port(host)
            self.client_proxies[broker_id] = TcpProxy((host, client_port), host=host)
            self.broker_proxies[broker_id] = TcpProxy((host, replication_port), host=host,
                                                      classify=kafka_client_source)
            self.zookeeper_proxies[broker_id] = TcpProxy(self.zookeeper, host=host)
        client, peers, zk = (self.client_proxies[broker_id], self.broker_proxies[broker_id],
                             self.zookeeper_proxies[broker_id])
        return [
            f"listeners=PLAINTEXT://{host}:{client_port},{REPLICATION_LISTENER}://{host}:{peers.target[1]}",
            (f"advertised.listeners=PLAINTEXT://{client.host}:{client.port},"
             f"{REPLICATION_LISTENER}://{peers.host}:{peers.port}"),
            f"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,{REPLICATION_LISTENER}:PLAINTEXT",
            f"inter.broker.listener.name={REPLICATION_LISTENER}",
            f"zookeeper.connect={zk.host}:{zk.port}{self.chroot}",
        ]

    # -- faults ----------------------------------------------------------------------------------
    def cut(self, source: int, target: int, mode: Mode = Mode.BLACKHOLE,
            directions: tuple[Direction, ...] = tuple(Direction), delay_ms: int = 0) -> None:
        """Broker ``source``'s connections to broker ``target`` (its requests UPSTREAM, the answers
        DOWNSTREAM) get ``mode``; PASS heals."""
        for direction in directions:
            self.broker_proxies[target].set(direction, mode, delay_ms, source=f"broker-{source}")

    def cut_zookeeper(self, broker_id: int, mode: Mode = Mode.BLACKHOLE) -> None:
        """Broker ``broker_id``'s ZooKeeper session link, both ways; PASS heals."""
        proxy = self.zookeeper_proxies[broker_id]
        for direction in Direction:
            proxy.set(direction, mode)

    def cut_clients(self, broker_id: int, mode: Mode = Mode.BLACKHOLE) -> None:
        """Every client's link to broker ``broker_id``, both ways; PASS heals."""
        proxy = self.client_proxies[broker_id]
        for direction in Direction:
            proxy.set(direction, mode)

    def isolate(self, broker_id: int, zookeeper: bool = True) -> None:
        """Cut ``broker_id`` from every other broker (both ways) and, by default, from ZooKeeper;
        its clients still reach it."""
        for other in self.broker_proxies:
            if other != broker_id:
                self.cut(broker_id, other)
                self.cut(other, broker_id)
        if zookeeper:
            self.cut_zookeeper(broker_id)

    def heal(self) -> None:
        """Every link passes again."""
        for target in self.broker_proxies:
            for source in self.broker_proxies:
                self.cut(source, target, Mode.PASS)
        for broker_id in self.zookeeper_proxies:
            self.cut_zookeeper(broker_id, Mode.PASS)
            self.cut_clients(broker_id, Mode.PASS)

    def close(self) -> None:
        for proxies in (self.client_proxies, self.broker_proxies, self.zookeeper_proxies):
            for proxy in proxies.values():
                with contextlib.suppress(Exception):
                    proxy.close()
            proxies.clear()
