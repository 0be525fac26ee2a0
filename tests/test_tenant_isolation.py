"""What one tenant or client does must not show through to, or disturb, another:
error messages name resources, not Redis keys; metrics series are bounded per
tenant; listings walk only the caller's own resources; cancelled streams are not
errors."""

from __future__ import annotations

import grpc
import pytest

import concord


def test_a_missing_file_s_message_names_the_file_not_a_redis_key(client, name):
    for read in (client.files.chunks, client.files.lines):
        with pytest.raises(concord.FileNotFound) as err:
            list(read(f"12345:{name}"))
        assert err.value.code == grpc.StatusCode.NOT_FOUND
        message = str(err.value)
        assert f"12345:{name}" in message, message
        assert "{" not in message and "concord:" not in message, message


def test_a_tenant_touching_many_queues_keeps_another_tenant_s_depth_series():
    """metrics.RecentQueues decides which queues' depths a scrape exports."""
    import contextvars

    from concord_server import tenants
    from concord_server.metrics import RecentQueues

    recent = RecentQueues()

    def as_tenant(tenant: str, names: list[str]) -> None:
        def note() -> None:
            tenants.current.set(tenant)
            recent.seen(names)
        contextvars.copy_context().run(note)

    as_tenant("quiet", ["orders"])
    for i in range(0, 5000, 10):
        as_tenant("noisy", [f"q{j}" for j in range(i, i + 10)])
    names = recent.names()
    assert ("quiet", "orders") in names
    noisy = [n for t, n in names if t == "noisy"]
    assert 0 < len(noisy) < 5000 and noisy[-1] == "q4999"  # bounded, the most recent kept
