// The selected object's last hour (api/history/{name}), drawn with uPlot
// (vendor/uplot): a chart of sampled state, one of events per minute and
// one of mean durations, whichever the object has. Loaded before app.js,
// whose refresh calls historyView.show.
"use strict";

const historyView = (() => {
  const every = 15000; // the history changes a minute at a time
  const palette = ["#1f6feb", "#6e40c9", "#0e7490", "#c2410c", "#4b5563", "#8a5a00", "#067647", "#b42318"];
  // The colours of the series that mean the same in every chart: good
  // green, trouble amber, lost red.
  const colours = {
    ready: "#1f6feb", delayed: "#8a5a00", "in flight": "#067647", dead: "#b42318",
    "processed (acked)": "#067647", "failed (nacked)": "#d97706", "dead-lettered": "#b42318",
    "rejected (denied)": "#b42318", allowed: "#067647", "leases lost": "#b42318",
  };
  let object = null;
  let fetchedAt = 0;
  let plots = [];
  let loading = false;

  const q = (sel) => document.querySelector(sel);

  // show draws name's history, fetched again at most every 15 s.
  async function show(name) {
    if (!name) {
      q("#history").hidden = true;
      return;
    }
    if (loading || (name === object && Date.now() - fetchedAt < every)) return;
    loading = true;
    try {
      const r = await fetch("api/history/" + encodeURIComponent(name), { cache: "no-store" });
      const h = await r.json();
      if (!r.ok) throw new Error(h.error || r.statusText);
      object = name;
      fetchedAt = Date.now();
      render(h);
    } catch (e) {
      q("#history-note").textContent = "history: " + e.message;
      q("#history-note").hidden = false;
    } finally {
      loading = false;
    }
  }

  // last returns a series' last value that is not null.
  function last(values) {
    for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null) return values[i];
    return null;
  }

  function render(h) {
    for (const p of plots) p.destroy();
    plots = [];
    const box = q("#charts");
    box.replaceChildren();
    q("#history").hidden = false;
    q("#history-title").textContent = `${h.object}: the last hour, a minute at a time`;
    const notes = [];
    if (!h.counted) notes.push("No events counted: the services' runtimes count them with lockgen's runtime.WithStats(namespace).");
    if (!h.charts.some((c) => c.id === "state")) notes.push("No state sampled: the dashboard samples it once a minute while a page is open or lockgen serve runs.");
    q("#history-note").textContent = notes.join(" ");
    q("#history-note").hidden = notes.length === 0;
    const width = Math.max(320, Math.min(box.clientWidth || 900, 1200));
    for (const c of h.charts) {
      // For tests and tooltips: each series' last value, and the sum of
      // its last two minutes (the current one is partial).
      const lasts = {}, recent = {};
      for (const s of c.series) {
        lasts[s.name] = last(s.values);
        recent[s.name] = s.values.slice(-2).reduce((a, v) => a + (v || 0), 0);
      }
      const div = document.createElement("div");
      div.className = "chart";
      div.dataset.chart = c.id;
      div.dataset.last = JSON.stringify(lasts);
      div.dataset.recent = JSON.stringify(recent);
      box.append(div);
      const opts = {
        title: c.title + (c.unit ? ` (${c.unit})` : ""),
        width, height: 200,
        scales: { x: { time: true } },
        series: [{}].concat(c.series.map((s, i) => ({
          label: s.name, stroke: colours[s.name] || palette[i % palette.length], width: 1.5,
          points: { size: 4 }, spanGaps: false, // uPlot shows the points when they are sparse: a lone sample too
        }))),
        axes: [{}, { size: 60 }],
      };
      plots.push(new uPlot(opts, [h.minutes].concat(c.series.map((s) => s.values)), div));
    }
    box.dataset.object = h.object;
  }

  return { show };
})();
