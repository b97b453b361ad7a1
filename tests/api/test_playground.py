"""The playground page and its files: content types, the policy, what the page tells its script."""

from __future__ import annotations

import html
import json
import re

from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.http.playground import CONTENT_SECURITY_POLICY, EXAMPLE, assets
from tests.api.conftest import Client, running

REFERENCE = re.compile(r'(?:src|href)="([^"]*)"')
DATA = re.compile(r'data-(example|keyed)="([^"]*)"')


def page_data(text: str) -> dict[str, object]:
    return {name: json.loads(html.unescape(value)) for name, value in DATA.findall(text)}


async def test_the_page_and_its_files_come_from_this_server_under_a_self_only_policy(client: Client) -> None:
    page = await client.get("/playground")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert policy == CONTENT_SECURITY_POLICY
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'"
    for directive in ("script-src", "style-src", "connect-src", "img-src"):
        assert directives[directive] == "'self'", directive  # no 'unsafe-inline', no other origin
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in page.text and "<style" not in page.text and " style=" not in page.text

    files = [ref for ref in REFERENCE.findall(page.text) if ref.startswith("/playground/assets/")]
    assert sorted(ref.rsplit(".", 1)[1] for ref in files) == ["css", "js", "js"]
    for ref in files:
        served = await client.get(ref)
        assert served.status_code == 200, ref
        expected = "text/css" if ref.endswith(".css") else "text/javascript"
        assert served.headers["content-type"].startswith(expected), ref
        assert "immutable" in served.headers["cache-control"] and served.headers["x-content-type-options"] == "nosniff"
        assert served.content == assets()[ref.rsplit("/", 1)[1]].content
        assert b"http://" not in served.content and b"https://" not in served.content  # nothing fetched elsewhere
    others = [ref for ref in REFERENCE.findall(page.text) if ref not in files]
    assert others == ["/", "/docs", "/openapi.json"]  # the navigation links
    assert (await client.get("/playground/assets/nothing.js")).status_code == 404
    assert (await client.get("/playground/assets/../openapi.json")).status_code == 404


async def test_the_page_starts_from_the_readme_example_on_both_contracts(client: Client) -> None:
    page = await client.get("/playground")
    data = page_data(page.text)
    assert data == {"example": EXAMPLE, "keyed": False}
    assert EXAMPLE["state"] == [{"role": "user", "content": "I was charged twice. Please refund the duplicate."}]
    assert EXAMPLE["questions"] == EXAMPLE_REQUEST["questions"]
    assert 'value="systemone" data-path="/v1/systemone" checked' in page.text
    assert 'value="decisions" data-path="/v1/decisions"' in page.text
    assert 'id="api-key"' not in page.text and '<label for="state">State</label>' in page.text


async def test_a_keyed_server_asks_for_the_key_without_guarding_the_page() -> None:
    async with running({"OPENJEV_API_KEY": "page-never-shows-this"}) as client:
        page = await client.get("/playground")  # no Authorization header: the page itself is open
        decision = await client.post("/v1/systemone", json=EXAMPLE)
    assert page.status_code == 200 and page_data(page.text)["keyed"] is True
    assert '<input id="api-key" type="password"' in page.text and "page-never-shows-this" not in page.text
    assert decision.status_code == 401  # the routes the page calls still need it


async def test_the_reference_pages_link_to_the_playground(client: Client) -> None:
    document = (await client.get("/openapi.json")).json()
    assert "[the playground](/playground)" in document["info"]["description"]  # / and /docs render it as a link
