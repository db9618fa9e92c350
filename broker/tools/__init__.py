"""pafka's command-line tools built on its own client (``client``)."""
