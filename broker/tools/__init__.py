"""pafka's command-line tools built on its own client (``broker.client``)."""
