"""``pafka console``: the web console (package ``console``) as its own process.

    --bootstrap-server HOST:PORT [--command-config FILE] [--host 127.0.0.1] [--port 8080] [--allow-writes]
    [--metrics-port PORT] [--metrics-endpoint ID=URL ...]

Read-only unless ``--allow-writes``. The throughput screen scrapes each broker's Prometheus endpoint:
the URL ``--metrics-endpoint`` gives for that broker, else ``http://<broker host>:<port>/metrics`` with
``--metrics-port``, the port the broker reports (pafka's ``prometheus.metrics.port``) or 9404.
"""

from __future__ import annotations

from pathlib import Path

import click
from aiohttp import web

from console.app import ConsoleSettings, create_app
from tools.common import command_config_security


def _endpoints(values: tuple[str, ...]) -> dict[int, str]:
    out = {}
    for value in values:
        node, sep, url = value.partition("=")
        if not sep or not node.strip().isdigit() or not url:
            raise click.BadParameter(f"{value!r}: expected BROKER_ID=URL", param_hint="--metrics-endpoint")
        out[int(node)] = url
    return out


@click.command("console")
@click.option("--bootstrap-server", required=True, metavar="host:port",
              help="A comma-separated list of host:port pairs to use for establishing the connection to the Kafka cluster.")
@click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Client properties (security.protocol, sasl.*, ssl.*) for the connections to the brokers.")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address the console listens on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="The console's HTTP port.")
@click.option("--allow-writes", is_flag=True, help="Offer the changes (create/delete topics, add partitions, edit "
              "configs, reset offsets); each asks for a confirmation in the browser.")
@click.option("--metrics-port", type=click.IntRange(1, 65535),
              help="The port of every broker's Prometheus endpoint, on the broker's advertised host "
                   "[default: each broker's prometheus.metrics.port, as it reports it, else 9404].")
@click.option("--metrics-endpoint", multiple=True, metavar="ID=URL",
              help="One broker's Prometheus endpoint, e.g. 1=http://10.0.0.5:9404/metrics (repeatable).")
@click.option("--scrape-interval", default=2.0, show_default=True, type=click.FloatRange(0.2), help="Seconds between scrapes.")
def console_command(bootstrap_server: str, command_config: Path | None, host: str, port: int, allow_writes: bool, metrics_port: int | None,
                    metrics_endpoint: tuple[str, ...], scrape_interval: float) -> None:
    """A web console: cluster, topics, messages, consumer groups, ACLs and throughput."""
    settings = ConsoleSettings(bootstrap_server, allow_writes=allow_writes, metrics_port=metrics_port,
                               metrics_endpoints=_endpoints(metrics_endpoint), scrape_interval_s=scrape_interval,
                               security=command_config_security(command_config))
    mode = "writes allowed" if allow_writes else "read-only"
    web.run_app(create_app(settings), host=host, port=port, handle_signals=True, access_log=None,
                print=lambda _: click.echo(f"pafka console on http://{host}:{port}/ ({mode}); Ctrl-C stops it"))
