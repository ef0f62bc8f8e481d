"""When a run's first job began stepping, where the supervisor's first round came after it (a loop started
late, or a controller that came up with the compute): the goodput ledger's start of training
(supervisor/ledger.py), so the time before that round is split by what the nodes did, not counted as
provisioning whole."""

from __future__ import annotations

from collections.abc import Sequence

from supervisor.model import RoundRecord


def began_stepping(
    groups: Sequence[Sequence[RoundRecord]], compute_start: float | None, first_answer: Sequence[float]
) -> float | None:
    """The first round's step counted back at the job's own pace between the first two rounds of the first
    compute that saw it step (the nodes' step records over the supervisor's clock, never a node's
    timestamp), never before the compute's start plus the health checks the nodes measured (`health_s`).
    None where the first round saw step 0 or no answer, or there is no second step to pace it by."""
    live = [g for g in groups if g[0].observation.nodes]
    if not live or compute_start is None or not first_answer:
        return None
    stepped = [r.observation for r in live[0] if r.observation.node0_reachable and r.observation.step]
    if len(stepped) < 2 or stepped[0].at != first_answer[0] or stepped[0].at != live[0][0].observation.at:
        return None  # an earlier round saw this compute without a step: the boot is what it saw, as before
    first = stepped[0]
    later = next((o for o in stepped[1:] if (o.step or 0) > (first.step or 0) and o.at > first.at), None)
    if later is None or first.step is None or later.step is None:
        return None
    pace = (later.step - first.step) / (later.at - first.at)  # steps per second of the supervisor's clock
    health = next((o.health_s for o in stepped if o.health_s is not None), None) or 0.0
    began = max(first.at - first.step / pace, compute_start + min(health, first.at - compute_start))
    return began if began < first.at else None
