// Concord console: the views of read-write locks and elections (on the coordination
// page), chats, autocomplete indexes (with the suggestion box), file groups and rate
// limits (with their reset and delete). Plain ES module beside console.js, whose
// helpers it uses; it renders the snapshot parts rwlocks, elections, chats, indexes,
// file_groups and limits (console/views_*.py).
// Every string from the server goes through textContent (never innerHTML).

import { $, el, when, duration, bytes, api, count, table, unavailable, registerView, state, toast, confirmThen } from "./console.js";

const more = (part, what) => (part.more ? ` (the first ${part.limit} by name)` : "") + (what ? ` ${what}` : "");

function code(text) {
  return el("code", {}, text);
}

function empty(box, ...children) {
  box.replaceChildren(el("p", { class: "empty" }, ...children));
}

// A value as the server sends it: {text} when it is UTF-8, else {hex}; cut when longer.
function shownValue(v) {
  if (!v || !v.bytes) return el("span", { class: "muted" }, "(empty)");
  const text = v.text !== undefined ? v.text : `0x${v.hex}`;
  return el("span", { class: "value", title: `${v.bytes} bytes${v.cut ? ", cut" : ""}` }, text + (v.cut ? "…" : ""));
}

// -- read-write locks

function rwState(lock) {
  const mode = lock.state === "write" ? "write-held" : `read-held ×${lock.readers}`;
  if (lock.state === "free") return el("span", { class: "state free", title: "free, with waiters about to take it" }, "○ free");
  if (lock.waiters) return el("span", { class: "state waiting", title: `${mode}, with waiters` }, `▲ ${mode}`);
  return el("span", { class: "state held", title: mode }, `${lock.state === "write" ? "●" : "◐"} ${mode}`);
}

function rwQueue(lock) {
  if (!lock.queue.length) return lock.waiters ? `${lock.waiters} queued` : "—";
  const rest = lock.waiters - lock.queue.length;
  return el("ol", { class: "waiters" }, lock.queue.map((w) => el("li", {},
    el("span", { class: `mode ${w.mode}` }, w.mode === "write" ? "◆ write" : "◇ read"), " ",
    el("span", { class: "name" }, w.owner || "(no label)"), ` · waiting ${duration(w.waited_ms)}`)),
  rest > 0 ? el("li", { class: "more" }, `… and ${rest} more`) : null);
}

function renderRWLocks(s) {
  const box = $("rwlocks"), part = s.rwlocks;
  if (unavailable(box, part, "read-write locks", "rwlock service")) return;
  if (!part.items.length) {
    empty(box, "No read-write lock is held or waited for in this tenant. Take one through the API (in Python: ",
      code('with client.rwlock("catalog").write(): ...'), ") and it shows here within a second, with its writer or readers and its waiters.");
    return;
  }
  box.replaceChildren(el("p", { class: "legend" }, count(part.items.length, "read-write lock") + more(part)),
    table(["state", "name", "writer", "fencing token", "time left", "readers", "waiters (first in line first)"],
      part.items.map((lock) => el("tr", { "data-rwlock": lock.name },
        el("td", { "data-label": "state" }, rwState(lock)),
        el("td", { "data-label": "name", class: "name" }, lock.name),
        el("td", { "data-label": "writer" }, lock.writer ? lock.writer.owner || "(no label)" : "—"),
        el("td", { "data-label": "fencing token" }, lock.writer ? lock.writer.fencing_token : "—"),
        el("td", { "data-label": "time left" }, lock.writer
          ? el("span", { title: `expires about ${when(Date.now() + lock.writer.ttl_ms)}` }, duration(lock.writer.ttl_ms)) : "—"),
        el("td", { "data-label": "readers" }, lock.readers),
        el("td", { "data-label": "waiters" }, rwQueue(lock))))));
}

// -- elections

function renderElections(s) {
  const box = $("elections"), part = s.elections;
  if (unavailable(box, part, "elections", "election service")) return;
  if (!part.items.length) {
    empty(box, "No election has a leader or candidates in this tenant. Campaign through the API (in Python: ",
      code('client.election("scheduler", candidate="host-a").elect(b"host-a:8080")'),
      ", or ", code("concord election campaign scheduler host-a:8080 -- CMD"),
      ") and it shows here within a second, with its leader, term and candidates.");
    return;
  }
  box.replaceChildren(el("p", { class: "legend" }, count(part.items.length, "election") + more(part) +
      `; the last ${part.history_limit} leaders each, newest first`),
  table(["state", "name", "leader", "term", "value", "time left", "candidates (first in line first)", "recent leaders"],
    part.items.map((e) => el("tr", { "data-election": e.name },
      el("td", { "data-label": "state" }, e.leader ? el("span", { class: "state held", title: "led" }, "★ led")
        : el("span", { class: "state free", title: "no leader; candidates waiting" }, "○ no leader")),
      el("td", { "data-label": "name", class: "name" }, e.name),
      el("td", { "data-label": "leader", class: "leader" }, e.leader ? e.leader.candidate || "(no label)" : "—"),
      el("td", { "data-label": "term" }, e.leader ? e.leader.term : "—"),
      el("td", { "data-label": "value" }, e.leader ? shownValue(e.leader.value) : "—"),
      el("td", { "data-label": "time left" }, e.leader
        ? el("span", { title: `ends ${when(e.leader.expires_at_ms)} unless refreshed` }, duration(e.leader.ttl_ms)) : "—"),
      el("td", { "data-label": "candidates" }, e.queue.length ? el("ol", { class: "waiters" },
        e.queue.map((c) => el("li", {}, el("span", { class: "name" }, c.candidate || "(no label)"), ` · waiting ${duration(c.waited_ms)}`)),
        e.candidates > e.queue.length ? el("li", { class: "more" }, `… and ${e.candidates - e.queue.length} more`) : null)
        : String(e.candidates)),
      el("td", { "data-label": "recent leaders" }, e.history.length ? el("ol", { class: "history" },
        e.history.map((h) => el("li", {}, h.term
          ? [el("span", { class: "name" }, h.candidate || "(no label)"), ` · term ${h.term}`]
          : el("span", { class: "state free" }, "○ nobody"),
        el("time", { datetime: new Date(h.at_ms).toISOString() }, ` · ${when(h.at_ms)}`)))) : "—")))));
}

// -- chats

function memberLine(m) {
  const parts = [el("span", { class: "name" }, m.user), " "];
  if (m.unread) parts.push(el("span", { class: "state waiting", title: `${m.unread} unread` }, `● ${m.unread} unread`));
  else parts.push(el("span", { class: "state held", title: "has seen every message" }, "✔ caught up"));
  if (m.missed) {
    parts.push(" ", el("span", { class: "state dead", title: "messages dropped by retention before this member saw them" },
      `⚠ gap: ${m.missed} dropped unseen`));
  }
  return el("li", { "data-member": m.user }, parts);
}

function renderChats(s) {
  const box = $("chats"), part = s.chats;
  $("chats-retention").textContent = part && part.retention
    ? `Each chat keeps at most ${part.retention.max_messages} messages and ${bytes(part.retention.max_bytes)} of bodies ` +
      "(the server's --chat-max-messages and --chat-max-bytes), and drops what every member has seen. A member whose " +
      "unseen messages were dropped has a gap: it is told so, and reads on from the oldest kept message." : "";
  if (unavailable(box, part, "chats", "chat service")) return;
  if (!part.items.length) {
    empty(box, "No chat in this tenant. Create one through the API (in Python: ",
      code('client.chat.create("alice", ["bob", "carol"], "hello")'),
      ") and it shows here within a second, with each member's unread count.");
    return;
  }
  box.replaceChildren(el("p", { class: "legend" }, count(part.items.length, "chat") + more(part) +
      `; members furthest behind first (the first ${part.members_limit})`),
  table(["chat", "last message", "kept", "members (unread, gaps)"], part.items.map((c) => el("tr", { "data-chat": c.name },
    el("td", { "data-label": "chat", class: "name" }, c.name,
      c.gaps ? el("div", { class: "state dead" }, `⚠ ${count(c.gaps, "member")} with a gap`) : null),
    el("td", { "data-label": "last message" }, `#${c.last_id}`),
    el("td", { "data-label": "kept" }, c.kept ? `#${c.first_id}–#${c.last_id} · ${count(c.kept, "message")} · ${bytes(c.kept_bytes)}`
      : "none (all seen)"),
    el("td", { "data-label": "members" }, el("ul", { class: "waiters" }, c.members.map(memberLine),
      c.member_count > c.members.length ? el("li", { class: "more" }, `… and ${c.member_count - c.members.length} more`) : null))))));
}

// -- autocomplete: index sizes and the suggestion box (the server answers, debounced here)

const suggestBox = { timer: null, asked: 0 };

function renderIndexes(s) {
  const box = $("indexes"), part = s.indexes;
  if (unavailable(box, part, "name indexes", "autocomplete service")) return;
  $("index-names").replaceChildren(...part.items.map((ix) => el("option", { value: ix.name })));
  const form = $("suggest-form");
  if (!form.index.value && part.items.length && document.activeElement !== form.index) form.index.value = part.items[0].name;
  if (!part.items.length) {
    empty(box, "No name index holds names in this tenant. Add some through the API (in Python: ",
      code('client.autocomplete.add_names("guild:7", ["Thomas", "Thea"])'),
      ") and the index shows here with its size; then type a prefix above.");
    return;
  }
  box.replaceChildren(el("p", { class: "legend" }, count(part.items.length, "index", "indexes") + more(part)),
    table(["index", "names", ""], part.items.map((ix) => el("tr", { "data-index": ix.name },
      el("td", { "data-label": "index", class: "name" }, ix.name),
      el("td", { "data-label": "names" }, ix.size.toLocaleString()),
      el("td", { "data-label": "try" }, el("button", { type: "button", "aria-label": `Suggest from ${ix.name}`, onclick: () => {
        form.index.value = ix.name;
        form.prefix.focus();
        suggestSoon(0);
      } }, "Suggest"))))));
}

function suggestSoon(delay = 200) {
  clearTimeout(suggestBox.timer);
  suggestBox.timer = setTimeout(suggest, delay);
}

async function suggest() {
  const form = $("suggest-form"), out = $("suggestions");
  const index = form.index.value.trim();
  if (!index) { out.replaceChildren(el("p", { class: "legend" }, "Name an index to suggest from.")); return; }
  const asked = ++suggestBox.asked;
  try {
    const reply = await api("/api/autocomplete/suggest", { index, prefix: form.prefix.value, order: form.order.value, limit: 10 });
    if (asked !== suggestBox.asked) return; // a later keystroke asked again
    if (!reply.suggestions.length) {
      out.replaceChildren(el("p", { class: "empty" }, `No name of "${index}" starts with "${form.prefix.value}".`));
      return;
    }
    out.replaceChildren(el("ol", { class: "suggestions", "aria-label": "Suggestions" }, reply.suggestions.map((x) =>
      el("li", {}, el("span", { class: "name" }, x.name), x.score ? el("span", { class: "muted" }, ` · score ${x.score}`) : null))),
    ...(reply.truncated ? [el("p", { class: "legend" }, "The score search was cut short: a longer prefix narrows it.")] : []));
  } catch (error) {
    if (asked === suggestBox.asked) out.replaceChildren(el("p", { class: "error", role: "alert" }, `No suggestions: ${error.message}`));
  }
}

const suggestForm = $("suggest-form");
suggestForm.addEventListener("input", () => suggestSoon());
suggestForm.addEventListener("submit", (e) => { e.preventDefault(); suggestSoon(0); });

// -- file groups

// A bar of fraction (0-1); past 80 % it warns and at 100 % it is full (a bound's
// levels), unless the caller says the level (a download's is always "ok").
function meter(fraction, label, level = fraction >= 1 ? "full" : fraction >= 0.8 ? "warn" : "ok") {
  const bar = el("span");
  bar.style.width = `${Math.min(100, Math.round(100 * fraction))}%`; // CSSOM: allowed under the CSP
  return el("div", { class: `meter ${level}`, role: "img", "aria-label": label }, bar);
}

function fileState(f) {
  return f.state === "complete" ? el("span", { class: "state held", title: "complete: sent to its workers" }, "● complete")
    : el("span", { class: "state waiting", title: "being uploaded" }, "◐ uploading");
}

// How far a worker's download of a file has got, as the server last noted it: out of
// the file's size when the offset is into its stored bytes; a gzip file read as lines
// has an offset into its decompressed text, whose length nobody knows.
function downloadLine(d) {
  const noted = el("span", { class: "muted" }, ` · noted ${when(d.updated_ms)}`);
  if (d.lines && d.gzip) {
    return el("div", { class: "download", "data-file": d.file_id }, `${d.file}: ${bytes(d.offset)} of text read`,
      el("span", { class: "muted" }, " (gzip, decompressed)"), noted);
  }
  const fraction = d.size ? Math.min(1, d.offset / d.size) : 1;
  return el("div", { class: "download", "data-file": d.file_id },
    `${d.file}: ${bytes(d.offset)} of ${bytes(d.size)} read`, noted,
    meter(fraction, `${Math.round(100 * fraction)} % of ${d.file} read`, "ok"));
}

function workerLine(w) {
  const total = w.done + w.pending;
  return el("li", { "data-worker": w.worker }, el("span", { class: "name" }, w.worker), " ",
    w.pending ? el("span", { class: "state waiting" }, `◷ ${w.done} of ${total} done`)
      : el("span", { class: "state held" }, `✔ ${w.done} of ${total} done`),
    w.pending ? ` · waiting on ${w.pending_files.join(", ")}${w.pending > w.pending_files.length ? ", …" : ""}` : "",
    (w.downloads || []).map(downloadLine));
}

function renderFileGroups(s) {
  const box = $("file-groups"), part = s.file_groups;
  if (unavailable(box, part, "file groups", "files service")) return;
  if (!part.items.length) {
    empty(box, "No file group holds files in this tenant. A group is a chat: create it with its workers, then upload (in Python: ",
      code('client.chat.create("alice", ["worker-1"], "files follow", chat_id="logs")'), " then ",
      code('client.files.upload("report.csv", "logs", sender="alice")'), ") and it shows here with its bytes and workers.");
    return;
  }
  box.replaceChildren(el("p", { class: "legend" }, count(part.items.length, "group") + more(part) +
      `. A worker's progress is the files it has marked done and, of those it has not, how far its download has got ` +
      `when it named itself in the download (the server notes the offset it sent last, at most once a second).`),
  ...part.items.map((g) => {
    const fraction = g.bound_bytes ? g.held_bytes / g.bound_bytes : 0;
    return el("div", { class: "card group", "data-group": g.name },
      el("h3", {}, el("span", { class: "name" }, g.name)),
      el("p", { class: "held" }, `${bytes(g.held_bytes)} held of ${bytes(g.bound_bytes)} · ${count(g.files, "file")}`,
        fraction >= 1 ? el("span", { class: "state dead" }, " ■ at the bound: uploads wait") : fraction >= 0.8
          ? el("span", { class: "state waiting" }, " ▲ near the bound") : null),
      meter(fraction, `${Math.round(100 * fraction)} % of the group's bound`),
      table(["state", "file", "size", "sent by", "sent at", "workers done"], g.file_list.map((f) => el("tr", { "data-file": f.file_id },
        el("td", { "data-label": "state" }, fileState(f)),
        el("td", { "data-label": "file", class: "name" }, f.name, f.gzip ? el("span", { class: "muted" }, " (gzip)") : null),
        el("td", { "data-label": "size" }, bytes(f.size)),
        el("td", { "data-label": "sent by" }, f.sender),
        el("td", { "data-label": "sent at" }, when(f.created_ms)),
        el("td", { "data-label": "workers done" }, `${f.done} of ${f.done + f.pending}`,
          meter(f.done + f.pending ? f.done / (f.done + f.pending) : 0, `${f.done} of ${f.done + f.pending} workers done`))))),
      g.files > g.file_list.length ? el("p", { class: "legend" }, `the oldest ${g.file_list.length} of ${g.files} files`) : null,
      el("h4", {}, "Workers"),
      g.workers.length ? el("ul", { class: "waiters workers" }, g.workers.map(workerLine)) : el("p", { class: "legend" }, "—"),
      g.workers_sampled || g.workers_more ? el("p", { class: "legend" }, `workers sampled: at most ${part.workers_limit} shown, ` +
        "counted over the files listed") : null);
  }));
}

// -- rate limits

const ALGORITHMS = {
  gcra: "GCRA", token_bucket: "token bucket", sliding_log: "sliding log", sliding_window: "sliding window",
  fixed_window: "fixed window", concurrency: "concurrency",
};

// A period as a unit: "s", "min", "10 s", "250 ms".
function period(ms) {
  for (const [unit, size] of [["day", 86400000], ["h", 3600000], ["min", 60000], ["s", 1000]]) {
    if (ms % size === 0) return ms === size ? unit : `${ms / size} ${unit}`;
  }
  return `${ms} ms`;
}

function limitText(l) {
  const per = period(l.period_ms);
  if (l.algorithm === "concurrency") return `${l.rate} held at once (a permit lasts ${duration(l.period_ms)} at most)`;
  return `${l.rate} per ${per}` + (l.burst && l.burst !== l.rate ? `, burst ${l.burst}` : "") + (l.drain ? ", drains over limit" : "");
}

// Full (every unit back), spent (none left), or part used: colour and shape.
function limitState(l) {
  if (l.remaining <= 0) return el("span", { class: "state dead", title: `spent: full again in ${duration(l.reset_ms)}` }, "■ spent");
  if (l.remaining < l.capacity) return el("span", { class: "state waiting", title: `${l.capacity - l.remaining} of ${l.capacity} in use` }, "◐ in use");
  return el("span", { class: "state held", title: "full: nothing counted" }, "● full");
}

function limitAction(title, text, ok, path, key, done) {
  confirmThen(title, text, ok, async () => {
    try {
      toast(done(await api(path, { key })));
    } catch (error) {
      toast(`Not done: ${error.reason || ""} ${error.message}`);
    }
  });
}

function renderLimits(s) {
  const box = $("limits"), part = s.limits;
  if (unavailable(box, part, "rate limits", "rate-limit service")) return;
  const may = (state.me && state.me.may) || {};
  const note = "Only keys with a stored limit (SetLimit) are listed: a limit that travels with each call is kept nowhere to list.";
  if (!part.items.length) {
    empty(box, "No key has a stored rate limit in this tenant. Store one through the API (in Python: ",
      code('client.rate_limit("api:acme").set_limit(concord.Limit(100, 1.0, burst=20))'), ", or ",
      code("concord limit set api:acme 100 --burst 20"), ") and it shows here with what it allows now. " + note);
    return;
  }
  const acts = may.reset_limit || may.delete_limit;
  box.replaceChildren(el("p", { class: "legend" }, count(part.items.length, "key") + more(part) + `. ${note}`),
    table(["state", "key", "limit", "algorithm", "allows now", "full again in", "waiters", ...(acts ? ["actions"] : [])],
      part.items.map((l) => el("tr", { "data-limit": l.name },
        el("td", { "data-label": "state" }, limitState(l)),
        el("td", { "data-label": "key", class: "name" }, l.name),
        el("td", { "data-label": "limit" }, limitText(l)),
        el("td", { "data-label": "algorithm" }, ALGORITHMS[l.algorithm] || l.algorithm),
        el("td", { "data-label": "allows now" }, `${l.remaining} of ${l.capacity}`,
          meter(l.capacity ? 1 - l.remaining / l.capacity : 0, `${l.remaining} of ${l.capacity} left`)),
        el("td", { "data-label": "full again in" }, l.reset_ms ? duration(l.reset_ms) : "—"),
        el("td", { "data-label": "waiters" }, l.waiters),
        acts ? el("td", { "data-label": "actions" },
          may.reset_limit ? el("button", { type: "button", "aria-label": `Reset ${l.name}`, onclick: () => limitAction(
            "Reset this rate limit?", `What "${l.name}" has counted is forgotten: it is full again at once. Its stored limit stays.`,
            "Reset", "/api/limits/reset", l.name, () => `"${l.name}" is full again.`) }, "Reset") : null, " ",
          may.delete_limit ? el("button", { type: "button", class: "danger", "aria-label": `Delete ${l.name}`, onclick: () => limitAction(
            "Delete this rate limit?", `The stored limit of "${l.name}" and what it counted are deleted. Calls that carry no ` +
            "limit of their own fail NOT_FOUND until one is stored again.", "Delete", "/api/limits/delete", l.name,
            (reply) => (reply.deleted ? `"${l.name}" deleted.` : `"${l.name}" had no stored limit.`)) }, "Delete") : null) : null))));
}

registerView("coordination", (s) => { renderRWLocks(s); renderElections(s); });
registerView("chats", renderChats);
registerView("autocomplete", renderIndexes);
registerView("files", renderFileGroups);
registerView("limits", renderLimits);
