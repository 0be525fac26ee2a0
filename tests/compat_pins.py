"""Pins for `make compat`: every direct dependency of concord-client and concord-server at
exactly its lower bound (the ``>=`` of its requirement), everything else at the pins
of constraints.txt (the test tools; dependencies of dependencies).

    python tests/compat_pins.py constraints.txt > compat-constraints.txt   # write the pins
    python tests/compat_pins.py --check                                    # are they installed?

It reads the requirements from the installed metadata of the two distributions, so
run it with the python of the environment it is for, after installing them there
(``pip install --no-deps -e clients/python -e .`` is enough). Standard library only, but
``--check`` reads environment markers with ``packaging`` (pytest's dependency).
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path

DISTRIBUTIONS = ("concord-client", "concord-server")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*?)\s*(?:;\s*(.*))?$")


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lowest() -> dict[str, tuple[str, str, str]]:
    """{normalized name: (name, lower bound, environment marker)} of the direct dependencies."""
    pins: dict[str, tuple[str, str, str]] = {}
    for dist in DISTRIBUTIONS:
        for req in requires(dist) or []:
            match = _REQUIREMENT.match(req)
            if match is None:
                raise SystemExit(f"{dist}: cannot read requirement {req!r}")
            name, spec, marker = match.group(1), match.group(2), match.group(3) or ""
            if "extra" in marker or _key(name).startswith("concord-"):
                continue  # extras are not tested here; ours are the checkout
            bounds = [s.strip()[2:].strip() for s in spec.split(",") if s.strip().startswith(">=")]
            if not bounds:
                raise SystemExit(f"{dist}: {req!r} has no lower bound (>=)")
            pins[_key(name)] = (name, bounds[0], marker)
    return pins


def constraints(base: Path) -> str:
    pins = lowest()
    lines = [f"# direct dependencies of {' and '.join(DISTRIBUTIONS)} at their lower bounds"]
    lines += [f"{name}=={low}" + (f"; {marker}" if marker else "") for name, low, marker in pins.values()]
    lines.append(f"# the rest as pinned in {base.name}")
    for line in base.read_text().splitlines():
        name = re.split(r"[=<>!~;\s\[]", line.strip(), maxsplit=1)[0]
        if name and not line.lstrip().startswith("#") and _key(name) not in pins:
            lines.append(line.strip())
    return "\n".join(lines) + "\n"


def _release(v: str) -> str:
    """1.2.0 and 1.2 are the same release."""
    parts = v.split(".")
    while len(parts) > 1 and parts[-1] == "0":
        parts.pop()
    return ".".join(parts)


def check() -> int:
    """Exit status 1 unless every direct dependency is installed at its lower bound."""
    from packaging.markers import Marker  # pytest's dependency: installed by the time this runs

    wrong = []
    for name, low, marker in lowest().values():
        if marker and not Marker(marker).evaluate():
            continue  # not a dependency here (tzdata on Windows only); another may pull in any version
        try:
            got = version(name)
        except PackageNotFoundError:
            if marker:  # its environment marker may leave it out here
                continue
            got = "missing"
        if _release(got) != _release(low):
            wrong.append(f"{name} {got} (lower bound {low})")
        else:
            print(f"{name}=={got}")
    if wrong:
        print("not at the lower bound:", *wrong, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        sys.exit(check())
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.stdout.write(constraints(Path(sys.argv[1])))
