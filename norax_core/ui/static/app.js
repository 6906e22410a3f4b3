// The Norax inspector's page: calls the JSON API under /api/ and draws what it returns.
// Memory text is never markup: every value goes in through textContent or an attribute.
"use strict";

const $ = (sel) => document.querySelector(sel);
const SVG = "http://www.w3.org/2000/svg";
const DIGITS = 3; // the precision scores are shown with (views.SHOWN on the server)
const state = { info: null, namespace: "", offset: 0, limit: 25, total: 0, current: null };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

const fmt = (x) => Number(x).toFixed(DIGITS);
const signed = (x) => (x >= 0 ? "+" : "") + fmt(x);

function showError(message) {
  const box = $("#error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(path, params = {}, options = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params)) {
    for (const item of [].concat(v)) if (item !== "" && item != null) url.searchParams.append(k, item);
  }
  const response = await fetch(url, options);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  showError("");
  return body;
}

// -- header and namespaces -------------------------------------------------------------

async function loadInfo() {
  const info = (state.info = await api("/api/info"));
  $("#store").textContent = info.store || "(in memory)";
  $("#mode").textContent = info.allow_writes ? "writes allowed" : "read-only";
  $("#mode").classList.toggle("warn", info.allow_writes);
  for (const id of ["#edit-btn", "#delete-btn"]) {
    $(id).disabled = !info.allow_writes;
    $(id).title = info.allow_writes ? "" : "read-only: start norax ui --allow-writes";
  }
  const select = $("#namespace");
  const keep = state.namespace;
  select.replaceChildren(...info.namespaces.map((n) => el("option", { value: n.name }, n.name)));
  const names = info.namespaces.map((n) => n.name);
  state.namespace = names.includes(keep) ? keep : names[0] || "default";
  select.value = state.namespace;
  const here = info.namespaces.find((n) => n.name === state.namespace);
  $("#count").textContent = `${here ? here.count : 0} memories · weights ${info.weights}`;
}

// -- browsing --------------------------------------------------------------------------

function filters() {
  const meta = $("#f-meta").value.split(",").map((s) => s.trim()).filter(Boolean);
  return {
    namespace: state.namespace,
    kind: $("#f-kind").value.trim(),
    inferred_kind: $("#f-inferred").value.trim(),
    since: $("#f-since").value.trim(),
    until: $("#f-until").value.trim(),
    where: $("#f-where").value.trim(),
    meta,
    limit: state.limit,
    offset: state.offset,
  };
}

function idLink(id) {
  const a = el("a", { href: "#", "data-id": id, class: "id" }, id);
  a.addEventListener("click", (e) => {
    e.preventDefault();
    openMemory(id).catch((err) => showError(err.message));
  });
  return a;
}

async function loadMemories() {
  const page = await api("/api/memories", filters());
  state.total = page.total;
  const rows = page.memories.map((m) =>
    el(
      "tr",
      { "data-id": m.id },
      el("td", {}, idLink(m.id)),
      el("td", {}, m.created_at.slice(0, 16).replace("T", " ")),
      el("td", {}, m.inferred_kind ? `${m.kind} (${m.inferred_kind})` : m.kind),
      el("td", { class: "text" }, m.text),
      el("td", { class: "muted" }, (m.entities || []).join(", ")),
    ),
  );
  $("#memories-table tbody").replaceChildren(...rows);
  const last = Math.min(state.offset + state.limit, page.total);
  $("#page-info").textContent = page.total
    ? `${state.offset + 1}–${last} of ${page.total}`
    : "no memories match";
  $("#prev").disabled = state.offset === 0;
  $("#next").disabled = last >= page.total;
}

// -- search ----------------------------------------------------------------------------

function bar(label, value, scale, cls) {
  const fill = el("span", { class: `fill ${cls} ${value < 0 ? "neg" : ""}` });
  fill.style.width = `${Math.min(100, (Math.abs(value) / (scale || 1)) * 100)}%`;
  return el(
    "div",
    { class: `bar-row ${Number(value.toFixed(DIGITS)) === 0 ? "zero" : ""}`, "data-key": label },
    el("span", { class: "label" }, label),
    el("span", { class: "bar" }, fill),
    el("span", { class: "value" }, cls === "stage" ? signed(value) : fmt(value)),
  );
}

function showPlan(body) {
  const p = body.plan;
  const periods = p.periods.map((x) => `${x.text} (${x.start.slice(0, 10)} – ${x.end.slice(0, 10)})`);
  const parts = [
    ["intent", p.intent],
    ["weights", body.weights + (p.weights_intent ? ` (per-intent: ${p.weights_intent})` : "")],
    ["now", new Date(body.now * 1000).toISOString()],
    ["periods", periods.join("; ") || "none"],
    ["query entities", p.entities.join(", ") || "none"],
  ];
  $("#plan").replaceChildren(
    el("h3", {}, "Query plan"),
    el("dl", {}, ...parts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
  );
}

function resultCard(r) {
  const expl = r.explanation || {};
  const stageScale = Math.max(...Object.values(expl).map(Math.abs), 1e-9);
  const shares = Object.keys(r.contributions).length ? r.contributions : null;
  const extra = Object.entries(r)
    .filter(([k, v]) => typeof v === "string" && !["id", "text", "kind", "created_at", "namespace"].includes(k))
    .map(([k, v]) => `${k}: ${v}`);
  return el(
    "li",
    { class: "result", "data-id": r.id },
    el(
      "div",
      { class: "row head" },
      el("span", { class: "rank" }, `#${r.rank}`),
      el("span", { class: "score" }, fmt(r.score)),
      idLink(r.id),
      el("span", { class: "muted" }, [r.kind, ...extra, r.created_at.slice(0, 16).replace("T", " ")].join(" · ")),
    ),
    el("p", { class: "text" }, r.text),
    el(
      "div",
      { class: "columns" },
      el("div", { class: "signals" }, el("h4", {}, "signals"),
        ...Object.entries(r.signals).map(([k, v]) => bar(k, v, 1, "signal"))),
      shares
        ? el("div", { class: "shares" }, el("h4", {}, "share of the fused score"),
            ...Object.entries(shares).map(([k, v]) => bar(k, v, expl.fused || 1, "share")))
        : el("div"),
      el("div", { class: "stages" }, el("h4", {}, "stages (sum = score)"),
        ...Object.entries(expl).map(([k, v]) => bar(k, v, stageScale, "stage"))),
    ),
    r.matched_entities.length
      ? el("p", { class: "entities" }, "matched entities: ",
          ...r.matched_entities.map((e) => el("span", { class: "chip" }, e)))
      : "",
    el("ul", { class: "why" }, ...r.why.map((s) => el("li", {}, s))),
  );
}

async function runSearch() {
  const body = await api("/api/search", {
    q: $("#q").value,
    namespace: state.namespace,
    now: $("#now").value.trim(),
    k: $("#k").value,
    where: $("#where").value.trim(),
  });
  showPlan(body);
  $("#results").replaceChildren(
    ...(body.results.length ? body.results.map(resultCard) : [el("li", { class: "muted" }, "no results")]),
  );
}

// -- one memory: fields, graph, edit and delete ----------------------------------------

async function openMemory(id) {
  const m = await api(`/api/memories/${encodeURIComponent(id)}`, { namespace: state.namespace });
  state.current = m;
  $("#detail").hidden = false;
  $("#edit-form").hidden = true;
  $("#d-id").textContent = m.id;
  $("#d-text").textContent = m.text;
  const fields = Object.entries(m).filter(([k]) => !["id", "text"].includes(k));
  $("#d-fields").replaceChildren(
    ...fields.flatMap(([k, v]) => [
      el("dt", {}, k),
      el("dd", {}, typeof v === "object" ? JSON.stringify(v) : String(v)),
    ]),
  );
  const picture = await api(`/api/graph/${encodeURIComponent(id)}`, { namespace: state.namespace });
  drawGraph(picture);
}

function drawGraph(picture) {
  const W = 560, H = 360;
  const at = Object.fromEntries(picture.nodes.map((n) => [n.key, [24 + n.x * (W - 150), 16 + n.y * (H - 32)]]));
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img" });
  const maxW = Math.max(1, ...picture.edges.map((e) => e.weight));
  for (const e of picture.edges) {
    const [x1, y1] = at[e.source], [x2, y2] = at[e.target];
    const line = svg("line", { x1, y1, x2, y2, class: "edge", "stroke-width": 1 + (3 * e.weight) / maxW });
    line.append(svg("title"));
    line.firstChild.textContent = `${e.weight} shared`;
    root.append(line);
  }
  for (const n of picture.nodes) {
    const [x, y] = at[n.key];
    const g = svg("g", { class: `node ${n.type} ${n.seed ? "seed" : ""}`, "data-label": n.label });
    const r = n.type === "memory" ? 9 : 4 + Math.min(8, Math.sqrt(n.count || 1) * 2);
    g.append(svg("circle", { cx: x, cy: y, r }));
    const text = svg("text", { x: x + r + 3, y: y + 4 });
    text.textContent = n.type === "memory" ? "this memory" : `${n.label} (${n.count})`;
    g.append(text);
    root.append(g);
  }
  $("#graph").replaceChildren(picture.nodes.length > 1 ? root : el("p", { class: "muted" }, "no entities"));
  const lists = Object.entries(picture.shared).map(([entity, s]) =>
    el("p", {}, el("span", { class: "chip" }, entity),
      s.total ? ` also in ${s.total}: ` : " only in this memory",
      ...s.ids.flatMap((id) => [idLink(id), " "]), s.total > s.ids.length ? "…" : ""),
  );
  $("#shared").replaceChildren(...lists);
}

async function deleteCurrent() {
  const m = state.current;
  if (!m || !confirm(`Delete ${m.id}? This cannot be undone.`)) return;
  await api(`/api/memories/${encodeURIComponent(m.id)}`, { namespace: m.namespace }, { method: "DELETE" });
  $("#detail").hidden = true;
  await Promise.all([loadInfo(), loadMemories()]);
  if ($("#q").value) await runSearch();
}

function startEdit() {
  const m = state.current;
  $("#edit-form").hidden = false;
  $("#e-text").value = m.text;
  $("#e-kind").value = m.kind;
  $("#e-created").value = m.created_at;
  $("#e-meta").value = JSON.stringify(m.metadata);
}

async function saveEdit() {
  let metadata;
  try {
    metadata = JSON.parse($("#e-meta").value || "{}");
  } catch (err) {
    throw new Error(`metadata is not JSON: ${err.message}`);
  }
  const m = state.current;
  const body = { text: $("#e-text").value, kind: $("#e-kind").value, created_at: $("#e-created").value, metadata };
  await api(`/api/memories/${encodeURIComponent(m.id)}`, { namespace: m.namespace }, {
    method: "PUT",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  await Promise.all([openMemory(m.id), loadMemories()]);
}

// -- wiring ----------------------------------------------------------------------------

function on(sel, event, fn) {
  $(sel).addEventListener(event, (e) => {
    if (event === "submit") e.preventDefault();
    fn(e).catch((err) => showError(err.message));
  });
}

function showPanel(name) {
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.panel === name);
  for (const panel of document.querySelectorAll(".panel")) panel.hidden = panel.id !== name;
}

document.addEventListener("DOMContentLoaded", () => {
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showPanel(tab.dataset.panel));
  on("#namespace", "change", async (e) => {
    state.namespace = e.target.value;
    state.offset = 0;
    $("#detail").hidden = true;
    await Promise.all([loadInfo(), loadMemories()]);
  });
  on("#filters", "submit", async () => { state.offset = 0; await loadMemories(); });
  on("#prev", "click", async () => { state.offset = Math.max(0, state.offset - state.limit); await loadMemories(); });
  on("#next", "click", async () => { state.offset += state.limit; await loadMemories(); });
  on("#search-form", "submit", runSearch);
  on("#delete-btn", "click", deleteCurrent);
  on("#edit-btn", "click", async () => startEdit());
  on("#edit-form", "submit", saveEdit);
  on("#close", "click", async () => { $("#detail").hidden = true; });
  loadInfo().then(loadMemories).catch((err) => showError(err.message));
});
