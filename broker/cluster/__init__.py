"""A broker's membership of a ZooKeeper-mode cluster (``zookeeper.connect`` set).

A lone broker imports only ``coordinator_cluster`` from here, which needs no
ZooKeeper: its start-up stays free of ZooKeeper, kazoo and the controller.
"""
