"""The web console in a real browser: Debian's chromium (/usr/bin/chromium) driven by
Playwright for Python, nothing downloaded (no `playwright install`). Skipped, with
the reason, where chromium or playwright is missing.

Against a live server with tokens, under load from another tenant for the whole
module (Load: LOAD_WAITS Dequeues blocked at all times, lock handoffs and task round
trips at about LOAD_RATE a second; the overview shows its blocked calls): the overview (with the server processes), locks
(with the lock activity), coordination, queues (with each queue's chart), chats,
autocomplete and files pages render with no console error; a lock taken through the
API shows with its waiter; a force-release confirmed in the page hands the lock to the
waiter; a semaphore shows with its holder; a dead task shows with its error, is found
by a search for its error text, and a Retry from the search results confirmed in the
page makes it ready; another tenant's admin sees neither the queue nor the task; a
read-only token sees no action button; at phone width the page still fits; a
read-write lock's writer taken through the API shows with its waiter, an election's
leader with its candidate and the history of leaders, a chat with its members' unread
counts, a file group with its bytes and workers, and the suggestion box suggests a
name added through the API, typed into it; another tenant sees none of them; a
stored rate limit shows spent, and a Reset confirmed in the page makes it full. Each
page is saved as a screenshot in the test's directory, or in $CONSOLE_SCREENSHOTS when
set (docs/console/ holds the ones the README shows).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import concord
from support import wait_until
from test_console import ACME_ADMIN, ACME_READER, ACME_WRITER, GLOBEX_ADMIN, console_server  # noqa: F401 (a fixture)

CHROMIUM = os.environ.get("CONCORD_CHROMIUM", "/usr/bin/chromium")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright for Python is not installed")
# After the rest, alone (make test): a browser, its server and the load take both cores;
# beside another test worker the load's blocked calls overran wait + 0.3 s (UNAVAILABLE)
# on 2.5% of its steps in one CI run.
pytestmark = pytest.mark.serial
if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
    pytest.skip(f"no chromium at {CHROMIUM} (Debian: apt-get install chromium)", allow_module_level=True)

UI_DEADLINE_MS = 5000
# What a call that expects its grant at once may wait for it: a try-once call is bounded
# by 0.3 s in the server, which a loaded CI machine overruns now and then (UNAVAILABLE).
GRANT_WAIT = 10
LOAD_WAITS = 200  # Dequeues the load keeps blocked in the server at all times
LOAD_RATE = 50  # lock handoffs, and task round trips, the load makes a second
LOAD_CLIENTS = 4  # its connections: a connection carries at most 100 calls at once
UNAVAILABLE_SHARE = 0.01  # of the load's steps that may answer UNAVAILABLE on a loaded machine (see Load)


class Load:
    """Another tenant's traffic on the console's server, in a thread of its own with an
    event loop, until ``stop``, which returns the errors it met (none expected): every
    blocked Dequeue is asked again as its wait ends, and the handoffs and round trips
    are paced to LOAD_RATE a second, so it loads the server steadily without taking
    both cores from the browser. UNAVAILABLE is what a blocked call answers when its
    Redis reply does not come within its wait + 0.3 s (primitives/letting_go.py),
    which a loaded CI machine can cause now and then: like any client, the load asks
    again, and counts it; a server that answered it often would fail ``stop``."""

    def __init__(self, target: str, token: str) -> None:
        self._target, self._token = target, token
        self._loop = asyncio.new_event_loop()
        self._stopping: asyncio.Event | None = None
        self.errors: list[BaseException] = []
        self.calls = self.unavailable = 0
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._run(),), daemon=True)

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> list[BaseException]:
        """The errors the load met: any but UNAVAILABLE, and UNAVAILABLE too once it
        answered more than one step in UNAVAILABLE_SHARE."""
        self._loop.call_soon_threadsafe(lambda: self._stopping and self._stopping.set())
        self._thread.join(30)
        if self.unavailable > max(2, self.calls * UNAVAILABLE_SHARE):
            return [*self.errors, AssertionError(f"{self.unavailable} of {self.calls} steps answered UNAVAILABLE")]
        return self.errors

    async def _run(self) -> None:
        self._stopping = asyncio.Event()
        # A subchannel pool each: else gRPC shares one connection among the clients.
        clients = [concord.AsyncClient(self._target, token=self._token, options=[("grpc.use_local_subchannel_pool", 1)])
                   for _ in range(LOAD_CLIENTS)]
        work = [asyncio.create_task(self._blocked(clients[i % LOAD_CLIENTS])) for i in range(LOAD_WAITS)]
        work.append(asyncio.create_task(self._round_trips(clients[0])))
        await self._stopping.wait()
        for task in work:
            task.cancel()
        await asyncio.gather(*work, return_exceptions=True)
        for client in clients:
            await client.close()

    async def _guarded(self, step) -> None:
        self.calls += 1
        try:
            await step()
        except asyncio.CancelledError:
            raise
        except concord.Unavailable:
            self.unavailable += 1  # asked again by the caller's loop
        except Exception as exc:  # noqa: BLE001 (kept for the module's end)
            self.errors.append(exc)
            raise

    async def _blocked(self, client: concord.AsyncClient) -> None:
        idle = client.queue("load:idle")  # never holds a task: every Dequeue waits its whole 5 s
        while True:
            await self._guarded(lambda: idle.get(1, timeout=5))

    async def _round_trips(self, client: concord.AsyncClient) -> None:
        loop = asyncio.get_running_loop()
        queue, started, done = client.queue("load:busy"), loop.time(), 0

        async def one() -> None:
            lock = client.lock(f"load:{done % 4}", ttl=10)
            lease = await lock.acquire(timeout=5)
            if lease is not None:  # None: a step cut short by UNAVAILABLE holds it until its TTL
                await lock.release(lease)
            await queue.put("t", b"x")
            for task in await queue.get(1, timeout=5):
                await queue.ack(task)

        while True:
            await self._guarded(one)
            done += 1
            await asyncio.sleep(max(0.0, started + done / LOAD_RATE - loop.time()))  # pacing, not settling


@pytest.fixture(scope="module", autouse=True)
def load(console_server) -> Iterator[Load]:
    running = Load(console_server.target, GLOBEX_ADMIN).start()
    yield running
    assert running.stop() == []


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        # --no-sandbox: tests may run as root (CI does), where chromium's sandbox will not start.
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = Path(os.environ.get("CONSOLE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Page:
    """A browser page on the console that collects console errors and page errors."""

    def __init__(self, browser, base: str, **context) -> None:
        self.context = browser.new_context(**context)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.base = base

    def log_in(self, token: str) -> None:
        self.page.goto(self.base + "/#overview")
        self.page.get_by_label("Token").fill(token)
        self.page.keyboard.press("Enter")  # the form is keyboard usable
        self.page.locator("#live.on").wait_for(timeout=UI_DEADLINE_MS)

    def close(self) -> None:
        self.context.close()

    def open(self, view: str, row: str) -> None:
        """Goes to ``#view`` and waits for the first element ``row`` selects."""
        self.page.goto(f"{self.base}/#{view}")
        self.page.locator(row).first.wait_for(timeout=UI_DEADLINE_MS)

    def fits(self) -> None:
        """Nothing is wider than the viewport (a phone's, for the readers here)."""
        width, viewport = self.page.evaluate("document.documentElement.scrollWidth"), self.page.viewport_size["width"]
        assert width <= viewport, f"{self.page.url} is {width}px wide in a {viewport}px viewport"

    def confirm(self, says: str, button: str) -> None:
        """The confirm dialog, once it says ``says``, answered with ``button``."""
        dialog = self.page.get_by_role("dialog")
        dialog.get_by_text(says).wait_for(timeout=UI_DEADLINE_MS)
        dialog.get_by_role("button", name=button).click()


def test_the_pages_render_live_and_force_release_hands_the_lock_on(browser, console_server, shots, name):
    admin = Page(browser, console_server.console, viewport={"width": 1280, "height": 800})
    reader = Page(browser, console_server.console, viewport={"width": 390, "height": 844}, is_mobile=True)
    granted: list[object] = []
    with concord.Client(console_server.target, token=ACME_WRITER) as holder, \
            concord.Client(console_server.target, token=ACME_WRITER) as waiter:
        try:
            admin.log_in(ACME_ADMIN)
            page = admin.page
            page.get_by_role("heading", name="Overview").wait_for(timeout=UI_DEADLINE_MS)
            page.locator("#overview-cards").get_by_text("● reachable").wait_for(timeout=UI_DEADLINE_MS)
            # Every server process, from the registry in Redis: this one at least, with its health's shape.
            process = page.locator(f'#processes tr[data-process] td[data-label="process"]:has-text("pid {console_server.proc.pid}")')
            process.wait_for(timeout=UI_DEADLINE_MS)
            page.locator("#processes tr[data-process] .state").first.wait_for(timeout=UI_DEADLINE_MS)
            process.locator("xpath=..").locator('td[data-label="loop lag"]').get_by_text("ms").wait_for(
                timeout=UI_DEADLINE_MS)  # its second beat: figures over an interval
            blocked = page.locator("#overview-cards .card", has_text="Blocked calls").locator(".big")
            wait_until(lambda: int(blocked.inner_text()) >= LOAD_WAITS, timeout=UI_DEADLINE_MS / 1000,
                       message="the load's blocked calls on the overview")
            page.screenshot(path=str(shots / "console-overview.png"), full_page=True)

            page.get_by_role("link", name="Locks").click()
            page.get_by_text("No lock is held").wait_for(timeout=UI_DEADLINE_MS)  # the empty state says what to do
            page.locator("#lock-activity").get_by_text("Lock handoffs per second").wait_for(timeout=UI_DEADLINE_MS)
            held = holder.lock(name, ttl=60, owner="stuck-worker").acquire(timeout=GRANT_WAIT)
            thread = threading.Thread(target=lambda: granted.append(
                waiter.lock(name, ttl=60, owner="next-worker").acquire(timeout=30)))
            thread.start()
            row = page.locator(f'tr[data-lock="{name}"]')
            row.get_by_text("▲ held").wait_for(timeout=UI_DEADLINE_MS)  # held, with a waiter: shape and colour
            assert row.get_by_text("stuck-worker").is_visible()
            assert row.locator('td[data-label="waiters"]').inner_text() == "1"
            row.locator('td[data-label="queue"]').get_by_text("next-worker").wait_for(timeout=UI_DEADLINE_MS)
            page.screenshot(path=str(shots / "console-locks.png"), full_page=True)

            reader.log_in(ACME_READER)
            reader.open("locks", f'tr[data-lock="{name}"]')
            assert reader.page.get_by_role("button", name="Force-release").count() == 0  # read-only: no actions
            reader.page.screenshot(path=str(shots / "console-locks-phone.png"), full_page=True)
            reader.fits()

            row.get_by_role("button", name=f"Force-release {name}").click()
            admin.confirm("the next waiter gets the lock", "Force-release")
            thread.join(UI_DEADLINE_MS / 1000)
            assert granted and granted[0] is not None and granted[0].fencing_token > held.fencing_token
            row.get_by_text("next-worker").wait_for(timeout=UI_DEADLINE_MS)
            page.get_by_text(f'Released "{name}" from stuck-worker').wait_for(timeout=UI_DEADLINE_MS)
            assert admin.errors == [] and reader.errors == [], (admin.errors, reader.errors)
            granted[0].release()
        finally:
            admin.close()
            reader.close()


def test_the_coordination_and_queues_pages_render_live_and_retry_makes_a_dead_task_ready(browser, console_server,
                                                                                      shots, name):
    admin = Page(browser, console_server.console, viewport={"width": 1280, "height": 800})
    reader = Page(browser, console_server.console, viewport={"width": 390, "height": 844}, is_mobile=True)
    other = Page(browser, console_server.console, viewport={"width": 1280, "height": 800})
    with concord.Client(console_server.target, token=ACME_WRITER) as client:
        permit = client.semaphore(name, limit=3, ttl=60, owner="crawler-7").acquire(timeout=GRANT_WAIT)
        try:
            admin.log_in(ACME_ADMIN)
            page = admin.page
            page.get_by_role("link", name="Coordination").click()
            row = page.locator(f'tr[data-semaphore="{name}"]')
            row.get_by_text("crawler-7").wait_for(timeout=UI_DEADLINE_MS)
            assert row.locator('td[data-label="held / limit"]').inner_text() == "1 / 3"
            page.get_by_text("No read-write lock is held").wait_for(timeout=UI_DEADLINE_MS)  # says what to do
            page.get_by_text("No election has a leader").wait_for(timeout=UI_DEADLINE_MS)
        finally:
            client.semaphore(name).release(permit)

        queue = client.queue(name)
        handle = queue.put("resize", b"payload", max_attempts=1)
        (task,) = queue.get(1, lease_ttl=30, timeout=GRANT_WAIT)
        queue.nack(task, "disk full", retryable=False)
        try:
            page.get_by_role("link", name="Queues").click()
            dead = page.locator(f'[data-dead-of="{name}"] tr[data-task="{handle.task_id}"]')  # ids are per queue
            dead.get_by_text("disk full").wait_for(timeout=UI_DEADLINE_MS)
            # Its counts over time, drawn in the page from the history kept in Redis.
            page.locator(f'tr[data-queue="{name}"] svg.spark[aria-label*="3 samples"]').wait_for(
                timeout=3 * UI_DEADLINE_MS)  # sampled once a second (the fixture's --console-history-interval)
            page.screenshot(path=str(shots / "console-queues.png"), full_page=True)

            reader.log_in(ACME_READER)
            reader.open("queues", f'[data-dead-of="{name}"] tr[data-task="{handle.task_id}"]')
            assert reader.page.get_by_role("button", name="Retry").count() == 0  # read-only: no actions
            reader.fits()

            # Found by a search for its error text (served by SearchTasks), and retried from the results.
            search = page.locator("#search-form")
            search.get_by_label("Queue").fill(name)
            search.get_by_label("Error text").fill("DISK FULL")
            search.get_by_label("Error text").press("Enter")  # the form is keyboard usable
            found = page.locator(f'#search-results tr[data-task="{handle.task_id}"]')
            found.get_by_text("✖ dead").wait_for(timeout=UI_DEADLINE_MS)
            assert found.get_by_text("disk full").is_visible() and found.get_by_text("payload").is_visible()
            page.locator("#search-status").get_by_text("the whole queue was searched").wait_for(timeout=UI_DEADLINE_MS)
            search.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / "console-search.png"), full_page=True)

            found.get_by_role("button", name=f"Retry {handle.task_id} of {name}").click()
            admin.confirm("goes back to ready", "Retry")
            page.get_by_text(f"Task {handle.task_id} is ready again").wait_for(timeout=UI_DEADLINE_MS)
            dead.wait_for(state="detached", timeout=UI_DEADLINE_MS)
            found.get_by_text("● ready").wait_for(timeout=UI_DEADLINE_MS)  # the search ran again
            page.locator(f'tr[data-queue="{name}"] td[data-label="ready"]').get_by_text("1").wait_for(
                timeout=UI_DEADLINE_MS)
            assert queue.stats().ready == 1

            # Another tenant's admin: neither the queue nor its task.
            other.log_in(GLOBEX_ADMIN)
            other.page.goto(console_server.console + "/#queues")
            other.page.get_by_role("heading", name="Search tasks").wait_for(timeout=UI_DEADLINE_MS)
            other_search = other.page.locator("#search-form")
            other_search.get_by_label("Queue").fill(name)
            other_search.get_by_role("button", name="Search").click()
            other.page.get_by_text(f'No task of queue "{name}" matches').wait_for(timeout=UI_DEADLINE_MS)
            assert other.page.locator(f'tr[data-queue="{name}"]').count() == 0
            assert other.page.locator(f'tr[data-task="{handle.task_id}"]').count() == 0
            assert admin.errors == [] and reader.errors == [] and other.errors == [], (
                admin.errors, reader.errors, other.errors)
        finally:
            admin.close()
            reader.close()
            other.close()


def test_the_coordination_chats_autocomplete_and_files_pages_render_live(browser, console_server, shots, name):
    admin = Page(browser, console_server.console, viewport={"width": 1280, "height": 800})
    reader = Page(browser, console_server.console, viewport={"width": 390, "height": 844}, is_mobile=True)
    other = Page(browser, console_server.console, viewport={"width": 1280, "height": 800})
    waiting: list[object] = []
    with concord.Client(console_server.target, token=ACME_WRITER) as client, \
            concord.Client(console_server.target, token=ACME_WRITER) as waiter:
        writer = client.rwlock(name, ttl=60, owner="index-builder").acquire("write", timeout=GRANT_WAIT)
        thread = threading.Thread(target=lambda: waiting.append(
            waiter.rwlock(name, ttl=60, owner="report-reader").acquire("read", timeout=30)))
        thread.start()
        first = client.election(name, ttl=60, candidate="host-a").elect(b"host-a:8080", timeout=GRANT_WAIT)
        candidate = threading.Thread(target=lambda: waiting.append(
            waiter.election(name, ttl=60, candidate="host-b").elect(b"host-b:8080", timeout=30)))
        try:
            admin.log_in(ACME_ADMIN)
            page = admin.page
            page.get_by_role("link", name="Coordination").click()
            rw = page.locator(f'tr[data-rwlock="{name}"]')
            rw.get_by_text("▲ write-held").wait_for(timeout=UI_DEADLINE_MS)  # held, with a waiter: shape and colour
            assert rw.get_by_text("index-builder").is_visible()
            assert rw.locator('td[data-label="fencing token"]').inner_text() == str(writer.fencing_token)
            rw.locator('td[data-label="waiters"]').get_by_text("report-reader").wait_for(timeout=UI_DEADLINE_MS)
            election = page.locator(f'tr[data-election="{name}"]')
            election.get_by_text("★ led").wait_for(timeout=UI_DEADLINE_MS)
            assert election.locator('td[data-label="leader"]').inner_text() == "host-a"
            assert election.locator('td[data-label="term"]').inner_text() == str(first.term)
            assert election.get_by_text("host-a:8080").is_visible()
            candidate.start()
            election.locator('td[data-label="candidates"]').get_by_text("host-b").wait_for(timeout=UI_DEADLINE_MS)
            page.screenshot(path=str(shots / "console-coordination.png"), full_page=True)

            client.election(name).resign(first.term)  # the candidate leads next: two leaders in the history
            candidate.join(UI_DEADLINE_MS / 1000)
            election.locator('td[data-label="leader"]').get_by_text("host-b").wait_for(timeout=UI_DEADLINE_MS)
            history = election.locator('td[data-label="recent leaders"] li')
            assert history.count() == 2 and "host-b" in history.nth(0).inner_text()

            client.chat.create("alice", ["bob", "carol"], "hello", chat_id=name)
            client.chat.send(name, "alice", "the report is ready")
            client.chat.ack("carol", name, 2)
            page.get_by_role("link", name="Chats").click()
            chat = page.locator(f'tr[data-chat="{name}"]')
            chat.locator('li[data-member="bob"]').get_by_text("● 2 unread").wait_for(timeout=UI_DEADLINE_MS)
            assert chat.locator('li[data-member="carol"]').get_by_text("✔ caught up").is_visible()
            page.screenshot(path=str(shots / "console-chats.png"), full_page=True)

            client.autocomplete.add_names(name, ["Thomas", "Thea", "Zoe"])
            page.get_by_role("link", name="Autocomplete").click()
            page.locator(f'tr[data-index="{name}"] td[data-label="names"]').get_by_text("3").wait_for(
                timeout=UI_DEADLINE_MS)
            box = page.locator("#suggest-form")
            box.get_by_label("Index").fill(name)
            box.get_by_label("Prefix").press_sequentially("th")  # typed: debounced, answered by the server
            suggestions = page.locator("#suggestions li")
            suggestions.get_by_text("Thomas").wait_for(timeout=UI_DEADLINE_MS)
            assert suggestions.all_inner_texts() == ["Thea", "Thomas"]
            client.autocomplete.add_names(name, ["Thora"])  # added through the API, suggested on the next key
            box.get_by_label("Prefix").press_sequentially("o")
            suggestions.get_by_text("Thora").wait_for(timeout=UI_DEADLINE_MS)
            assert suggestions.all_inner_texts() == ["Thomas", "Thora"]
            assert "null" not in page.locator("#view-autocomplete").inner_text()
            page.screenshot(path=str(shots / "console-autocomplete.png"), full_page=True)

            client.chat.create("sender", ["worker-1", "worker-2"], "files follow", chat_id=f"{name}:files")
            one = client.files.upload([b"line\n" * 1000], f"{name}:files", sender="sender", name="report.csv")
            client.files.upload([b"x\n" * 100], f"{name}:files", sender="sender", name="events.log")
            client.files.mark_done(one.file_id, "worker-1")
            read = sum(1 for _ in zip(range(400), client.files.lines(one.file_id, worker="worker-2")))
            assert read == 400  # worker-2 stops part way: the server noted how far it got
            page.get_by_role("link", name="Files").click()
            group = page.locator(f'[data-group="{name}:files"]')
            group.get_by_text("of 64.0 MiB").wait_for(timeout=UI_DEADLINE_MS)
            group.locator('li[data-worker="worker-1"]').get_by_text("◷ 1 of 2 done").wait_for(timeout=UI_DEADLINE_MS)
            download = group.locator(f'li[data-worker="worker-2"] .download[data-file="{one.file_id}"]')
            download.get_by_text("report.csv:").wait_for(timeout=UI_DEADLINE_MS)  # the offset the server noted
            assert " of 4.9 KiB read" in download.inner_text()
            assert group.locator(f'tr[data-file="{one.file_id}"]').get_by_text("1 of 2").is_visible()
            page.screenshot(path=str(shots / "console-files.png"), full_page=True)

            # A read-only token sees every page, at phone width; another tenant sees none of it.
            reader.log_in(ACME_READER)
            for view, selector in (("coordination", f'tr[data-rwlock="{name}"]'), ("chats", f'tr[data-chat="{name}"]'),
                                   ("autocomplete", f'tr[data-index="{name}"]'),
                                   ("files", f'[data-group="{name}:files"]')):
                reader.open(view, selector)
                reader.fits()
            reader.page.screenshot(path=str(shots / "console-files-phone.png"), full_page=True)
            other.log_in(GLOBEX_ADMIN)
            for view, heading in (("coordination", "Read-write locks"), ("chats", "Chats"),
                                  ("autocomplete", "Name indexes"), ("files", "Files")):
                other.page.goto(f"{console_server.console}/#{view}")
                other.page.get_by_role("heading", name=heading, exact=True).wait_for(timeout=UI_DEADLINE_MS)
                other.page.locator("#live.on").wait_for(timeout=UI_DEADLINE_MS)
                assert other.page.locator(f'[data-rwlock="{name}"], [data-election="{name}"], [data-chat="{name}"], '
                                          f'[data-index="{name}"], [data-group="{name}:files"]').count() == 0
            assert admin.errors == [] and reader.errors == [] and other.errors == [], (
                admin.errors, reader.errors, other.errors)
        finally:
            client.rwlock(name).release(writer)  # the reader gets it
            thread.join(UI_DEADLINE_MS / 1000)
            admin.close()
            reader.close()
            other.close()
            if candidate.ident is not None:
                with contextlib.suppress(concord.ConcordError):
                    client.election(name).resign(first.term)
                candidate.join(UI_DEADLINE_MS / 1000)
            for held in waiting:
                if hasattr(held, "mode"):
                    waiter.rwlock(name).release(held)
                elif held is not None:
                    waiter.election(name).resign(held.term)


def test_the_limits_page_shows_a_spent_limit_and_a_reset_makes_it_full(browser, console_server, shots, name):
    admin = Page(browser, console_server.console, viewport={"width": 1280, "height": 800})
    reader = Page(browser, console_server.console, viewport={"width": 390, "height": 844}, is_mobile=True)
    other = Page(browser, console_server.console, viewport={"width": 1280, "height": 800})
    with concord.Client(console_server.target, token=ACME_ADMIN) as client:
        api = client.rate_limit(f"{name}:api")
        api.set_limit(concord.Limit(5, 60.0))
        assert api.check(5).allowed  # spent: its 5 units taken
        client.rate_limit(f"{name}:exports").set_limit(concord.Limit(4, 300.0, algorithm="concurrency"))
        try:
            admin.log_in(ACME_ADMIN)
            page = admin.page
            page.get_by_role("link", name="Limits").click()
            row = page.locator(f'tr[data-limit="{name}:api"]')
            row.get_by_text("■ spent").wait_for(timeout=UI_DEADLINE_MS)
            assert row.locator('td[data-label="allows now"]').inner_text().startswith("0 of 5")
            assert row.locator('td[data-label="limit"]').inner_text() == "5 per min"
            page.locator(f'tr[data-limit="{name}:exports"]').get_by_text("● full").wait_for(timeout=UI_DEADLINE_MS)
            page.screenshot(path=str(shots / "console-limits.png"), full_page=True)

            reader.log_in(ACME_READER)
            reader.open("limits", f'tr[data-limit="{name}:api"]')
            assert reader.page.get_by_role("button", name=f"Reset {name}:api").count() == 0  # read-only: no actions
            reader.fits()

            row.get_by_role("button", name=f"Reset {name}:api").click()
            admin.confirm("Its stored limit stays", "Reset")
            row.get_by_text("● full").wait_for(timeout=UI_DEADLINE_MS)
            assert api.check(0).remaining == 5  # full again, through the API too

            other.log_in(GLOBEX_ADMIN)
            other.page.goto(console_server.console + "/#limits")
            other.page.get_by_role("heading", name="Rate limits", exact=True).wait_for(timeout=UI_DEADLINE_MS)
            other.page.locator("#live.on").wait_for(timeout=UI_DEADLINE_MS)
            assert other.page.locator(f'[data-limit^="{name}"]').count() == 0
            assert admin.errors == [] and reader.errors == [] and other.errors == [], (
                admin.errors, reader.errors, other.errors)
        finally:
            admin.close()
            reader.close()
            other.close()
            api.delete_limit()
            client.rate_limit(f"{name}:exports").delete_limit()
