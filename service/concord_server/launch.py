"""The ``concord-server`` command: picks the allocator (c_heap.choose) before
importing the server, then runs it."""

import sys

from .c_heap import choose


def main() -> None:
    choose(sys.argv[1:])
    from .cli import main as run

    run()
