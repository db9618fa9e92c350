"""A broker's membership of a ZooKeeper-mode cluster (``zookeeper.connect`` set).

Nothing here is imported by the embedded single broker: its start-up stays free
of ZooKeeper, kazoo and the controller.
"""
