"""Broker configuration: static properties, Kafka's ConfigDef vocabulary, dynamic broker
configs, topic config descriptions and the AlterConfigs logic."""
