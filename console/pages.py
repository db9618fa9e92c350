"""HTML of each screen, from the data of :mod:`console.views`. Plain server-rendered pages: every value is
escaped here, and the only script is the throughput plot's (uPlot, shipped in ``console/static``)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from html import escape
from urllib.parse import quote

from console.views import ClusterView, ConfigRow, GroupDetail, GroupRow, MessageRow, SecurityView, TopicDetail, TopicRow

_NAV = (("/", "Cluster"), ("/topics", "Topics"), ("/groups", "Consumer groups"), ("/security", "ACLs and users"),
        ("/throughput", "Throughput"))

_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#1d2330}
nav{background:#1d2330;padding:.6em 1em}nav a{color:#dfe6f3;margin-right:1.4em;text-decoration:none}
main{padding:1em 1.5em}table{border-collapse:collapse;margin:.6em 0 1.2em}
th,td{border:1px solid #ccd3df;padding:.25em .6em;text-align:left;vertical-align:top;font-size:.92em}
th{background:#eef1f6}pre{margin:0;white-space:pre-wrap}.warn{color:#a33}.note{color:#566}
form.inline{display:inline-block;margin:.3em 1em .3em 0}.ro{color:#566;font-style:italic}
"""


def _e(value: object) -> str:
    return escape("" if value is None else str(value))


def size(n: int | None) -> str:
    """Bytes for people: 512 B, 1.5 KiB... ("?" when unknown)."""
    if n is None:
        return "?"
    if n < 1024:
        return f"{n} B"
    scaled = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        scaled /= 1024
        if scaled < 1024 or unit == "TiB":
            break
    return f"{scaled:.1f} {unit}"


def _time(ms: int) -> str:
    if ms < 0:
        return str(ms)
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], table_id: str = "") -> str:
    """A table of already-escaped cells."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    ident = f' id="{table_id}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def layout(title: str, body: str, *, head: str = "") -> str:
    nav = "".join(f'<a href="{href}">{label}</a>' for href, label in _NAV)
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{_e(title)} · pafka console</title>"
            f"<style>{_STYLE}</style>{head}</head><body><nav>{nav}</nav><main><h1>{_e(title)}</h1>{body}</main></body></html>")


def _confirmed_form(action: str, question: str, fields: str, button: str, form_id: str) -> str:
    """A form whose submission the browser confirms first (every write does)."""
    return (f'<form class="inline" id="{form_id}" method="post" action="{_e(action)}" '
            f'onsubmit="return confirm({_e(repr(question))})">{fields}<button type="submit">{_e(button)}</button></form>')


def _configs(rows: list[ConfigRow]) -> str:
    return table(("Name", "Value", "Source", "Read-only"),
                 ([_e(c.name), "(sensitive)" if c.is_sensitive else _e(c.value), _e(c.source), "yes" if c.read_only else ""]
                  for c in rows), "configs")


def cluster_page(view: ClusterView) -> str:
    brokers = table(
        ("Broker", "Host", "Port", "Rack", "Controller", "APIs", "Highest versions", "Replicas", "Leaders", "Log dirs"),
        ([_e(b.node_id), _e(b.host), _e(b.port), _e(b.rack or ""), "yes" if b.is_controller else "", _e(b.api_count),
          _e(", ".join(f"{k} v{v}" for k, v in b.api_versions.items())), _e(b.partitions), _e(b.leaders),
          _e(size(b.log_dir_bytes))] for b in view.brokers), "brokers")
    features = table(("Feature", "Finalized level"), ([_e(k), _e(v)] for k, v in sorted(view.features.items())), "features")
    body = (f'<p>Cluster id <code id="cluster-id">{_e(view.cluster_id)}</code>, controller '
            f'<b id="controller">{_e(view.controller_id)}</b>.</p><h2>Brokers</h2>{brokers}<h2>Features</h2>{features}'
            f"<h2>Configs of broker {_e(view.config_broker)} (not defaults)</h2>{_configs(view.broker_configs)}")
    return layout("Cluster", body)


def topics_page(rows: list[TopicRow], *, writes: bool) -> str:
    listing = table(("Topic", "Partitions", "Replication", "Under-replicated", "Messages", "Size"),
                    ([f'<a href="/topics/{quote(t.name, safe="")}">{_e(t.name)}</a>' + (" (internal)" if t.internal else ""),
                      _e(t.partitions), _e(t.replication_factor),
                      f'<span class="warn">{t.under_replicated}</span>' if t.under_replicated else "0",
                      _e(t.messages), _e(size(t.size_bytes))] for t in rows), "topics")
    if writes:
        fields = ('<input name="name" placeholder="name" required> <input name="partitions" type="number" value="1" min="1">'
                  ' partitions <input name="replication_factor" type="number" value="-1"> replication (-1: default) ')
        create = "<h2>Create a topic</h2>" + _confirmed_form("/topics", "Create this topic?", fields, "Create", "create-topic")
    else:
        create = _read_only_note()
    return layout("Topics", listing + create)


def _read_only_note() -> str:
    return '<p class="ro">Read-only: start the console with --allow-writes to change the cluster.</p>'


def topic_page(t: TopicDetail, *, writes: bool) -> str:
    name = quote(t.name, safe="")
    parts = table(("Partition", "Leader", "Replicas", "ISR", "Offline", "Log start", "High watermark", "Size"),
                  ([_e(p.partition), _e(p.leader), _e(p.replicas), f'<span class="warn">{_e(p.isr)}</span>' if p.under_replicated
                    else _e(p.isr), _e(p.offline_replicas or ""), _e(p.log_start_offset), _e(p.high_watermark),
                    _e(size(p.size_bytes))] for p in t.partitions), "partitions")
    body = (f'<p>Topic id <code>{_e(t.topic_id)}</code>. <a id="browse" href="/topics/{name}/messages">Browse messages</a></p>'
            f"<h2>Partitions</h2>{parts}")
    if writes:
        body += "<h2>Change</h2>" + _confirmed_form(
            f"/topics/{name}/partitions", "Add partitions to this topic?",
            f'<input name="total" type="number" min="{len(t.partitions) + 1}" value="{len(t.partitions) + 1}"> partitions in all ',
            "Add partitions", "add-partitions") + _confirmed_form(
            f"/topics/{name}/config", "Change this topic config?",
            '<input name="key" placeholder="config name" required> <input name="value" placeholder="value (empty: default)"> ',
            "Set config", "set-config") + _confirmed_form(
            f"/topics/{name}/delete", f"Delete topic {t.name} and all its records?", "", "Delete topic", "delete-topic")
    else:
        body += _read_only_note()
    return layout(f"Topic {t.name}", body + "<h2>Configs</h2>" + _configs(t.configs))


def messages_page(topic: str, partitions: int, rows: list[MessageRow], *, partition: int, offset: str,
                  timestamp: str, limit: int) -> str:
    options = "".join(f'<option value="{p}"{" selected" if p == partition else ""}>{p}</option>' for p in range(partitions))
    form = (f'<form method="get" id="seek">Partition <select name="partition">{options}</select> '
            f'from offset <input name="offset" value="{_e(offset)}" size="8"> or timestamp (ms or ISO 8601) '
            f'<input name="timestamp" value="{_e(timestamp)}" size="22"> limit <input name="limit" value="{limit}" size="4"> '
            '<button type="submit">Show</button></form><p class="note">No offset nor timestamp: the newest records.</p>')

    def value_cell(m: MessageRow) -> str:
        cls = ' class="json"' if m.value_is_json else ""
        return f"<pre{cls}>{_e(m.value)}</pre>" if m.value is not None else '<span class="note">null</span>'

    listing = table(("Partition", "Offset", "Timestamp", "Key", "Value", "Headers"),
                    ([_e(m.partition), _e(m.offset), _e(_time(m.timestamp)), _e(m.key) if m.key is not None else "null",
                      value_cell(m), "<br>".join(f"{_e(k)}: {_e(v)}" for k, v in m.headers)] for m in rows), "messages")
    back = f'<p><a href="/topics/{quote(topic, safe="")}">Back to {_e(topic)}</a></p>'
    return layout(f"Messages of {topic}", back + form + listing)


def groups_page(rows: list[GroupRow]) -> str:
    listing = table(("Group", "Type", "Protocol type", "State"),
                    ([f'<a href="/groups/{quote(g.group_id, safe="")}">{_e(g.group_id)}</a>', _e(g.group_type or "?"),
                      _e(g.protocol_type), _e(g.state)] for g in rows), "groups")
    return layout("Consumer groups", listing)


def group_page(g: GroupDetail, *, writes: bool) -> str:
    members = table(("Member", "Instance", "Client", "Host", "Assignment"),
                    ([_e(m.member_id), _e(m.instance_id or ""), _e(m.client_id), _e(m.host), _e(", ".join(str(tp) for tp in m.assignment))]
                     for m in g.members), "members")
    lag = table(("Topic", "Partition", "Committed", "Log end", "Lag", "Member"),
                ([_e(r.topic), _e(r.partition), _e(r.committed_offset if r.committed_offset is not None else "-"),
                  _e(r.log_end_offset), f'<span class="lag">{_e(r.lag if r.lag is not None else "-")}</span>',
                  _e(r.member_id or "")] for r in g.offsets), "lag")
    body = (f'<p>Type <b>{_e(g.group_type or "classic")}</b>, state <b id="state">{_e(g.state)}</b>, '
            f'protocol {_e(g.protocol)}, total lag <b id="total-lag">{g.total_lag}</b>.</p>'
            f"<h2>Members</h2>{members}<h2>Offsets and lag</h2>{lag}")
    if writes:
        topics = sorted({r.topic for r in g.offsets})
        options = "".join(f"<option>{_e(t)}</option>" for t in topics)
        fields = (f'<select name="topic">{options}</select> to <select name="strategy"><option>earliest</option>'
                  '<option>latest</option><option>offset</option><option>timestamp</option></select> '
                  '<input name="value" placeholder="offset or timestamp ms"> ')
        body += ("<h2>Reset offsets</h2><p class=note>The group must have no members, as kafka-consumer-groups.sh requires.</p>"
                 + _confirmed_form(f"/groups/{quote(g.group_id, safe='')}/reset", "Reset this group's offsets?", fields,
                                   "Reset offsets", "reset-offsets"))
    return layout(f"Group {g.group_id}", body)


def security_page(view: SecurityView) -> str:
    acls = (f'<p class="note">{_e(view.acls_error)}</p>' if view.acls_error else
            table(("Resource type", "Name", "Pattern", "Principal", "Host", "Operation", "Permission"),
                  ([_e(a.resource_type), _e(a.resource_name), _e(a.pattern_type), _e(a.principal), _e(a.host),
                    _e(a.operation), _e(a.permission_type)] for a in view.acls), "acls"))
    users = (f'<p class="note">{_e(view.scram_error)}</p>' if view.scram_error else
             table(("User", "Mechanisms"), ([_e(u), _e(", ".join(m))] for u, m in view.scram_users.items()), "scram-users"))
    return layout("ACLs and users", f"<h2>ACLs</h2>{acls}<h2>SCRAM users</h2>{users}")


def throughput_page(endpoints: dict[int, str]) -> str:
    where = ", ".join(f"{node}: {url}" for node, url in sorted(endpoints.items())) or "none yet"
    head = '<link rel="stylesheet" href="/static/uPlot.min.css"><script src="/static/uPlot.iife.min.js"></script>'
    body = (f'<p class="note" id="endpoints">Scraping {_e(where)}.</p><p id="status" class="note">Waiting for two scrapes…</p>'
            '<h2>Per broker</h2><div id="brokers"></div><h2>Per topic</h2><div id="topics"></div>'
            '<script src="/static/throughput.js"></script>')
    return layout("Throughput", body, head=head)


def error_page(title: str, message: str) -> str:
    return layout(title, f'<p class="warn" id="error">{_e(message)}</p>')
