"""What the console's tests share: aiohttp sessions logged in to a server's console
with a token (closed when the test ends), and a snapshot read."""

from __future__ import annotations

from typing import Any

import aiohttp


class Logins:
    """``await logins(base_url, token)``: a session logged in with ``token`` (None: not
    logged in); ``aclose()`` closes every one it opened."""

    def __init__(self) -> None:
        self._sessions: list[aiohttp.ClientSession] = []

    async def __call__(self, base: str, token: str | None) -> aiohttp.ClientSession:
        # unsafe: keep cookies of an IP address host (127.0.0.1)
        s = aiohttp.ClientSession(base, cookie_jar=aiohttp.CookieJar(unsafe=True))
        self._sessions.append(s)
        if token is not None:
            async with s.post("/api/login", json={"token": token}) as r:
                assert r.status == 200, await r.text()
        return s

    async def aclose(self) -> None:
        for s in self._sessions:
            await s.close()


async def snapshot(s: aiohttp.ClientSession) -> dict[str, Any]:
    """The console's snapshot of every view, as /api/snapshot answers it."""
    async with s.get("/api/snapshot") as r:
        assert r.status == 200, await r.text()
        return await r.json()
