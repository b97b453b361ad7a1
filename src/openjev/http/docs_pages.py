"""The two documentation UIs on /openapi.json, Scalar at / and Swagger UI at /docs, with their assets.

The assets are vendored in `docs_assets/`: Scalar's standalone bundle (npm `@scalar/api-reference`)
and Swagger UI's bundle and stylesheet (npm `swagger-ui-dist`), byte for byte, with their licences;
`docs_assets/ASSETS.json` records each release and file hash (`scripts/update-docs-assets` replaces
them). The app serves them itself at versioned paths under /docs/assets/, so the pages work
without internet access (an air-gapped deployment gets the same pages) and no package is needed.
The pages run no inline script, and their Content-Security-Policy allows scripts, connections and
fonts from this server only: a document or a response shown in them cannot bring in a script from
anywhere else.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from litestar import Response, get
from litestar.enums import MediaType
from litestar.exceptions import NotFoundException
from litestar.params import FromPath

from openjev.http.openapi_docs import OPENAPI_PATH, TITLE

ASSETS_PACKAGE = "openjev.http"
ASSETS_DIR = "docs_assets"
MANIFEST = json.loads(resources.files(ASSETS_PACKAGE).joinpath(ASSETS_DIR, "ASSETS.json").read_text())
SCALAR_VERSION: str = MANIFEST["scalar"]["version"]
SWAGGER_VERSION: str = MANIFEST["swagger-ui"]["version"]
ASSETS_PATH = "/docs/assets"

# Styles may be inline (both UIs set them from script); nothing else but this server's own files.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
JAVASCRIPT = "text/javascript; charset=utf-8"
CSS = "text/css; charset=utf-8"

SWAGGER_INIT = f"""window.ui = SwaggerUIBundle({{
  url: {json.dumps(OPENAPI_PATH)},
  dom_id: "#swagger-ui",
  tryItOutEnabled: true,
}});
"""
SCALAR_CONFIGURATION = {"hideDownloadButton": False, "withDefaultFonts": False}  # no fonts from Scalar's CDN


@dataclass(frozen=True)
class Asset:
    """A vendored file (`path` under docs_assets/), or text of our own when `path` is empty."""

    media_type: str
    path: str = ""
    text: str = ""

    def content(self) -> bytes:
        if not self.path:
            return self.text.encode()
        return resources.files(ASSETS_PACKAGE).joinpath(ASSETS_DIR, self.path).read_bytes()


ASSETS: dict[str, Asset] = {
    f"scalar-{SCALAR_VERSION}.js": Asset(JAVASCRIPT, "scalar/standalone.js"),
    f"swagger-ui-{SWAGGER_VERSION}.js": Asset(JAVASCRIPT, "swagger-ui/swagger-ui-bundle.js"),
    f"swagger-ui-{SWAGGER_VERSION}.css": Asset(CSS, "swagger-ui/swagger-ui.css"),
    f"swagger-init-{SWAGGER_VERSION}.js": Asset(JAVASCRIPT, text=SWAGGER_INIT),
}


def asset_url(name: str) -> str:
    if name not in ASSETS:
        raise KeyError(name)
    return f"{ASSETS_PATH}/{name}"


@cache
def _asset_bytes(name: str) -> bytes:
    return ASSETS[name].content()


@get(f"{ASSETS_PATH}/{{name:str}}", include_in_schema=False, sync_to_thread=False)
def asset(name: FromPath[str]) -> Response[bytes]:
    """A docs asset; its name carries its version, so browsers may keep it."""
    found = ASSETS.get(name)
    if found is None:
        raise NotFoundException(f"no docs asset named {name!r}")
    return Response(
        content=_asset_bytes(name),
        media_type=found.media_type,
        headers={"Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"},
    )


def scalar_page() -> str:
    configuration = html.escape(json.dumps(SCALAR_CONFIGURATION), quote=True)
    return f"""<!doctype html>
<html>
  <head>
    <title>{html.escape(TITLE)}</title>
    <meta charset="utf-8"/>
    <meta name="viewport" content="width=device-width, initial-scale=1"/>
  </head>
  <body>
    <script id="api-reference" data-url="{OPENAPI_PATH}" data-configuration="{configuration}"></script>
    <script src="{asset_url(f"scalar-{SCALAR_VERSION}.js")}"></script>
  </body>
</html>
"""


def swagger_page() -> str:
    return f"""<!doctype html>
<html>
  <head>
    <title>{html.escape(TITLE)}</title>
    <meta charset="utf-8"/>
    <link rel="stylesheet" href="{asset_url(f"swagger-ui-{SWAGGER_VERSION}.css")}"/>
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="{asset_url(f"swagger-ui-{SWAGGER_VERSION}.js")}"></script>
    <script src="{asset_url(f"swagger-init-{SWAGGER_VERSION}.js")}"></script>
  </body>
</html>
"""


@get("/", include_in_schema=False, media_type=MediaType.HTML, sync_to_thread=False)
def scalar() -> Response[str]:
    return Response(content=scalar_page(), media_type=MediaType.HTML, headers=PAGE_HEADERS)


@get("/docs", include_in_schema=False, media_type=MediaType.HTML, sync_to_thread=False)
def swagger() -> Response[str]:
    return Response(content=swagger_page(), media_type=MediaType.HTML, headers=PAGE_HEADERS)
