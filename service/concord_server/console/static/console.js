// Concord console: plain ES module, no dependencies. The server pushes one snapshot per
// second over Server-Sent Events (/api/events); this file only renders what it gets.
// Every string from the server goes through textContent (never innerHTML).

const $ = (id) => document.getElementById(id);
const state = { me: null, snapshot: null, events: null, view: "overview" };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const when = (ms) => timeFormat.format(new Date(ms)); // the viewer's own time zone

function duration(ms) {
  if (ms < 1000) return `${ms} ms`;
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(data.message || response.statusText);
    error.reason = data.reason;
    error.status = response.status;
    throw error;
  }
  return data;
}

function toast(text) {
  const t = $("toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 5000);
}

// -- views

// Pages and parts other modules render (console-kinds.js): page name -> render(snapshot) functions.
const extraViews = new Map();

export function registerView(page, render) {
  if (!extraViews.has(page)) extraViews.set(page, []);
  extraViews.get(page).push(render);
  if (state.me) showView(); // registered after the page was shown: show it again
}

function showView() {
  const name = (location.hash || "#overview").slice(1).split("/")[0]; // "#queue/<name>": the page "queue"
  const pages = ["overview", "locks", "coordination", "queues", ...extraViews.keys()].filter((v, i, all) => all.indexOf(v) === i);
  state.view = pages.includes(name) ? name : "overview";
  if (state.view !== "queues") { clearTimeout(charts.timer); charts.timer = null; }
  const loggedIn = state.me && state.me.logged_in;
  $("login").hidden = loggedIn;
  for (const v of pages) $(`view-${v}`).hidden = !loggedIn || v !== state.view;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.view === state.view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (state.events && state.parts !== partsOf(state.view)) connect(); // another page: its own parts
  render();
}

function card(title, big, rows = [], extra = null) {
  return el("div", { class: "card" }, el("h3", {}, title), big === null ? null : el("div", { class: "big" }, big),
    rows.length ? el("dl", {}, rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])) : null, extra);
}

// A process's health word (console/views.health_of) as colour and shape.
const HEALTH = {
  ok: ["ok", "● serving"], slow: ["waiting", "▲ slow loop"], late: ["waiting", "◌ late beat"],
  draining: ["free", "◐ draining"], redis: ["bad", "■ Redis unreachable"],
};

function health(word) {
  const [cls, text] = HEALTH[word] || ["free", word];
  return el("span", { class: `state ${cls}`, title: text.slice(2) }, text);
}

const perSecond = (calls) => (calls && calls.available ? calls.rates.reduce((sum, c) => sum + c.per_second, 0).toFixed(1) : "n/a");

function renderOverview(s) {
  const o = s.overview, r = o.redis, procs = s.processes;
  const cards = [
    card("Redis", r.serving ? el("span", { class: "ok" }, "● reachable") : el("span", { class: "bad" }, "■ unreachable"),
      r.error ? [["error", r.error]] : [
        ["version", r.version], ["memory used", bytes(r.used_memory)], ["peak", bytes(r.peak_memory)],
        ["bound", r.maxmemory ? `${bytes(r.maxmemory)} (${r.maxmemory_policy})` : "none"],
      ],
      r.maxmemory ? el("div", { class: "meter", role: "img", "aria-label": `${Math.round(100 * r.used_memory / r.maxmemory)} % of the memory bound` },
        el("span")) : null),
  ];
  if (procs && !procs.error) {
    const unwell = procs.items.filter((p) => p.health !== "ok").length;
    cards.unshift(card("Server processes", procs.items.length, [
      ["serving", procs.items.length - unwell], ["not well", unwell],
      ["calls / s (all)", procs.calls.available ? procs.calls.rates.reduce((sum, c) => sum + c.per_second, 0).toFixed(1) : "n/a"],
    ]));
    const b = procs.blocked;
    cards.push(card("Blocked calls", b.locks_semaphores + b.queues + b.chats_files, [
      ["lock / semaphore waits", b.locks_semaphores], ["queue waits", b.queues],
      ["chat / file waits", b.chats_files], ["open streams", procs.streams],
    ]));
  }
  const meter = cards.find((c) => c.querySelector(".meter > span"));
  if (meter) meter.querySelector(".meter > span").style.width = `${Math.min(100, (100 * r.used_memory) / r.maxmemory)}%`;
  $("overview-cards").replaceChildren(...cards);
  renderProcesses(procs, o.process_id);
  renderCalls(procs);
}

function renderProcesses(procs, self) {
  const box = $("processes");
  if (!procs) {
    box.replaceChildren(el("p", { class: "empty" }, "Server processes are the server's, not a tenant's: " +
      "log in with an admin token to see them, with their health and figures."));
    return;
  }
  if (procs.error) {
    box.replaceChildren(el("p", { class: "empty error" }, `Server processes could not be read: ${procs.error}`));
    return;
  }
  if (!procs.items.length) {
    box.replaceChildren(el("p", { class: "empty" }, "No server process has written its record yet: each does within two " +
      "seconds of starting. If none ever shows, this server cannot write to Redis."));
    return;
  }
  box.replaceChildren(el("p", { class: "legend" }, count(procs.items.length, "process", "processes") +
      (procs.more ? ` (the first ${procs.limit})` : "") + " · every replica on this Redis, from its record of the last 2 s"),
  table(["health", "process", "gRPC", "version", "up since", "calls / s", "blocked", "streams", "loop lag", "memory", "CPU"],
    procs.items.map((p) => el("tr", { "data-process": p.id },
      el("td", { "data-label": "health" }, health(p.health)),
      el("td", { "data-label": "process", class: "name" }, `${p.host} · pid ${p.pid}`,
        p.id === self ? el("div", { class: "legend" }, "this console's") : null),
      el("td", { "data-label": "gRPC", class: "name" }, p.listen, p.console ? el("div", { class: "legend" }, `console ${p.console}`) : null),
      el("td", { "data-label": "version" }, p.version),
      el("td", { "data-label": "up since" }, when(p.started_at_ms)),
      el("td", { "data-label": "calls / s" }, perSecond(p.calls)),
      el("td", { "data-label": "blocked" }, p.blocked.locks_semaphores + p.blocked.queues + p.blocked.chats_files),
      el("td", { "data-label": "streams" }, p.streams ?? "n/a"),
      el("td", { "data-label": "loop lag" }, p.loop_lag_ms === null ? "…" : `${p.loop_lag_ms} ms`),
      el("td", { "data-label": "memory" }, bytes(p.rss_bytes)),
      el("td", { "data-label": "CPU" }, p.cpu_percent === null ? "…" : `${p.cpu_percent} %`)))));
}

function renderCalls(procs) {
  if (!procs || procs.error) { $("calls").replaceChildren(); $("calls-title").hidden = true; return; }
  $("calls-title").hidden = false;
  const rates = procs.calls.rates.filter((c) => c.per_second > 0 || c.total > 0);
  if (!procs.calls.available) {
    $("calls").replaceChildren(el("p", { class: "empty" }, "No process counts its calls: start servers with " +
      "--console-listen or --metrics-listen to see calls per second here."));
  } else if (!rates.length) {
    $("calls").replaceChildren(el("p", { class: "empty" },
      "No calls yet. Point a client at this server (or run ", el("code", {}, "concord lock list"),
      ") and its calls appear here within two seconds, by service and status code."));
  } else {
    $("calls").replaceChildren(el("p", { class: "legend" }, `summed over the ${count(procs.calls.processes_counting, "process", "processes")} that count calls`),
      el("table", {},
      el("thead", {}, el("tr", {}, el("th", {}, "service"), el("th", {}, "code"), el("th", {}, "per second"), el("th", {}, "since start"))),
      el("tbody", {}, rates.map((c) => el("tr", {},
        el("td", { "data-label": "service" }, c.service),
        el("td", { "data-label": "code", class: c.code === "OK" ? "ok" : "bad" }, c.code),
        el("td", { "data-label": "per second" }, c.per_second.toFixed(1)),
        el("td", { "data-label": "since start" }, c.total))))));
  }
}

function lockState(lock) {
  if (lock.held && lock.waiters) return el("span", { class: "state waiting", title: "held, with waiters" }, "▲ held");
  if (lock.held) return el("span", { class: "state held", title: "held" }, "● held");
  return el("span", { class: "state free", title: "free, with waiters about to take it" }, "○ free");
}

function waiterList(lock) {
  const queue = lock.queue || [];
  if (!queue.length) return "—";
  const more = lock.waiters - queue.length;
  return el("ol", { class: "waiters" }, queue.map((w) => el("li", {},
    el("span", { class: "name" }, w.owner || "(no label)"), ` · waiting ${duration(w.waited_ms)}`)),
    more > 0 ? el("li", { class: "more" }, `… and ${more} more: `,
      el("a", { href: `#lock/${encodeURIComponent(lock.name)}` }, "all waiters, page by page")) : null);
}

function renderLocks(locks) {
  const box = $("locks");
  if (!locks) {
    box.replaceChildren(el("p", { class: "empty" }, "Your token may not list locks (its services leave the lock service out)."));
    return;
  }
  if (locks.error) {
    box.replaceChildren(el("p", { class: "empty error" }, `Locks could not be read: ${locks.error}`));
    return;
  }
  if (!locks.items.length) {
    box.replaceChildren(activity(locks.activity), el("p", { class: "empty" },
      "No lock is held or waited for in this tenant. Take one through the API (in Python: ",
      el("code", {}, 'client.lock("orders:42").acquire()'), ") and it shows here within a second, with its holder and waiters."));
    return;
  }
  const canRelease = state.me && state.me.may && state.me.may.force_release;
  box.replaceChildren(activity(locks.activity), el("p", { class: "legend" }, `${locks.items.length} lock${locks.items.length === 1 ? "" : "s"}` +
      (locks.more ? ` (the first ${locks.limit} by name)` : "")), el("table", {},
    el("thead", {}, el("tr", {}, ["state", "name", "owner", "fencing token", "time left", "waiters", "queue (first in line first)"]
      .map((h) => el("th", { scope: "col" }, h)), canRelease ? el("th", { scope: "col" }, "action") : null)),
    el("tbody", {}, locks.items.map((lock) => el("tr", { "data-lock": lock.name },
      el("td", { "data-label": "state" }, lockState(lock)),
      el("td", { "data-label": "name", class: "name" }, lock.name),
      el("td", { "data-label": "owner" }, lock.held ? lock.owner || "(no label)" : "—"),
      el("td", { "data-label": "fencing token" }, lock.held ? lock.fencing_token : "—"),
      el("td", { "data-label": "time left" }, lock.held
        ? el("span", { title: `expires ${when(lock.expires_at_ms)}` }, duration(lock.ttl_ms))
        : "—"),
      el("td", { "data-label": "waiters" }, lock.waiters),
      el("td", { "data-label": "queue" }, waiterList(lock)),
      canRelease ? el("td", { "data-label": "action" }, el("button", {
        type: "button", class: "danger", disabled: !lock.held, onclick: () => forceRelease(lock),
        "aria-label": `Force-release ${lock.name}`,
      }, "Force-release")) : null)))));
}

// The tenant's handoffs per second and deadlocks broken, summed over every replica (kept in Redis).
function activity(a) {
  if (!a) return null;
  const h = a.handoffs_per_second, hour = a.handoffs_last_hour;
  const seconds = Math.round(a.interval_ms / 1000);
  return el("div", { class: "cards", id: "lock-activity" },
    card("Lock handoffs per second", h.lock.toFixed(1), [
      ["semaphores", h.semaphore.toFixed(1)], ["read-write locks", h.rwlock.toFixed(1)], ["elections", h.election.toFixed(1)],
      ["over", `the ${seconds} s from ${when(a.handoffs_at_ms)}`],
      ["last hour", `${hour.lock + hour.semaphore + hour.rwlock + hour.election} handoffs`],
    ]),
    card("Deadlocks broken", a.deadlocks_broken ? el("span", { class: "state waiting" }, `▲ ${a.deadlocks_broken}`)
      : el("span", { class: "state held" }, "● 0"), [
      ["in", "the last hour, every replica"],
      ["last", a.last_deadlock_at_ms ? when(a.last_deadlock_at_ms) : "—"],
    ]));
}

function render() {
  const s = state.snapshot;
  if (!s || !state.me || !state.me.logged_in) return;
  if (s.error) { $("live").textContent = `error: ${s.error}`; return; }
  if (state.view === "overview" && s.overview) renderOverview(s);
  if (state.view === "locks") renderLocks(s.locks);
  if (state.view === "coordination") renderSemaphores(s.semaphores);
  if (state.view === "queues") {
    renderQueues(s.queues);
    if (!search) renderSearch();
  }
  for (const renderPart of extraViews.get(state.view) || []) renderPart(s);
}

// The box's message when a part is missing (the token may not list it) or failed to read;
// null when there is data to show.
function unavailable(box, part, what, service) {
  if (!part) {
    box.replaceChildren(el("p", { class: "empty" }, `Your token may not list ${what} (its services leave the ${service} out).`));
    return true;
  }
  if (part.error) {
    box.replaceChildren(el("p", { class: "empty error" }, `${what[0].toUpperCase()}${what.slice(1)} could not be read: ${part.error}`));
    return true;
  }
  return false;
}

function table(headers, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows));
}

const count = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function renderSemaphores(sems) {
  const box = $("semaphores");
  if (unavailable(box, sems, "semaphores", "semaphore service")) return;
  if (!sems.items.length) {
    box.replaceChildren(el("p", { class: "empty" },
      "No semaphore is held or waited for in this tenant. Take a permit through the API (in Python: ",
      el("code", {}, 'client.semaphore("crawlers", limit=4).acquire()'),
      ") and it shows here within a second, with its holders and waiters."));
    return;
  }
  box.replaceChildren(el("p", { class: "legend" }, count(sems.items.length, "semaphore") +
      (sems.more ? ` (the first ${sems.limit} by name)` : "")),
    table(["name", "held / limit", "holders (soonest to expire first)", "waiters"], sems.items.map((s) =>
      el("tr", { "data-semaphore": s.name },
        el("td", { "data-label": "name", class: "name" }, s.name),
        el("td", { "data-label": "held / limit" }, `${s.held} / ${s.limit}`),
        el("td", { "data-label": "holders" }, s.holders.length ? el("ul", { class: "waiters" },
          s.holders.map((h) => el("li", {}, el("span", { class: "name" }, h.owner || "(no label)"),
            h.permits === 1 ? "" : ` ×${h.permits}`,
            el("span", { title: `expires ${when(h.expires_at_ms)}` }, ` · ${duration(h.ttl_ms)} left`))),
          s.holder_count > s.holders.length ? el("li", { class: "more" }, `… and ${s.holder_count - s.holders.length} more`) : null)
          : "—"),
        el("td", { "data-label": "waiters" }, s.waiters)))));
}

function renderQueues(queues) {
  const box = $("queues");
  if (unavailable(box, queues, "queues", "queue service")) return;
  if (!queues.items.length) {
    box.replaceChildren(el("p", { class: "empty" },
      "No queue holds tasks in this tenant. Enqueue one through the API (in Python: ",
      el("code", {}, 'client.queue("emails").enqueue("send", b"...")'),
      ") and it shows here within a second, with its tasks counted by state."));
    return;
  }
  const may = (state.me && state.me.may) || {};
  const canRetry = may.retry_dead;
  $("queue-names").replaceChildren(...queues.items.map((q) => el("option", { value: q.name })));
  wantHistory(queues.items.map((q) => q.name));
  const parts = [el("p", { class: "legend" }, count(queues.items.length, "queue") +
      (queues.more ? ` (the first ${queues.limit} by name)` : ""),
    " · last hour: ", el("span", { class: "key ready" }, "● ready"), el("span", { class: "key delayed" }, "◷ delayed"),
    el("span", { class: "key leased" }, "▶ leased"), el("span", { class: "key dead" }, "✖ dead"),
    "(kept in Redis; in / s and out / s over the last sample interval)"),
    table(["name", "ready", "delayed", "leased", "dead", "done", "oldest ready", "in / s", "out / s", "last hour", "actions"], queues.items.map((q) =>
      el("tr", { "data-queue": q.name },
        el("td", { "data-label": "name", class: "name" }, el("a", { href: `#queue/${encodeURIComponent(q.name)}` }, q.name),
          q.paused ? el("span", { class: "state free" }, " ⏸ paused") : null),
        el("td", { "data-label": "ready" }, q.ready),
        el("td", { "data-label": "delayed" }, q.delayed),
        el("td", { "data-label": "leased" }, q.leased),
        el("td", { "data-label": "dead", class: q.dead ? "bad" : null }, q.dead),
        el("td", { "data-label": "done" }, q.done),
        el("td", { "data-label": "oldest ready" }, q.ready ? duration(q.oldest_ready_age_ms) : "—"),
        ...historyCells(q.name),
        el("td", { "data-label": "actions" }, queueActions(q, may)))))];
  for (const q of queues.items.filter((q) => q.dead_tasks.length)) {
    parts.push(el("div", { "data-dead-of": q.name }, el("h3", {}, `Dead tasks of ${q.name}`),
      el("p", { class: "legend" }, q.dead > q.dead_tasks.length ? `the first ${q.dead_tasks.length} of ${q.dead}, oldest death first` : "oldest death first"),
      table(["task", "type", "attempts", "last error", ...(canRetry ? ["action"] : [])], q.dead_tasks.map((t) =>
        el("tr", { "data-task": t.task_id },
          el("td", { "data-label": "task", class: "name" }, taskLink(q.name, t.task_id)),
          el("td", { "data-label": "type" }, t.type),
          el("td", { "data-label": "attempts" }, `${t.attempt} / ${t.max_attempts}`),
          el("td", { "data-label": "last error", class: "error" }, t.last_error || `(${t.dead_reason || "no error"})`),
          canRetry ? el("td", { "data-label": "action" }, el("button", {
            type: "button", onclick: () => retryDead(q.name, t), "aria-label": `Retry ${t.task_id} of ${q.name}`,
          }, "Retry")) : null)))));
  }
  box.replaceChildren(...parts);
}

// -- queue histories: asked of the server once per sample interval while the Queues page shows

const charts = { names: [], data: null, timer: null, asking: false };

function wantHistory(names) {
  const changed = names.join("\n") !== charts.names.join("\n");
  charts.names = names;
  if (changed || !charts.timer) loadHistory();
}

async function loadHistory() {
  clearTimeout(charts.timer);
  charts.timer = null;
  if (state.view !== "queues" || !charts.names.length || charts.asking) return;
  charts.asking = true;
  try {
    charts.data = await api("/api/queues/history", { queues: charts.names });
  } catch (error) {
    charts.data = { error: error.message, queues: {} };
  }
  charts.asking = false;
  const every = Math.max(1000, (charts.data && charts.data.interval_ms) || 10000);
  charts.timer = setTimeout(loadHistory, every);
  if (state.view === "queues" && state.snapshot && state.snapshot.queues) renderQueues(state.snapshot.queues);
}

const rate = (n) => (n === null || n === undefined ? "…" : n.toFixed(n < 10 ? 2 : 1));

function historyCells(name) {
  const h = charts.data && charts.data.queues ? charts.data.queues[name] : null;
  return [
    el("td", { "data-label": "in / s" }, h ? rate(h.in_per_second) : "…"),
    el("td", { "data-label": "out / s" }, h ? rate(h.out_per_second) : "…"),
    el("td", { "data-label": "last hour" }, h ? chart(h.samples) : "…"),
  ];
}

const SVG = "http://www.w3.org/2000/svg";
const SERIES = [["ready", 1], ["delayed", 2], ["leased", 3], ["dead", 4]]; // [class, index in a sample]

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  node.append(...children);
  return node;
}

// A queue's counts over its kept samples as one small inline SVG: a line per state,
// time left to right (the first sample to the last; at most the kept hour), counts
// scaled to the highest. samples: [[at_ms, ready, delayed, leased, dead, enqueued], ...] oldest first.
function chart(samples) {
  if (!samples.length) return el("span", { class: "legend" }, "no samples yet");
  const W = 160, H = 36;
  const points = samples.length > 1 ? samples : [samples[0], samples[0]]; // one sample: a level line
  const start = points[0][0], span = Math.max(1, points[points.length - 1][0] - start);
  const top = Math.max(1, ...points.flatMap((s) => SERIES.map(([, i]) => s[i])));
  const x = (k, at) => (points === samples ? ((at - start) / span) * (W - 2) + 1 : k * (W - 2) + 1).toFixed(1);
  const y = (n) => (H - 1 - (n / top) * (H - 2)).toFixed(1);
  const last = samples[samples.length - 1];
  const label = `${SERIES.map(([name, i]) => `${name} ${last[i]}`).join(", ")}; highest ${top}; ` +
    `${count(samples.length, "sample")} since ${when(samples[0][0])}`;
  return svg("svg", { class: "spark", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": label },
    svg("title", {}, label),
    ...SERIES.map(([name, i]) => svg("polyline", {
      class: name, points: points.map((s, k) => `${x(k, s[0])},${y(s[i])}`).join(" "),
    })));
}

function queueActions(q, may) {
  return el("div", { class: "row-actions" },
    may.search_tasks ? el("button", { type: "button", onclick: () => searchQueue(q.name), "aria-label": `Search ${q.name}` }, "Search") : null,
    may.pause_queue ? el("button", { type: "button", onclick: () => pauseQueue(q), "aria-label": `${q.paused ? "Resume" : "Pause"} ${q.name}` },
      q.paused ? "Resume" : "Pause") : null,
    may.purge ? el("button", { type: "button", class: "danger", onclick: () => purgeQueue(q), "aria-label": `Purge ${q.name}` }, "Purge") : null);
}

// -- task search: results come from the server (SearchTasks), a page at a time

const STATE_SHAPES = { ready: "● ready", waiting: "⏸ waiting", delayed: "◷ delayed", leased: "▶ leased",
  dead: "✖ dead", succeeded: "✔ succeeded", cancelled: "○ cancelled" };
let search = null; // {query, tasks: Map id -> task, token, examined, done, selected: Set, error}

function searchQueue(name) {
  const form = $("search-form");
  form.queue.value = name;
  form.scrollIntoView({ block: "start" });
  form.requestSubmit();
}

function searchQuery() {
  const f = $("search-form");
  const query = { queue: f.queue.value.trim() };
  if (f.task_id.value.trim()) query.task_id = f.task_id.value.trim();
  if (f.type.value) query[f.prefix.checked ? "type_prefix" : "type"] = f.type.value;
  if (f.state.value) query.states = [f.state.value];
  if (f.error.value) query.error = f.error.value;
  if (f.payload.value) query.payload = f.payload.value;
  return query;
}

async function runSearch(fresh = true) {
  if (fresh) {
    search = { query: searchQuery(), tasks: new Map(), token: "", examined: 0, done: false, selected: new Set(),
      page: 0, found: 0 };
    loadSchedules(search.query.queue);
  }
  const asked = search;
  asked.busy = true;
  renderSearch();
  try {
    const page = await api("/api/queues/search", { ...asked.query, page_token: asked.token });
    // One page at a time: the next replaces it, so 100,000 matches never make 100,000 rows.
    asked.tasks = new Map(page.tasks.map((t) => [t.task_id, t]));
    asked.page += 1;
    asked.found += page.tasks.length;
    asked.token = page.next_page_token;
    asked.examined += page.examined;
    asked.done = !page.next_page_token;
    asked.error = null;
  } catch (error) {
    asked.error = `${error.reason || ""} ${error.message}`;
  }
  asked.busy = false;
  if (asked === search) renderSearch();
}

// A task's page (console-detail.js): its state and its whole event history.
function taskLink(queue, id) {
  return el("a", { href: `#task/${encodeURIComponent(queue)}/${encodeURIComponent(id)}`, "aria-label": `Task ${id} of ${queue}` }, id);
}

function taskState(t) {
  return el("span", { class: `state ${t.state}` }, STATE_SHAPES[t.state] || t.state);
}

function renderSearch() {
  const box = $("search-results");
  if (!search) {
    box.replaceChildren(el("p", { class: "empty" }, "Name a queue and any of a task id, type, state, error text or payload " +
      "text: the server searches the whole queue, a page at a time. Use a queue's Search button above to start."));
    return;
  }
  const may = (state.me && state.me.may) || {};
  const tasks = [...search.tasks.values()];
  const parts = [];
  const status = search.busy ? "searching…" : search.done ? "the whole queue was searched" : "more of the queue to search";
  parts.push(el("p", { class: "legend", id: "search-status" },
    `${count(search.found, "task")} found in queue "${search.query.queue}"` +
    (search.page > 1 ? ` · page ${search.page}: ${tasks.length} shown` : "") + ` · ${search.examined} looked at · ${status}`));
  if (search.error) parts.push(el("p", { class: "error", role: "alert" }, `Search failed: ${search.error}`));
  if (!tasks.length && !search.busy && !search.error) {
    parts.push(el("p", { class: "empty" }, search.done && !search.found ? `No task of queue "${search.query.queue}" matches. ` +
      "Loosen a filter, or check the queue's name." : search.done ? "No more matches." : "None found on this page: press Next page to search on."));
  }
  const actions = may.retry_dead || may.delete_dead || may.cancel;
  if (tasks.length) {
    parts.push(table([...(actions ? ["select"] : []), "task", "state", "type", "attempts", "last error", "payload",
      ...(actions ? ["action"] : [])], tasks.map((t) => el("tr", { "data-task": t.task_id },
      actions ? el("td", { "data-label": "select" }, el("input", {
        type: "checkbox", checked: search.selected.has(t.task_id), "aria-label": `Select ${t.task_id}`,
        onchange: (e) => { if (e.target.checked) search.selected.add(t.task_id); else search.selected.delete(t.task_id); renderBulk(); },
      })) : null,
      el("td", { "data-label": "task", class: "name" }, taskLink(search.query.queue, t.task_id)),
      el("td", { "data-label": "state" }, taskState(t)),
      el("td", { "data-label": "type" }, t.type),
      el("td", { "data-label": "attempts" }, `${t.attempt} / ${t.max_attempts}`),
      el("td", { "data-label": "last error", class: "error" }, t.last_error || "—"),
      el("td", { "data-label": "payload", class: "payload", title: `${t.payload_bytes} bytes` },
        t.payload_bytes ? t.payload_preview + (t.payload_bytes > t.payload_preview.length ? "…" : "") : "—"),
      actions ? el("td", { "data-label": "action" }, taskActions(t, may)) : null))));
  }
  if (!search.done && !search.busy) {
    parts.push(el("div", { class: "row-actions" },
      search.page > 1 ? el("button", { type: "button", id: "search-first", onclick: () => runSearch() }, "First page") : null,
      el("button", { type: "button", id: "search-more", onclick: () => runSearch(false) }, "Next page")));
  } else if (search.page > 1 && !search.busy) {
    parts.push(el("button", { type: "button", id: "search-first", onclick: () => runSearch() }, "First page"));
  }
  parts.push(el("div", { class: "bulk", id: "bulk" }));
  box.replaceChildren(...parts);
  renderBulk();
}

function taskActions(t, may) {
  const q = search.query.queue;
  if (t.state === "dead") {
    return el("div", { class: "actions" },
      may.retry_dead ? el("button", { type: "button", onclick: () => retryDead(q, t), "aria-label": `Retry ${t.task_id} of ${q}` }, "Retry") : null,
      may.delete_dead ? el("button", { type: "button", class: "danger", onclick: () => deleteDead(q, [t.task_id]),
        "aria-label": `Delete ${t.task_id} of ${q}` }, "Delete") : null);
  }
  if (["ready", "waiting", "delayed"].includes(t.state) && may.cancel) {
    return el("button", { type: "button", class: "danger", onclick: () => cancelTask(q, t), "aria-label": `Cancel ${t.task_id} of ${q}` }, "Cancel");
  }
  return "—";
}

// The bulk actions: on the selected dead tasks, or on every dead task the search finds.
function renderBulk() {
  const bar = $("bulk");
  if (!bar || !search) return;
  const may = (state.me && state.me.may) || {};
  const q = search.query.queue;
  const deadSelected = [...search.selected].filter((id) => (search.tasks.get(id) || {}).state === "dead");
  const deadShown = [...search.tasks.values()].some((t) => t.state === "dead");
  const buttons = [];
  if (may.retry_dead && deadSelected.length) {
    buttons.push(el("button", { type: "button", onclick: () => retrySelected(q, deadSelected) }, `Retry ${count(deadSelected.length, "selected dead task")}`));
  }
  if (may.delete_dead && deadSelected.length) {
    buttons.push(el("button", { type: "button", class: "danger", onclick: () => deleteDead(q, deadSelected) }, `Delete ${count(deadSelected.length, "selected dead task")}`));
  }
  if (deadShown && may.retry_dead) buttons.push(el("button", { type: "button", onclick: () => allMatching("retry") }, "Retry all matching dead tasks"));
  if (deadShown && may.delete_dead) buttons.push(el("button", { type: "button", class: "danger", onclick: () => allMatching("delete") }, "Delete all matching dead tasks"));
  bar.replaceChildren(...buttons);
}

function filtersText(query) {
  const shown = [["type", query.type], ["type prefix", query.type_prefix], ["error text", query.error], ["payload text", query.payload]]
    .filter(([, value]) => value).map(([k, value]) => `${k} "${value}"`);
  return shown.length ? shown.join(", ") : "no filter";
}

async function loadSchedules(queue) {
  const box = $("schedules");
  const may = (state.me && state.me.may) || {};
  if (!may.list_schedules) { box.replaceChildren(); return; }
  let reply;
  try {
    reply = await api("/api/queues/schedules", { queue });
  } catch (error) {
    box.replaceChildren(el("p", { class: "empty error" }, `Schedules could not be read: ${error.message}`));
    return;
  }
  if (!reply.schedules.length) {
    box.replaceChildren(el("h3", {}, `Schedules of ${queue}`), el("p", { class: "empty" },
      "This queue has no schedule. Create one through the API (in Python: ", el("code", {}, `client.queue("${queue}").schedule("nightly", cron="0 3 * * *")`), ")."));
    return;
  }
  box.replaceChildren(el("h3", {}, `Schedules of ${queue}`), table(["name", "when", "next run", "runs", "state", ...(may.pause_schedule ? ["action"] : [])],
    reply.schedules.map((s) => el("tr", { "data-schedule": s.name },
      el("td", { "data-label": "name", class: "name" }, s.name),
      el("td", { "data-label": "when" }, s.when),
      el("td", { "data-label": "next run" }, s.next_run_ms ? when(s.next_run_ms) : "—"),
      el("td", { "data-label": "runs" }, s.runs),
      el("td", { "data-label": "state" }, s.paused ? el("span", { class: "state free" }, "⏸ paused") : el("span", { class: "state held" }, "● running")),
      may.pause_schedule ? el("td", { "data-label": "action" }, el("button", {
        type: "button", onclick: () => pauseSchedule(queue, s), "aria-label": `${s.paused ? "Resume" : "Pause"} schedule ${s.name}`,
      }, s.paused ? "Resume" : "Pause")) : null))));
}

// -- actions

// Asks in the confirm dialog; then(…) runs only on its OK button.
function confirmThen(title, text, ok, then) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = ok;
  dialog.returnValue = "cancel";
  dialog.onclose = async () => { if (dialog.returnValue === "ok") await then(); };
  dialog.showModal();
}

// Confirms, then POSTs body to path; toasts what done(reply) says, and searches again.
function act(title, text, ok, path, body, done) {
  confirmThen(title, text, ok, async () => {
    try {
      toast(done(await api(path, body)));
    } catch (error) {
      toast(`Not done: ${error.reason || ""} ${error.message}`);
    }
    if (search) runSearch();
  });
}

function retryDead(queue, task) {
  act("Retry this dead task?", `Task ${task.task_id} (${task.type}) of queue "${queue}" goes back to ready ` +
    "with a fresh set of attempts; a worker will run it again.", "Retry", "/api/queues/retry-dead",
  { queue, task_id: task.task_id },
  (reply) => (reply.retried ? `Task ${task.task_id} is ready again.` : `Task ${task.task_id} was no longer dead.`));
}

function retrySelected(queue, ids) {
  act(`Retry ${count(ids.length, "dead task")}?`, `They go back to ready in queue "${queue}" with a fresh set of attempts.`,
    "Retry", "/api/queues/retry-dead", { queue, task_ids: ids }, (reply) => `${count(reply.retried, "task")} ready again.`);
}

function deleteDead(queue, ids) {
  act(ids.length === 1 ? "Delete this dead task?" : `Delete ${count(ids.length, "dead task")}?`,
    `${ids.length === 1 ? `Task ${ids[0]}` : `These ${ids.length} tasks`} of queue "${queue}" will be deleted for good, ` +
    "with their payload and error.", "Delete", "/api/queues/delete-dead", { queue, task_ids: ids },
    (reply) => `${count(reply.deleted, "dead task")} deleted.`);
}

function cancelTask(queue, task) {
  act("Cancel this task?", `Task ${task.task_id} (${task.type}) of queue "${queue}" will not run; it is kept as cancelled ` +
    "under the queue's retention.", "Cancel task", "/api/queues/cancel", { queue, task_id: task.task_id },
  () => `Task ${task.task_id} is cancelled.`);
}

// Every dead task the search finds: the server takes a bounded step per request; the page asks until done.
function allMatching(verb) {
  const query = { ...search.query };
  const word = verb === "retry" ? "Retry" : "Delete";
  confirmThen(`${word} every matching dead task?`, `Every dead task of queue "${query.queue}" with ${filtersText(query)} ` +
    (verb === "retry" ? "goes back to ready with a fresh set of attempts." : "will be deleted for good."), word, async () => {
    let token = "", total = 0;
    try {
      do {
        const reply = await api(`/api/queues/${verb}-matching`, { ...query, page_token: token });
        total += verb === "retry" ? reply.retried : reply.deleted;
        token = reply.next_page_token;
        toast(`${verb === "retry" ? "Retried" : "Deleted"} ${count(total, "dead task")}${token ? " so far…" : "."}`);
      } while (token);
    } catch (error) {
      toast(`Stopped after ${total}: ${error.reason || ""} ${error.message}`);
    }
    if (search) runSearch();
  });
}

function pauseQueue(q) {
  const pausing = !q.paused;
  act(pausing ? "Pause this queue?" : "Resume this queue?", pausing
    ? `Workers get no task of "${q.name}" until it is resumed; tasks keep arriving.`
    : `Workers get tasks of "${q.name}" again at once.`, pausing ? "Pause" : "Resume", "/api/queues/pause",
  { queue: q.name, paused: pausing }, () => `Queue "${q.name}" is ${pausing ? "paused" : "running"}.`);
}

function purgeQueue(q) {
  act("Purge this queue?", `Every ready and delayed task of "${q.name}" (${q.ready + q.delayed}) is deleted for good; ` +
    "leased tasks are left to their workers, dead ones stay.", "Purge", "/api/queues/purge", { queue: q.name },
  (reply) => `Purged ${count(reply.deleted, "task")} from "${q.name}".`);
}

function pauseSchedule(queue, s) {
  const pausing = !s.paused;
  act(pausing ? "Pause this schedule?" : "Resume this schedule?", pausing
    ? `Schedule "${s.name}" of queue "${queue}" enqueues nothing until it is resumed.`
    : `Schedule "${s.name}" ticks again from its next time after now (ticks missed while paused do not run).`,
  pausing ? "Pause" : "Resume", "/api/queues/schedule-pause", { queue, name: s.name, paused: pausing }, (reply) => {
    loadSchedules(queue);
    return `Schedule "${s.name}" is ${reply.paused ? "paused" : "running"}.`;
  });
}

function forceRelease(lock) {
  confirmThen("Force-release this lock?", `"${lock.name}" is held by ${lock.owner || "(no label)"} with fencing token ` +
    `${lock.fencing_token}. Its holder is not told; ${lock.waiters ? "the next waiter gets the lock." : "nobody waits for it."}`,
  "Force-release", async () => {
    try {
      const reply = await api("/api/locks/force-release", { name: lock.name });
      toast(reply.released ? `Released "${lock.name}" from ${reply.owner || "(no label)"}.` : `"${lock.name}" was not held.`);
    } catch (error) {
      toast(`Not released: ${error.reason || ""} ${error.message}`);
    }
  });
}

// -- live updates

// The snapshot parts each page shows (console/app.py VIEWS): the server reads only the
// ones some open page asks for; the overview's comes with every snapshot.
const PARTS = {
  locks: ["locks"], coordination: ["semaphores", "rwlocks", "elections"], queues: ["queues"], chats: ["chats"],
  autocomplete: ["indexes"], files: ["file_groups"], limits: ["limits"],
};

function partsOf(view) {
  return (PARTS[view] || []).join(",");
}

function connect() {
  if (state.events) state.events.close();
  state.parts = partsOf(state.view);
  const events = new EventSource(`/api/events?parts=${encodeURIComponent(state.parts)}`);
  state.events = events;
  events.addEventListener("snapshot", (e) => {
    state.snapshot = JSON.parse(e.data);
    $("live").textContent = `live · ${new Date(state.snapshot.at_ms).toLocaleTimeString()}`;
    $("live").className = "live on";
    render();
  });
  events.onerror = async () => {
    $("live").textContent = "reconnecting…";
    $("live").className = "live off";
    if (events.readyState === EventSource.CLOSED) {
      events.close();
      await start(); // a closed stream: maybe logged out; ask again
    }
  };
}

async function start() {
  try {
    state.me = await api("/api/me");
  } catch (error) {
    $("live").textContent = `cannot reach the server: ${error.message}`;
    setTimeout(start, 3000);
    return;
  }
  $("who").textContent = $("who").title = state.me.logged_in ? state.me.who : "";  // the whole of it on hover
  $("logout").hidden = !(state.me.logged_in && state.me.needs_token);
  showView();
  if (state.me.logged_in) connect();
  else { $("live").textContent = "not logged in"; $("token").focus(); }
}

$("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("login-error").textContent = "";
  try {
    await api("/api/login", { token: $("token").value });
    $("token").value = "";
    await start();
  } catch (error) {
    $("login-error").textContent = error.status === 401 ? "That token is not known to this server." : error.message;
  }
});

$("logout").addEventListener("click", async () => {
  if (state.events) state.events.close();
  await api("/api/logout", {});
  state.snapshot = null;
  await start();
});

$("search-form").addEventListener("submit", (e) => {
  e.preventDefault();
  runSearch();
});

window.addEventListener("hashchange", showView);
start();

export { $, el, when, duration, bytes, api, count, table, unavailable, state, toast, confirmThen };
