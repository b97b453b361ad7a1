"""`openjev smoke URL`: an end-to-end check of any running System One server (docs/spec.md#command-line).

`checks` holds the requests and what their answers must look like (pure, no I/O); `runner` does
the HTTP, the waiting through a cold start and the result file; `cli` wires the subcommand.
"""

from openjev.smoke.runner import SmokeOptions, SmokeResult, run_smoke, run_smoke_sync

__all__ = ["SmokeOptions", "SmokeResult", "run_smoke", "run_smoke_sync"]
