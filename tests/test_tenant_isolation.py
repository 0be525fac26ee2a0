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
