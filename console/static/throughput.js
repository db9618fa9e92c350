// The throughput screen: polls /api/throughput and draws, per broker and per topic, messages in per
// second and bytes in/out per second with uPlot (shipped next to this file).
"use strict";
(function () {
  const colors = ["#2b6cb0", "#c05621", "#2f855a", "#b83280", "#6b46c1", "#975a16", "#2c7a7b", "#9b2c2c"];
  const charts = {};

  function short(value) {
    const units = ["", "k", "M", "G", "T"];
    let i = 0;
    while (Math.abs(value) >= 1000 && i < units.length - 1) {
      value /= 1000;
      i += 1;
    }
    return (Number.isInteger(value) ? value : value.toFixed(1)) + units[i];
  }

  function chart(id, parent, title, names, times, columns) {
    const key = id + "|" + names.join(",");
    const data = [times].concat(columns);
    if (charts[id] && charts[id].key === key) {
      charts[id].plot.setData(data);
      return;
    }
    if (charts[id]) {
      charts[id].plot.destroy();
    }
    let holder = document.getElementById(id);
    if (!holder) {
      holder = document.createElement("div");
      holder.id = id;
      holder.className = "plot";
      parent.appendChild(holder);
    }
    const series = [{}].concat(names.map((name, i) => ({label: name, stroke: colors[i % colors.length], spanGaps: true})));
    const opts = {title: title, width: Math.min(960, window.innerWidth - 60), height: 220, series: series,
                  scales: {x: {time: true}}, axes: [{}, {size: 70, values: (u, values) => values.map(short)}]};
    charts[id] = {key: key, plot: new uPlot(opts, data, holder)};
  }

  function draw(kind, subjects, times) {
    const parent = document.getElementById(kind === "broker" ? "brokers" : "topics");
    const names = Object.keys(subjects).sort();
    const label = (name) => (kind === "broker" ? "broker " + name : name);
    const column = (name, series) => subjects[name][series] || times.map(() => null);
    chart(kind + "-messages", parent, "messages in / s", names.map(label), times,
          names.map((n) => column(n, "messages_in")));
    const byteNames = [];
    const byteColumns = [];
    for (const n of names) {
      byteNames.push(label(n) + " in", label(n) + " out");
      byteColumns.push(column(n, "bytes_in"), column(n, "bytes_out"));
    }
    chart(kind + "-bytes", parent, "bytes / s", byteNames, times, byteColumns);
  }

  async function poll() {
    const status = document.getElementById("status");
    try {
      const response = await fetch("/api/throughput");
      const body = await response.json();
      const errors = Object.entries(body.errors || {});
      if (!body.available) {
        status.textContent = "No metrics endpoint answered" + (errors.length ? ": " + errors.map((e) => e.join(" ")).join("; ") : ".");
      } else {
        status.textContent = (errors.length ? "Some endpoints did not answer: " + errors.map((e) => e[0]).join(", ") + ". " : "")
          + body.times.length + " points.";
      }
      if (body.times.length > 0) {
        draw("broker", body.broker, body.times);
        draw("topic", body.topic, body.times);
        document.body.dataset.points = String(body.times.length);
      }
    } catch (e) {
      status.textContent = "The console did not answer: " + e;
    }
  }

  poll();
  setInterval(poll, 2000);
})();
