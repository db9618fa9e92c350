"""pafka's command-line tools: the ``pafka`` command (``cli``; ``python -m tools``).

The client tools (topics, console producer and consumer, consumer groups, transactions,
reassignments, configs, ACLs) speak to brokers through pafka's own client (``client``);
``dump-log`` reads segment and index files (``storage``); ``dev-cluster`` runs a local
ZooKeeper (``local_zookeeper``) and brokers as child processes; ``pafka broker`` is the
broker's own command (``broker.broker_command``). Nothing in the broker imports this package.
"""
