// The rbs dashboard: one page, routed by the URL's hash, reading the
// server's JSON API under /api/ (GET /api/ lists it), whose schema is the
// CLI's --json. Everything shown is set as text, never as HTML.
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
// when shows an RFC 3339 time of the API; null is "-".
const when = (t) => (t ? t.replace(".000Z", "Z") : "-");
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

function elapsed(j) {
  if (!j.start_time) return "-";
  const end = j.end_time ? Date.parse(j.end_time) : Date.now();
  return secs(end - Date.parse(j.start_time));
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
      const workers = st.workers.map((w) => {
        const gpus = w.gpus.map((g) => `${g.index}: ${g.name || g.uuid}`).join(", ") || (w.gpu_note ? "none (" + w.gpu_note + ")" : "none");
        const props = Object.entries(w.properties).flatMap(([k, vs]) => vs.map((v) => k + "=" + v)).sort();
        return el("tr", { "data-worker": w.name },
          el("td", {}, w.name),
          el("td", { class: "num" }, `${w.action_slots.used}/${w.action_slots.total}`),
          el("td", { class: "num" }, `${w.job_slots.used}/${w.job_slots.total}`),
          el("td", { class: "num" }, w.cpus),
          el("td", { class: "num" }, bytes(w.memory_bytes)),
          el("td", {}, gpus),
          el("td", {}, w.container_runtime || "-"),
          el("td", {}, props.join(" ")),
          el("td", {}, when(w.last_heartbeat)));
      });
      const jobs = Object.entries(st.jobs).filter(([, n]) => n > 0).map(([s, n]) => el("tr", {},
        el("td", {}, el("a", { href: "#/jobs?state=" + encodeURIComponent(s) }, state(s))), el("td", { class: "num" }, n)));
      const windows = o.reservations.map((r) => el("tr", {}, el("td", {}, r.name), el("td", {}, when(r.start)), el("td", {}, when(r.end)), el("td", {}, r.workers.join(", ") || "all"), el("td", {}, r.reason)));
      const q = st.queue;
      box.replaceChildren(
        el("h2", {}, `Workers (${workers.length})`),
        table(["Worker", "Action slots", "Job slots", "CPUs", "Memory", "GPUs", "Containers", "Properties", "Last heartbeat"], workers, { id: "workers" }),
        el("h2", {}, "Build actions"),
        el("p", {}, `${q.queued_actions} queued, ${q.executing_actions} executing`),
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
  return table(["Queue", "Priority", "Max time", "Running", "Pending", "Default"], queues.map((q) =>
    el("tr", { "data-queue": q.name }, el("td", {}, el("a", { href: "#/jobs?queue=" + encodeURIComponent(q.name) }, q.name)),
      el("td", { class: "num" }, q.priority), el("td", {}, q.max_time_seconds ? secs(1000 * q.max_time_seconds) : "none"),
      el("td", { class: "num" }, q.running), el("td", { class: "num" }, q.pending), el("td", {}, q.default ? "yes" : ""))), { id: "queues" });
}

async function queues() {
  const box = el("div");
  page("Queues", box);
  every(2000, async () => {
    try { box.replaceChildren(queueTable(await api("/api/queues"))); } catch (e) { problem(e); }
  });
}

const STATES = ["", "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"];

// The job list, with filters kept in the hash: #/jobs?state=PENDING&queue=batch&user=ann&history=1.
// Its query is the API's: by default, as GET /api/jobs and rbs job list,
// the jobs pending and running.
async function jobs(params) {
  const f = {
    state: el("select", { id: "filter-state" }, STATES.map((s) => el("option", { value: s, selected: params.get("state") === s }, s || "pending and running"))),
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
      const list = await api("/api/jobs?" + q);
      const rows = list.map((j) => el("tr", { "data-id": j.id },
        el("td", {}, el("a", { href: "#/jobs/" + j.id, class: "job-link" }, j.id)),
        el("td", {}, j.name), el("td", {}, j.user), el("td", {}, j.queue),
        el("td", {}, state(j.state)), el("td", {}, elapsed(j)), el("td", { class: "num" }, j.priority.total),
        el("td", {}, j.state === "PENDING" ? "(" + j.pending_reason + ")" : j.workers.join(","))));
      const none = q.get("history") === "1" ? "No jobs." : "No pending or running jobs; tick \u201cWith ended\u201d for the ended ones.";
      box.replaceChildren(rows.length ? table(["Job", "Name", "User", "Queue", "State", "Time", "Priority", "Worker / reason"], rows, { id: "jobs" }) : el("p", { class: "muted", id: "jobs" }, none));
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
    try {
      const shown = await api("/api/jobs/" + encodeURIComponent(id));
      list = Array.isArray(shown) ? shown : [shown];
    } catch (e) { details.replaceChildren(el("p", { class: "error" }, e.message)); return; }
    if (list.length > 1) {
      details.replaceChildren(el("p", {}, `An array of ${list.length} tasks:`), table(["Task", "State"], list.map((t) =>
        el("tr", { "data-id": t.id }, el("td", {}, el("a", { href: "#/jobs/" + t.id }, t.id)), el("td", {}, state(t.state))))));
      cancel.hidden = list.every((t) => terminal(t.state));
      return;
    }
    const j = list[0];
    const nodes = j.nodes;
    if (ranks !== nodes) {
      ranks = nodes;
      rankSel.replaceChildren(el("option", { value: "" }, nodes > 1 ? "all ranks" : "output"),
        ...(nodes > 1 ? [...Array(nodes).keys()].map((k) => el("option", { value: String(k) }, "rank " + k)) : []));
      rankSel.hidden = nodes < 2;
      stream("");
    }
    ended = terminal(j.state);
    cancel.hidden = ended;
    const row = (k, ...v) => el("tr", {}, el("th", {}, k), el("td", {}, ...v));
    const p = j.priority;
    const rows = [
      row("State", el("span", { id: "job-state", class: "state " + j.state }, j.state), j.state === "PENDING" && j.pending_reason ? el("span", { id: "job-reason" }, " (" + j.pending_reason + ")") : null),
      row("Name", j.name), row("User", j.user), row("Queue", j.queue),
      row("Command", j.script_bytes ? `script (${j.script_bytes} bytes)` : j.command_line),
      row("Resources", `cpus=${j.cpus} memory=${bytes(j.memory_bytes)} gpus=${j.gpus} nodes=${nodes}`),
      row("Time limit", j.time_limit_seconds ? secs(1000 * j.time_limit_seconds) : "none"),
      row("Priority", el("span", { id: "priority" }, `${p.total} = base ${p.base} + queue ${p.queue} + age ${p.age}`)),
      row("Submitted", when(j.submit_time)), row("Started", when(j.start_time)), row("Ended", when(j.end_time)),
      row("Attempts", j.attempts),
    ];
    if (j.state === "PENDING") {
      rows.push(row("Queue position", j.queue_position ? `${j.queue_position} in ${j.queue}` : "-"));
      rows.push(row("Expected start", j.expected_start ? when(j.expected_start) : "unknown" + (j.start_unknown ? ": " + j.start_unknown : "")));
    }
    for (const n of j.ranks) {
      rows.push(row(nodes > 1 ? "Rank " + n.rank : "Worker", n.worker + (n.gpu_uuids.length ? " GPUs " + n.gpu_uuids.join(",") : "")));
    }
    if (terminal(j.state)) {
      rows.push(row("Exit code", j.exit_code), row("CPU time", secs(1000 * j.cpu_time_seconds)), row("Peak memory", bytes(j.peak_memory_bytes)));
    }
    if (j.message) rows.push(row("Message", j.message));
    if ((j.sweep || []).length) rows.push(row("Sweep", el("span", { id: "job-sweep" }, j.sweep.join(", "))));
    if (j.cached_from) rows.push(row("Cache", el("span", { id: "job-cached" }, "cached from job ", el("a", { href: "#/jobs/" + j.cached_from }, j.cached_from))));
    else if (j.cache !== "off") rows.push(row("Cache", j.cache));
    for (const d of j.dependencies) rows.push(row("Dependency", `${d.kind}:${d.id} (${d.state})`));
    const parts = [table([], rows, { id: "job" })];
    if ((j.placement || []).length) {
      parts.push(el("h2", {}, "Why it waits"), el("ul", { id: "placement" }, j.placement.map((x) => el("li", {}, x))));
    }
    if (j.history.length) {
      parts.push(el("h2", {}, "Attempts"), table(["Attempt", "Where", "State", "Exit", "Started", "Ended", "Message"], j.history.map((a) =>
        el("tr", {}, el("td", {}, a.attempt), el("td", {}, (a.workers || []).length ? a.workers.join(",") : a.worker), el("td", {}, state(a.state)),
          el("td", {}, a.exit_code), el("td", {}, when(a.start_time)), el("td", {}, when(a.end_time)), el("td", {}, a.message))), { id: "attempts" }));
    }
    if ((j.outputs || []).length) {
      parts.push(el("h2", {}, "Outputs"), el("ul", { id: "outputs" }, j.outputs.map((o) => el("li", {},
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
      const st = a.stats;
      const run = st.completed, hits = st.cache_hits;
      const rate = run + hits ? ((100 * hits) / (run + hits)).toFixed(1) + "%" : "-";
      const ms = (v) => (num(v) ? num(v).toFixed(1) : "-");
      const scale = Math.max(1, ...(a.actions || []).map((x) => num(x.total_ms)));
      const bar = (cls, v) => el("span", { class: "bar " + cls, title: cls + " " + ms(v) + " ms", "data-w": Math.round((200 * num(v)) / scale) });
      const rows = (a.actions || []).map((x) => el("tr", {},
        el("td", {}, when(x.completed_time)), el("td", { title: x.digest }, x.digest.slice(0, 12)), el("td", {}, x.worker || "-"),
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
