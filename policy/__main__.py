"""The entry point `pulumi preview --policy-pack policy` runs: serves trainstack's policies to the engine."""

from __future__ import annotations

import sys
from pathlib import Path

# The CLI runs this directory as a script, so only policy/ itself is on sys.path; the rules are
# imported as `policy.rules`, the same name the tests use, from the repository root.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


def main() -> None:
    """Start the policy server; `PolicyPack` blocks until the engine is done with it."""
    from common.imports import collector_paused

    with collector_paused():  # the SDK's, gRPC's and the rules' imports (common/imports.py)
        from pulumi_policy import EnforcementLevel, PolicyPack

        from policy.config_file import refuse_at_start
        from policy.rules import ALL_POLICIES

    # The engine reads --policy-pack-config only after this pack starts; a bad file is refused here first,
    # with the checker's message (file, key path, fix), whichever way pulumi was run.
    refuse_at_start(Path(__file__).resolve().parent)

    PolicyPack(
        name="trainstack",
        policies=list(ALL_POLICIES),
        enforcement_level=EnforcementLevel.MANDATORY,
        description="Guardrails for trainstack on RunPod: capacity, budget, security, placement.",
    )


if __name__ == "__main__":
    main()
