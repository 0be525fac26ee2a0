"""The Go and Node clients as their users get them, from outside the repository.

Go: a module of its own in a temporary directory requires go.concord.dev/concord
with the `replace` line clients/go/README.md gives, builds clients/go/examples/roundtrip
there, and runs it against live servers. Node: `npm pack` in clients/node, the
tarball installed into a temporary project with TypeScript, the example
clients/node/examples/roundtrip.ts compiled under `tsc --strict` against it, and run.
Both run a lock round trip and a queue round trip (enqueue, dequeue, ack) over
plaintext, over mutual TLS with a bearer token, and with a token over plaintext.

npm's cache (~/.npm) makes repeated runs quick. Without Go or npm these tests are
skipped, except under CI (tests/test_polyglot.py's `require`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from test_auth import ALPHA, auth_server, token_file  # noqa: F401 (fixtures)
from test_polyglot import GO_CLIENT, NODE_CLIENT, go, node, require, run
from test_tls import TOKEN, mtls_server, pki  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]
# The TypeScript the example is compiled with; the types are meant for 5.9 and later.
TYPESCRIPT = os.environ.get("CONCORD_TEST_TYPESCRIPT", "typescript@^7.0.2")


def npm() -> str:
    return require(shutil.which("npm"), "npm")


# --- Go ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def go_app(tmp_path_factory) -> str:
    """clients/go/examples/roundtrip built in a module outside the repository that
    requires go.concord.dev/concord as clients/go/README.md says."""
    go_ = go()
    app = tmp_path_factory.mktemp("go-app")
    assert not app.resolve().is_relative_to(ROOT)
    shutil.copy(GO_CLIENT / "examples" / "roundtrip" / "main.go", app / "main.go")
    # The client's go.sum vouches for the modules it needs, so no checksum database is asked.
    shutil.copy(GO_CLIENT / "go.sum", app / "go.sum")
    env = {"GOFLAGS": "-mod=mod", "GOWORK": "off"}
    run([go_, "mod", "init", "example.com/concordapp"], cwd=app, env=env, timeout=30)
    run([go_, "mod", "edit", f"-replace=go.concord.dev/concord={GO_CLIENT}"], cwd=app, env=env, timeout=30)
    run([go_, "get", "go.concord.dev/concord@v0.0.0"], cwd=app, env=env, timeout=120)
    run([go_, "mod", "tidy"], cwd=app, env=env, timeout=120)
    mod = (app / "go.mod").read_text()
    assert f"replace go.concord.dev/concord => {GO_CLIENT}" in mod and "go.concord.dev/concord v0.0.0" in mod, mod
    run([go_, "build", "-o", "roundtrip", "."], cwd=app, env=env, timeout=180)
    return str(app / "roundtrip")


def test_the_go_module_needs_no_newer_go_than_it_says():
    """clients/go/go.mod's `go` line is the oldest Go its dependencies allow
    (google.golang.org/protobuf v1.36.12 and grpc v1.75 say go 1.23.0)."""
    mod = (GO_CLIENT / "go.mod").read_text()
    assert re.search(r"^module go\.concord\.dev/concord$", mod, re.M)
    assert re.search(r"^go 1\.23\.0$", mod, re.M) and not re.search(r"^toolchain ", mod, re.M), mod


# --- Node --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def node_tarball(tmp_path_factory) -> Path:
    npm_ = npm()
    out = tmp_path_factory.mktemp("npm-pack")
    run([npm_, "pack", "--pack-destination", str(out), "--loglevel=error"], cwd=NODE_CLIENT, timeout=120)
    (tarball,) = out.glob("*.tgz")
    assert not (NODE_CLIENT / "protos").exists(), "postpack leaves no copy of protos/ behind"
    return tarball


def test_the_node_tarball_is_a_package_of_its_own(node_tarball):
    with tarfile.open(node_tarball) as tar:
        names = set(tar.getnames())
        manifest = json.load(tar.extractfile("package/package.json"))
    protos = {p.relative_to(ROOT).as_posix() for p in (ROOT / "protos").rglob("*.proto")}
    assert {f"package/{p}" for p in protos} <= names, "every .proto file is in the package"
    assert {"package/src/index.js", "package/src/index.d.ts", "package/src/services.d.ts"} <= names
    assert not manifest.get("private")
    assert manifest["exports"]["."]["types"] == "./src/index.d.ts" and manifest["type"] == "module"
    assert all(re.fullmatch(r"\^\d+\.\d+\.\d+", v) for v in manifest["dependencies"].values()), manifest


@pytest.fixture(scope="session")
def node_app(node_tarball, tmp_path_factory) -> Path:
    """A project outside the repository with the tarball and TypeScript installed,
    and examples/roundtrip.ts compiled under --strict: yields its directory."""
    npm_ = npm()
    app = tmp_path_factory.mktemp("node-app")
    assert not app.resolve().is_relative_to(ROOT)
    (app / "package.json").write_text(json.dumps({"name": "concord-ts-example", "private": True, "type": "module"}))
    run([npm_, "install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", str(node_tarball),
         TYPESCRIPT], cwd=app, timeout=240)
    shutil.copy(NODE_CLIENT / "examples" / "roundtrip.ts", app / "roundtrip.ts")
    (app / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {"strict": True, "module": "nodenext", "moduleResolution": "nodenext",
                            "target": "es2022", "outDir": "dist", "skipLibCheck": False},
        "files": ["roundtrip.ts"],
    }))
    run([str(app / "node_modules" / ".bin" / "tsc"), "--strict", "-p", "."], cwd=app, timeout=180)
    return app


def test_node_protos_that_cannot_be_found_are_named(node_app):
    node_ = require(shutil.which("node"), "Node")
    script = "import { Client } from '@concord/client'; new Client('127.0.0.1:1').close();"
    proc = subprocess.run([node_, "--input-type=module", "-e", script], cwd=node_app, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "CONCORD_PROTOS": str(node_app / "nowhere")})
    assert proc.returncode != 0 and "CONCORD_PROTOS=" in proc.stderr and "ENOENT" not in proc.stderr, proc.stderr
    # Without it, the package's own copy of the protos serves.
    run([node_, "--input-type=module", "-e", script], cwd=node_app, env={"CONCORD_PROTOS": ""}, timeout=60)


def test_node_types_are_fresh(tmp_path):
    """src/services.d.ts is what scripts/gen-types.js writes from protos/ today."""
    node_ = node()
    run([node_, "scripts/gen-types.js", str(tmp_path / "services.d.ts")], cwd=NODE_CLIENT, timeout=60)
    assert (tmp_path / "services.d.ts").read_text() == (NODE_CLIENT / "src" / "services.d.ts").read_text(), (
        "clients/node/src/services.d.ts is stale: run `make proto`")


# --- both, against live servers ----------------------------------------------------


def _check(out: str) -> None:
    lines = out.splitlines()
    assert any(line.startswith("lock ") for line in lines), out
    assert any(re.fullmatch(r"release again (FailedPrecondition|FAILED_PRECONDITION) LOCK_NOT_HELD( true)?", line)
               for line in lines), out
    assert any(re.fullmatch(r"queue send_welcome (TASK_STATE_LEASED )?0 0", line) for line in lines), out


@pytest.mark.timeout(400)
def test_go_module_round_trips_over_plaintext(go_app, concord_server):
    _check(run([go_app], cwd=Path(go_app).parent, env={"CONCORD_ADDR": concord_server.target}, timeout=60))


@pytest.mark.timeout(400)
def test_go_module_round_trips_over_mutual_tls_with_a_token(go_app, mtls_server, pki):  # noqa: F811
    env = {"CONCORD_ADDR": mtls_server.target, "CONCORD_CA": pki["ca"], "CONCORD_CERT": pki["client_cert"],
           "CONCORD_KEY": pki["client_key"], "CONCORD_TOKEN": TOKEN}
    _check(run([go_app], cwd=Path(go_app).parent, env=env, timeout=60))


@pytest.mark.timeout(400)
def test_go_module_sends_a_token_over_plaintext(go_app, auth_server):  # noqa: F811
    _check(run([go_app], cwd=Path(go_app).parent, env={"CONCORD_ADDR": auth_server.target, "CONCORD_TOKEN": ALPHA},
               timeout=60))
    proc = subprocess.run([go_app], env={**os.environ, "CONCORD_ADDR": auth_server.target, "CONCORD_TOKEN": ""},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "UNAUTHENTICATED" in proc.stderr, proc.stderr


@pytest.mark.timeout(600)
def test_node_package_round_trips_over_plaintext(node_app, concord_server):
    _check(run([require(shutil.which("node"), "Node"), "dist/roundtrip.js"], cwd=node_app,
               env={"CONCORD_ADDR": concord_server.target}, timeout=60))


@pytest.mark.timeout(600)
def test_node_package_round_trips_over_mutual_tls_with_a_token(node_app, mtls_server, pki):  # noqa: F811
    env = {"CONCORD_ADDR": mtls_server.target, "CONCORD_CA": pki["ca"], "CONCORD_CERT": pki["client_cert"],
           "CONCORD_KEY": pki["client_key"], "CONCORD_TOKEN": TOKEN}
    _check(run([require(shutil.which("node"), "Node"), "dist/roundtrip.js"], cwd=node_app, env=env, timeout=60))


@pytest.mark.timeout(600)
def test_node_package_sends_a_token_over_plaintext(node_app, auth_server):  # noqa: F811
    node_ = require(shutil.which("node"), "Node")
    _check(run([node_, "dist/roundtrip.js"], cwd=node_app,
               env={"CONCORD_ADDR": auth_server.target, "CONCORD_TOKEN": ALPHA}, timeout=60))
    proc = subprocess.run([node_, "dist/roundtrip.js"], cwd=node_app, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "CONCORD_ADDR": auth_server.target, "CONCORD_TOKEN": ""})
    assert proc.returncode != 0 and "UNAUTHENTICATED" in proc.stderr, proc.stderr
