"""The two documentation pages render in a real headless Chromium, offline, under their strict policy.

The real server (`openjev serve --backend fake`) on loopback serves the pages and their vendored
assets; Chromium runs with background networking off, loads each page, lets its scripts run, and
prints the resulting DOM. The UIs must have fetched /openapi.json and drawn its operations, and the
browser must have refused nothing under the Content-Security-Policy (it logs every refusal).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openjev.http.openapi_docs import TITLE
from tests.blackbox.chromium import refusals, render
from tests.smoke.servers import openjev_server, wait_ready

pytestmark = pytest.mark.needs_chromium
SUMMARY = "Answer typed questions"  # the summary of POST /v1/systemone in /openapi.json


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with openjev_server("--backend", "fake") as url:
        wait_ready(url)
        yield url


def test_scalar_renders_the_document_offline_under_the_policy(server: str) -> None:
    dom, log = render(server + "/")
    assert 'class="scalar-app' in dom  # the bundle ran
    body = dom.split("</head>", 1)[1]  # the page's own <title> proves nothing
    assert TITLE in body and "/v1/systemone" in body and SUMMARY in body  # drawn from the fetched document
    assert '<a href="/playground">' in body  # the document's description, rendered as a link
    assert refusals(log) == []


def test_swagger_ui_renders_the_document_offline_under_the_policy(server: str) -> None:
    dom, log = render(server + "/docs")
    assert 'data-path="/v1/systemone"' in dom and "opblock-post" in dom and SUMMARY in dom
    assert 'data-path="/health"' in dom
    assert '<a href="/playground"' in dom
    assert refusals(log) == []
