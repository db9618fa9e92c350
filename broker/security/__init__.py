"""Security of the broker's connections: TLS contexts, SASL, principals and their mapping, ACLs,
and the handlers' authorization helpers (``auth_helper``, ``authorized_operations``)."""
