"""The console's detail pages in a real browser (Debian's chromium driven by Playwright,
as tests/test_console_browser.py; skipped where either is missing), against a live
server with tokens: a queue opened from the Queues page by keyboard shows a delayed
task with its due time and a leased task with its lease's Dequeue call; the task opened
from there shows its history (enqueued, leased, failed with its error, leased again);
a lock with 10,000 waiters shows its first 50 on the Locks page with a link to all of
them, whose page shows the first 100 in FIFO order and pages on; dead tasks and a
search's results show one page at a time however many there are; no page logs a
console error, and at phone width the queue's page still fits. Screenshots go where
test_console_browser.py puts them (docs/console/ holds the README's)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

import concord
from concord.queues import LeaseRate, NewTask
from test_console import ACME_ADMIN, ACME_READER, ACME_WRITER, console_server  # noqa: F401 (a fixture)
from test_console_browser import UI_DEADLINE_MS, Page, browser, pytestmark, shots, sync_api  # noqa: F401 (fixtures; serial as it is)

expect = sync_api.expect
from test_console_detail import MASS_WAITERS, waiting

MASS_DEADLINE_MS = 120_000  # for 10,000 Acquires to queue on a shared, busy machine


@contextlib.contextmanager
def waiting_in_background(target: str, token: str, lock: str, n: int) -> Iterator[None]:
    """test_console_detail.waiting, on an event loop of its own thread (Playwright's
    sync API will not run inside one)."""
    loop = asyncio.new_event_loop()
    ready, failure = threading.Event(), []
    stop: list[asyncio.Event] = []

    async def main() -> None:
        stop.append(asyncio.Event())
        try:
            async with waiting(target, token, lock, n):
                ready.set()
                await stop[0].wait()
        except BaseException as exc:  # reported by the test, not lost in the thread
            failure.append(exc)
            ready.set()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(60) and not failure, failure
    try:
        yield
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(60)
        loop.close()


def test_a_queues_page_shows_due_and_leased_tasks_and_a_tasks_history(browser, console_server, shots, name):
    admin = Page(browser, console_server.console, viewport={"width": 1280, "height": 900})
    reader = Page(browser, console_server.console, viewport={"width": 390, "height": 844}, is_mobile=True)
    with concord.Client(console_server.target, token=ACME_WRITER) as client:
        q = client.queue(name)
        with concord.Client(console_server.target, token=ACME_ADMIN) as admin_client:  # policy: admin only
            admin_client.queue(name).set_policy(max_leased=8, rate=LeaseRate(100, 1.0, 20))
            admin_client.queue(name).set_group("tenant-7", max_leased=2, weight=3)
        q.schedule("nightly", cron="30 2 * * *", tz="Europe/Berlin", type="report")
        later = q.put("report", b'{"day": "monday"}', delay=600)
        q.put("report", b'{"day": "tuesday"}', delay=900, group="tenant-7")
        worked = q.put("resize", b'{"file": "cat.png"}', priority=1000)
        (task,) = q.get(1, lease_ttl=60, timeout=10)
        q.nack(task, "timeout talking to S3", retry_delay=0)
        (task,) = q.get(1, lease_ttl=60, timeout=10)
        assert task.task_id == worked.task_id
        try:
            admin.log_in(ACME_ADMIN)
            page = admin.page
            page.get_by_role("link", name="Queues").click()
            link = page.locator(f'tr[data-queue="{name}"]').get_by_role("link", name=name)
            link.focus()
            page.keyboard.press("Enter")  # keyboard reachable
            page.get_by_role("heading", name=f"Queue {name}").wait_for(timeout=UI_DEADLINE_MS)
            assert page.url.endswith(f"#queue/{name.replace(':', '%3A')}")

            delayed = page.locator(f'[data-list="delayed"] tr[data-task="{later.task_id}"]')
            delayed.locator('td[data-label="due"]').get_by_text("in 9 min").or_(
                delayed.locator('td[data-label="due"]').get_by_text("in 10 min")).wait_for(timeout=UI_DEADLINE_MS)
            assert delayed.locator('td[data-label="due at"]').inner_text() not in ("", "—")
            leased = page.locator(f'[data-list="leased"] tr[data-task="{worked.task_id}"]')
            leased.get_by_text(f"call {task.lease[:8]}").wait_for(timeout=UI_DEADLINE_MS)
            assert "in " in leased.locator('td[data-label="lease expires"]').inner_text()
            assert leased.locator('td[data-label="attempt"]').inner_text() == "2 / 3"
            page.locator('#queue-detail tr[data-group="tenant-7"]').wait_for(timeout=UI_DEADLINE_MS)
            page.evaluate("document.activeElement.blur()")  # the heading took the focus: not in the picture
            page.screenshot(path=str(shots / "console-queue.png"), full_page=True)

            leased.get_by_role("link", name=f"Task {worked.task_id} of {name}").click()
            page.get_by_role("heading", name=f"Task {worked.task_id}").wait_for(timeout=UI_DEADLINE_MS)
            history = page.locator('[data-list="history"] tbody tr')
            history.nth(3).wait_for(timeout=UI_DEADLINE_MS)
            kinds = [history.nth(i).get_attribute("data-event") for i in range(history.count())]
            assert kinds == ["enqueued", "leased", "failed", "leased"], kinds
            assert "timeout talking to S3" in history.nth(2).inner_text()
            page.get_by_text("its whole history, oldest first").wait_for(timeout=UI_DEADLINE_MS)
            assert page.locator('[data-card="task"]').get_by_text(f"call {task.lease[:8]}").is_visible()
            page.evaluate("document.activeElement.blur()")
            page.screenshot(path=str(shots / "console-task.png"), full_page=True)

            reader.log_in(ACME_READER)  # a read-only token may look; the page fits a phone
            reader.open(f"queue/{name}", f'[data-list="delayed"] tr[data-task="{later.task_id}"]')
            reader.fits()
            assert admin.errors == [] and reader.errors == [], (admin.errors, reader.errors)
        finally:
            admin.close()
            reader.close()
            q.ack(task)


def test_ten_thousand_waiters_show_a_page_at_a_time(browser, console_server, shots, name):
    admin = Page(browser, console_server.console, viewport={"width": 1280, "height": 900})
    with waiting_in_background(console_server.target, ACME_WRITER, name, MASS_WAITERS):
        try:
            admin.log_in(ACME_ADMIN)
            page = admin.page
            page.get_by_role("link", name="Locks").click()
            row = page.locator(f'tr[data-lock="{name}"]')
            row.get_by_text(f"… and {MASS_WAITERS - 50} more").wait_for(timeout=MASS_DEADLINE_MS)
            assert row.locator('td[data-label="queue"] li:not(.more)').count() == 50  # the snapshot's cap
            row.get_by_role("link", name="all waiters, page by page").click()
            page.get_by_role("heading", name=f"Waiters of lock {name}").wait_for(timeout=UI_DEADLINE_MS)
            status = page.locator("#waiters-status")
            status.get_by_text(f"{MASS_WAITERS} waiters queued").wait_for(timeout=UI_DEADLINE_MS)
            rows = page.locator('[data-list="waiters"] tbody tr')
            assert rows.count() == 100
            assert rows.first.locator('td[data-label="position"]').inner_text() == "1"
            page.evaluate("document.activeElement.blur()")
            page.screenshot(path=str(shots / "console-lock-waiters.png"), full_page=False)
            page.get_by_role("button", name="Next page of waiters").click()
            status.get_by_text("positions 101 to 200").wait_for(timeout=UI_DEADLINE_MS)
            rows.first.locator('td[data-label="position"]').get_by_text("101").wait_for(timeout=UI_DEADLINE_MS)
            assert rows.count() == 100
            assert admin.errors == [], admin.errors
        finally:
            admin.close()


def test_dead_letters_and_search_results_show_one_page_at_a_time(browser, console_server, name):
    """25 dead tasks: a queue's page shows 20 and pages on to the other 5; a search
    finding 120 tasks shows 50, then the next 50 in their place."""
    admin = Page(browser, console_server.console, viewport={"width": 1280, "height": 900})
    with concord.Client(console_server.target, token=ACME_WRITER) as client:
        q = client.queue(name)
        q.put_many([NewTask("resize", b"{}", max_attempts=1) for _ in range(25)])
        for task in q.get(25, lease_ttl=30, timeout=10):  # all 25 are ready: one script takes them
            q.nack(task, "disk full", retryable=False)
        q.put_many([NewTask("thumbnail", b"{}") for _ in range(120)])
        try:
            admin.log_in(ACME_ADMIN)
            page = admin.page
            page.goto(f"{console_server.console}/#queue/{name}")
            dead = page.locator('[data-list="dead"] tbody tr')
            # Counts are waited for: a pager shows its new page number at once, and the
            # rows when the page's read comes back.
            expect(dead).to_have_count(20, timeout=UI_DEADLINE_MS)
            page.get_by_role("button", name="Next page of dead tasks").click()
            page.locator('[data-pager="dead"]').get_by_text("page 2").wait_for(timeout=UI_DEADLINE_MS)
            expect(dead).to_have_count(5, timeout=UI_DEADLINE_MS)
            page.get_by_role("button", name="First page of dead tasks").click()
            dead.nth(19).wait_for(timeout=UI_DEADLINE_MS)

            page.get_by_role("link", name="Queues", exact=True).click()
            search = page.locator("#search-form")
            search.get_by_label("Queue").fill(name)
            search.get_by_label("Type", exact=True).fill("thumbnail")
            search.get_by_role("button", name="Search").click()
            status = page.locator("#search-status")
            status.get_by_text("50 tasks found").wait_for(timeout=UI_DEADLINE_MS)
            rows = page.locator("#search-results tbody tr")
            assert rows.count() == 50
            first = rows.first.get_attribute("data-task")
            page.locator("#search-more").click()
            status.get_by_text("page 2: 50 shown").wait_for(timeout=UI_DEADLINE_MS)
            expect(rows).to_have_count(50, timeout=UI_DEADLINE_MS)
            expect(page.locator(f'#search-results tr[data-task="{first}"]')).to_have_count(0, timeout=UI_DEADLINE_MS)
            assert admin.errors == [], admin.errors
        finally:
            admin.close()
