"""A headless Chromium driven over the Chrome DevTools Protocol, with aiohttp's websocket client.

Enough to click through a page and read it back (Runtime.evaluate), take a screenshot, and see
every request the page made (Network.requestWillBeSent), every script error and every policy
refusal. Nothing is downloaded: Debian's /usr/bin/chromium is driven as it is, and host names
other than loopback resolve to nothing, so a request could not leave the machine even if a page
tried (the recorded requests say whether it tried).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--window-size=1400,1000",
    "--remote-debugging-port=0", "--remote-allow-origins=*",
]  # fmt: skip
START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 30.0


class BrowserError(AssertionError):
    """The browser refused a command, or a page's script threw."""


@dataclass
class Page:
    """One page target: commands out, events recorded."""

    ws: aiohttp.ClientWebSocketResponse
    requests: list[str] = field(default_factory=list)  # every URL the page asked for, in order
    errors: list[str] = field(default_factory=list)  # uncaught exceptions and policy refusals
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _waiting: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        call = next(self._ids)
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[call] = answer
        await self.ws.send_str(json.dumps({"id": call, "method": method, "params": params}))
        reply = await asyncio.wait_for(answer, CALL_TIMEOUT_S)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    async def read(self) -> None:
        """Dispatch every message: replies to their callers, events to the records."""
        async for message in self.ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                break
            data = json.loads(message.data)
            if "id" in data:
                waiting = self._waiting.pop(data["id"], None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(data)
            else:
                self._event(data["method"], data.get("params", {}))
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(BrowserError("the browser closed the connection"))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description") or details.get("text", ""))
        elif method == "Log.entryAdded":
            text = params["entry"].get("text", "")
            if "Content Security Policy" in text or "Refused to" in text:
                self.errors.append(text)

    async def evaluate(self, expression: str) -> Any:
        """`expression`'s value (awaited when a promise), as JSON; a thrown error fails the test."""
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, within: float = 30.0) -> Any:
        """Poll `expression` until it is truthy; its value. A deadline for a hang, never a timing check."""
        deadline = asyncio.get_running_loop().time() + within
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if asyncio.get_running_loop().time() > deadline:
                raise BrowserError(f"still false after {within} s: {expression}")
            await asyncio.sleep(0.05)

    async def open(self, url: str) -> None:
        await self.send("Page.navigate", url=url)
        await self.wait_for(f"location.href === {json.dumps(url)} && document.readyState === 'complete'")

    async def screenshot(self) -> bytes:
        """The whole page, as a PNG."""
        size = (await self.send("Page.getLayoutMetrics"))["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
        return base64.b64decode(shot["data"])


def chromium() -> str:
    found = shutil.which("chromium")
    assert found, "chromium is missing: apt-get install -y chromium"
    return found


async def _debugging_port(profile: Path, process: asyncio.subprocess.Process) -> int:
    """Chromium writes the port it picked (port 0) into its profile once it listens."""
    marker = profile / "DevToolsActivePort"
    deadline = asyncio.get_running_loop().time() + START_TIMEOUT_S
    while not marker.exists() or not marker.read_text().strip():
        if process.returncode is not None:
            raise BrowserError(f"chromium exited with {process.returncode} before listening")
        if asyncio.get_running_loop().time() > deadline:
            raise BrowserError(f"chromium did not listen within {START_TIMEOUT_S} s")
        await asyncio.sleep(0.05)
    return int(marker.read_text().split()[0])


@asynccontextmanager
async def browser_page(profile: Path) -> AsyncIterator[Page]:
    """A fresh headless Chromium (its profile in the existing directory `profile`) and its one page.

    The page records requests and errors from before its first navigation.
    """
    process = await asyncio.create_subprocess_exec(
        chromium(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        "about:blank",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        port = await _debugging_port(profile, process)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/json/list") as reply:
                targets = await reply.json()
            target = next(t for t in targets if t["type"] == "page")
            async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                reader = asyncio.create_task(page.read())
                try:
                    for domain in ("Page", "Runtime", "Network", "Log"):
                        await page.send(f"{domain}.enable")
                    yield page
                finally:
                    reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await reader
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
