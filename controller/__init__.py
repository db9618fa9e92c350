"""The cluster's controller (Kafka's ZooKeeper mode): election, state machines, ZooKeeper access."""
