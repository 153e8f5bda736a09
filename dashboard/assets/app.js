// The lockgen dashboard: polls api/snapshot (and the selected object's
// instances) and offers the operator's actions, each confirmed first.
"use strict";

let config = { readOnly: true, refreshMs: 2000 };
let selected = null; // the object whose instances are shown
let pending = null;  // the action waiting for confirmation

const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "onclick") e.addEventListener("click", v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c == null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function getJSON(url) {
  const r = await fetch(url, { cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function ms(v) {
  if (v < 0) return "no expiry";
  if (v < 1000) return v + "ms";
  if (v < 60000) return (v / 1000).toFixed(1) + "s";
  if (v < 3600000) return Math.floor(v / 60000) + "m" + Math.floor((v % 60000) / 1000) + "s";
  return (v / 3600000).toFixed(1) + "h";
}

function summary(o) {
  const parts = [];
  switch (o.kind) {
    case "semaphore": parts.push(`${o.held || 0}/${o.capacity || 0} permits in use`); break;
    case "queue": parts.push(`${o.ready || 0} ready, ${o.delayed || 0} delayed, ${o.inFlight || 0} in flight, ${o.dead || 0} dead`); break;
    case "latch": parts.push(`${o.open || 0} open`); break;
    case "limiter": parts.push(`${o.exhausted || 0} exhausted`); break;
    default: parts.push(`${o.held || 0} held`);
  }
  if (o.waiters) parts.push(`${o.waiters} waiting`);
  return parts.join(", ");
}

function renderSnapshot(snap) {
  const body = $("#objects tbody");
  body.replaceChildren();
  for (const o of snap.objects) {
    const tr = el("tr", { class: "object" + (o.name === selected ? " selected" : ""), "data-object": o.name, onclick: () => select(o.name) },
      el("td", {}, o.name), el("td", {}, o.kind), el("td", { class: "key" }, o.pattern),
      el("td", { "data-field": "instances" }, o.instances + (o.truncated ? "+" : "")),
      el("td", { "data-field": "state" }, summary(o)));
    body.append(tr);
  }
  $("#truncated").hidden = !snap.truncated;
  const cycles = (snap.waitFor && snap.waitFor.cycles) || [];
  $("#deadlocks").hidden = cycles.length === 0;
  $("#cycles").replaceChildren(...cycles.map((c, i) => el("div", { class: "cycle" },
    el("strong", {}, `Deadlock ${i + 1}: `),
    el("ul", {}, ...c.map((e) => el("li", { class: "mono" },
      `${e.waiter} (client ${e.waiterClient}) waits for ${e.key}, held by ${e.holder} (client ${e.holderClient})`))))));
}

function holderText(h) {
  let s = (h.side ? h.side + " " : "") + h.owner;
  if (h.holds > 1) s += " ×" + h.holds;
  if (h.permits) s += `, ${h.permits} permits`;
  if (h.token) s += ", token " + h.token;
  return s + ", " + ms(h.ttlMs) + " left";
}

function instanceState(inst) {
  if (inst.lock) {
    const l = inst.lock;
    if (!l.held) return el("span", { class: "free" }, "free" + (l.lastToken ? ` (last token ${l.lastToken})` : ""));
    return el("span", { class: "held" }, "held by " + l.holders.map(holderText).join("; "));
  }
  if (inst.semaphore) { const s = inst.semaphore; return `${s.held}/${s.capacity} permits in use, ${s.free} free`; }
  if (inst.latch) { const l = inst.latch; return l.open ? "open" : !l.set ? `not set (count ${l.count})` : `count ${l.count}, expires in ${ms(l.ttlMs)}`; }
  if (inst.limiter) {
    return inst.limiter.clients.map((r) => (r.client ? r.client + ": " : "") + `${r.remaining}/${inst.limiter.capacity} left, full in ${ms(r.resetAfterMs)}` + (r.error ? ` (${r.error})` : "")).join("; ");
  }
  if (inst.queue) {
    const q = inst.queue;
    let s = `${q.ready} ready, ${q.delayed} delayed, ${q.inFlight} in flight, ${q.dead} dead`;
    if (q.nextDueMs != null) s += ", next due in " + ms(q.nextDueMs);
    return s;
  }
  return "";
}

function details(inst) {
  const items = [];
  const waiters = (inst.lock && inst.lock.waiters) || (inst.semaphore && inst.semaphore.waiters) || [];
  for (const w of waiters) items.push(`waiting: ${w.side ? w.side + " " : ""}${w.owner}${w.permits ? ` for ${w.permits} permits` : ""}`);
  if (inst.semaphore) for (const h of inst.semaphore.holders || []) items.push("holder: " + holderText(h));
  const lis = items.map((t) => el("li", { class: "mono" }, t));
  if (inst.queue) lis.push(...queueItems(inst));
  return lis.length ? el("ul", { class: "details" }, ...lis) : "";
}

// queueItems lists a queue instance's items, each with its id (data-item)
// and state (data-state), and the actions that apply to it.
function queueItems(inst) {
  const q = inst.queue;
  const rows = [];
  const item = (state, id, text, actions) => {
    const li = el("li", { class: "mono item", "data-state": state }, el("span", { class: "item-id" }, id ? "#" + id : "(no id)"), " " + text + " ");
    if (id) li.setAttribute("data-item", id);
    if (!config.readOnly && id) {
      const params = inst.params.map((p) => p.value);
      for (const [action, label, question] of actions) {
        li.append(el("button", {
          class: "danger small", "data-action": action,
          onclick: (ev) => { ev.stopPropagation(); ask({ action, object: inst.object, params, id }, `${question} item ${id} of ${inst.key}?`, false); },
        }, label));
      }
    }
    rows.push(li);
  };
  const remove = ["remove-item", "Remove", "Remove"];
  const deliveries = (n) => (n ? `, ${n} deliveries` : "");
  for (const it of q.readyItems || []) item("ready", it.id, `ready${deliveries(it.deliveries)}: ${it.body}`, [remove]);
  for (const it of q.delayedItems || []) item("delayed", it.id, `delayed, due in ${ms(it.dueMs)}${deliveries(it.deliveries)}: ${it.body}`, [["run-item-now", "Run now", "Make ready now"], remove]);
  for (const d of q.deliveries || []) item("in-flight", d.id, `in flight: attempt ${d.deliveries}, redelivered in ${ms(d.deadlineMs)}: ${d.body || ""}`, []);
  for (const d of q.deadLetters || []) item("dead", d.id, `dead after ${d.deliveries} deliveries: ${d.reason} — ${d.body}`, [["redrive-item", "Redrive", "Redrive"], remove]);
  const shown = rows.length, total = q.ready + q.delayed + q.inFlight + q.dead;
  if (total > shown) rows.push(el("li", { class: "note" }, `first items only: ${shown} of ${total} shown`));
  return rows;
}

function actionButtons(inst) {
  if (config.readOnly) return [];
  const params = inst.params.map((p) => p.value);
  const b = (action, label, text, n) => el("button", {
    class: "danger", "data-action": action,
    onclick: (ev) => { ev.stopPropagation(); ask({ action, object: inst.object, params, n }, text, n !== undefined); },
  }, label);
  if (inst.lock) return inst.lock.held ? [b("force-unlock", "Force unlock", `Force-unlock ${inst.key}?`)] : [];
  if (inst.queue) {
    const out = [];
    if (inst.queue.dead > 0) out.push(b("redrive", "Redrive", `Put the ${inst.queue.dead} dead letters of ${inst.key} back on the queue?`));
    out.push(b("purge", "Purge", `Delete every item of ${inst.key}?`));
    return out;
  }
  if (inst.semaphore) return [b("set-permits", "Set permits", `Set the permits of ${inst.key} to`, inst.semaphore.capacity)];
  return [];
}

function renderInstances(listing) {
  $("#detail").hidden = false;
  $("#detail-title").textContent = `${listing.object.name} (${listing.object.kind}, key ${listing.object.pattern})` + (listing.truncated ? " — first instances only" : "");
  const body = $("#instances tbody");
  body.replaceChildren();
  for (const inst of listing.instances) {
    body.append(el("tr", { "data-key": inst.key },
      el("td", {}, inst.params.map((p) => `${p.name}=${p.value}`).join(" ") || "–"),
      el("td", { class: "key" }, inst.key),
      el("td", { "data-field": "state" }, instanceState(inst)),
      el("td", {}, details(inst)),
      el("td", {}, ...actionButtons(inst))));
  }
}

function ask(action, text, withNumber) {
  pending = action;
  $("#confirm-text").textContent = text;
  const n = $("#confirm-n");
  n.hidden = !withNumber;
  if (withNumber) n.value = action.n;
  $("#confirm").hidden = false;
}

async function confirmed() {
  const a = pending;
  pending = null;
  $("#confirm").hidden = true;
  if (!a) return;
  if (!$("#confirm-n").hidden) a.n = parseInt($("#confirm-n").value, 10) || 0;
  try {
    const r = await fetch("api/action", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(a) });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    show(`${a.object} ${(a.params || []).join(" ")}: ${body.result}`, false);
  } catch (e) {
    show(e.message, true);
  }
  refresh();
}

function show(text, error) {
  const m = $("#message");
  m.textContent = text;
  m.className = "message" + (error ? " error" : "");
  m.hidden = false;
  clearTimeout(show.timer);
  show.timer = setTimeout(() => { m.hidden = true; }, 4000);
}

function select(name) {
  selected = name;
  refresh();
}

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    renderSnapshot(await getJSON("api/snapshot"));
    if (selected) renderInstances(await getJSON("api/objects/" + encodeURIComponent(selected)));
    $("#status").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.loaded = "true";
  } catch (e) {
    $("#status").textContent = "error: " + e.message;
  } finally {
    refreshing = false;
  }
}

async function start() {
  config = await getJSON("api/config");
  $("#namespace").textContent = config.namespace;
  $("#mode").textContent = config.readOnly ? "read-only" : "actions enabled";
  if (config.readOnly) $("#mode").classList.add("ro");
  $("#confirm-yes").addEventListener("click", confirmed);
  $("#confirm-no").addEventListener("click", () => { pending = null; $("#confirm").hidden = true; });
  const hash = decodeURIComponent(location.hash.slice(1));
  if (hash) selected = hash;
  await refresh();
  setInterval(refresh, config.refreshMs);
}

start();
