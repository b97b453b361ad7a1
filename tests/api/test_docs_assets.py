"""The vendored documentation UIs: the exact files of the releases ASSETS.json names, with their licences."""

from __future__ import annotations

import hashlib
from importlib import resources

from openjev.http.docs_pages import ASSETS, MANIFEST, SCALAR_VERSION, SWAGGER_VERSION

ASSETS_DIR = resources.files("openjev.http").joinpath("docs_assets")


def test_every_vendored_file_is_the_one_recorded_and_its_licence_is_there() -> None:
    assert set(MANIFEST) == {"scalar", "swagger-ui"}
    for ui in MANIFEST.values():
        assert ui["version"] and ui["npm"] and ui["licence"] in ("MIT", "Apache-2.0")
        assert ASSETS_DIR.joinpath(ui["licence_file"]).read_text().strip()
        for path, entry in ui["files"].items():
            assert hashlib.sha256(ASSETS_DIR.joinpath(path).read_bytes()).hexdigest() == entry["sha256"], path


def test_the_served_assets_are_the_vendored_files_under_their_versions() -> None:
    served = {asset.path for asset in ASSETS.values() if asset.path}
    recorded = {path for ui in MANIFEST.values() for path in ui["files"]}
    assert served == recorded
    assert f"scalar-{SCALAR_VERSION}.js" in ASSETS and f"swagger-ui-{SWAGGER_VERSION}.css" in ASSETS
