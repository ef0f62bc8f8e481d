"""No "idle" for want of GPU metrics (issue #68: a `scripts/supervise --dry-run` labelled a training run
"idle" on its first round because the CPU nodes serve no NVML). Without GPU metrics idling is a step that did
not move since an earlier round; with them a low utilisation says it in one round."""

from __future__ import annotations

from supervisor.decide import decide
from tests.supervisor.test_decide import POLICY, obs, past


def test_a_first_round_without_gpu_metrics_is_not_idle() -> None:
    decision = decide(obs(0, gpu_util_max=None), (), POLICY)
    assert decision.kind != "idle" and decision.state != "idle", decision


def test_a_step_that_did_not_move_since_an_earlier_round_still_is() -> None:
    history = (past(obs(0, gpu_util_max=None)),)
    decision = decide(obs(5, gpu_util_max=None), history, POLICY)
    assert decision.kind == "idle" and "no GPU metrics" in decision.reason


def test_low_gpu_utilisation_is_idle_from_the_first_round() -> None:
    assert decide(obs(0, gpu_util_max=0.01), (), POLICY).kind == "idle"
