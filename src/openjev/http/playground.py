"""The playground at /playground: a form that asks this server a decision and draws the answers.

Plain HTML, one stylesheet and two hand-written scripts, all served by the app itself (no build
step, no CDN, no package), so the page works offline and on an air-gapped deployment. Its policy
is stricter than the docs pages': scripts, styles, images and connections from this server only,
no inline script or style at all. The page carries what its script cannot know by itself: the
example it starts from and whether the server wants a key (data attributes), and the contracts
served (one radio button each).
"""

from __future__ import annotations

import hashlib
import html
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from litestar import Response, get
from litestar.enums import MediaType
from litestar.exceptions import NotFoundException
from litestar.params import FromPath

from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.http.lifecycle import AppState

PAGE_PATH = "/playground"
ASSETS_PATH = "/playground/assets"
ASSETS_PACKAGE = "openjev.http"
ASSETS_DIR = "playground_assets"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # the page names the assets by their hashes: a new release is seen at once
}
MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
# In load order: `wire.js` turns the form into requests and responses into rows; `page.js` draws them.
FILES = ("playground.css", "wire.js", "page.js")

# The README's example: the chat of the specification's example without its system message.
EXAMPLE: dict[str, Any] = {
    "model": EXAMPLE_REQUEST["model"],
    "state": [message for message in EXAMPLE_REQUEST["state"] if message["role"] == "user"],
    "questions": EXAMPLE_REQUEST["questions"],
}
# The contracts the script can write a request for, with the name the page shows.
CONTRACT_LABELS = {"systemone": "System One", "decisions": "Decisions (OpenAI)"}


@dataclass(frozen=True)
class Asset:
    file: str
    media_type: str
    content: bytes


def _load(file: str) -> Asset:
    content = resources.files(ASSETS_PACKAGE).joinpath(ASSETS_DIR, file).read_bytes()
    return Asset(file, MEDIA_TYPES["." + file.rpartition(".")[2]], content)


@cache
def assets() -> dict[str, Asset]:
    """Each file under a name carrying its content's hash, so a browser may keep it forever."""
    named = {}
    for file in FILES:
        asset = _load(file)
        stem, _, suffix = file.rpartition(".")
        named[f"{stem}-{hashlib.sha256(asset.content).hexdigest()[:16]}.{suffix}"] = asset
    return named


def asset_url(file: str) -> str:
    name = next((name for name, asset in assets().items() if asset.file == file), None)
    if name is None:
        raise KeyError(file)
    return f"{ASSETS_PATH}/{name}"


def _attribute(value: object) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value), quote=True)


@cache
def page(*, keyed: bool, contracts: tuple[tuple[str, str], ...]) -> str:
    """The page's HTML; `contracts`: (name, path) of each contract served that the script knows."""
    choices = "\n".join(
        f'<label class="contract"><input type="radio" name="contract" value="{_attribute(name)}" '
        f'data-path="{_attribute(path)}"{" checked" if i == 0 else ""}/> {html.escape(CONTRACT_LABELS[name])} '
        f"<code>POST {html.escape(path)}</code></label>"
        for i, (name, path) in enumerate(contracts)
    )
    key_field = (
        '<p class="field"><label for="api-key">API key</label>'
        '<input id="api-key" type="password" autocomplete="off" spellcheck="false" '
        'placeholder="the server\'s OPENJEV_API_KEY"/>'
        '<span class="hint">This server requires a key: it is sent as <code>Authorization: Bearer …</code> '
        "and kept nowhere.</span></p>"
        if keyed
        else ""
    )
    scripts = "\n".join(f'<script src="{asset_url(file)}" defer></script>' for file in FILES if file.endswith(".js"))
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>openjev playground</title>
<link rel="stylesheet" href="{asset_url("playground.css")}"/>
{scripts}
</head>
<body>
<header>
<h1>openjev playground</h1>
<nav><a href="/">API reference</a> <a href="/docs">Swagger UI</a> <a href="/openapi.json">OpenAPI document</a></nav>
</header>
<main id="playground" data-example="{_attribute(EXAMPLE)}" data-keyed="{json.dumps(keyed)}">
<noscript><p class="error">The playground needs JavaScript (served by this server, nothing else).</p></noscript>
<form id="decision" novalidate>
<fieldset class="contracts"><legend>Contract</legend>
{choices}
</fieldset>
{key_field}
<p class="field"><label for="model">Model</label><input id="model" spellcheck="false"/></p>
<p class="field"><label for="state">State</label>
<textarea id="state" rows="6" spellcheck="false" aria-describedby="state-reading"></textarea>
<span class="hint" id="state-reading"></span></p>
<section id="questions" aria-labelledby="questions-title">
<h2 id="questions-title">Questions</h2>
<div id="question-list"></div>
<p class="add">Add a question:
<button type="button" data-add="noul">Yes/no</button>
<button type="button" data-add="choice">Choice</button>
<button type="button" data-add="score">Score</button></p>
</section>
<p><button type="submit" id="decide">Decide</button></p>
</form>
<section id="result" aria-live="polite" data-state="empty"></section>
<section id="snippets" aria-labelledby="snippets-title">
<h2 id="snippets-title">The request</h2>
<div class="snippet"><h3>curl</h3><button type="button" data-copy="snippet-curl">Copy</button>
<pre id="snippet-curl"></pre></div>
<div class="snippet"><h3 id="snippet-python-title">Python</h3>
<button type="button" data-copy="snippet-python">Copy</button>
<pre id="snippet-python"></pre></div>
</section>
</main>
</body>
</html>
"""


@get(PAGE_PATH, include_in_schema=False, media_type=MediaType.HTML, sync_to_thread=False)
def playground(state: AppState) -> Response[str]:
    """The playground; it asks for a key only when this server has one (OPENJEV_API_KEY)."""
    contracts = tuple((spec.name, spec.path) for spec in state.contracts if spec.name in CONTRACT_LABELS)
    content = page(keyed=state.service.settings.api_key is not None, contracts=contracts)
    return Response(content=content, media_type=MediaType.HTML, headers=PAGE_HEADERS)


@get(f"{ASSETS_PATH}/{{name:str}}", include_in_schema=False, sync_to_thread=False)
def playground_asset(name: FromPath[str]) -> Response[bytes]:
    """A playground file; its name carries its hash, so browsers may keep it."""
    found = assets().get(name)
    if found is None:
        raise NotFoundException(f"no playground asset named {name!r}")
    return Response(
        content=found.content,
        media_type=found.media_type,
        headers={"Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"},
    )
