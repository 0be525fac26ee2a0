"""The non-editable install the Dockerfile makes carries everything the server needs
(generated stubs, Lua scripts), and its HEALTHCHECK command works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import concord
from support import ServerProcess

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_install_serves_locks_and_passes_the_docker_healthcheck(redis_server, tmp_path, name):
    target_dir = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target_dir), str(ROOT)], check=True)
    assert list(target_dir.glob("concord_server/lua/lock_acquire.lua"))
    env = {"PYTHONPATH": str(target_dir), "PYTHONSAFEPATH": "1"}
    server = ServerProcess("--redis-url", redis_server.url, env=env).start(tmp_path / "server.log")
    try:
        with concord.Client(server.target) as client:
            assert client.lock(name, ttl=5).acquire() is not None
        check = subprocess.run([sys.executable, "-m", "concord_server.healthcheck"], env={**os.environ, **env,
                               "CONCORD_LISTEN": f"0.0.0.0:{server.port}"}, cwd=tmp_path)
        assert check.returncode == 0
    finally:
        server.stop()
    check = subprocess.run([sys.executable, "-m", "concord_server.healthcheck", server.target], capture_output=True)
    assert check.returncode == 1
