"""Security of the broker's connections: TLS contexts, principals and their mapping."""
