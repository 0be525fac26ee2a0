"""Chat faults: Redis restarting under live subscriptions, a server killed under one."""

from __future__ import annotations

import threading

import pytest

import concord
from support import ServerProcess, unless_unavailable, wait_until


def test_a_subscription_survives_a_redis_restart(fresh_redis, tmp_path, name):
    server = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "server.log")
    try:
        with concord.Client(server.target, timeout=5) as client:
            chat_id = client.chat.create("a", ["b"], "before")
            got: list = []
            errors: list = []

            def follow() -> None:  # as an app would: resubscribe after UNAVAILABLE
                while len(got) < 2:
                    try:
                        with client.chat.subscribe("b", ack_mode="explicit") as feed:
                            for m in feed:
                                client.chat.ack("b", chat_id, m.message_id)
                                got.append(m.body)
                                if len(got) == 2:
                                    return
                    except concord.Unavailable as exc:
                        errors.append(exc)

            reader = threading.Thread(target=follow, daemon=True)
            reader.start()
            wait_until(lambda: got == ["before"], message="the first message")
            fresh_redis.stop()
            with pytest.raises(concord.Unavailable):
                client.chat.send(chat_id, "a", "while down")
            fresh_redis.start()  # same port, same append-only file
            wait_until(lambda: unless_unavailable(client.chat.send, chat_id, "a", "after"), message="service back after Redis restart")
            reader.join(30)
            assert got == ["before", "after"]
            assert [m.body for m in client.chat.history(chat_id)] == ["before", "after"]  # "a" has read neither
    finally:
        server.stop()


def test_a_subscriber_whose_server_dies_gets_its_unacked_messages_from_another(redis_server, concord_server, tmp_path,
                                                                             name):
    doomed = ServerProcess("--redis-url", redis_server.url).start(tmp_path / "doomed.log")
    a, b = f"{name}:a", f"{name}:b"
    try:
        with concord.Client(concord_server.target) as survivor, concord.Client(doomed.target) as client:
            chat_id = survivor.chat.create(a, [b], "m1")
            survivor.chat.send(chat_id, a, "m2")
            feed = client.chat.subscribe(b, ack_mode="explicit")
            it = iter(feed)
            first = next(it)
            client.chat.ack(b, chat_id, first.message_id)
            assert next(it).body == "m2"  # received, not acked
            doomed.kill()
            with pytest.raises(concord.ConcordError):
                next(it)
            with survivor.chat.subscribe(b, ack_mode="explicit") as again:
                assert next(iter(again)).body == "m2"
    finally:
        doomed.kill()
