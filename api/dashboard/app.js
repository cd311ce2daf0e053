// strata dashboard: the cluster as a picture and a chat box that streams.
// Plain JavaScript, no build step; it talks only to the node that served it.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
let apiKey = localStorage.getItem("strataKey") || "";
let models = {};          // id -> model info from /v1/models
let history = [];         // the conversation sent with each request
let aborter = null;       // aborts the answer being streamed

// api fetches a path of this node with the API key; a 401 asks for the key.
async function api(path, opts = {}) {
  opts.headers = Object.assign({}, opts.headers || {});
  if (apiKey) opts.headers["Authorization"] = "Bearer " + apiKey;
  const resp = await fetch(path, opts);
  if (resp.status === 401) {
    $("keyform").hidden = false;
    throw new Error("this node needs an API key");
  }
  return resp;
}

$("keyform").addEventListener("submit", (ev) => {
  ev.preventDefault();
  apiKey = $("apikey").value.trim();
  localStorage.setItem("strataKey", apiKey);
  $("keyform").hidden = true;
  loadModels();
  poll();
});

function fmtBytes(n) {
  if (!n) return "0 B";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return (n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + u[i];
}
const shortID = (id) => (id && id.length > 14 ? id.slice(0, 6) + "…" + id.slice(-6) : id || "?");

async function loadModels() {
  try {
    const resp = await api("/v1/models");
    if (!resp.ok) return;
    const list = (await resp.json()).data || [];
    models = {};
    const sel = $("model");
    const keep = sel.value;
    sel.textContent = "";
    for (const m of list) {
      models[m.id] = m;
      const o = document.createElement("option");
      o.value = o.textContent = m.id;
      sel.appendChild(o);
    }
    if (keep && models[keep]) sel.value = keep;
  } catch (e) { /* shown by poll */ }
}

async function poll() {
  try {
    const [c, s] = await Promise.all([api("/api/cluster"), api("/api/stats")]);
    const cluster = await c.json();
    const stats = await s.json();
    $("cluster-error").hidden = true;
    showStats(stats);
    record(stats);
    drawHistory();
    drawCluster(cluster, stats);
    showSessions(cluster.sessions || []);
    pollHealth();
  } catch (e) {
    $("cluster-error").textContent = "cannot read the cluster: " + e.message;
    $("cluster-error").hidden = false;
  }
}

// --- the last minutes: tokens/s and requests waiting, one sample a poll ---

const samples = []; // {t, tps, waiting}
const historySeconds = 300;

function record(s) {
  const now = Date.now() / 1000;
  samples.push({ t: now, tps: s.tokens_per_second, waiting: s.waiting });
  while (samples.length && samples[0].t < now - historySeconds) samples.shift();
}

function drawHistory() {
  const svg = $("history");
  svg.textContent = "";
  const W = 600, H = 120, left = 36, right = 36, top = 8, bottom = 18;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const now = Date.now() / 1000;
  const maxTps = Math.max(1, ...samples.map((p) => p.tps));
  const maxQ = Math.max(1, ...samples.map((p) => p.waiting));
  const x = (t) => left + (W - left - right) * (1 - (now - t) / historySeconds);
  const y = (v, max) => top + (H - top - bottom) * (1 - v / max);
  el("line", { class: "grid", x1: left, y1: H - bottom, x2: W - right, y2: H - bottom }, svg);
  el("text", { x: 2, y: top + 8 }, svg, maxTps.toFixed(0) + " tok/s");
  el("text", { x: W - right + 2, y: top + 8 }, svg, maxQ + " waiting");
  el("text", { x: left, y: H - 4 }, svg, `${historySeconds / 60} min ago`);
  el("text", { x: W - right, y: H - 4, "text-anchor": "end" }, svg, "now");
  const line = (key, max) => samples.map((p) => `${x(p.t).toFixed(1)},${y(p[key], max).toFixed(1)}`).join(" ");
  if (samples.length > 1) {
    el("polyline", { class: "tps", points: line("tps", maxTps) }, svg);
    el("polyline", { class: "queue", points: line("waiting", maxQ) }, svg);
  }
}

// --- health: strata doctor's report (GET /api/doctor), every few polls ---

let healthAt = 0;

async function pollHealth() {
  if (Date.now() - healthAt < 5000) return;
  healthAt = Date.now();
  let rep;
  try {
    const resp = await api("/api/doctor");
    if (!resp.ok) { $("health-summary").textContent = "(this node has no doctor)"; return; }
    rep = await resp.json();
  } catch (e) { return; }
  showHealth(rep);
}

function showHealth(rep) {
  const checks = rep.checks || [];
  const bad = checks.filter((c) => c.status !== "ok" && c.check !== "link");
  const fails = checks.filter((c) => c.status === "fail").length;
  const warns = checks.filter((c) => c.status === "warn").length;
  $("health-summary").textContent = fails + warns === 0 ? "all " + checks.length + " checks pass" : `${fails} failed, ${warns} to look at (strata doctor)`;
  const ul = $("findings");
  ul.textContent = "";
  for (const c of bad) {
    const li = document.createElement("li");
    li.className = c.status;
    li.textContent = `${c.check}${c.node ? " [" + shortID(c.node) + "]" : ""}: ${c.message}`;
    if (c.fix) {
      const f = document.createElement("span");
      f.className = "fix";
      f.textContent = "fix: " + c.fix;
      li.appendChild(f);
    }
    ul.appendChild(li);
  }
  // Links: doctor's link checks, "A ↔ B: transport, round trip …".
  const body = $("links").tBodies[0];
  body.textContent = "";
  for (const c of checks.filter((c) => c.check === "link")) {
    const tr = body.insertRow();
    tr.className = c.status;
    const [pair, rest] = c.message.split(/: (.*)/s);
    const transport = (rest.match(/^(shm|rdma|tcp|TCP)/) || ["", "none"])[1].toLowerCase();
    const rtt = (rest.match(/round trip ([^ ,(]+)/) || ["", "–"])[1];
    for (const v of [pair, transport, rtt, c.status === "ok" ? "" : rest + (c.fix ? " — " + c.fix : "")]) tr.insertCell().textContent = v;
  }
}

function showStats(s) {
  $("tps").textContent = s.tokens_per_second.toFixed(1);
  $("generated").textContent = s.generated_tokens;
  $("active").textContent = s.active;
  $("waiting").textContent = s.waiting;
  $("ttft").textContent = s.last_ttft_ms ? s.last_ttft_ms.toFixed(0) + " ms" : "–";
}

function el(tag, attrs, parent, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

// drawCluster draws each node as a card (memory bar, one layer bar per
// shard it holds) and each active session's ring of stages as arrows.
function drawCluster(c, stats) {
  const svg = $("cluster");
  svg.textContent = "";
  $("self").textContent = c.self ? "answering: " + shortID(c.self) : "";
  const defs = el("defs", {}, svg);
  const mk = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" }, defs);
  el("path", { d: "M0,0 L10,5 L0,10 z" }, mk);

  const members = c.members || [];
  const W = 240, gap = 40, cols = Math.max(1, Math.min(members.length, 4));
  const rows = Math.ceil(members.length / cols) || 1;
  // A node with a device (strata node --gpu) has a line for it under its name.
  const deviceLine = (m) => (m.device ? 16 : 0);
  const heights = members.map((m) => 78 + deviceLine(m) + 26 * Math.max(1, (m.shards || []).length) + 22 * (m.fetching || []).length);
  const H = Math.max(110, ...heights);
  const top = 60, rowGap = 110;
  const total = top + rows * H + (rows - 1) * rowGap + 60;
  svg.setAttribute("viewBox", `0 0 ${cols * (W + gap) + gap} ${total}`);
  svg.style.height = Math.min(720, total) + "px";
  const pos = {};
  members.forEach((m, i) => {
    const x = gap + (i % cols) * (W + gap), y = top + Math.floor(i / cols) * (H + rowGap);
    pos[m.peer_id] = { x, y, w: W, h: H };
    const g = el("g", { class: "node" + (m.peer_id === c.self ? " self" : ""), "data-peer": m.peer_id, transform: `translate(${x},${y})` }, svg);
    el("rect", { class: "box", width: W, height: H, rx: 8 }, g);
    el("text", { x: 10, y: 18 }, g, shortID(m.peer_id) + (m.peer_id === c.self ? " (this node)" : ""));
    const dy = deviceLine(m);
    if (m.device) el("text", { x: 10, y: 34, class: "small device" }, g, "device: " + m.device);
    let used = 0;
    for (const sh of m.shards || []) {
      const info = models[sh.model];
      if (info && info.layers) used += info.size_bytes * (sh.layers[1] - sh.layers[0]) / info.layers;
    }
    el("text", { x: 10, y: 36 + dy, class: "small" }, g, `weights ${fmtBytes(used)} of ${fmtBytes(m.memory_bytes)} memory`);
    el("rect", { class: "bar-bg", x: 10, y: 42 + dy, width: W - 20, height: 8, rx: 3 }, g);
    const frac = m.memory_bytes ? Math.min(1, used / m.memory_bytes) : 0;
    el("rect", { class: "bar-mem", x: 10, y: 42 + dy, width: Math.max(frac > 0 ? 2 : 0, (W - 20) * frac), height: 8, rx: 3 }, g);
    const shards = m.shards || [];
    if (shards.length === 0 && !(m.fetching || []).length) el("text", { x: 10, y: 70 + dy, class: "small" }, g, "no layers loaded");
    (m.fetching || []).forEach((f, j) => {
      const y0 = H - 22 - j * 22, frac = f.total_bytes ? f.done_bytes / f.total_bytes : 0;
      el("text", { x: 10, y: y0, class: "small fetch" }, g, `fetching ${f.model}: ${fmtBytes(f.done_bytes)} of ${fmtBytes(f.total_bytes)}`);
      el("rect", { class: "bar-bg", x: 10, y: y0 + 4, width: W - 20, height: 6, rx: 2 }, g);
      el("rect", { class: "bar-fetch", x: 10, y: y0 + 4, width: Math.max(2, (W - 20) * frac), height: 6, rx: 2 }, g);
    });
    shards.forEach((sh, j) => {
      const y0 = 62 + dy + j * 26;
      const info = models[sh.model];
      const total = (info && info.layers) || sh.layers[1] || 1;
      el("text", { x: 10, y: y0 + 8, class: "small" }, g, `${sh.model}: layers ${sh.layers[0]}–${sh.layers[1] - 1} of ${total}`);
      el("rect", { class: "bar-bg", x: 10, y: y0 + 12, width: W - 20, height: 7, rx: 2 }, g);
      el("rect", { class: "bar-layers", x: 10 + (W - 20) * sh.layers[0] / total, y: y0 + 12, width: Math.max(2, (W - 20) * (sh.layers[1] - sh.layers[0]) / total), height: 7, rx: 2 }, g);
    });
  });

  // Links: each session's stages in order, and back from the last to the first.
  const hop = {};
  for (const p of (stats && stats.peers) || []) hop[p.peer_id] = p;
  const seen = {};
  for (const s of c.sessions || []) {
    const st = s.stages || [];
    for (let i = 0; i < st.length && st.length > 1; i++) {
      const a = st[i].peer_id, b = st[(i + 1) % st.length].peer_id;
      if (a === b || seen[a + ">" + b] || !pos[a] || !pos[b]) continue;
      seen[a + ">" + b] = true;
      const pa = pos[a], pb = pos[b];
      const ca = pa.x + pa.w / 2, cb = pb.x + pb.w / 2;
      let x1, y1, x2, y2, sign;
      if (ca !== cb) {
        // Forward (left to right) arcs over the cards, backward ones under them.
        sign = cb > ca ? -1 : 1;
        y1 = sign < 0 ? pa.y : pa.y + pa.h;
        y2 = sign < 0 ? pb.y : pb.y + pb.h;
        x1 = ca + 24 * -sign;
        x2 = cb - 24 * -sign;
      } else { // one card above the other
        sign = 1;
        x1 = x2 = ca + (pb.y > pa.y ? 30 : -30);
        y1 = pb.y > pa.y ? pa.y + pa.h : pa.y;
        y2 = pb.y > pa.y ? pb.y : pb.y + pb.h;
      }
      const bend = Math.min(90, 30 + Math.abs(x2 - x1) * 0.15);
      const mx = (x1 + x2) / 2 + (ca === cb ? 30 : 0), my = (y1 + y2) / 2 + sign * bend;
      el("path", { class: "link", d: `M${x1},${y1} Q${mx},${my} ${x2},${y2}` }, svg);
      const lx = mx, ly = (y1 + y2) / 2 + sign * bend / 2 + (sign < 0 ? -4 : 12);
      const h = hop[b];
      if (h) el("text", { x: lx, y: ly, class: "small", "text-anchor": "middle" }, svg, `${h.hop_ms_mean.toFixed(1)} ms · ${fmtBytes(h.bytes_sent)}`);
    }
  }
}

function showSessions(sessions) {
  const body = $("sessions").tBodies[0];
  body.textContent = "";
  if (sessions.length === 0) {
    const td = body.insertRow().insertCell();
    td.colSpan = 5;
    td.className = "muted";
    td.textContent = "no session running";
    return;
  }
  for (const s of sessions) {
    const tr = body.insertRow();
    for (const v of [shortID(s.id), s.model, s.prompt_tokens, s.generated_tokens,
      (s.stages || []).map((st) => `${shortID(st.peer_id)} [${st.layers[0]},${st.layers[1]})`).join(" → ")]) {
      tr.insertCell().textContent = v;
    }
  }
}

// --- chat ---

function addMessage(role, text) {
  const d = document.createElement("div");
  d.className = "msg " + role;
  d.textContent = text;
  $("log").appendChild(d);
  $("log").scrollTop = $("log").scrollHeight;
  return d;
}

$("prompt").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) {
    ev.preventDefault();
    $("chat").requestSubmit();
  }
});

$("clear").addEventListener("click", () => {
  history = [];
  $("log").textContent = "";
  $("chat-status").textContent = "";
});

$("stop").addEventListener("click", () => { if (aborter) aborter.abort(); });

$("chat").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const text = $("prompt").value;
  if (!text.trim() || aborter) return;
  $("prompt").value = "";
  addMessage("user", text);
  history.push({ role: "user", content: text });
  const out = addMessage("assistant", "");
  out.dataset.chunks = "0";
  aborter = new AbortController();
  $("send").hidden = true;
  $("stop").hidden = false;
  const started = performance.now();
  let first = 0, answer = "", finish = "", usage = null;
  try {
    const body = { model: $("model").value, messages: history, stream: true, stream_options: { include_usage: true } };
    const t = parseFloat($("temp").value);
    if (!isNaN(t)) body.temperature = t;
    const mt = parseInt($("maxtokens").value, 10);
    if (mt > 0) body.max_tokens = mt;
    const resp = await api("/v1/chat/completions", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), signal: aborter.signal,
    });
    if (!resp.ok) {
      let msg = resp.status + " " + resp.statusText;
      try { msg = (await resp.json()).error.message; } catch (e) { /* keep the status */ }
      throw new Error(msg);
    }
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "", done = false;
    while (!done) {
      const r = await reader.read();
      if (r.done) break;
      buf += dec.decode(r.value, { stream: true });
      let i;
      while (!done && (i = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        for (const line of ev.split("\n")) {
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data === "[DONE]") { done = true; break; }
          const msg = JSON.parse(data);
          if (msg.error) throw new Error(msg.error.message);
          if (msg.usage) usage = msg.usage;
          for (const ch of msg.choices || []) {
            if (ch.delta && ch.delta.content) {
              if (!first) first = performance.now();
              answer += ch.delta.content;
              out.textContent = answer;
              out.dataset.chunks = String(Number(out.dataset.chunks) + 1);
              $("log").scrollTop = $("log").scrollHeight;
            }
            if (ch.finish_reason) finish = ch.finish_reason;
          }
        }
      }
    }
    history.push({ role: "assistant", content: answer });
    const secs = (performance.now() - (first || started)) / 1000;
    const n = usage ? usage.completion_tokens : 0;
    $("chat-status").textContent = `${n} tokens, first after ${((first || started) - started).toFixed(0)} ms, ` +
      `${secs > 0 ? (n / secs).toFixed(1) : "–"} tokens/s, finish: ${finish || "?"}`;
    out.dataset.finish = finish;
  } catch (e) {
    if (e.name === "AbortError") {
      history.push({ role: "assistant", content: answer });
      $("chat-status").textContent = "stopped";
    } else {
      history.pop();
      addMessage("error", e.message);
      $("chat-status").textContent = "";
    }
  } finally {
    out.dataset.done = "1";
    aborter = null;
    $("send").hidden = false;
    $("stop").hidden = true;
  }
});

loadModels().then(poll);
setInterval(poll, 1000);
setInterval(loadModels, 15000);
