"""The README runs as written: every fenced block of README.md, in README order, on
one fresh server (concord-server on a Redis of its own, with a key prefix of its
own), each block after the ones before it, so a block may use what an earlier one
made (ids pass from call to call through shell variables and jq within a block).

How each kind of block runs:

- ```sh: one bash per block, at the checkout's root, after the README's set-up block
  (`source .venv/bin/activate` and `.tools/bin` on PATH: the shell the README tells
  the reader to open; that block runs first as a block of its own). Each command
  must exit 0, unless the comment lines under it show grpcurl's `Code: X`: then it
  must fail with exactly that code and print the `Message:`, `"reason"` and
  `"domain"` lines shown. A command whose comment says "until Ctrl-C" gets Ctrl-C
  (SIGINT) after CTRL_C_AFTER seconds, as the reader would press it, and must then
  exit 0.
- ```python: the venv's python, in a scratch directory (what a block writes lands
  there; it also holds a test CA's ca.pem and a client.pem / client.key it signed,
  the files the Security section's TLS client names).
- ```go: main.go of a new module in a scratch directory, whose go.mod has the
  `require` and `replace` lines the block's comment shows, the replace pointing at
  this checkout's clients/go; `gofmt -l` must list nothing; `go mod tidy`, `go run .`.
- ```js: an ES module in a scratch directory whose node_modules holds this checkout's
  clients/node under the name in its package.json (as `npm install
  path/to/concord/clients/node` leaves it); `node`.
- ```toml (the token file): a second server is started with `--auth-tokens` on it; a
  call with the file's first token must pass, a call without a token must not.

Rewrites, the only ones: the README addresses the server as 127.0.0.1:50051 (where
`make run` listens); every occurrence is replaced by the test server's address before
a block runs, and CONCORD_TARGET (the admin CLI's default target) is set to it. The
README's Go module path, go.concord.dev/concord, becomes the one clients/go/go.mod
declares, should they differ.

A block that is not run has `<!-- not run: REASON -->` on the line before it and is
listed in NOT_RUN with the same reason; only set-up commands may be. Independently of
the run, reflection lists every RPC of the six services, and the README's commands
must call each one.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
import trustme

import concord
from concord.errors import Unauthenticated
from concord_server.store.embedded_valkey import valkey_binary
from support import RedisServer, ServerProcess
from test_polyglot import GO_CLIENT, NODE_CLIENT, ROOT, go, node, require, tool

# The README's examples talk to the default address, 127.0.0.1:50051, which no other
# test may hold meanwhile (test_startup's bad settings would see it busy): run alone
# after the rest (make test).
pytestmark = pytest.mark.serial

README = ROOT / "README.md"
README_ADDRESS = "127.0.0.1:50051"
README_GO_MODULE = "go.concord.dev/concord"
CTRL_C_AFTER = 3  # seconds a command that runs "until Ctrl-C" runs
BLOCK_TIMEOUT = 240  # seconds, far above what any block needs (a Go build included)

# Blocks not run: their first command -> why. The README marks each with the same reason.
NOT_RUN = {
    "make run": "set-up; the test that runs this README's blocks starts its own server",
}
SETUP = "source .venv/bin/activate"  # the set-up block: later shell blocks run after it

SERVICES = [f"concord.{s}.v1.{n}Service" for s, n in [("lock", "Lock"), ("semaphore", "Semaphore"), ("queue", "Queue"),
                                                      ("chat", "Chat"), ("autocomplete", "Autocomplete"),
                                                      ("files", "File"), ("rwlock", "ReadWriteLock"),
                                                      ("election", "Election"), ("ratelimit", "RateLimit")]]
EXIT_STATUS_BASE = 64  # grpcurl exits with 64 + the status code of a failed call
SHOWN_LINES = re.compile(r'^(Code:|Message:|"reason":|"domain":)')
METHOD = re.compile(r"concord\.\w+\.v1\.\w+/\w+")

# What some grpcurl calls must print: the flow works, not just exits 0.
EXPECTED_OUTPUT = {
    "concord.lock.v1.LockService/Describe": ['"held": true', '"owner": "me"'],
    "concord.lock.v1.LockService/Hold": ['"event": "HOLD_EVENT_ACQUIRED"'],
    "concord.lock.v1.LockService/HoldMany": ['"event": "HOLD_EVENT_ACQUIRED"'],
    "concord.election.v1.ElectionService/Leader": ['"candidate": "host-b"', '"value": "aG9zdC1iOjgwODA="'],
    "concord.election.v1.ElectionService/Observe": ['"candidate": "host-b"', '"value": "aG9zdC1hOjkwOTA="'],
    "concord.election.v1.ElectionService/Lead": ['"event": "LEAD_EVENT_ELECTED"'],
    "concord.semaphore.v1.SemaphoreService/Describe": ['"held": 1'],
    "concord.semaphore.v1.SemaphoreService/Hold": ['"event": "HOLD_EVENT_ACQUIRED"'],
    "concord.rwlock.v1.ReadWriteLockService/Describe": ['"owner": "reader-1"'],
    "concord.rwlock.v1.ReadWriteLockService/Hold": ['"event": "HOLD_EVENT_ACQUIRED"'],
    "concord.semaphore.v1.SemaphoreService/SetLimit": ['"previous_limit": 5'],
    "concord.queue.v1.QueueService/Nack": ['"state": "TASK_STATE_DEAD"'],
    "concord.queue.v1.QueueService/ListDead": ['"last_error": "SMTP said no"'],
    "concord.queue.v1.QueueService/SearchTasks": ['"last_error": "SMTP said no"', '"examined": 1'],
    "concord.queue.v1.QueueService/RetryDead": ['"retried": "1"'],
    "concord.queue.v1.QueueService/Consume": ['"task": {', '"state": "TASK_STATE_LEASED"'],
    "concord.queue.v1.QueueService/GetTask": ['"state": "TASK_STATE_SUCCEEDED"', '"result": "eyJpZCI6NDJ9"',
                                              '"value": 0.5'],
    "concord.queue.v1.QueueService/WaitTask": ['"finished": true', '"result": "eyJpZCI6NDJ9"'],
    "concord.queue.v1.QueueService/GetQueuePolicy": ['"max_count": 10000', '"max_age": "2592000s"'],
    "concord.queue.v1.QueueService/GetGroup": ['"weight": 3', '"max_leased": 5'],
    "concord.ratelimit.v1.RateLimitService/Release": ['"released": true'],
    "concord.queue.v1.QueueService/ListGroups": ['"WAIT_REASON_GROUP_PAUSED"'],
    "concord.chat.v1.ChatService/FetchPending": ['"body": "Hi all"'],
    "concord.chat.v1.ChatService/Subscribe": ['"body": "Hey Joe"', '"caught_up": true'],
    "concord.autocomplete.v1.AutocompleteService/Suggest": ['"name": "Astrid"'],
    "concord.autocomplete.v1.AutocompleteService/SuggestRecent": ['"Thomas Müller"'],
    "concord.files.v1.FileService/Download": ['"Zmlyc3Q="', '"c2Vjb25k"'],  # the lines "first" and "second"
    "concord.files.v1.FileService/MarkDone": ['"deleted": true'],
}
# What other commands (by the start of their text) and blocks (by a line they hold) must print.
COMMAND_OUTPUT = {
    "concord --version": [f"concord {concord.__version__}"],
    "concord lock describe orders:42": ["lock 'orders:42' is not held"],
    "concord semaphore set-limit api:tenant-7 5": ["semaphore 'api:tenant-7': limit 5 (was 5)"],
    "concord chat describe ops": ["Hey Joe"],
    "concord --json chat tail ops": ["tailing chat 'ops'"],
    "concord queue task thumbnails": ["dead", "not_retryable", "notes.txt is not an image"],
    "concord queue wait thumbnails": ["died (not_retryable)", "exit 3"],
    "concord queue search thumbnails": ["notes.txt is not an image", "1 found"],
    "echo | go -C clients/go run ./examples/lock": ["acquired orders:42", "released orders:42"],
}
BLOCK_OUTPUT = {
    "worker.run()": ["welcome mail to ada@example.com", "joe Lunch?", "GET /about"],
    "handle.result(timeout=30)": ["{'sizes': [64, 256, 1024]}", "succeeded 1.0 {'size': 1024}",
                                  "dead not_retryable", "{'sizes': [64]}", "Retention(max_count=10000"],
    "func main() {": ["welcome mail: {\"to\": \"ada@example.com\"}", "PermissionDenied NOT_A_MEMBER"],
    "const client = new Client(": ["9 LOCK_NOT_HELD"],
}


@dataclass
class Block:
    lang: str
    text: str
    line: int  # of the opening fence, 1-based
    not_run: str | None  # the reason of a <!-- not run: ... --> marker

    @property
    def first(self) -> str:
        """The first command, without its comment: how NOT_RUN names the block."""
        return self.text.splitlines()[0].split("#")[0].strip()

    def __str__(self) -> str:
        return f"README.md line {self.line} (```{self.lang}):\n{self.text}"


def readme_blocks() -> list[Block]:
    lines = README.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = re.fullmatch(r"```(\S*)\s*", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        marker = re.fullmatch(r"<!-- not run: (.+?) -->", lines[i - 1].strip()) if i else None
        blocks.append(Block(fence[1], "\n".join(lines[i + 1:end]) + "\n", i + 1, marker[1] if marker else None))
        i = end + 1
    return blocks


@dataclass
class Command:
    text: str
    shown: list[str] = field(default_factory=list)  # the comment lines under it: its output, abridged

    @property
    def methods(self) -> list[str]:
        return METHOD.findall(self.text)

    @property
    def expected_code(self) -> str | None:
        """grpcurl's name of the status code it must fail with (FailedPrecondition), if any."""
        found = re.search(r"Code: (\w+)", "\n".join([self.text, *self.shown]))
        return found.group(1) if found else None

    @property
    def expected_exit(self) -> int:
        if self.expected_code is None:
            return 0
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", self.expected_code).upper()
        return EXIT_STATUS_BASE + grpc.StatusCode[snake].value[0]

    @property
    def until_ctrl_c(self) -> bool:
        return "until Ctrl-C" in self.text


def _complete(text: str) -> bool:
    """True when text is a whole shell command: no trailing backslash, no open quote."""
    if text.rstrip("\n").endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def shell_commands(block: Block) -> list[Command]:
    commands: list[Command] = []
    pending = ""
    for line in block.text.splitlines():
        if not pending and line.lstrip().startswith("#"):
            if commands:
                commands[-1].shown.append(line.lstrip("# ").strip())
        elif pending or line.strip():
            pending += line + "\n"
            if _complete(pending):
                commands.append(Command(pending.strip()))
                pending = ""
    assert not pending, f"unfinished command in {block}"
    return commands


def readme_commands() -> list[Command]:
    return [c for b in readme_blocks() if b.lang in ("sh", "bash") for c in shell_commands(b)]


@dataclass
class Ran:
    command: Command
    exit: int
    output: str


class Runner:
    """Runs README blocks against one server, from a scratch directory."""

    def __init__(self, server: ServerProcess, redis_url: str, scratch: Path, setup: Block) -> None:
        self.server, self.redis_url, self.scratch, self.setup = server, redis_url, scratch, setup
        self.env = {**os.environ, "CONCORD_TARGET": server.target}
        self.env.pop("VIRTUAL_ENV", None)
        # The prerequisites on PATH, as the README asks: Go, Node, jq.
        extra = [str(Path(p).parent) for p in (go(), node(), require(shutil.which("jq"), "jq", "apt-get install jq"))]
        self.env["PATH"] = os.pathsep.join([*extra, self.env["PATH"]])

    def local(self, text: str) -> str:
        return text.replace(README_ADDRESS, self.server.target)

    def run(self, block: Block) -> None:
        runner = {"sh": self.shell, "bash": self.shell, "python": self.python, "go": self.go, "js": self.node,
                  "toml": self.token_file}[block.lang]
        output = runner(block)
        for line, expected in BLOCK_OUTPUT.items():
            if line in block.text:
                for text in expected:
                    assert text in output, f"{text!r} not printed by {block}\noutput:\n{output}"

    def _process(self, args: list[str], cwd: Path, block: Block, env: dict[str, str] | None = None) -> str:
        proc = subprocess.Popen(args, cwd=cwd, env=env or self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, _ = proc.communicate()
            pytest.fail(f"{' '.join(args)} took over {BLOCK_TIMEOUT}s for {block}\noutput:\n{out}")
        assert proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode} for {block}\noutput:\n{out}"
        return out

    def shell(self, block: Block) -> str:
        """The block's commands in one bash (shell variables carry over), each one's exit
        status and output (stdout and stderr) recorded between markers."""
        commands = shell_commands(block)
        script = ["set -o pipefail", f"cd {shlex.quote(str(ROOT))}"]
        if block is not self.setup:
            script += [self.setup.text, f"cd {shlex.quote(str(ROOT))}"]
        for i, c in enumerate(commands):
            text = self.local(c.text)
            if c.until_ctrl_c:
                text = f"timeout --preserve-status -s INT {CTRL_C_AFTER} {text}"
            # The command gets lines of its own: a trailing comment must not swallow the braces.
            script += [f"printf '\\n@@ {i}\\n'", "{", text, "} 2>&1", f"printf '\\n@@ {i} exit %d\\n' $?"]
        path = self.scratch / f"readme-{block.line}.sh"
        path.write_text("\n".join(script) + "\n")
        out = self._process(["bash", str(path)], ROOT, block)
        found = re.findall(r"\n@@ (\d+)\n(.*?)\n@@ \1 exit (\d+)\n", out, re.S)
        assert len(found) == len(commands), f"the script stopped early for {block}\noutput:\n{out}"
        for i, output, code in found:
            check(Ran(commands[int(i)], int(code), output), block)
        return out

    def python(self, block: Block) -> str:
        path = self.scratch / f"readme-{block.line}.py"
        path.write_text(self.local(block.text))
        return self._process([sys.executable, str(path)], self.scratch, block)

    def go(self, block: Block) -> str:
        declared = re.search(r"^module\s+(\S+)", (GO_CLIENT / "go.mod").read_text(), re.M)[1]
        go_version = re.search(r"^go\s+(\S+)", (GO_CLIENT / "go.mod").read_text(), re.M)[1]
        text = self.local(block.text).replace(README_GO_MODULE, declared)
        module = self.scratch / f"go-{block.line}"
        module.mkdir()
        (module / "main.go").write_text(text)
        requires = re.findall(r"^//\s+require\s+(.+)$", text, re.M)
        replaces = re.findall(r"^//\s+replace\s+(\S+)\s+=>\s+(\S+)$", text, re.M)
        assert requires and replaces, f"the Go block must show its go.mod's require and replace lines: {block}"
        assert all(target.endswith("clients/go") for _, target in replaces), replaces
        (module / "go.mod").write_text("\n".join([
            "module readme.example/app", "", f"go {go_version}", "",
            *(f"require {r}" for r in requires),
            *(f"replace {path} => {GO_CLIENT}" for path, _ in replaces), ""]))
        unformatted = self._process([str(Path(go()).with_name("gofmt")), "-l", "main.go"], module, block)
        assert not unformatted.strip(), f"gofmt would change the Go block: {block}"
        self._process([go(), "mod", "tidy"], module, block)
        return self._process([go(), "run", "."], module, block)

    def node(self, block: Block) -> str:
        name = json.loads((NODE_CLIENT / "package.json").read_text())["name"]
        imported = re.findall(r"""\bfrom\s+['"]([^'"]+)['"]""", block.text)
        bare = [m for m in imported if not m.startswith((".", "/", "node:"))]
        assert bare == [name] * len(bare), f"the Node block must import the package by its name {name!r}: {block}"
        project = self.scratch / f"node-{block.line}"
        (project / "node_modules" / name).parent.mkdir(parents=True)
        (project / "node_modules" / name).symlink_to(NODE_CLIENT, target_is_directory=True)
        (project / "readme.mjs").write_text(self.local(block.text))
        return self._process([node(), "readme.mjs"], project, block)

    def token_file(self, block: Block) -> str:
        path = self.scratch / f"tokens-{block.line}.toml"
        path.write_text(block.text)
        token = tomllib.loads(block.text)["tokens"][0]["token"]
        server = ServerProcess("--redis-url", self.redis_url, "--key-prefix", f"readme{uuid.uuid4().hex[:8]}",
                               "--auth-tokens", str(path), "--log-level", "WARNING")
        server.start(self.scratch / f"auth-server-{block.line}.log")
        try:
            with concord.Client(server.target, token=token) as client:
                assert client.lock("readme:token").describe().held is False
            with concord.Client(server.target) as client, pytest.raises(Unauthenticated):
                client.lock("readme:token").describe()
        finally:
            assert server.stop() == 0, server.log_text()
        return ""


def check(ran: Ran, block: Block) -> None:
    where = f"README command (line {block.line}'s block):\n{ran.command.text}\noutput:\n{ran.output}"
    assert ran.exit == ran.command.expected_exit, where
    lines = {line.strip().rstrip(",") for line in ran.output.splitlines()}
    for shown in filter(SHOWN_LINES.match, ran.command.shown):
        assert shown.rstrip(",") in lines, f"{shown!r} not printed; {where}"
    expected = [e for m in ran.command.methods[-1:] for e in EXPECTED_OUTPUT.get(m, [])]
    expected += [e for start, out in COMMAND_OUTPUT.items() if ran.command.text.startswith(start) for e in out]
    described = re.fullmatch(r"grpcurl -plaintext \S+ describe concord\.\w+\.v1\.(\w+Service)", ran.command.text)
    if described:
        expected.append(f"service {described[1]} {{")
    for text in expected:
        assert text in ran.output, f"{text!r} not printed; {where}"


@pytest.fixture(scope="module")
def readme_server(tmp_path_factory) -> Iterator[tuple[ServerProcess, RedisServer]]:
    """A server on a Redis of its own with keys of its own, so the README's fixed names start fresh."""
    redis = RedisServer(valkey_binary(), tmp_path_factory.mktemp("readme-redis")).start()
    server = ServerProcess("--redis-url", redis.url, "--key-prefix", f"readme{uuid.uuid4().hex[:8]}",
                           "--log-level", "WARNING")
    try:
        server.start(tmp_path_factory.mktemp("readme-server") / "server.log")
        yield server, redis
    finally:
        server.stop()
        redis.stop()


def _scratch(tmp_path: Path) -> Path:
    """The directory Python blocks run in, with the TLS files the Security block names."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(tmp_path / "ca.pem")
    client = ca.issue_cert("client.concord.test")
    client.cert_chain_pems[0].write_to_path(tmp_path / "client.pem")
    client.private_key_pem.write_to_path(tmp_path / "client.key")
    return tmp_path


def test_every_block_is_run_or_listed_as_set_up():
    blocks = readme_blocks()
    assert blocks, "no fenced blocks in README.md"
    unknown = [b for b in blocks if b.lang not in ("sh", "bash", "python", "go", "js", "toml")]
    assert not unknown, f"the test does not know how to run: {unknown[0]}"
    marked = {b.first: b.not_run for b in blocks if b.not_run}
    assert marked == NOT_RUN, "blocks marked <!-- not run: ... --> in the README and NOT_RUN must agree"
    setup = [i for i, b in enumerate(blocks) if b.lang == "sh" and b.text.startswith(SETUP)]
    assert setup, f"the README's set-up block ({SETUP}...) is missing"
    assert all(b.not_run for b in blocks[:setup[0]]), "only set-up may come before the set-up block"


def test_prerequisites_match_the_clients():
    text = README.read_text()
    go_version = re.search(r"^go\s+(\d+\.\d+)", (GO_CLIENT / "go.mod").read_text(), re.M)[1]
    assert f"Go {go_version} or newer" in text, f"clients/go/go.mod needs Go {go_version}: say so in the README"
    engines = json.loads((NODE_CLIENT / "package.json").read_text()).get("engines", {}).get("node", "")
    node_version = re.fullmatch(r">=\s*(\d+)(?:\.0)*", engines)
    assert node_version, f"clients/node/package.json engines.node: {engines!r}"
    assert f"Node {node_version[1]} or newer" in text
    python = re.search(r'requires-python\s*=\s*">=\s*(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text())
    if python:
        assert f"Python {python[1]} or newer" in text


def test_readme_calls_every_rpc_that_reflection_lists(readme_server):
    server, _ = readme_server

    def grpcurl(*args: str) -> str:
        proc = subprocess.run([tool("grpcurl"), "-plaintext", server.target, *args], capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    listed = grpcurl("list").split()
    assert sorted(listed) == sorted([*SERVICES, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"])
    called = {m for c in readme_commands() for m in c.methods}
    described = {c.text.split()[-1] for c in readme_commands() if re.match(r"grpcurl .* describe ", c.text)}
    assert set(SERVICES) <= described, "the README must describe every service with grpcurl"
    for service in SERVICES:
        rpcs = re.findall(r"^\s*rpc (\w+) \(", grpcurl("describe", service), re.M)
        assert rpcs, f"describe {service} listed no RPCs"
        missing = [r for r in rpcs if f"{service}/{r}" not in called]
        assert not missing, f"the README's grpcurl commands never call {service}: {missing}"


def test_readme_shows_an_error_with_its_code_and_error_info():
    shown = [(c.expected_code, "\n".join(c.shown)) for c in readme_commands()]
    assert any(code == "FailedPrecondition" and '"reason": "LOCK_NOT_HELD"' in lines and '"domain": "concord"' in lines
               for code, lines in shown), "the README's grpcurl section must show an error and its ErrorInfo"
    grpcurls = [c for c in readme_commands() if "grpcurl" in c.text]
    assert not any("-proto" in c.text or "-import-path" in c.text for c in grpcurls), "reflection only"


@pytest.mark.timeout(900)
def test_readme_runs_in_order_on_a_fresh_server(readme_server, tmp_path):
    server, redis = readme_server
    tool("grpcurl")
    require(ROOT / ".venv" / "bin" / "activate", ".venv", "`make run` or `make test` builds it")
    blocks = readme_blocks()
    setup = next(b for b in blocks if b.lang == "sh" and b.text.startswith(SETUP))
    runner = Runner(server, redis.url, _scratch(tmp_path), setup)
    for block in blocks:
        if not block.not_run:
            runner.run(block)
