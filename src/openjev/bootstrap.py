"""The composition root: pick the backend adapter the settings ask for."""

from __future__ import annotations

from openjev.runtime import Runtime
from openjev.settings import Settings


def build_runtime(settings: Settings) -> Runtime:
    kind = settings.resolved_backend()
    if kind == "fake":
        from openjev.adapters.fake.build import build_runtime as build_fake

        return build_fake(settings)
    if kind == "sglang":
        from openjev.adapters.sglang.build import build_runtime as build_sglang

        return build_sglang(settings)
    from openjev.adapters.embedded_requirements import require_embedded_dependencies

    require_embedded_dependencies()  # a StartupError, not an ImportError, where the group is missing
    from openjev.adapters.embedded.build import build_runtime as build_embedded

    return build_embedded(settings)
