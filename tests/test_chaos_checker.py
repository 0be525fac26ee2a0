"""The fault campaign's checker is itself tested: for each rule, a hand-built valid
history (with indeterminate outcomes the rule must tolerate) passes every rule, and
the same history with one injected violation fails that rule. Also: the fault
schedule is a function of its seed.

No servers here: histories are built with explicit times (History.record / note).
"""

from __future__ import annotations

import pytest

from chaos import checker
from chaos.faults import counts, plan
from chaos.history import Event, History


def passes_all(h: History) -> None:
    bad = [v for r in checker.check(h.events, {"server0.log": "WARNING fine\n"}) for v in r.violations]
    assert not bad, "\n".join(v.render({e.id: e for e in h.events}) for v in bad)


def fails(rule, h: History, *needles: str) -> list[checker.Violation]:
    result = rule(h.events)
    assert result.violations, f"{result.rule} missed the injected violation"
    text = " ".join(v.message for v in result.violations)
    for n in needles:
        assert n in text, text
    return result.violations


# ---------------------------------------------------------------- every service


def test_no_internal_or_unknown():
    h = History()
    h.record("p", "lock.describe", 0.0, 0.1, ok={}, name="x")
    h.record("p", "lock.describe", 0.2, 0.3, code="UNAVAILABLE", reason="REDIS_UNAVAILABLE", name="x")
    h.record("p", "queue.ack", 0.2, 0.3, code="FAILED_PRECONDITION", reason="TASK_LEASE_NOT_HELD",
             queue="q", task_id="1", lease="l")
    passes_all(h)
    # The client's gRPC library reporting a connection that died with its server process:
    h.record("faults", "fault", 1.0, 2.0, ok={}, kind="server_kill", target=1, duration=0.5, gap=1.0)
    h.record("p", "queue.consume", 0.5, 1.01, code="INTERNAL", server=1, queue="q", lease_ttl=1.0, prefetch=1)
    stream = h.record("p", "queue.consume", 3.0, 3.5, code="INTERNAL", server=0, queue="q", lease_ttl=1.0, prefetch=1)
    h.record("p", "queue.ack", 3.4, 3.5, code="INTERNAL", server=0, queue="q", task_id="1", lease="l", via="stream",
             parent=stream.id)
    for e in h.events[-2:]:  # grpc.aio's own status for a bidi call the server ended while the client wrote
        e.message = checker.GRPC_CORE_INTERNAL
    passes_all(h)
    assert [e.op for e in checker.transport_errors(h.events)] == ["queue.consume"] * 2 + ["queue.ack"]
    for code in ("INTERNAL", "UNKNOWN"):
        bad = History()
        bad.events = list(h.events)
        bad.record("p", "chat.send", 0.4, 0.5, code=code, chat="c", sender="s", body="b")
        fails(checker.no_internal_or_unknown, bad, code)
    bad = History()  # sent by a server (it carries an ErrorInfo), even one about to be killed
    bad.events = list(h.events)
    bad.record("p", "queue.ack", 0.9, 1.05, code="INTERNAL", reason="INTERNAL", server=1, queue="q", task_id="1",
               lease="l")
    fails(checker.no_internal_or_unknown, bad, "INTERNAL")


def _blocked(h: History, took: float, *, server: int = 0) -> Event:
    return h.record("p", "lock.acquire", 10.0, 10.0 + took, ok={"acquired": False}, server=server, name="x",
                    ttl=1.0, wait=1.0)


def test_blocked_calls_answer_in_time():
    h = History()
    _blocked(h, 1.4)
    h.record("p", "lock.acquire", 11.0, 13.0, ok={"acquired": False}, name="x", ttl=1.0, wait=0)  # not blocked
    hold = h.record("p", "lock.hold", 12.0, 20.0, ok={"closed": True}, name="y", ttl=1.0, wait=0.5)
    h.note("p", "lock.hold.event", parent=hold.id, at=12.9, kind="acquired", lease="l", token=1, expires=13.9)
    h.note("p", "lock.hold.close", parent=hold.id, at=13.0)
    late = History()
    late.events = list(h.events)
    _blocked(late, 1.3, server=1)
    late.note("harness", "harness.lag", at=11.2, lag=0.6)  # the harness stalled: not the server's fault
    _blocked(late, 6.0, server=2)
    late.record("faults", "fault", 9.0, 12.0, ok={}, kind="server_kill", target=2, duration=1.0, gap=1.0)
    passes_all(h)
    passes_all(late)

    bad = History()
    bad.events = list(h.events)
    _blocked(bad, 1.6)
    fails(checker.blocked_calls_answer_in_time, bad, "after 1.60s")
    bad = History()
    bad.events = list(h.events)
    hold = bad.record("p", "sem.hold", 30.0, 38.5, code="CLIENT_TIMEOUT", name="s", ttl=1.0, wait=0.5,
                      limit=3, permits=1)
    fails(checker.blocked_calls_answer_in_time, bad, "sem.hold")


def test_blocked_calls_are_not_timed_while_other_processes_starve_the_cpu():
    h = History()
    h.record("p", "lock.acquire", 1.0, 3.0, code="UNAVAILABLE", reason="REDIS_UNAVAILABLE", name="L", ttl=1.0,
             wait=0.2)
    fails(checker.blocked_calls_answer_in_time, h, "answered (UNAVAILABLE) after 2.00s")
    h.record("faults", "fault", 2.5, 4.0, ok={"healed": True}, kind="cpu_pressure", duration=1.5, gap=1.0, target=0)
    assert checker.blocked_calls_answer_in_time(h.events).ok
    whole = History()
    whole.events = [e for e in h.events if e.op != "fault"]
    assert not checker.blocked_calls_answer_in_time(whole.events).ok
    whole.note("harness", "harness.cpu_hogs", at=0.0, processes=2)
    assert checker.blocked_calls_answer_in_time(whole.events).ok


def test_calls_answered_by_deadline():
    h = History()
    h.record("p", "lock.hold", 0.0, 1.0, code="DEADLINE_EXCEEDED", reason="LOCK_WAIT_TIMEOUT", name="x", ttl=1.0,
             wait=1.0)
    h.record("p", "queue.ack", 0.0, 5.0, code="UNAVAILABLE", reason="REDIS_UNAVAILABLE", queue="q", task_id="1",
             lease="l")
    passes_all(h)
    for code in ("DEADLINE_EXCEEDED", "CLIENT_TIMEOUT"):
        bad = History()
        bad.events = list(h.events)
        bad.record("p", "queue.nack", 1.0, 9.0, code=code, queue="q", task_id="1", lease="l")
        fails(checker.calls_answered_by_deadline, bad, code)


def test_server_logs_clean():
    assert checker.server_logs_clean({"s0.log": "WARNING Redis not reachable\n"}).ok
    result = checker.server_logs_clean({"s0.log": "ERROR unexpected error in Acquire\nTraceback (most recent..."})
    assert len(result.violations) == 2


# ---------------------------------------------------------------- locks


def _acquire(h, proc, name, invoke, complete, token, lease, ttl=1.0, wait=0.0):
    return h.record(proc, "lock.acquire", invoke, complete, name=name, ttl=ttl, wait=wait,
                    ok={"acquired": True, "lease": lease, "token": token, "expires": invoke + ttl + 0.01})


def lock_history(*, second_token: int = 11, late_start: float = 2.3) -> History:
    h = History()
    _acquire(h, "p1", "L", 0.0, 0.01, 10, "a")
    h.record("p1", "lock.refresh", 0.5, 0.51, ok={"expires": 1.51}, name="L", lease="a", ttl=1.0)
    h.record("p1", "lock.release", 0.8, 0.81, ok=None, name="L", lease="a")
    _acquire(h, "p2", "L", 0.2, 0.9, second_token, "b", wait=1.0)  # granted at the release
    h.record("p2", "lock.release", 1.0, 1.4, code="UNAVAILABLE", name="L", lease="b")  # maybe released
    h.record("p3", "lock.acquire", 0.3, 0.31, ok={"acquired": False}, name="L", ttl=1.0, wait=0.0)
    h.record("p4", "lock.acquire", 1.1, 1.2, code="UNAVAILABLE", name="L", ttl=1.0, wait=0.0)  # maybe granted
    hold = h.record("p5", "lock.hold", 1.0, 1.6, ok={"closed": True}, name="L", ttl=1.0, wait=1.0)
    h.note("p5", "lock.hold.event", parent=hold.id, at=1.1, kind="acquired", lease="c", token=12, expires=2.1)
    h.note("p5", "lock.hold.event", parent=hold.id, at=1.4, kind="refreshed", lease="", token=0, expires=2.4)
    h.note("p5", "lock.hold.close", parent=hold.id, at=1.6)
    _acquire(h, "p6", "L", 1.7, 1.71, 13, "d", ttl=0.5)  # never released: expires at 2.2 or later
    h.record("p6", "lock.refresh", 2.25, 2.26, code="FAILED_PRECONDITION", reason="LOCK_NOT_HELD", name="L",
             lease="d", ttl=0.5)  # after its TTL: fine
    _acquire(h, "p7", "L", late_start, late_start + 0.01, 14, "e")
    _acquire(h, "p8", "M", 0.0, 0.01, 1, "f")  # another lock: its own tokens
    return h


def test_lock_mutual_exclusion():
    passes_all(lock_history())
    v = fails(checker.lock_mutual_exclusion, lock_history(late_start=2.0), "tokens 13 and 14")
    assert len(v) == 1


def test_lock_mutual_exclusion_across_hold_streams():
    h = lock_history()
    _acquire(h, "p9", "L", 1.2, 1.3, 15, "g")  # while the Hold stream surely held it
    fails(checker.lock_mutual_exclusion, h, "tokens 12 and 15")


def test_lock_fencing_tokens_increase():
    fails(checker.lock_fencing_tokens_increase, lock_history(second_token=9), "token 9 granted after token 10")
    fails(checker.lock_fencing_tokens_increase, lock_history(second_token=14), "fencing token 14 granted twice")


def test_leases_not_lost_early():
    h = lock_history()
    h.record("p2", "lock.refresh", 0.95, 0.96, code="FAILED_PRECONDITION", reason="LOCK_NOT_HELD", name="L",
             lease="b", ttl=1.0)
    fails(checker.leases_not_lost_early, h, "LOCK_NOT_HELD")
    ok = lock_history()  # the same answer after a release was attempted is no violation
    ok.record("p2", "lock.refresh", 1.45, 1.46, code="FAILED_PRECONDITION", reason="LOCK_NOT_HELD", name="L",
              lease="b", ttl=1.0)
    passes_all(ok)


def _elect(h, proc, name, invoke, complete, term, ttl=1.0, wait=0.0):
    return h.record(proc, "election.acquire", invoke, complete, name=name, ttl=ttl, wait=wait,
                    ok={"acquired": True, "lease": str(term), "token": term, "expires": invoke + ttl + 0.01})


def election_history(*, second_term: int = 20, overlap: bool = False, observed: tuple = (0, 10, 0, 20, 0),
                     other: tuple | None = None, skip: bool = False) -> History:
    h = History()
    _elect(h, "e1", "E", 0.0, 0.01, 10)
    h.record("e1", "election.release", 0.5, 0.51, ok=None, name="E", lease="10")
    h.record("e1", "election.refresh", 0.6, 0.61, code="FAILED_PRECONDITION", reason="NOT_LEADER", name="E",
             lease="10", ttl=1.0)  # after its resign: fine
    _elect(h, "e2", "E", 0.3 if overlap else 0.55, 0.4 if overlap else 0.56, second_term, ttl=0.5)
    h.record("e3", "election.acquire", 0.2, 0.21, ok={"acquired": False}, name="E", ttl=1.0, wait=0.0)
    for proc, terms in (("o1", observed), ("o2", other or observed)):
        positions = range(3, 3 + len(terms))
        for i, (pos, term) in enumerate(zip(positions, terms)):
            if skip and proc == "o1" and i == 2:
                continue
            h.note(proc, "election.observe.change", at=0.1 * i, name="E", position=pos, term=term, gap=False)
    return h


def test_election_rules():
    passes_all(election_history())
    fails(checker.election_one_leader, election_history(overlap=True), "tokens 10 and 20")
    fails(checker.election_terms_increase, election_history(second_term=9), "token 9 granted after token 10")
    fails(checker.election_observers_agree, election_history(skip=True), "came after 4 with no gap")
    fails(checker.election_observers_agree, election_history(other=(0, 10, 0, 21, 0)), "term 20 to o1 and term 21")
    fails(checker.election_observers_agree, election_history(observed=(0, 20, 0, 10, 0)), "term 10 at position 6")
    h = election_history()
    h.record("e2", "election.refresh", 0.7, 0.71, code="FAILED_PRECONDITION", reason="NOT_LEADER", name="E",
             lease="20", ttl=0.5)  # before its TTL ran out, and never resigned
    fails(checker.leases_not_lost_early, h, "NOT_LEADER")


def _rw(h, proc, invoke, complete, token, mode, lease, ttl=1.0):
    return h.record(proc, "rw.acquire", invoke, complete, name="R", ttl=ttl, wait=1.0, mode=mode,
                    ok={"acquired": True, "lease": lease, "token": token, "expires": invoke + ttl + 0.01})


def rw_history(*, writer_at: float = 1.0, writer_token: int = 40) -> History:
    h = History()
    _rw(h, "r1", 0.0, 0.01, 30, "read", "a")
    _rw(h, "r2", 0.1, 0.11, 31, "read", "b")  # readers share
    h.record("r1", "rw.release", 0.5, 0.51, ok=None, name="R", lease="a")
    h.record("r2", "rw.release", 0.6, 0.61, ok=None, name="R", lease="b")
    _rw(h, "w1", 0.2, writer_at, writer_token, "write", "c")
    return h


def test_rwlock_rules():
    passes_all(rw_history())
    fails(checker.rwlock_writers_exclusive, rw_history(writer_at=0.55), "a read hold (token 31) and a write hold")
    fails(checker.rwlock_tokens_increase, rw_history(writer_token=29), "token 29 granted after token 31")


def test_answers_a_retrying_client_may_give_are_not_violations():
    """With a client library that repeats calls on UNAVAILABLE, a release or ack told
    "not held" may follow its own first try, and a call may use up its budget on
    retries: those answers are "maybe happened", not violations. Refresh answers, and
    stream settles (never repeated), are still checked."""
    def with_client(h: History, retries: bool) -> History:
        h.note("harness", "harness.client", at=0.0, retries=retries)
        return h

    release = lock_history()
    release.record("p2", "lock.release", 0.95, 0.96, code="FAILED_PRECONDITION", reason="LOCK_NOT_HELD", name="L",
                   lease="b")
    fails(checker.leases_not_lost_early, with_client(release, False), "lock.release answered LOCK_NOT_HELD")
    release.events = [e for e in release.events if e.op != "harness.client"]
    passes_all(with_client(release, True))
    refresh = lock_history()
    refresh.record("p2", "lock.refresh", 0.95, 0.96, code="FAILED_PRECONDITION", reason="LOCK_NOT_HELD", name="L",
                   lease="b", ttl=1.0)
    fails(checker.leases_not_lost_early, with_client(refresh, True), "lock.refresh answered LOCK_NOT_HELD")

    def ack_told_not_held(retries: bool) -> History:
        h = with_client(queue_history(lost=True), retries)
        h.record("w1", "queue.dequeue", 2.4, 2.41, queue="r", max=1, lease_ttl=1.0, wait=0.0, ok={"tasks": [
            {"queue": "r", "task_id": "1", "lease": "M1", "attempt": 1, "payload": "R1", "max_attempts": 1,
             "lease_expires": 3.4}]})
        h.record("w1", "queue.ack", 2.5, 3.0, code="FAILED_PRECONDITION", reason="TASK_LEASE_NOT_HELD", queue="r",
                 task_id="1", lease="M1")
        # A first try's reply lost in a Redis fault is what lets it take effect unseen.
        h.record("faults", "fault", 2.55, 2.7, ok={"healed": True}, kind="link_cut", duration=0.15, gap=1.0, target=0)
        return h

    fails(checker.queue_tasks_settled, ack_told_not_held(False), "lost")
    passes_all(ack_told_not_held(True))

    budget = with_client(History(), True)
    budget.record("p", "queue.ack", 0.0, 8.0, code="DEADLINE_EXCEEDED", queue="q", task_id="1", lease="l")
    passes_all(budget)
    budget.record("p", "queue.ack", 0.0, 8.0, code="CLIENT_TIMEOUT", queue="q", task_id="1", lease="l", via="stream")
    fails(checker.calls_answered_by_deadline, budget, "queue.ack unanswered")


# ---------------------------------------------------------------- semaphores


def sem_history(*, third_at: float = 0.6) -> History:
    h = History()

    def acquire(proc, invoke, complete, permits, pid, ttl=1.0):
        return h.record(proc, "sem.acquire", invoke, complete, name="S", limit=3, permits=permits, ttl=ttl, wait=1.0,
                        ok={"acquired": True, "permit_id": pid, "expires": invoke + ttl})

    acquire("p1", 0.0, 0.01, 2, "a")
    h.record("p1", "sem.release", 0.5, 0.51, ok=None, name="S", permit_id="a")
    acquire("p2", 0.1, 0.11, 1, "b")
    acquire("p3", third_at - 0.2, third_at, 2, "c")
    h.record("p4", "sem.acquire", 0.2, 0.3, code="UNAVAILABLE", name="S", limit=3, permits=2, ttl=1.0, wait=0.0)
    hold = h.record("p5", "sem.hold", 1.2, 2.0, ok={"closed": True}, name="S", limit=3, permits=1, ttl=1.0,
                    wait=1.0)
    h.note("p5", "sem.hold.event", parent=hold.id, at=1.3, kind="acquired", permit_id="d", expires=2.3)
    h.note("p5", "sem.hold.close", parent=hold.id, at=1.5)
    return h


def test_semaphore_within_limit():
    passes_all(sem_history())
    fails(checker.semaphore_within_limit, sem_history(third_at=0.3), "5 permits held")


# ---------------------------------------------------------------- queues


def queue_history(**inject: bool) -> History:
    h = History()

    def task(tid, lease, attempt, payload, max_attempts, expires):
        return {"queue": "q", "task_id": tid, "lease": lease, "attempt": attempt, "payload": payload,
                "max_attempts": max_attempts, "lease_expires": expires}

    h.record("prod", "queue.enqueue", 0.0, 0.01, queue="q", ok={"task_ids": ["1", "2"]},
             tasks=[{"payload": "P1", "max_attempts": 3}, {"payload": "P2", "max_attempts": 3}])
    h.record("prod", "queue.enqueue", 0.02, 0.03, queue="q", code="UNAVAILABLE",
             tasks=[{"payload": "P3", "max_attempts": 2}])  # took effect after all: task 3
    h.record("prod", "queue.enqueue", 0.04, 0.05, queue="r", ok={"task_ids": ["1"]},
             tasks=[{"payload": "R1", "max_attempts": 1}])  # task ids are per queue
    payload1 = "P2" if inject.get("wrong_payload") else "P1"
    h.record("w1", "queue.dequeue", 0.1, 0.11, queue="q", max=1, lease_ttl=1.0, wait=0.0,
             ok={"tasks": [task("1", "L1", 1, payload1, 3, 1.1)]})
    h.record("w1", "queue.ack", 0.2, 0.21, ok=None, queue="q", task_id="1", lease="L1")
    if inject.get("acked_twice"):
        h.record("w2", "queue.dequeue", 0.3, 0.31, queue="q", max=1, lease_ttl=1.0, wait=0.0,
                 ok={"tasks": [task("1", "L9", 2, "P1", 3, 1.3)]})
        h.record("w2", "queue.ack", 0.4, 0.41, ok=None, queue="q", task_id="1", lease="L9")
    h.record("w1", "queue.dequeue", 0.3, 0.31, queue="q", max=1, lease_ttl=1.0, wait=0.0,
             ok={"tasks": [task("2", "L2", 1, "P2", 3, 1.3)]})  # then "crashes": its lease runs out
    stream = h.record("w2", "queue.consume", 1.0, 3.0, ok={"closed": "graceful"}, queue="q", lease_ttl=2.0,
                      prefetch=1)
    second_at = 1.05 if inject.get("overlap") else 1.5
    h.note("w2", "queue.consume.task", parent=stream.id, at=second_at, **task("2", "L3", 2, "P2", 3, 3.5))
    h.record("w2", "queue.nack", 1.6, 1.61, ok=None, queue="q", task_id="2", lease="L3", via="stream",
             parent=stream.id)
    h.note("w2", "queue.consume.close", parent=stream.id, at=2.9, how="graceful")
    h.record("w1", "queue.dequeue", 2.0, 2.01, queue="q", max=2, lease_ttl=1.0, wait=0.5,
             ok={"tasks": [task("2", "L4", 3, "P2", 3, 3.0), task("3", "L5", 1, "P3", 2, 3.0)]})
    h.record("w1", "queue.nack", 2.1, 2.11, ok={"state": "dead"}, queue="q", task_id="2", lease="L4")
    h.record("w1", "queue.ack", 2.2, 2.3, code="UNAVAILABLE", queue="q", task_id="3", lease="L5")  # maybe acked
    if not inject.get("lost"):
        h.record("w1", "queue.dequeue", 2.4, 2.41, queue="r", max=1, lease_ttl=1.0, wait=0.0,
                 ok={"tasks": [{**task("1", "M1", 1, "R1", 1, 3.4), "queue": "r"}]})
        h.record("w1", "queue.ack", 2.5, 2.51, ok=None, queue="r", task_id="1", lease="M1")
    leased = 1 if inject.get("left_leased") else 0
    for q, dead in (("q", ["2"]), ("r", [])):
        h.record("final", "queue.final_dead", 5.0, 5.01, queue=q,
                 ok={"task_ids": dead, "attempts": {tid: 3 for tid in dead}})  # task 2: leases L2, L3, L4
        h.record("final", "queue.final_stats", 5.0, 5.01, queue=q,
                 ok={"ready": 0, "delayed": 0, "leased": leased if q == "q" else 0, "dead": len(dead)})
    return h


def test_queue_tasks_settled():
    passes_all(queue_history())
    fails(checker.queue_tasks_settled, queue_history(acked_twice=True), "acked 2 times")
    fails(checker.queue_tasks_settled, queue_history(lost=True), "('r', '1') (enqueue acknowledged) lost")
    fails(checker.queue_tasks_settled, queue_history(left_leased=True), "left after the final drain")


def test_queue_leases_exclusive():
    fails(checker.queue_leases_exclusive, queue_history(overlap=True), "both held")
    # A Consume push received after its lease ran out (attempt 1, late) was never surely
    # held: no overlap with attempt 2 dequeued meanwhile.
    late = History()
    late.record("p", "queue.enqueue", 0.0, 0.01, queue="q", ok={"task_ids": ["1"]},
                tasks=[{"payload": "P", "max_attempts": 3}])
    stream = late.record("w1", "queue.consume", 0.1, 3.0, ok={"closed": "graceful"}, queue="q", lease_ttl=1.0,
                         prefetch=1)
    late.record("w2", "queue.dequeue", 1.2, 2.0, queue="q", max=1, lease_ttl=2.0, wait=1.0, ok={"tasks": [
        {"queue": "q", "task_id": "1", "lease": "B", "attempt": 2, "payload": "P", "max_attempts": 3,
         "lease_expires": 4.0}]})
    late.note("w1", "queue.consume.task", parent=stream.id, at=2.01, queue="q", task_id="1", lease="A", attempt=1,
              payload="P", max_attempts=3, lease_expires=1.15)
    assert checker.queue_leases_exclusive(late.events).ok
    late.note("w1", "queue.consume.task", parent=stream.id, at=2.02, queue="q", task_id="1", lease="C", attempt=3,
              payload="P", max_attempts=3, lease_expires=4.0)
    fails(checker.queue_leases_exclusive, late, "both held")


def _one_task(max_attempts: int = 1) -> History:
    h = History()
    h.record("prod", "queue.enqueue", 0.0, 0.01, queue="q", ok={"task_ids": ["1"]},
             tasks=[{"payload": "P", "max_attempts": max_attempts}])
    return h


def _task(lease: str, attempt: int, expires: float) -> dict:
    return {"queue": "q", "task_id": "1", "lease": lease, "attempt": attempt, "payload": "P", "max_attempts": 3,
            "lease_expires": expires}


def _server_ended_stream(h: History, **end: str) -> Event:
    """A stream on [q, r] that got task 1 (lease A to 3.0) at 1.0; the server ended it
    at 1.2 (a Redis error in its pusher); its consumer, asleep before a late ack, read
    the end at 2.6."""
    stream = h.record("c1", "queue.consume", 0.5, 2.6, queue="q", queues=["q", "r"], lease_ttl=2.0, prefetch=3,
                      **({"code": "UNAVAILABLE", "reason": "REDIS_UNAVAILABLE"} | end))
    h.note("c1", "queue.consume.task", parent=stream.id, at=1.0, **_task("A", 1, 3.0))
    h.note("c1", "queue.consume.end", parent=stream.id, at=1.2, how="error", error="Unavailable")
    return stream


def test_queue_leases_exclusive_past_a_stream_the_server_ended():
    """A lease a stream delivered is the consumer's until it settles, releases or ends
    the stream itself, or the lease expires: not until the server ends the stream."""
    h = _one_task(3)
    _server_ended_stream(h)
    h.record("w2", "queue.dequeue", 1.5, 1.51, queue="q", queues=["q"], max=1, lease_ttl=1.0, wait=0.0,
             ok={"tasks": [_task("B", 2, 2.5)]})
    fails(checker.queue_leases_exclusive, h, "leases A (attempt 1) and B (attempt 2) both held")
    # Its late ack by unary call, told the lease is gone, ended nothing: still a violation.
    h.record("c1", "queue.ack", 2.7, 2.71, code="FAILED_PRECONDITION", reason="TASK_LEASE_NOT_HELD", queue="q",
             task_id="1", lease="A", via="unary")
    fails(checker.queue_leases_exclusive, h, "both held")
    # Its holder gave it up first (a settle or a release, whatever the answer; a crash;
    # a graceful close): no overlap.
    for ending in (
        lambda h, s: h.record("c1", "queue.release", 1.3, 1.31, ok=None, queue="q", task_id="1", lease="A"),
        lambda h, s: h.record("c1", "queue.ack", 1.3, 1.4, code="CANCELLED", queue="q", task_id="1", lease="A",
                              via="stream", parent=s.id),
        lambda h, s: h.note("c1", "queue.consume.close", parent=s.id, at=1.3, how="crash"),
        lambda h, s: h.note("c1", "queue.consume.close", parent=s.id, at=1.3, how="graceful"),
    ):
        ok = _one_task(3)
        ending(ok, _server_ended_stream(ok))
        ok.record("w2", "queue.dequeue", 1.5, 1.51, queue="q", queues=["q"], max=1, lease_ttl=1.0, wait=0.0,
                  ok={"tasks": [_task("B", 2, 2.5)]})
        assert checker.queue_leases_exclusive(ok.events).ok
    # The harness cancelling the stream (at 1.3, no end from the server) is its holder ending it too.
    ok = _one_task(3)
    stream = ok.record("c1", "queue.consume", 0.5, 1.3, code="CLIENT_CANCELLED", queue="q", queues=["q", "r"],
                       lease_ttl=2.0, prefetch=3)
    ok.note("c1", "queue.consume.task", parent=stream.id, at=1.0, **_task("A", 1, 3.0))
    ok.record("w2", "queue.dequeue", 1.5, 1.51, queue="q", queues=["q"], max=1, lease_ttl=1.0, wait=0.0,
              ok={"tasks": [_task("B", 2, 2.5)]})
    assert checker.queue_leases_exclusive(ok.events).ok


def test_queue_leases_not_lost_early():
    """The consumer, having read its stream's end, acks by unary call on its lease well
    before the lease's reported expiry (3.0): told TASK_LEASE_NOT_HELD, the server let go
    of a task its holder still had, even though nobody else leased it meanwhile."""
    def told_not_held(complete: float = 1.51, **kw) -> History:
        h = _one_task(3)
        _server_ended_stream(h)
        h.record("c1", "queue.ack", complete - 0.01, complete, code="FAILED_PRECONDITION",
                 reason="TASK_LEASE_NOT_HELD", queue="q", task_id="1", lease="A", via="unary", **kw)
        return h

    fails(checker.queue_leases_not_lost_early, told_not_held(), "queue.ack on lease A (attempt 1) answered "
          "TASK_LEASE_NOT_HELD 1.390s before")
    assert checker.queue_leases_not_lost_early(told_not_held(2.95).events).ok  # past the expiry (less the margin)
    closed = told_not_held()
    closed.note("c1", "queue.consume.close", parent=closed.events[1].id, at=1.3, how="graceful")
    assert checker.queue_leases_not_lost_early(closed.events).ok  # its holder handed it back first
    acked = told_not_held()
    acked.record("c1", "queue.ack", 1.3, 1.4, code="CANCELLED", queue="q", task_id="1", lease="A", via="stream")
    assert checker.queue_leases_not_lost_early(acked.events).ok  # an earlier ack may have taken effect
    # A retrying client's repeat whose first try's reply a Redis fault lost: maybe its own doing.
    retried = told_not_held()
    retried.note("harness", "harness.client", at=0.0, retries=True)
    fails(checker.queue_leases_not_lost_early, retried, "answered TASK_LEASE_NOT_HELD")
    retried.record("faults", "fault", 1.45, 1.6, ok={"healed": True}, kind="redis_kill", duration=0.15, gap=1.0,
                   target=0)
    assert checker.queue_leases_not_lost_early(retried.events).ok


def test_a_released_task_comes_again_at_the_same_attempt():
    h = _one_task(3)
    h.record("w1", "queue.dequeue", 0.1, 0.11, queue="q", queues=["q"], max=1, lease_ttl=1.0, wait=0.0,
             ok={"tasks": [_task("A", 1, 1.1)]})
    h.record("w1", "queue.release", 0.2, 0.21, ok=None, queue="q", task_id="1", lease="A")
    h.record("w2", "queue.dequeue", 0.3, 0.31, queue="q", queues=["q"], max=1, lease_ttl=1.0, wait=0.0,
             ok={"tasks": [_task("B", 1, 1.3)]})
    assert checker.queue_leases_exclusive(h.events).ok
    h.events[2].op = "queue.ack"  # settled, not released: attempt 1 again is a violation
    fails(checker.queue_leases_exclusive, h, "attempt 1 delivered after attempt 1")


def _died(h: History, attempt: int, at: float = 9.0) -> Event:
    return h.record("final", "queue.final_dead", at, at + 0.01, queue="q",
                    ok={"task_ids": ["1"], "attempts": {"1": attempt}})


def test_queue_dead_tasks_delivered():
    # Died at attempt 1 and nobody ever got it: a stream the server ended handed back a
    # task it had leased and never sent, or a claim over [q, r] dropped what it took from q.
    h = _one_task()
    h.record("c1", "queue.consume", 0.5, 2.6, code="UNAVAILABLE", reason="REDIS_UNAVAILABLE", queue="q",
             queues=["q", "r"], lease_ttl=2.0, prefetch=3)
    h.record("w1", "queue.dequeue", 1.0, 1.1, code="UNAVAILABLE", reason="REDIS_UNAVAILABLE", queue="q",
             queues=["q", "r"], max=2, lease_ttl=1.0, wait=0.0)
    h.record("faults", "fault", 0.8, 1.5, ok={"healed": True}, kind="slot_move", duration=0.7, gap=1.0, target=0)
    _died(h, 1)
    fails(checker.queue_dead_tasks_delivered, h, "task q/1 died at attempt 1 (max_attempts 1); no client saw "
          "attempt(s) [1]")
    # Seen once: fine. Died at attempt 2 with one delivery seen: not.
    seen = _one_task()
    d = seen.record("w1", "queue.dequeue", 1.0, 1.1, queue="q", queues=["q"], max=1, lease_ttl=1.0, wait=0.0,
                    ok={"tasks": [_task("A", 1, 2.0)]})
    _died(seen, 1)
    assert checker.queue_dead_tasks_delivered(seen.events).ok
    seen.events[-1].result = {"task_ids": ["1"], "attempts": {"1": 2}}
    fails(checker.queue_dead_tasks_delivered, seen, "no client saw attempt(s) [2]", "1 deliveries seen")
    # A lease no client could see is no violation: a Dequeue whose reply never came, a
    # stream its consumer abandoned, a claim that met a Redis fault (the reply was lost).
    for blind in (
        lambda h: h.record("w1", "queue.dequeue", 1.0, 9.0, code="DEADLINE_EXCEEDED", queue="q", queues=["r", "q"],
                           max=1, lease_ttl=1.0, wait=1.0),
        lambda h: h.note("c1", "queue.consume.close", parent=h.record(
            "c1", "queue.consume", 0.5, 2.0, ok={"closed": "crash"}, queue="r", queues=["r", "q"], lease_ttl=1.0,
            prefetch=1).id, at=1.9, how="crash"),
        lambda h: (h.record("faults", "fault", 1.0, 1.5, ok={"healed": True}, kind="redis_kill", duration=0.5, gap=1.0,
                            target=0),
                   h.record("c1", "queue.consume", 0.5, 2.0, code="UNAVAILABLE", reason="REDIS_UNAVAILABLE",
                            queue="q", queues=["q"], lease_ttl=1.0, prefetch=1)),
        lambda h: (h.record("faults", "fault", 1.0, 1.5, ok={"healed": True}, kind="failover", duration=0.5, gap=1.0,
                            target=0),  # the Sentinel primary killed mid-claim
                   h.record("c1", "queue.consume", 0.5, 2.0, code="UNAVAILABLE", reason="REDIS_UNAVAILABLE",
                            queue="q", queues=["q"], lease_ttl=1.0, prefetch=1)),
    ):
        ok = _one_task()
        blind(ok)
        _died(ok, 1)
        assert checker.queue_dead_tasks_delivered(ok.events).ok, blind
    # ... but one that ended before the task was enqueued could not have taken it.
    early = History()
    early.record("w1", "queue.dequeue", 0.0, 0.5, code="DEADLINE_EXCEEDED", queue="q", queues=["q"], max=1,
                 lease_ttl=1.0, wait=0.0)
    early.record("prod", "queue.enqueue", 1.0, 1.01, queue="q", ok={"task_ids": ["1"]},
                 tasks=[{"payload": "P", "max_attempts": 1}])
    _died(early, 1)
    fails(checker.queue_dead_tasks_delivered, early, "0 deliveries seen")
    # Where the server's event log places the lease, only a blind claim around then excuses it.
    placed = _one_task()
    placed.record("w1", "queue.dequeue", 1.0, 1.2, code="DEADLINE_EXCEEDED", queue="q", queues=["q"], max=1,
                  lease_ttl=1.0, wait=0.0)
    placed.note("watch-q", "queue.event.leased", queue="q", task_id="1", attempt=1, when=4.0, at=4.0)
    _died(placed, 1)
    fails(checker.queue_dead_tasks_delivered, placed, "no client saw attempt(s) [1] (leased at {1: [4.0]})")
    placed.events[1].complete = 3.8
    assert checker.queue_dead_tasks_delivered(placed.events).ok


def test_queue_deliveries_match_enqueues():
    fails(checker.queue_deliveries_match_enqueues, queue_history(wrong_payload=True), "acknowledged with 'P1'")


# ---------------------------------------------------------------- chat


def chat_history(**inject: bool) -> History:
    h = History()
    h.record("setup", "chat.create", 0.0, 0.01, ok={"chat_id": "c", "message_id": 1}, chat="c", sender="s0",
             recipients=["s1", "e0", "a0"], body="B1")
    h.record("s0", "chat.send", 0.1, 0.11, ok={"message_id": 2}, chat="c", sender="s0", body="B2")
    h.record("s1", "chat.send", 0.12, 0.2, ok={"message_id": 3}, chat="c", sender="s1", body="B3")
    h.record("s1", "chat.send", 0.3, 0.4, code="UNAVAILABLE", chat="c", sender="s1", body="B4")  # became id 4
    h.record("s0", "chat.send", 0.5, 0.51, ok={"message_id": 3 if inject.get("dup_id") else 5}, chat="c",
             sender="s0", body="B5")
    bodies = {1: ("s0", "B1"), 2: ("s0", "B2"), 3: ("s1", "B3"), 4: ("s1", "B4"), 5: ("s0", "B5")}
    if inject.get("wrong_body"):
        bodies[3] = ("s0", "B2")

    def stream(user, mode, invoke, ids, *, final=False, ack=True, caught_up=False):
        s = h.record(user, "chat.subscribe", invoke, invoke + 0.5, ok={"closed": True}, user=user, mode=mode,
                     final=final)
        t = invoke
        for mid in ids:
            t += 0.01
            sender, body = bodies[mid]
            h.note(user, "chat.deliver", parent=s.id, at=t, chat="c", message_id=mid, sender=sender, body=body)
            if mode == "explicit" and ack:
                h.record(user, "chat.ack", t + 0.001, t + 0.002, ok=None, user=user, chat="c", up_to=mid)
        if caught_up:
            h.note(user, "chat.caught_up", parent=s.id, at=t + 0.005)
        return s

    s1 = stream("e0", "explicit", 0.05, [1])
    h.note("e0", "chat.deliver", parent=s1.id, at=0.15, chat="c", message_id=2, sender="s0", body="B2")  # not acked
    first = [3, 4, 5] if inject.get("skip_unacked") else [2, 3, 4, 5]
    stream("e0", "explicit", 0.6, [2, 3] if inject.get("lose_at_end") else first)
    stream("e0", "explicit", 1.2, [], final=True, caught_up=True)
    stream("a0", "auto", 0.05, [1, 2, 3, 5] if inject.get("gap_in_stream") else [1, 2, 3])
    stream("a0", "auto", 0.7, [3, 4, 5])  # auto mode: the batch in flight comes again
    h.record("final", "chat.history", 2.0, 2.01, chat="c", after=0, ok={"messages": [
        {"message_id": mid, "sender": s, "body": b} for mid, (s, b) in bodies.items()]})
    return h


def test_chat_ids_unique_and_increasing():
    passes_all(chat_history())
    fails(checker.chat_ids_unique_and_increasing, chat_history(dup_id=True), "message id 3 acknowledged to two")


def test_chat_bodies_match():
    fails(checker.chat_bodies_match, chat_history(wrong_body=True), "acknowledged 's1'/'B3'")


def test_chat_delivery_order():
    fails(checker.chat_delivery_order, chat_history(gap_in_stream=True), "id 5 followed id 3")
    fails(checker.chat_delivery_order, chat_history(skip_unacked=True), "started at id 3")
    fails(checker.chat_delivery_order, chat_history(lose_at_end=True), "never received acknowledged message 5")


# ---------------------------------------------------------------- autocomplete


def ac_history(*, recent: list[str] | None = None, names: list[str] | None = None, count: int = 2) -> History:
    h = History()
    h.record("w", "ac.add_recent", 0.0, 0.01, ok={"size": 1}, user="u", contact="ab")
    h.record("w", "ac.add_recent", 0.1, 0.2, code="UNAVAILABLE", user="u", contact="cd")  # maybe added
    h.record("r", "ac.suggest_recent", 0.3, 0.31, ok={"contacts": ["cd", "ab"] if recent is None else recent},
             user="u", prefix="")
    h.record("w", "ac.add_names", 0.0, 0.01, ok={"added": 2}, index="i", names=["aa", "ab"])
    h.record("r", "ac.suggest", 0.1, 0.11, ok={"names": ["aa", "ab"] if names is None else names}, index="i",
             prefix="a")
    h.record("r", "ac.count", 0.1, 0.11, ok={"count": count}, index="i", prefix="a")
    return h


def test_autocomplete_reads():
    passes_all(ac_history())
    passes_all(ac_history(recent=["ab"]))
    fails(checker.autocomplete_reads, ac_history(recent=[]), "acknowledged ['ab'] missing")
    fails(checker.autocomplete_reads, ac_history(recent=["ab", "zz"]), "['zz'] never written")
    fails(checker.autocomplete_reads, ac_history(names=["ab", "aa"]), "not in name order")
    fails(checker.autocomplete_reads, ac_history(count=3), "expected 2..2")


# ---------------------------------------------------------------- the schedule


def test_a_cluster_schedule_moves_slots_of_the_queues():
    a = plan(7, 30, servers=1, minimum={"slot_move": 3, "cpu_pressure": 1}, topology="cluster", queues=3)
    assert a == plan(7, 30, servers=1, minimum={"slot_move": 3, "cpu_pressure": 1}, topology="cluster", queues=3)
    assert counts(a)["slot_move"] >= 3 and counts(a)["cpu_pressure"] >= 1
    assert {f.kind for f in a} <= {"slot_move", "cpu_pressure", "server_kill"}
    assert {f.target for f in a if f.kind == "slot_move"} <= {0, 1, 2}


@pytest.mark.parametrize("long", [False, True])
def test_the_same_seed_gives_the_same_schedule(long):
    minimum = {"redis_kill": 20 if long else 3, "redis_pause": 2, "link_cut": 2, "server_kill": 1}
    a = plan(123, 60, servers=3, minimum=minimum, long=long, long_pauses=2 if long else 0)
    assert a == plan(123, 60, servers=3, minimum=minimum, long=long, long_pauses=2 if long else 0)
    assert a != plan(124, 60, servers=3, minimum=minimum, long=long, long_pauses=2 if long else 0)
    assert all(counts(a)[k] >= n for k, n in minimum.items())
    if long:
        assert sum(f.kind == "redis_pause" and f.duration > 5.0 for f in a) >= 2


# ---------------------------------------------------------------- failovers


def test_failover_seconds_are_the_store_s_and_the_first_success_after_each_kill():
    from chaos.campaign import failover_seconds

    h = History()
    h.record("faults", "fault", 10.0, 15.0, ok={}, kind="primary_kill", duration=4.0, gap=1.0)
    h.note("faults", "fault.primary_kill", at=10.0, queue="qa", slot=1, primary=7000)
    h.record("p", "queue.enqueue", 9.0, 10.5, ok={}, queue="qa")  # invoked before the kill: not counted
    h.record("p", "queue.enqueue", 10.1, 10.2, ok={}, queue="qb")  # another queue's primary: not counted
    h.record("p", "queue.enqueue", 10.2, 11.0, code="UNAVAILABLE", queue="qa")
    h.record("p", "queue.enqueue", 11.1, 12.5, ok={}, queue="qa")
    h.record("p", "queue.enqueue", 11.2, 12.2, ok={}, queue="qa")
    figures = failover_seconds(h.events, [(10.0, 11.5)])
    assert figures == {"failovers": 1, "store": [1.5, 1.5, 1.5], "first_success": [2.2, 2.2, 2.2]}
    assert failover_seconds(h.events, []) is None


def test_without_acks_from_every_replica_a_failover_s_state_violations_are_measured_loss_not_failures():
    from chaos.campaign import Config, Report

    h = History()
    grant = h.record("p", "lock.acquire", 1.0, 1.2, ok={"acquired": True}, name="x")
    h.record("faults", "fault", 2.0, 5.0, ok={}, kind="failover", duration=3.0, gap=1.0)
    results = [checker.RuleResult("lock_mutual_exclusion", 2, [checker.Violation("lock_mutual_exclusion", "two",
                                                                                 [grant.id])]),
               checker.RuleResult("calls_answered_by_deadline", 2, [])]

    def report(acks: int, topology: str = "sentinel") -> Report:
        r = Report(Config(seed=1, servers=1, seconds=1, minimum={}, topology=topology, replica_acks=acks),
                   [], h, results)
        r.promotions = [(2.0, 4.0)]
        return r

    assert not report(2).ok and report(2).loss_window() is None  # acks from every replica: a loss is a failure
    assert not report(1, "cluster-failover").ok  # its primaries have one replica each: 1 is every one
    assert report(1).ok and report(1).losses  # one of Sentinel's two replicas: a double failover may lose it
    assert not report(0, "single").ok  # one Redis with AOF loses nothing: a failure too
    without = report(0)
    assert without.ok and [v.rule for v in without.losses] == ["lock_mutual_exclusion"]
    assert without.loss_window() == {"violations": {"lock_mutual_exclusion": 1}, "seconds_before_kill_p50": 0.8,
                                     "longest_seconds_before_kill": 0.8}
    results[1].violations.append(checker.Violation("calls_answered_by_deadline", "hung", []))
    assert not report(0).ok  # answering rules hold in every deployment


def test_ratelimit_within_limit():
    h = History()
    # burst 2 + 10 per second: 2 at once, then one each 0.1 s.
    for i, t in enumerate([0.0, 0.0, 0.1, 0.2, 0.3, 0.4]):
        h.record(f"l{i % 3}", "ratelimit.check", t, t + 0.01, ok={"allowed": True, "remaining": 0}, key="k", rate=10,
                 per=1.0, burst=2, hits=1)
    h.record("l0", "ratelimit.check", 0.05, 0.06, ok={"allowed": False, "remaining": 0}, key="k", rate=10, per=1.0,
             burst=2, hits=1)
    h.record("l1", "ratelimit.check", 0.0, 2.0, code="UNAVAILABLE", reason="REDIS_UNAVAILABLE", key="k", rate=10,
             per=1.0, burst=2, hits=1)  # may have taken a unit: not counted
    passes_all(h)
    h.record("l2", "ratelimit.check", 0.12, 0.13, ok={"allowed": True, "remaining": 0}, key="k", rate=10, per=1.0,
             burst=2, hits=2)
    fails(checker.ratelimit_within_limit, h, "units allowed within", "burst 2 + 10 per 1.0s")


def test_ratelimit_refusals_justified():
    """burst 2 + 10 per second (tau 0.2 s): a refusal needs two units taken in the 0.2 s
    before it; one taken and one of unknown outcome will do; one alone will not."""
    h = History()
    args = dict(key="k", rate=10, per=1.0, burst=2, hits=1)
    h.record("l0", "ratelimit.check", 0.0, 0.01, ok={"allowed": True, "remaining": 1}, **args)
    h.record("l1", "ratelimit.check", 0.02, 0.5, code="UNAVAILABLE", reason="REDIS_UNAVAILABLE", **args)
    h.record("l2", "ratelimit.check", 0.05, 0.06, ok={"allowed": False, "remaining": 0}, **args)
    passes_all(h)
    h.record("l0", "ratelimit.check", 1.0, 1.01, ok={"allowed": True, "remaining": 1}, **args)
    h.record("l2", "ratelimit.check", 1.05, 1.06, ok={"allowed": False, "remaining": 0}, **args)
    fails(checker.ratelimit_refusals_justified, h, "refused with at most 1 taken")


def test_a_check_of_unknown_outcome_may_take_its_units_until_the_fault_that_held_it_ends():
    """A check that failed UNAVAILABLE during a Redis pause may run when Redis comes
    back: a refusal right after the pause is justified by it, not one a second later."""
    h = History()
    args = dict(key="k", rate=10, per=1.0, burst=2, hits=1)
    h.record("faults", "fault", 1.0, 5.0, ok={"healed": True}, kind="redis_pause", duration=4.0, gap=1.0, target=0)
    h.record("l1", "ratelimit.check", 2.0, 3.0, code="UNAVAILABLE", reason="REDIS_UNAVAILABLE", **args)
    h.record("l0", "ratelimit.check", 4.0, 5.0, ok={"allowed": True, "remaining": 0}, **args)
    h.record("l2", "ratelimit.check", 5.01, 5.02, ok={"allowed": False, "remaining": 0}, **args)
    passes_all(h)
    h.record("l0", "ratelimit.check", 6.0, 6.01, ok={"allowed": True, "remaining": 1}, **args)
    h.record("l2", "ratelimit.check", 6.05, 6.06, ok={"allowed": False, "remaining": 0}, **args)
    fails(checker.ratelimit_refusals_justified, h, "refused with at most 1 taken")


def test_ratelimit_within_limit_counts_waits_too():
    """A Wait that was allowed took its units like a Check: two waits let through
    inside a burst the checks already spent break the rule."""
    h = History()
    for i, t in enumerate([0.0, 0.0, 0.1, 0.2]):
        h.record(f"l{i}", "ratelimit.check", t, t + 0.01, ok={"allowed": True, "remaining": 0}, key="k", rate=10,
                 per=1.0, burst=2, hits=1)
    h.record("w0", "ratelimit.wait", 0.2, 0.31, ok={"allowed": True}, key="k", rate=10, per=1.0, burst=2, hits=1,
             wait=1.0)
    h.record("w1", "ratelimit.wait", 0.2, 0.9, ok={"allowed": False}, key="k", rate=10, per=1.0, burst=2, hits=1,
             wait=1.0)  # not allowed: took nothing
    passes_all(h)
    h.record("w2", "ratelimit.wait", 0.25, 0.3, ok={"allowed": True}, key="k", rate=10, per=1.0, burst=2, hits=1,
             wait=1.0)
    fails(checker.ratelimit_within_limit, h, "units allowed within")


def test_a_rate_limit_wait_answers_within_its_wait():
    h = History()
    h.record("w0", "ratelimit.wait", 0.0, 1.2, ok={"allowed": False}, key="k", rate=10, per=1.0, burst=2, hits=1,
             wait=1.0)
    passes_all(h)
    h.record("w1", "ratelimit.wait", 2.0, 2.0 + 1.0 + checker.BLOCKED_SLACK + 0.5, ok={"allowed": False}, key="k",
             rate=10, per=1.0, burst=2, hits=1, wait=1.0)
    fails(checker.blocked_calls_answer_in_time, h)
