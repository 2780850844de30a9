// The rbs dashboard: one page, routed by the URL's hash, reading the
// server's JSON API under /api/. Everything shown is set as text, never as
// HTML.
"use strict";

const main = document.getElementById("main");
let timers = [];
let streams = [];

// leave stops what the page on view refreshes and follows.
function leave() {
  timers.forEach(clearInterval);
  streams.forEach((c) => c.abort());
  timers = [];
  streams = [];
}

function every(ms, fn) {
  fn();
  timers.push(setInterval(fn, ms));
}

async function api(path, opts) {
  const r = await fetch(path, Object.assign({ credentials: "same-origin", headers: { Accept: "application/json" } }, opts));
  if (r.status === 401) {
    location.href = "/login";
    throw new Error("not logged in");
  }
  if (!r.ok) throw new Error((await r.text()) || r.statusText);
  return r.json();
}

// el makes an element: el("td", {class: "num"}, "text", child, ...).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function table(head, rows, attrs) {
  return el("table", attrs, head.length ? el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))) : null, el("tbody", {}, rows));
}

const num = (v) => Number(v || 0);
const when = (ms) => (num(ms) ? new Date(num(ms)).toISOString().replace(".000Z", "Z") : "-");
const bytes = (n) => {
  n = num(n);
  if (!n) return "-";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
};
const secs = (ms) => {
  let s = Math.round(num(ms) / 1000);
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  return [h, m, s].map((x) => String(x).padStart(2, "0")).join(":");
};
const state = (s) => el("span", { class: "state " + s }, s);
const terminal = (s) => !["PENDING", "RUNNING"].includes(s);

function elapsed(r) {
  if (!num(r.start_unix_ms)) return "-";
  const end = num(r.end_unix_ms) || Date.now();
  return secs(end - num(r.start_unix_ms));
}

function page(title, ...children) {
  main.replaceChildren(el("h1", {}, title), ...children);
}

function problem(err) {
  main.append(el("p", { class: "error" }, String(err.message || err)));
}

// The cluster: workers and their slots, the action queue, jobs by state,
// maintenance windows.
async function overview() {
  const box = el("div", { id: "overview" });
  page("Cluster", box);
  every(2000, async () => {
    try {
      const o = await api("/api/overview");
      const st = o.status;
      const workers = (st.workers || []).map((w) => {
        const res = w.resources || {};
        const gpus = (res.gpus || []).map((g) => `${g.index}: ${g.name || g.uuid}`).join(", ") || (res.gpu_note ? "none (" + res.gpu_note + ")" : "none");
        return el("tr", { "data-worker": w.name },
          el("td", {}, w.name),
          el("td", { class: "num" }, `${w.action_slots.used}/${w.action_slots.total}`),
          el("td", { class: "num" }, `${w.job_slots.used}/${w.job_slots.total}`),
          el("td", { class: "num" }, res.cpus),
          el("td", { class: "num" }, bytes(res.memory_bytes)),
          el("td", {}, gpus),
          el("td", {}, res.container_runtime || "-"),
          el("td", {}, (w.properties || []).map((p) => p.name + "=" + p.value).join(" ")),
          el("td", {}, when(w.last_heartbeat_unix_ms)));
      });
      const jobs = Object.entries(st.jobs || {}).filter(([, n]) => num(n) > 0).map(([s, n]) => el("tr", {}, el("td", {}, state(s)), el("td", { class: "num" }, num(n))));
      const windows = (o.reservations || []).map((r) => el("tr", {}, el("td", {}, r.name), el("td", {}, when(r.start_unix_ms)), el("td", {}, when(r.end_unix_ms)), el("td", {}, (r.workers || []).join(", ") || "all"), el("td", {}, r.reason)));
      const q = st.queue || {};
      box.replaceChildren(
        el("h2", {}, `Workers (${workers.length})`),
        table(["Worker", "Action slots", "Job slots", "CPUs", "Memory", "GPUs", "Containers", "Properties", "Last heartbeat"], workers, { id: "workers" }),
        el("h2", {}, "Build actions"),
        el("p", {}, `${num(q.queued_actions)} queued, ${num(q.executing_actions)} executing`),
        el("h2", {}, "Jobs"),
        jobs.length ? table(["State", "Jobs"], jobs, { id: "job-counts" }) : el("p", { class: "muted" }, "No jobs."),
        el("h2", {}, "Queues"),
        queueTable(o.queues),
        el("h2", {}, "Maintenance windows"),
        windows.length ? table(["Name", "From", "Until", "Workers", "Reason"], windows) : el("p", { class: "muted" }, "None."));
    } catch (e) { problem(e); }
  });
}

function queueTable(queues) {
  return table(["Queue", "Priority", "Max time", "Running", "Pending", "Default"], (queues || []).map((q) =>
    el("tr", { "data-queue": q.name }, el("td", {}, el("a", { href: "#/jobs?queue=" + encodeURIComponent(q.name) }, q.name)),
      el("td", { class: "num" }, q.priority), el("td", {}, num(q.max_time_ms) ? secs(q.max_time_ms) : "none"),
      el("td", { class: "num" }, q.running), el("td", { class: "num" }, q.pending), el("td", {}, q.is_default ? "yes" : ""))), { id: "queues" });
}

async function queues() {
  const box = el("div");
  page("Queues", box);
  every(2000, async () => {
    try { box.replaceChildren(queueTable((await api("/api/overview")).queues)); } catch (e) { problem(e); }
  });
}

const STATES = ["", "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"];

// The job list, with filters kept in the hash: #/jobs?state=PENDING&queue=batch&user=ann&history=1.
async function jobs(params) {
  const f = {
    state: el("select", { id: "filter-state" }, STATES.map((s) => el("option", { value: s, selected: params.get("state") === s }, s || "active"))),
    queue: el("input", { id: "filter-queue", value: params.get("queue") || "", size: 10 }),
    user: el("input", { id: "filter-user", value: params.get("user") || "", size: 10 }),
    history: el("input", { id: "filter-history", type: "checkbox", checked: params.get("history") === "1" }),
  };
  const apply = () => {
    const p = new URLSearchParams();
    if (f.state.value) p.set("state", f.state.value);
    if (f.queue.value) p.set("queue", f.queue.value);
    if (f.user.value) p.set("user", f.user.value);
    if (f.history.checked) p.set("history", "1");
    location.hash = "#/jobs?" + p;
  };
  for (const i of Object.values(f)) i.addEventListener("change", apply);
  const box = el("div");
  page("Jobs",
    el("div", { class: "filters" },
      el("label", {}, "State", f.state), el("label", {}, "Queue", f.queue), el("label", {}, "User", f.user),
      el("label", {}, "With ended", f.history)),
    box);
  const q = new URLSearchParams(params);
  if (q.get("state") && terminal(q.get("state"))) q.set("history", "1");
  every(2000, async () => {
    try {
      const list = (await api("/api/jobs?" + q)).jobs;
      const rows = list.map((j) => {
        const r = j.record;
        return el("tr", { "data-id": j.id },
          el("td", {}, el("a", { href: "#/jobs/" + j.id, class: "job-link" }, j.id)),
          el("td", {}, r.spec.name), el("td", {}, r.spec.user), el("td", {}, r.spec.queue),
          el("td", {}, state(r.state)), el("td", {}, elapsed(r)), el("td", { class: "num" }, num(j.priority.total)),
          el("td", {}, r.state === "PENDING" ? "(" + r.pending_reason + ")" : r.worker));
      });
      box.replaceChildren(rows.length ? table(["Job", "Name", "User", "Queue", "State", "Time", "Priority", "Worker / reason"], rows, { id: "jobs" }) : el("p", { class: "muted", id: "jobs" }, "No jobs."));
    } catch (e) { problem(e); }
  });
}

// One job: its details, why it waits, its attempts, outputs and live logs.
async function job(id) {
  const details = el("div", { id: "details" });
  const logs = el("pre", { id: "logs" });
  const rankSel = el("select", { id: "rank" });
  const cancel = el("button", { id: "cancel" }, "Cancel job");
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try { await api("/api/jobs/" + encodeURIComponent(id) + "/cancel", { method: "POST" }); } catch (e) { problem(e); }
  });
  page("Job " + id, cancel, details, el("h2", {}, "Logs ", rankSel), logs);
  let ranks = -1;
  let follow = null;
  const stream = async (rank) => {
    if (follow) follow.abort();
    follow = new AbortController();
    streams.push(follow);
    logs.textContent = "";
    const url = "/api/jobs/" + encodeURIComponent(id) + "/logs" + (rank === "" ? "" : "?rank=" + rank);
    try {
      const r = await fetch(url, { credentials: "same-origin", signal: follow.signal });
      if (!r.ok) { logs.textContent = await r.text(); return; }
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        logs.append(dec.decode(value, { stream: true }));
        logs.scrollTop = logs.scrollHeight;
      }
    } catch (e) {
      if (e.name !== "AbortError") logs.append("\n[" + e.message + "]");
    }
  };
  rankSel.addEventListener("change", () => stream(rankSel.value));
  let ended = false;
  every(2000, async () => {
    if (ended) return;
    let list;
    try { list = (await api("/api/jobs/" + encodeURIComponent(id))).jobs; } catch (e) { details.replaceChildren(el("p", { class: "error" }, e.message)); return; }
    if (list.length > 1) {
      details.replaceChildren(el("p", {}, `An array of ${list.length} tasks:`), table(["Task", "State"], list.map((t) =>
        el("tr", { "data-id": t.id }, el("td", {}, el("a", { href: "#/jobs/" + t.id }, t.id)), el("td", {}, state(t.record.state))))));
      cancel.hidden = list.every((t) => terminal(t.record.state));
      return;
    }
    const j = list[0], r = j.record, s = r.spec;
    const nodes = Math.max(num(s.nodes), 1);
    if (ranks !== nodes) {
      ranks = nodes;
      rankSel.replaceChildren(el("option", { value: "" }, nodes > 1 ? "all ranks" : "output"),
        ...(nodes > 1 ? [...Array(nodes).keys()].map((k) => el("option", { value: String(k) }, "rank " + k)) : []));
      rankSel.hidden = nodes < 2;
      stream("");
    }
    ended = terminal(r.state);
    cancel.hidden = ended;
    const row = (k, ...v) => el("tr", {}, el("th", {}, k), el("td", {}, ...v));
    const p = j.priority;
    const rows = [
      row("State", el("span", { id: "job-state", class: "state " + r.state }, r.state), r.state === "PENDING" && r.pending_reason ? el("span", { id: "job-reason" }, " (" + r.pending_reason + ")") : null),
      row("Name", s.name), row("User", s.user), row("Queue", s.queue),
      row("Command", s.script ? `script (${s.script.length} bytes)` : (s.command || []).join(" ")),
      row("Resources", `cpus=${Math.max(num(s.cpus), 1)} memory=${bytes(s.memory_bytes)} gpus=${num(s.gpus)} nodes=${nodes}`),
      row("Time limit", num(r.time_limit_ms) ? secs(r.time_limit_ms) : "none"),
      row("Priority", el("span", { id: "priority" }, `${num(p.total)} = base ${num(p.base)} + queue ${num(p.queue)} + age ${num(p.age)}`)),
      row("Submitted", when(r.submit_unix_ms)), row("Started", when(r.start_unix_ms)), row("Ended", when(r.end_unix_ms)),
      row("Attempts", num(r.attempts)),
    ];
    if (r.state === "PENDING") {
      rows.push(row("Queue position", num(j.queue_position) ? `${j.queue_position} in ${s.queue}` : "-"));
      rows.push(row("Expected start", num(j.expected_start_unix_ms) ? when(j.expected_start_unix_ms) : "unknown"));
    }
    for (const n of r.nodes || []) {
      rows.push(row(nodes > 1 ? "Rank " + n.rank : "Worker", n.worker + ((n.gpu_uuids || []).length ? " GPUs " + n.gpu_uuids.join(",") : "")));
    }
    if (terminal(r.state)) {
      rows.push(row("Exit code", r.exit_code), row("CPU time", secs(r.cpu_time_ms)), row("Peak memory", bytes(r.peak_memory_bytes)));
    }
    if (r.message) rows.push(row("Message", r.message));
    for (const d of j.deps || []) rows.push(row("Dependency", `${d.kind}:${d.id} (${d.state})`));
    const parts = [table([], rows, { id: "job" })];
    if ((j.placement || []).length) {
      parts.push(el("h2", {}, "Why it waits"), el("ul", { id: "placement" }, j.placement.map((x) => el("li", {}, x))));
    }
    if ((r.history || []).length) {
      parts.push(el("h2", {}, "Attempts"), table(["Attempt", "Where", "State", "Exit", "Started", "Ended", "Message"], r.history.map((a) =>
        el("tr", {}, el("td", {}, a.attempt), el("td", {}, (a.workers || []).length ? a.workers.join(",") : a.worker), el("td", {}, state(a.state)),
          el("td", {}, a.exit_code), el("td", {}, when(a.start_unix_ms)), el("td", {}, when(a.end_unix_ms)), el("td", {}, a.message))), { id: "attempts" }));
    }
    if ((r.outputs || []).length) {
      parts.push(el("h2", {}, "Outputs"), el("ul", { id: "outputs" }, r.outputs.map((o) => el("li", {},
        o.kind === "file" ? el("a", { href: "/api/jobs/" + encodeURIComponent(id) + "/outputs/" + o.path.split("/").map(encodeURIComponent).join("/"), download: "" }, o.path) : o.path,
        ` (${o.kind}, ${bytes(o.size_bytes)})`))));
    }
    details.replaceChildren(...parts);
  });
}

// Recent build actions and where their time went.
async function actions() {
  const box = el("div");
  page("Build actions", box);
  every(2000, async () => {
    try {
      const a = await api("/api/actions");
      const st = a.stats || {};
      const run = num(st.completed), hits = num(st.cache_hits);
      const rate = run + hits ? ((100 * hits) / (run + hits)).toFixed(1) + "%" : "-";
      const ms = (v) => (num(v) ? num(v).toFixed(1) : "-");
      const scale = Math.max(1, ...(a.actions || []).map((x) => num(x.total_ms)));
      const bar = (cls, v) => el("span", { class: "bar " + cls, title: cls + " " + ms(v) + " ms", "data-w": Math.round((200 * num(v)) / scale) });
      const rows = (a.actions || []).map((x) => el("tr", {},
        el("td", {}, when(x.completed_unix_ms)), el("td", { title: x.digest }, x.digest.slice(0, 12)), el("td", {}, x.worker || "-"),
        el("td", {}, x.cache_hit ? "cache hit" : x.error ? "error: " + x.error : "exit " + x.exit_code),
        el("td", { class: "num" }, ms(x.total_ms)), el("td", { class: "num" }, ms(x.queued_ms)), el("td", { class: "num" }, ms(x.fetch_ms)),
        el("td", { class: "num" }, ms(x.run_ms)), el("td", { class: "num" }, ms(x.upload_ms)),
        el("td", {}, bar("queued", x.queued_ms), bar("fetch", x.fetch_ms), bar("run", x.run_ms), bar("upload", x.upload_ms))));
      box.replaceChildren(
        el("p", { id: "action-stats" }, `${run} run, ${hits} answered from the cache: hit rate ${rate}; overhead p50 ${ms(st.overhead_p50_ms)} ms, p99 ${ms(st.overhead_p99_ms)} ms`),
        rows.length ? table(["Ended", "Action", "Worker", "Result", "Total ms", "Queued", "Fetch", "Run", "Upload", ""], rows, { id: "actions" }) : el("p", { class: "muted" }, "No actions yet."));
      // Widths are set here, not in a style attribute, which the page's policy refuses.
      for (const b of box.querySelectorAll(".bar")) b.style.width = b.dataset.w + "px";
    } catch (e) { problem(e); }
  });
}

function route() {
  leave();
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query || "");
  const m = path.match(/^\/jobs\/(.+)$/);
  if (m) return job(decodeURIComponent(m[1]));
  switch (path) {
    case "/queues": return queues();
    case "/jobs": return jobs(params);
    case "/actions": return actions();
    default: return overview();
  }
}

window.addEventListener("hashchange", route);
route();
