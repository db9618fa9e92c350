"""The broker's network layer: listeners, connections, frames in and responses out.

- ``acceptor``: a listener's accepting loop, within the connection limits.
- ``connection_quotas``: max.connections (broker, listener, IP) and connection creation rates.
- ``socket_server``: each connection's frames decoded, dispatched, answered in request order.
- ``response_writer``: responses onto the socket, record bytes by sendfile where it can.
"""
