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

function renderSnapshot(snap) {
  const body = $("#objects tbody");
  body.replaceChildren();
  for (const o of snap.objects) {
    const tr = el("tr", { class: "object" + (o.name === selected ? " selected" : ""), "data-object": o.name, onclick: () => select(o.name) },
      el("td", {}, o.name), el("td", {}, o.kind), el("td", { class: "key" }, o.pattern),
      el("td", { "data-field": "instances" }, o.instances + (o.truncated ? "+" : "")),
      el("td", { "data-field": "state" }, o.summary));
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

// Every kind's instance comes with its view (inspect.View): its state,
// details, items and the actions it offers, rendered alike whatever the
// kind.

function instanceState(v) {
  return v.class ? el("span", { class: v.class }, v.state) : v.state;
}

// details lists an instance's detail lines, then its items, each with its
// id (data-item) and state (data-state) and the actions that apply to it.
function details(inst) {
  const v = inst.view;
  const lis = (v.details || []).map((t) => el("li", { class: "mono" }, t));
  for (const it of v.items || []) {
    const li = el("li", { class: "mono item", "data-state": it.state }, el("span", { class: "item-id" }, it.id ? "#" + it.id : "(no id)"), " " + it.text + " ");
    if (it.id) li.setAttribute("data-item", it.id);
    if (!config.readOnly && it.id) {
      const params = inst.params.map((p) => p.value);
      for (const a of it.actions || []) {
        li.append(el("button", {
          class: "danger small", "data-action": a.action,
          onclick: (ev) => { ev.stopPropagation(); ask({ action: a.action, object: inst.object, params, id: it.id }, a.question, false); },
        }, a.label));
      }
    }
    lis.push(li);
  }
  if (v.note) lis.push(el("li", { class: "note" }, v.note));
  return lis.length ? el("ul", { class: "details" }, ...lis) : "";
}

function actionButtons(inst) {
  if (config.readOnly) return [];
  const params = inst.params.map((p) => p.value);
  return (inst.view.actions || []).map((a) => el("button", {
    class: "danger", "data-action": a.action,
    onclick: (ev) => { ev.stopPropagation(); ask({ action: a.action, object: inst.object, params, n: a.n }, a.question, a.n !== undefined); },
  }, a.label));
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
      el("td", { "data-field": "state" }, instanceState(inst.view)),
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
    historyView.show(selected); // history.js
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
