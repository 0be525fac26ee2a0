"""grpcurl against a live server, through server reflection only (no proto files).

The commands are the README's: the ```sh blocks of its "## grpcurl" section are
run in order, as one shell session (variables and jq carry ids from call to
call), so the README cannot drift from what works. Each command must exit 0,
unless the comment lines under it show grpcurl's `Code: X` (then it must fail
with exactly that code, and print the `Message:`, `"reason"` and `"domain"`
lines shown). Independently of the README, reflection lists every RPC of the six
services, and each must be called by some command.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from support import ServerProcess
from test_polyglot import ROOT, require, tool

README = ROOT / "README.md"
README_ADDRESS = "127.0.0.1:50051"
SERVICES = [f"concord.{s}.v1.{n}Service" for s, n in [("lock", "Lock"), ("semaphore", "Semaphore"), ("queue", "Queue"),
                                                      ("chat", "Chat"), ("autocomplete", "Autocomplete"),
                                                      ("files", "File")]]
EXIT_STATUS_BASE = 64  # grpcurl exits with 64 + the status code of a failed call
SHOWN_LINES = re.compile(r'^(Code:|Message:|"reason":|"domain":)')
METHOD = re.compile(r"concord\.\w+\.v1\.\w+/\w+")

# What some calls' output must contain: the flow works, not just exits 0.
EXPECTED_OUTPUT = {
    "concord.lock.v1.LockService/Describe": ['"held": true', '"owner": "me"'],
    "concord.lock.v1.LockService/Hold": ['"event": "HOLD_EVENT_ACQUIRED"'],
    "concord.semaphore.v1.SemaphoreService/Describe": ['"held": 1'],
    "concord.semaphore.v1.SemaphoreService/Hold": ['"event": "HOLD_EVENT_ACQUIRED"'],
    "concord.queue.v1.QueueService/Nack": ['"state": "TASK_STATE_DEAD"'],
    "concord.queue.v1.QueueService/ListDead": ['"last_error": "SMTP said no"'],
    "concord.queue.v1.QueueService/RetryDead": ['"retried": "1"'],
    "concord.queue.v1.QueueService/Consume": ['"task": {', '"state": "TASK_STATE_LEASED"'],
    "concord.chat.v1.ChatService/FetchPending": ['"body": "Hi all"'],
    "concord.chat.v1.ChatService/Subscribe": ['"body": "Hey Joe"', '"caught_up": true'],
    "concord.autocomplete.v1.AutocompleteService/Suggest": ['"name": "Astrid"'],
    "concord.autocomplete.v1.AutocompleteService/SuggestRecent": ['"Thomas Müller"'],
    "concord.files.v1.FileService/Download": ['"Zmlyc3Q="', '"c2Vjb25k"'],  # the lines "first" and "second"
    "concord.files.v1.FileService/MarkDone": ['"deleted": true'],
}


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


def _complete(text: str) -> bool:
    """True when text is a whole shell command: no trailing backslash, no open quote."""
    if text.rstrip("\n").endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def readme_commands() -> list[Command]:
    section = README.read_text().split("\n## grpcurl\n", 1)[1].split("\n## ", 1)[0]
    commands: list[Command] = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        pending = ""
        for line in block.splitlines():
            if not pending and line.lstrip().startswith("#"):
                commands[-1].shown.append(line.lstrip("# ").strip())
            elif pending or line.strip():
                pending += line + "\n"
                if _complete(pending):
                    commands.append(Command(pending.strip()))
                    pending = ""
        assert not pending, f"unfinished command in the README's grpcurl section: {pending}"
    return commands


@dataclass
class Ran:
    command: Command
    exit: int
    output: str


def run_in_one_shell(commands: list[Command], target: str, tmp_path: Path) -> list[Ran]:
    """Runs the commands in order in one bash (so shell variables carry over), with
    the server's address in place of the README's and each command's exit status
    and output (stdout and stderr) recorded between markers."""
    script = ["set -o pipefail"]
    for i, c in enumerate(commands):
        # The command gets lines of its own: a trailing comment must not swallow the braces.
        script += [f"printf '\\n@@ {i}\\n'", "{", c.text.replace(README_ADDRESS, target), "} 2>&1",
                   f"printf '\\n@@ {i} exit %d\\n' $?"]
    path = tmp_path / "grpcurl.sh"
    path.write_text("\n".join(script) + "\n")
    env = {**os.environ, "PATH": f"{Path(tool('grpcurl')).parent}{os.pathsep}{os.environ['PATH']}"}
    require(shutil.which("jq"), "jq", "apt-get install jq; .ci/run does")
    proc = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env, timeout=100)
    found = re.findall(r"\n@@ (\d+)\n(.*?)\n@@ \1 exit (\d+)\n", proc.stdout, re.S)
    assert len(found) == len(commands), f"the script stopped early:\n{proc.stdout}\n{proc.stderr}"
    return [Ran(commands[int(i)], int(code), out) for i, out, code in found]


@pytest.fixture(scope="module")
def grpcurl_server(redis_server, tmp_path_factory) -> Iterator[ServerProcess]:
    """A server with keys of its own, so the README's fixed names start fresh."""
    server = ServerProcess("--redis-url", redis_server.url, "--key-prefix", f"grpcurl{uuid.uuid4().hex[:8]}",
                           "--log-level", "WARNING")
    server.start(tmp_path_factory.mktemp("grpcurl") / "server.log")
    yield server
    server.stop()


def grpcurl(target: str, *args: str) -> str:
    proc = subprocess.run([tool("grpcurl"), "-plaintext", target, *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_readme_calls_every_rpc_that_reflection_lists(grpcurl_server):
    listed = grpcurl(grpcurl_server.target, "list").split()
    assert sorted(listed) == sorted([*SERVICES, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"])
    called = {m for c in readme_commands() for m in c.methods}
    for service in SERVICES:
        rpcs = re.findall(r"^\s*rpc (\w+) \(", grpcurl(grpcurl_server.target, "describe", service), re.M)
        assert rpcs, f"describe {service} listed no RPCs"
        missing = [r for r in rpcs if f"{service}/{r}" not in called]
        assert not missing, f"the README's grpcurl section never calls {service}: {missing}"


def test_readme_shows_an_error_with_its_code_and_error_info():
    shown = [(c.expected_code, "\n".join(c.shown)) for c in readme_commands()]
    assert any(code == "FailedPrecondition" and '"reason": "LOCK_NOT_HELD"' in lines and '"domain": "concord"' in lines
               for code, lines in shown), "the README's grpcurl section must show an error and its ErrorInfo"
    assert not any("-proto" in c.text or "-import-path" in c.text for c in readme_commands()), "reflection only"


@pytest.mark.timeout(180)
def test_readme_commands_run_as_documented(grpcurl_server, tmp_path):
    ran = run_in_one_shell(readme_commands(), grpcurl_server.target, tmp_path)
    for r in ran:
        where = f"README command:\n{r.command.text}\noutput:\n{r.output}"
        assert r.exit == r.command.expected_exit, where
        lines = {line.strip() for line in r.output.splitlines()}
        for shown in filter(SHOWN_LINES.match, r.command.shown):
            assert shown.rstrip(",") in {line.rstrip(",") for line in lines}, f"{shown!r} not printed; {where}"
        for method in r.command.methods[-1:]:
            for expected in EXPECTED_OUTPUT.get(method, []):
                assert expected in r.output, f"{expected!r} not printed; {where}"
    described = {r.command.text.split()[-1]: r.output for r in ran if " describe " in r.command.text}
    assert set(SERVICES) <= described.keys(), "the README must describe every service"
    for service in SERVICES:
        assert f"service {service.rsplit('.', 1)[1]} {{" in described[service], described[service]
