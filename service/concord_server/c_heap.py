"""The server's memory allocator, chosen so that what a burst used goes back to the
kernel once the burst is over.

CPython's own small-object allocator (pymalloc) carves objects out of 1 MiB arenas
and frees an arena only when every object in it is gone. A burst (10,000 waiting
calls, a flood of refused calls) spreads its objects over hundreds of arenas, and the
few long-lived objects created meanwhile keep most of them alive: after the abuse
suite's 10,000 waiters the server's RSS stayed at 240 MB against a 64 MB baseline.
On the C allocator (``PYTHONMALLOC=malloc``) freed memory is glibc's, and
``malloc_trim(0)`` hands every free page back, fragmented or not: the same run came
back to 79 MB. CPU per call was within the noise of ``python -m bench --scenario
cost`` either way.

The allocator is fixed when the interpreter starts, so ``choose()`` re-executes the
server once with ``PYTHONMALLOC=malloc`` before anything heavy is imported (same PID,
so supervisors and tests see one process). An operator who sets ``PYTHONMALLOC``
keeps their choice. ``M_ARENA_MAX`` keeps gRPC's threads from each getting an arena
of their own, where trimming returns less.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_ARENA_MAX = -8  # mallopt's parameter number (glibc malloc.h)
ARENAS = 2


def choose(argv: list[str]) -> None:
    """Re-executes ``python -m concord_server argv`` on the C allocator, unless
    PYTHONMALLOC is set already (by us or by the operator) or there is no glibc."""
    if "PYTHONMALLOC" in os.environ or LIBC is None:
        return
    os.environ["PYTHONMALLOC"] = "malloc"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "concord_server", *argv])


def _glibc() -> ctypes.CDLL | None:
    """glibc, or None where there is none (musl, macOS): nothing here applies then."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim  # noqa: B018 - the lookup is the check: musl has no malloc_trim
        return libc
    except (OSError, AttributeError):
        return None


LIBC = _glibc()


def limit_arenas() -> None:
    """Called at start-up, before gRPC starts its threads."""
    if LIBC is not None:
        LIBC.mallopt(M_ARENA_MAX, ARENAS)


def return_free_memory() -> None:
    """Hands the C heap's free pages back to the kernel (a few ms on a large heap:
    the garbage collection policy calls it only while the server is nearly idle)."""
    if LIBC is not None:
        LIBC.malloc_trim(0)
