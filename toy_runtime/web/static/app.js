// toy-runtime console: renders the live stream from /events and posts controls to /api/<action>.
// Everything the runtime heard or said is untrusted text: it only ever goes into textContent, never into HTML.

const $ = (id) => document.getElementById(id);
const turns = new Map();  // turn_id → card parts
let stages = { voice: [], text: [] };
let status = {};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v; else if (k.startsWith("data-")) node.setAttribute(k, v); else node[k] = v;
  }
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

const short = (value) => { const s = JSON.stringify(value ?? {}); return s.length > 160 ? s.slice(0, 159) + "…" : s; };

// -- status ------------------------------------------------------------------------------------------

function applyStatus(fields) {
  Object.assign(status, fields);
  if (fields.command) $("command").textContent = fields.command;
  if (fields.state) { document.body.dataset.state = fields.state; $("state").textContent = fields.state; }
  if (fields.volume) {
    const v = fields.volume;
    $("volume").textContent = `${v.level} %${v.muted ? " (muted)" : ""}`;
    $("volume").dataset.level = v.level;
    if (document.activeElement !== $("volume-input")) { $("volume-input").value = v.level; $("volume-value").textContent = v.level; }
  }
  if (fields.overrides) renderOverrides(fields.overrides);
  if (fields.mqtt) $("mqtt").textContent = fields.mqtt.configured ? `${fields.mqtt.state} (${fields.mqtt.device_id})` : "not configured";
  if (fields.ears) $("ears").textContent = fields.ears;
  if (fields.language) $("language").textContent = { en: "English", zh: "中文 (Mandarin)" }[fields.language] || fields.language;
  if ("can_message" in fields) $("message-form").hidden = !fields.can_message;
  if (fields.stages) stages = fields.stages;
}

function renderOverrides(o) {
  $("mode").textContent = o.mode;
  if (o.mode !== "offline") $("mode-select").value = o.mode;
  $("mode-select").disabled = o.mode === "offline";
  const list = $("events-list");
  list.replaceChildren(...o.events_available.map((name) => el("label", {},
    el("input", { type: "checkbox", value: name, checked: o.events_enabled.includes(name) }), " ", name)));
}

function showLevel(dbfs) {
  const pct = Math.max(0, Math.min(100, (dbfs + 60) / 60 * 100));
  $("level").style.width = pct + "%";
  $("level-text").textContent = `${dbfs.toFixed(0)} dBFS`;
}

// -- turns -------------------------------------------------------------------------------------------

function card(turnId) {
  if (turns.has(turnId)) return turns.get(turnId);
  const console_ = turnId.startsWith("console.") || turnId.startsWith("remote.");
  const parts = {
    heard: el("span", { class: "heard" }, console_ ? "(a console or remote control)" : ""),
    mode: el("span", { class: "badge" }),
    a1: el("div", { class: "answer" }, el("h4", {}, "answer 1")),
    a2: el("div", { class: "answer" }, el("h4", {}, "answer 2")),
    events: el("table", { class: "events" }, el("tr", {}, ...["event", "status", "arguments", "outcome"].map((h) => el("th", {}, h)))),
    notes: el("ul", { class: "notes" }),
    waterfall: el("div", { class: "waterfall" }),
    rows: new Map(),
  };
  parts.root = el("article", { class: "turn", "data-turn-id": turnId },
    el("h3", {}, parts.heard, parts.mode, el("span", { class: "id" }, turnId)),
    el("div", { class: "answers" }, parts.a1, parts.a2), parts.events, parts.notes, parts.waterfall);
  parts.events.hidden = true;
  $("turns").prepend(parts.root);
  turns.set(turnId, parts);
  while (turns.size > 100) { const [old, p] = turns.entries().next().value; p.root.remove(); turns.delete(old); }
  return parts;
}

function addSpeech(m) {
  const parts = card(m.turn_id);
  const where = m.answer === 2 ? parts.a2 : parts.a1;
  where.append(el("p", { class: "speech", "data-kind": m.kind, "data-answer": m.answer },
    el("span", { class: "kind" }, m.kind), m.text, el("span", { class: "ms" }, `+${Math.round(m.ms)} ms`)));
}

function eventRow(r, status_, args, outcome) {
  const parts = card(r.turn_id || "console");
  parts.events.hidden = false;
  let row = parts.rows.get(r.event_id);
  if (!row) {
    row = el("tr", {}, el("td", {}, r.name), el("td", { class: "st" }), el("td", {}, el("code")), el("td", {}, el("code")));
    parts.rows.set(r.event_id, row);
    parts.events.append(row);
  }
  row.dataset.status = status_;
  row.children[1].textContent = status_;
  row.children[2].firstChild.textContent = short(args);
  row.children[3].firstChild.textContent = outcome;
}

function note(turnId, text) {
  card(turnId).notes.append(el("li", {}, text));
}

function waterfall(turnId, rows, origin) {
  const parts = card(turnId);
  const max = Math.max(1, ...rows.map((r) => r.value));
  let prev = 0;
  parts.waterfall.replaceChildren(el("div", { class: "muted" }, `ms after ${origin}`), ...rows.map((r) => {
    const start = r.event ? 0 : Math.min(prev, r.value);
    if (!r.event) prev = r.value;
    const bar = el("div", { class: "wf-bar" });
    bar.style.left = (start / max * 100) + "%";
    bar.style.width = ((r.value - start) / max * 100) + "%";
    return el("div", { class: "wf-row" + (r.event ? " event" : ""), "data-stage": r.key },
      el("span", {}, r.label), el("div", { class: "wf-track" }, bar), el("span", { class: "v" }, r.value.toFixed(0)));
  }));
}

function onAudit(rec) {
  const id = rec.turn_id;
  switch (rec.kind) {
    case "turn.started": {
      const parts = card(id);
      parts.heard.textContent = `heard: “${rec.text}”`;
      parts.mode.textContent = rec.mode;
      return;
    }
    case "event.detected":
      return eventRow(rec, "running", rec.proposed, "");
    case "event.result":
      return eventRow(rec, rec.status, rec.arguments, rec.error || short(rec.result));
    case "event.dropped":
      return note(id, `${rec.name} was asked for but is not an event here (${rec.reason})`);
    case "llm.fault":
      return note(id, `fault in the ${rec.call} call: ${rec.code} ${rec.message || ""}`);
    case "turn.not_run":
      return note(id, `asked for but never ran: ${rec.names.join(", ")}`);
    case "turn.holding_cue":
      return;  // the cue itself arrives as speech of kind "holding"
    case "speech.hidden":
      return note(id, `hidden from speech (${rec.speech_kind}): ${rec.hidden.join(", ")}`);
    case "turn.completed": {
      const rows = [];
      const ttft = rec.first_answer && rec.first_answer.ttft_ms;
      if (ttft != null) rows.push({ key: "first_token", label: "LLM first token", value: ttft });
      if (rec.first_speech_ms != null) rows.push({ key: "first_speech", label: "first speech", value: rec.first_speech_ms });
      if (rec.second_speech_ms != null) rows.push({ key: "second_speech", label: "answer 2", value: rec.second_speech_ms });
      for (const e of rec.events || []) rows.push({ key: "event:" + e.name, label: `${e.name} (${e.status})`, value: e.latency_ms, event: true });
      if (rec.total_ms != null) rows.push({ key: "total", label: "turn total", value: rec.total_ms });
      if (rec.fault) note(id, `provider fault: ${rec.fault} (answered by the ${rec.path})`);
      if (!card(id).voice) waterfall(id, rows, "turn start");
      return;
    }
    case "voice.turn": {
      const w = rec.waterfall_ms || {};
      const rows = [];
      for (const [key, label] of stages.voice) if (w[key] != null) rows.push({ key, label, value: w[key] });
      if (w.second_answer_audio != null) rows.push({ key: "second_answer_audio", label: "answer 2 audio", value: w.second_answer_audio });
      for (const [key, value] of Object.entries(w)) {
        if (key.startsWith("event:") && value != null) rows.push({ key, label: key.slice(6), value, event: true });
      }
      const turnId = id || `voice.${rec.turn}`;
      card(turnId).voice = true;
      waterfall(turnId, rows, "end of speech");
      if (rec.interrupted) note(turnId, "interrupted (barge-in)");
      return;
    }
    default:
      log(rec);
  }
}

function log(rec) {
  const { kind, ts, ...rest } = rec;
  const time = new Date(ts * 1000).toLocaleTimeString();
  $("log").prepend(el("li", { "data-kind": kind }, `${time} ${kind} ${short(rest)}`));
  while ($("log").children.length > 200) $("log").lastChild.remove();
}

// -- the stream --------------------------------------------------------------------------------------

function connect() {
  const source = new EventSource("/events");
  source.onopen = () => { document.body.dataset.connected = "true"; $("link").textContent = "live"; };
  source.onerror = () => { document.body.dataset.connected = "false"; $("link").textContent = "reconnecting…"; };
  source.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.type === "status") { const { type, ...fields } = m; applyStatus(fields); }
    else if (m.type === "level") showLevel(m.dbfs);
    else if (m.type === "speech") addSpeech(m);
    else if (m.type === "audit") onAudit(m.record);
    else if (m.type === "gap") log({ kind: "console.gap", ts: Date.now() / 1000, dropped: m.dropped });
    else if (m.type === "closed") { source.close(); $("link").textContent = "the runtime closed the console"; }
  };
}

// -- controls ----------------------------------------------------------------------------------------

async function control(action, body) {
  const out = $("control-result");
  out.textContent = `${action}…`;
  try {
    const response = await fetch(`/api/${action}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    const answer = await response.json().catch(() => ({}));
    out.textContent = response.ok ? `${action}: ${answer.status || "ok"}` : `${action}: ${answer.error || response.status}`;
    out.dataset.action = action;
    out.dataset.ok = String(response.ok && answer.ok !== false);
    return answer;
  } catch (err) {
    out.textContent = `${action}: ${err}`;
  }
}

function wire() {
  $("volume-input").addEventListener("input", (e) => { $("volume-value").textContent = e.target.value; });
  $("volume-form").addEventListener("submit", (e) => {
    e.preventDefault(); control("volume", { level: Number($("volume-input").value) });
  });
  $("mode-form").addEventListener("submit", (e) => { e.preventDefault(); control("mode", { mode: $("mode-select").value }); });
  $("events-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const enabled = [...$("events-list").querySelectorAll("input:checked")].map((i) => i.value);
    control("events", { enabled });
  });
  $("message-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("message-input").value.trim();
    if (text) { control("message", { text }); $("message-input").value = ""; }
  });
  $("end-button").addEventListener("click", () => control("end", {}));
}

wire();
connect();
