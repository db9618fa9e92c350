"""pafka's pytest plugin: real pafka brokers, clusters and ZooKeeper for tests (fixtures in :mod:`pytest_pafka.plugin`).

Installed with pafka and loaded by pytest through its ``pytest11`` entry point. The classes behind
the fixtures serve scripts too:

* :class:`BrokerProcess`: one broker process (``python -m broker``) on loopback (start, SIGTERM, SIGKILL,
  restart on the same data dir and port, its log, cleanup by PID);
* :class:`Cluster`: a ZooKeeper and N brokers on 127.0.0.1..N;
* :class:`ZooKeeperProcess`: Debian's ZooKeeper as a plain java process on loopback;
* :class:`PrometheusProcess`: Debian's Prometheus as a plain process on loopback, asked through its HTTP API;
* :func:`free_port`: a free loopback port.
"""

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.cluster import Cluster
from pytest_pafka.ports import free_port
from pytest_pafka.prometheus import PrometheusProcess
from pytest_pafka.zookeeper import ZooKeeperProcess

__all__ = ["BrokerProcess", "Cluster", "PrometheusProcess", "ZooKeeperProcess", "free_port"]
