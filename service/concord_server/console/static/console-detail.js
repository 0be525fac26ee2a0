// Concord console: the detail pages, each with a URL of its own so it can be linked.
//   #queue/<queue>       a queue: counts, flow control, delayed tasks by due time, leased
//                        tasks with their lease's Dequeue call and expiry, dead tasks,
//                        groups, schedules; every list a page at a time
//   #task/<queue>/<id>   a task as GetTask reads it, and its events from the queue's stream
//   #lock/<lock>         a lock's waiters in FIFO order, 100 a page, however many wait
// They are read from the server's JSON endpoints (console/queue_detail.py) while the
// page is open, again every REFRESH_MS, never in the 1 s snapshot. Plain ES module
// beside console.js, whose helpers it uses; strings from the server go through
// textContent only.

import { $, el, when, duration, api, count, table, state, registerView } from "./console.js";

const REFRESH_MS = 2000;
const PAGE = 20; // tasks per list on a queue's page (the endpoint allows 50)
const WAITERS_PAGE = 100;

const TASK_SHAPES = { ready: ["● ready", "held"], waiting: ["⏸ waiting", "waiting"], delayed: ["◷ delayed", "waiting"],
  leased: ["▶ leased", "waiting"], dead: ["✖ dead", "dead"], succeeded: ["✔ succeeded", "held"],
  cancelled: ["○ cancelled", "free"] };
const EVENT_SHAPES = { enqueued: ["◌ enqueued", "free"], leased: ["▶ leased", "waiting"], progress: ["… progress", "waiting"],
  succeeded: ["✔ succeeded", "held"], failed: ["✖ failed", "waiting"], dead: ["✖ dead", "dead"],
  cancelled: ["○ cancelled", "free"], released: ["↩ released", "free"], retried: ["↻ retried", "held"] };
const WHY = { paused: "the queue is paused", queue_capped: "the queue's cap is reached", queue_limited: "the queue's rate is spent",
  group_paused: "paused", group_capped: "at its cap", group_limited: "its rate is spent" };

const enc = encodeURIComponent;
export const queueHref = (queue) => `#queue/${enc(queue)}`;
export const taskHref = (queue, id) => `#task/${enc(queue)}/${enc(id)}`;
export const lockHref = (lock) => `#lock/${enc(lock)}`;

function shape(table_, key) {
  const [text, cls] = table_[key] || [key, "free"];
  return el("span", { class: `state ${cls}`, title: key }, text);
}

// "#page/a/b" -> {page, args: [a, b]} (decoded); null args when they do not decode.
function route() {
  const [page, ...rest] = (location.hash || "#").slice(1).split("/");
  try {
    return { page, args: rest.map(decodeURIComponent) };
  } catch {
    return { page, args: null };
  }
}

const inZone = (ms) => (ms === null || ms === undefined ? "—" : when(ms));

function inTime(ms, past = "overdue by") {
  if (ms === null || ms === undefined) return "—";
  return ms >= 0 ? `in ${duration(ms)}` : `${past} ${duration(-ms)}`;
}

function rate(r) {
  return r ? `${r.count} per ${duration(r.period_ms)} (burst ${r.burst})` : "none";
}

function empty(...children) {
  return el("p", { class: "empty" }, ...children);
}

function failed(what, error) {
  return el("p", { class: "empty error", role: "alert" }, `${what}: ${error.reason ? `${error.reason} ` : ""}${error.message}`);
}

// One open detail page: what it shows (key), its last reply, when it was read, and its
// pagers: the pages asked for (cursors) and the ones the reply shown was read for (shown).
const open = { key: null, data: null, error: null, at: 0, busy: false, seq: 0, cursors: {}, shown: {}, focus: false };

function reset(key, cursors) {
  Object.assign(open, { key, data: null, error: null, at: 0, busy: false, cursors, shown: cursors, focus: true });
}

// Reads path (relative to the key it was asked for); a reply for a page left meanwhile is dropped.
async function load(path, draw) {
  const key = open.key, seq = ++open.seq, asked = { ...open.cursors };
  open.busy = true;
  try {
    const data = await api(path);
    if (open.key !== key || open.seq !== seq) return;
    open.data = data;
    open.shown = asked;
    open.error = null;
  } catch (error) {
    if (open.key !== key || open.seq !== seq) return;
    open.error = error;
  }
  open.busy = false;
  open.at = Date.now();
  draw();
}

function due() {
  return !open.busy && Date.now() - open.at >= REFRESH_MS;
}

function focusTitle(id) {
  if (!open.focus) return;
  open.focus = false;
  const title = $(id);
  if (title) title.focus({ preventScroll: false });
}

// A pager over a stack of cursors (the first page's is ""): First, Previous, Next. It
// names the page whose rows are shown; while another page is being read it says so,
// its buttons off, so a label never names rows that have not come yet.
function pager(name, label, next, draw) {
  const stack = open.cursors[name], shown = open.shown[name] || stack;
  const loading = stack.length !== shown.length || stack.some((c, i) => c !== shown[i]);
  const go = (cursors) => { open.cursors[name] = cursors; open.at = 0; draw(true); };
  if (shown.length === 1 && !next && !loading) return null;
  const button = (text, cursors) => el("button", {
    type: "button", disabled: loading, onclick: () => go(cursors), "aria-label": `${text} of ${label}`,
  }, text);
  return el("div", { class: "pager", "data-pager": name, "aria-busy": loading ? "true" : "false" },
    shown.length > 1 ? button("First page", [""]) : null,
    shown.length > 1 ? button("Previous page", shown.slice(0, -1)) : null,
    el("span", { class: "legend" }, loading ? `reading page ${stack.length}…` : `page ${shown.length}`),
    next ? button("Next page", [...shown, next]) : null);
}

const current = (name) => open.cursors[name][open.cursors[name].length - 1];

// -- a queue

function queuePath(queue) {
  const q = new URLSearchParams({ limit: String(PAGE) });
  for (const list of ["delayed", "leased", "dead", "groups"]) {
    if (current(list)) q.set(`${list}_after`, current(list));
  }
  return `/api/queues/${enc(queue)}?${q}`;
}

function renderQueuePage() {
  const r = route();
  const box = $("queue-detail");
  if (!r.args || r.args.length !== 1 || !r.args[0]) {
    box.replaceChildren(empty("This address names no queue. Open one from the ", el("a", { href: "#queues" }, "Queues"), " page."));
    return;
  }
  const queue = r.args[0];
  const draw = (now = false) => {
    if (now) load(queuePath(queue), draw);
    drawQueue(queue);
  };
  if (open.key !== `queue:${queue}`) {
    reset(`queue:${queue}`, { delayed: [""], leased: [""], dead: [""], groups: [""] });
    draw(true);
  } else if (due()) {
    load(queuePath(queue), () => drawQueue(queue));
  }
}

function drawQueue(queue) {
  const box = $("queue-detail"), d = open.data;
  $("queue-title").textContent = `Queue ${queue}`;
  const back = el("p", { class: "legend" }, el("a", { href: "#queues" }, "← all queues"));
  if (open.error && (!d || open.error.status === 404)) {
    box.replaceChildren(back, open.error.status === 404
      ? empty(`Queue "${queue}" holds no task, schedule, group or event in this tenant. Enqueue a task through the API (in Python: `,
        el("code", {}, `client.queue("${queue}").put("send", b"...")`), ") and it shows here.")
      : failed("The queue could not be read", open.error));
    focusTitle("queue-title");
    return;
  }
  if (!d) {
    box.replaceChildren(back, el("p", { class: "legend" }, "reading…"));
    return;
  }
  const s = d.stats;
  const draw = (now) => { if (now) load(queuePath(queue), () => drawQueue(queue)); drawQueue(queue); };
  const parts = [back,
    el("p", { class: "legend" }, `read ${new Date(open.at).toLocaleTimeString()}, again every ${REFRESH_MS / 1000} s while this page is open`,
      open.error ? el("span", { class: "error" }, ` · last read failed: ${open.error.message}`) : null),
    el("div", { class: "cards" },
      el("div", { class: "card", "data-card": "counts" }, el("h3", {}, "Tasks by state"),
        el("div", { class: "big" }, s.paused ? el("span", { class: "state waiting" }, "⏸ paused") : el("span", { class: "state held" }, "● running")),
        el("dl", {}, [["ready", s.ready], ["delayed", s.delayed], ["leased", s.leased], ["dead", s.dead], ["done", s.done],
          ["oldest ready", s.ready ? duration(s.oldest_ready_age_ms) : "—"]].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]))),
      d.policy ? el("div", { class: "card", "data-card": "flow" }, el("h3", {}, "Flow control"),
        el("dl", {}, [["leased at once", d.policy.max_leased ?? "no cap"], ["lease rate", rate(d.policy.rate)],
          ["each group's cap", d.policy.group_max_leased ?? "no cap"], ["each group's rate", rate(d.policy.group_rate)],
          ["max attempts", d.policy.max_attempts ?? "—"]].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]))) : null,
      el("div", { class: "card", "data-card": "events" }, el("h3", {}, "Event stream"),
        el("dl", {}, [["events kept", d.events.first_kept ? `#${d.events.first_kept} to #${d.events.last}` : "none"],
          ["keeps the latest", d.policy ? d.policy.keep_events : "—"]].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])))),
  ];
  parts.push(el("h3", {}, "Delayed tasks, soonest due first"),
    taskList(queue, d.delayed.tasks, "delayed", ["task", "type", "group", "due", "due at", "attempts"], (t) => [
      el("td", { "data-label": "group" }, t.group || "—"),
      el("td", { "data-label": "due", class: t.due_in_ms < 0 ? "state waiting" : null }, inTime(t.due_in_ms)),
      el("td", { "data-label": "due at" }, inZone(t.ready_at_ms)),
      el("td", { "data-label": "attempts" }, `${t.attempt} / ${t.max_attempts}`)],
    "No delayed task. A task put with a delay or a run-at time waits here until it is due."),
    pager("delayed", "delayed tasks", d.delayed.next, draw));
  parts.push(el("h3", {}, "Leased tasks, soonest to expire first"),
    taskList(queue, d.leased.tasks, "leased", ["task", "type", "worker", "attempt", "lease expires", "expires at"], (t) => [
      el("td", { "data-label": "worker", class: "name", title: "the queue keeps no worker name: this is the first part of the lease, one per Dequeue call" },
        t.worker ? `call ${t.worker}` : "—"),
      el("td", { "data-label": "attempt" }, `${t.attempt} / ${t.max_attempts}`),
      el("td", { "data-label": "lease expires", class: t.expires_in_ms < 0 ? "state dead" : null }, inTime(t.expires_in_ms, "expired")),
      el("td", { "data-label": "expires at" }, inZone(t.lease_expires_at_ms))],
    "No task is leased: no worker holds one of this queue's tasks now."),
    pager("leased", "leased tasks", d.leased.next, draw));
  parts.push(el("h3", {}, "Dead tasks, oldest death first"),
    taskList(queue, d.dead.tasks, "dead", ["task", "type", "attempts", "last error"], (t) => [
      el("td", { "data-label": "attempts" }, `${t.attempt} / ${t.max_attempts}`),
      el("td", { "data-label": "last error", class: "error" }, t.last_error || "—")],
    "No dead task. A task that runs out of attempts lands here with its last error."),
    pager("dead", "dead tasks", d.dead.next, draw));
  if (d.groups) {
    parts.push(el("h3", {}, "Groups"), d.groups.items.length ? table(["group", "state", "ready", "leased / cap", "weight", "rate"],
      d.groups.items.map((g) => el("tr", { "data-group": g.name },
        el("td", { "data-label": "group", class: "name" }, g.name),
        el("td", { "data-label": "state" }, g.paused ? el("span", { class: "state waiting" }, "⏸ paused")
          : g.wait_reason ? el("span", { class: "state waiting", title: g.wait_reason }, `▲ held: ${WHY[g.wait_reason] || g.wait_reason}`)
            : el("span", { class: "state held" }, "● leasing")),
        el("td", { "data-label": "ready" }, g.ready),
        el("td", { "data-label": "leased / cap" }, `${g.leased} / ${g.max_leased ?? "no cap"}`),
        el("td", { "data-label": "weight" }, g.weight),
        el("td", { "data-label": "rate" }, rate(g.rate)))))
      : empty("No group. Tasks put with a group take turns with the other groups, each under its own cap and rate."),
    pager("groups", "groups", d.groups.next, draw));
  }
  if (d.schedules) {
    parts.push(el("h3", {}, "Schedules, next run first"), d.schedules.items.length
      ? table(["name", "when", "next run", "runs", "state"], d.schedules.items.map((x) => el("tr", { "data-schedule": x.name },
        el("td", { "data-label": "name", class: "name" }, x.name),
        el("td", { "data-label": "when" }, x.when),
        el("td", { "data-label": "next run" }, x.next_run_ms ? inZone(x.next_run_ms) : "—"),
        el("td", { "data-label": "runs" }, x.runs),
        el("td", { "data-label": "state" }, x.paused ? el("span", { class: "state free" }, "⏸ paused") : el("span", { class: "state held" }, "● running")))))
      : empty("No schedule. Create one through the API (in Python: ", el("code", {}, `client.queue("${queue}").schedule("nightly", cron="0 3 * * *")`), ")."),
    d.schedules.more ? el("p", { class: "legend" }, `the first ${d.schedules.items.length}`) : null);
  }
  box.replaceChildren(...parts.filter(Boolean));
  focusTitle("queue-title");
}

function taskList(queue, tasks, list, headers, cells, none) {
  if (!tasks.length) return empty(none);
  return el("div", { "data-list": list }, table(headers, tasks.map((t) => el("tr", { "data-task": t.task_id },
    el("td", { "data-label": "task", class: "name" }, el("a", { href: taskHref(queue, t.task_id), "aria-label": `Task ${t.task_id} of ${queue}` }, t.task_id)),
    el("td", { "data-label": "type" }, t.type),
    ...cells(t)))));
}

// -- a task and its history

function taskPath(queue, id) {
  const before = current("events");
  return `/api/tasks/${enc(queue)}/${enc(id)}${before ? `?before=${before}` : ""}`;
}

function renderTaskPage() {
  const r = route();
  const box = $("task-detail");
  if (!r.args || r.args.length !== 2 || !r.args[0] || !r.args[1]) {
    box.replaceChildren(empty("This address names no task. Open one from a queue's page or a search's results."));
    return;
  }
  const [queue, id] = r.args;
  const draw = (now = false) => { if (now) load(taskPath(queue, id), draw); drawTask(queue, id); };
  if (open.key !== `task:${queue}/${id}`) {
    reset(`task:${queue}/${id}`, { events: [""] });
    draw(true);
  } else if (due() && !current("events") && !(open.data && ["succeeded", "dead", "cancelled"].includes(open.data.task.state))) {
    load(taskPath(queue, id), () => drawTask(queue, id)); // the newest events, while it may still change
  }
}

function drawTask(queue, id) {
  const box = $("task-detail"), d = open.data;
  $("task-title").textContent = `Task ${id}`;
  const back = el("p", { class: "legend" }, el("a", { href: queueHref(queue) }, `← queue ${queue}`));
  if (open.error && (!d || open.error.status === 404)) {
    box.replaceChildren(back, open.error.status === 404
      ? empty(`Queue "${queue}" has no task ${id} in this tenant: it never existed, or its retention ended.`)
      : failed("The task could not be read", open.error));
    focusTitle("task-title");
    return;
  }
  if (!d) {
    box.replaceChildren(back, el("p", { class: "legend" }, "reading…"));
    return;
  }
  const t = d.task, now = d.now_ms;
  const rows = [["state", shape(TASK_SHAPES, t.state)], ["type", t.type], ["attempts", `${t.attempt} / ${t.max_attempts}`],
    ["priority", t.priority], ["group", t.group || "—"], ["enqueued", inZone(t.enqueued_at_ms)],
    ["ready at", inZone(t.ready_at_ms)]];
  if (t.wait_reason) rows.push(["held back", WHY[t.wait_reason] || t.wait_reason]);
  if (t.state === "leased") {
    rows.push(["worker", el("span", { class: "name", title: "the first part of the lease: one per Dequeue call" }, `call ${t.worker}`)],
      ["leased at", inZone(t.leased_at_ms)],
      ["lease expires", `${inZone(t.lease_expires_at_ms)}${now ? ` (${inTime(t.lease_expires_at_ms - now, "expired")})` : ""}`]);
  }
  if (t.progress) rows.push(["progress", `${t.progress.value ?? ""} ${t.progress.json || ""} (${inZone(t.progress.reported_at_ms)})`]);
  if (t.finished_at_ms) rows.push(["finished", inZone(t.finished_at_ms)]);
  if (t.last_error) rows.push(["last error", el("span", { class: "error" }, t.last_error)]);
  if (t.dead_reason) rows.push(["died of", t.dead_reason]);
  if (t.schedule) rows.push(["schedule", `${t.schedule} (tick ${inZone(t.scheduled_at_ms)})`]);
  rows.push(["payload", el("span", { class: "value" }, t.payload_bytes ? t.payload_preview + (t.payload_bytes > t.payload_preview.length ? "…" : "") : "(empty)",
    el("span", { class: "muted" }, ` · ${t.payload_bytes} bytes`))]);
  if (t.result_bytes) rows.push(["result", el("span", { class: "value" }, t.result_preview, el("span", { class: "muted" }, ` · ${t.result_bytes} bytes ${t.result_type}`))]);
  const parts = [back, el("div", { class: "card", "data-card": "task" },
    el("dl", {}, rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])))];
  parts.push(el("h3", {}, "History"));
  const ev = d.events;
  if (!ev) {
    parts.push(empty("Your token may not watch this queue's events (WatchQueue)."));
  } else {
    const items = [...ev.items].reverse(); // oldest first
    const note = ev.whole ? (current("events") ? "its first events" : "its whole history, oldest first")
      : ev.trimmed ? "Older events of this task were trimmed: the queue keeps only its latest events (its policy's keep_events)."
        : `Looked at ${ev.looked} of the queue's events, newest first; older ones may hold more of this task's.`;
    parts.push(el("p", { class: ev.trimmed ? "legend warn" : "legend", id: "history-note" }, note));
    parts.push(items.length ? el("div", { "data-list": "history" }, table(["#", "when", "event", "attempt", "details"], items.map((e) =>
      el("tr", { "data-event": e.kind },
        el("td", { "data-label": "#" }, e.position),
        el("td", { "data-label": "when" }, inZone(e.at_ms)),
        el("td", { "data-label": "event" }, shape(EVENT_SHAPES, e.kind)),
        el("td", { "data-label": "attempt" }, e.attempt || "—"),
        el("td", { "data-label": "details" }, eventDetails(e))))))
      : empty(ev.trimmed ? "None of this task's events is kept any more." : "No event of this task in the events looked at."));
    const draw = (now) => { if (now) load(taskPath(queue, id), () => drawTask(queue, id)); drawTask(queue, id); };
    parts.push(pager("events", "the task's events", ev.next_before ? String(ev.next_before) : "", draw));
  }
  box.replaceChildren(...parts.filter(Boolean));
  focusTitle("task-title");
}

function eventDetails(e) {
  const bits = [];
  if (e.type) bits.push(`type ${e.type}`);
  if (e.error) bits.push(el("span", { class: "error" }, e.error));
  if (e.dead_reason) bits.push(`(${e.dead_reason})`);
  if (e.kind !== "enqueued" && e.kind !== "leased" && e.ready_at_ms) bits.push(`ready again ${inZone(e.ready_at_ms)}`);
  if (e.kind === "enqueued" && e.ready_at_ms && e.ready_at_ms > e.at_ms) bits.push(`due ${inZone(e.ready_at_ms)}`);
  if (e.schedule) bits.push(`by schedule ${e.schedule}`);
  if (e.progress) bits.push(`${e.progress.value ?? ""} ${e.progress.json || ""}`);
  if (!bits.length) return "—";
  return el("span", {}, ...bits.flatMap((b, i) => (i ? [" · ", b] : [b])));
}

// -- a lock's waiters

function waitersPath(lock) {
  return `/api/locks/${enc(lock)}/waiters?offset=${current("waiters") || 0}&limit=${WAITERS_PAGE}`;
}

function renderLockPage() {
  const r = route();
  const box = $("lock-detail");
  if (!r.args || r.args.length !== 1 || !r.args[0]) {
    box.replaceChildren(empty("This address names no lock. Open one from the ", el("a", { href: "#locks" }, "Locks"), " page."));
    return;
  }
  const lock = r.args[0];
  if (open.key !== `lock:${lock}`) {
    reset(`lock:${lock}`, { waiters: [""] });
    load(waitersPath(lock), () => drawWaiters(lock));
    drawWaiters(lock);
  } else if (due()) {
    load(waitersPath(lock), () => drawWaiters(lock));
  }
}

function drawWaiters(lock) {
  const box = $("lock-detail"), d = open.data;
  $("lock-title").textContent = `Waiters of lock ${lock}`;
  const back = el("p", { class: "legend" }, el("a", { href: "#locks" }, "← all locks"));
  if (open.error && !d) {
    box.replaceChildren(back, failed("The waiters could not be read", open.error));
    return;
  }
  if (!d) {
    box.replaceChildren(back, el("p", { class: "legend" }, "reading…"));
    return;
  }
  const draw = (now) => { if (now) load(waitersPath(lock), () => drawWaiters(lock)); drawWaiters(lock); };
  const first = d.offset + 1, last = Math.min(d.offset + d.limit, d.queued);
  box.replaceChildren(...[back,
    el("p", { class: "legend", id: "waiters-status" }, `${count(d.queued, "waiter")} queued, first in line first` +
      (d.queued ? ` · positions ${first} to ${last}` : "") + ` · read ${new Date(open.at).toLocaleTimeString()}`),
    d.waiters.length ? el("div", { "data-list": "waiters" }, table(["position", "owner", "waiting for", "since"], d.waiters.map((w) =>
      el("tr", { "data-waiter": w.owner },
        el("td", { "data-label": "position" }, w.position + 1),
        el("td", { "data-label": "owner", class: "name" }, w.owner || "(no label)"),
        el("td", { "data-label": "waiting for" }, duration(w.waited_ms)),
        el("td", { "data-label": "since" }, inZone(w.since_ms))))))
      : empty(d.queued ? "No live waiter on this page (waiters that gave up leave when they reach the head)." : `Nobody waits for "${lock}".`),
    pager("waiters", "waiters", d.next_offset === null ? "" : String(d.next_offset), draw)].filter(Boolean));
  focusTitle("lock-title");
}

// The nav link of the list a detail page belongs to is marked as the current page.
function markNav(view) {
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.view === view) a.setAttribute("aria-current", "page");
  }
}

// Each page renders on every snapshot (each 0.8 s) and reads again when REFRESH_MS passed.
const whenLoggedIn = (render, nav) => () => { if (state.me && state.me.logged_in) { markNav(nav); render(); } };
registerView("queue", whenLoggedIn(renderQueuePage, "queues"));
registerView("task", whenLoggedIn(renderTaskPage, "queues"));
registerView("lock", whenLoggedIn(renderLockPage, "locks"));
