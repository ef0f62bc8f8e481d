"""Alerts: what a person must look at, never an action.

unverified   a run state says finished but does not verify (forged or torn): one alert, no release
unreachable  no SSH to the nodes (no key, or the network) while RunPod or billing answer: one alert
             (no key: once per run; the network: once per outage episode); never a replace (lost is
             RunPod's word); billing, RunPod and the bucket still decide
blind        neither node 0 nor billing answer for blind_for_min: one alert, never an action
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from supervisor.model import Decision, Observation, RoundRecord
from supervisor.policy import Policy
from supervisor.rules.base import Rule, State, earlier, minutes, notified, once


def unverified(obs: Observation, history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    bad = [r for r in obs.runs if r.status == "finished" and not r.verified]
    if not bad or obs.nodes == 0:
        return None
    reason = f"run state of {bad[0].run_id} says finished but does not verify: {bad[0].why}; not releasing"
    return once(
        obs,
        f"unverified:{bad[0].run_id}",
        Decision("unverified", reason, ("notify",), f"ALERT: {reason}", state="unverified"),
        history,
    )


def unreachable(obs: Observation, history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    if obs.nodes == 0 or obs.blind or (obs.ssh_key and obs.node0_reachable is not False):
        return None
    cause = "the supervisor has no SSH key (TRAINSTACK_SSH_KEY)" if not obs.ssh_key else "no SSH to node 0"
    reason = (
        f"{cause} while RunPod and billing answer: not a lost node, nothing is replaced; deciding from "
        "billing, RunPod and the bucket (finished, the cap, a pod RunPod stops)"
    )
    alert = Decision("unreachable", reason, ("notify",), f"ALERT: {reason}", state="unreachable")
    if not obs.ssh_key:  # no key is the supervisor's own setting: once per run
        return once(obs, "unreachable:no_key", alert, history)
    # An outage: one alert per episode (the rounds in a row without SSH), so a blip does not silence a
    # later long outage. Keyed by the episode's first round.
    start = obs.at
    for past in earlier(obs, history):
        if past.nodes == 0 or past.node0_reachable is not False:
            break
        start = past.at
    if notified(history, "unreachable", since=start, before=obs.at) is not None:
        return Decision("unreachable", reason, state="unreachable")
    return replace(alert, once=f"unreachable:ssh:{start:.0f}")


def blind(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    if not obs.blind:
        return None
    start = obs.at
    for past in earlier(obs, history):
        if not past.blind:
            break
        start = past.at
    lasted = obs.at - start
    reason = f"no SSH to node 0 and no RunPod billing for {minutes(lasted)}: not acting blind"
    if (
        lasted < policy.supervisor.blind_for_min * 60
        or notified(history, "blind", since=start, before=obs.at) is not None
    ):
        return Decision("blind", reason, state="unreachable")
    return Decision(
        "blind", reason, ("notify",), f"ALERT: {reason}; look at the stack by hand", state="unreachable"
    )


def _no_deadline(_p: Policy) -> float | None:
    return None


def _blind_look_back(p: Policy) -> float:
    return p.supervisor.blind_for_min + p.interval_min


UNVERIFIED = Rule("unverified", unverified, ("unverified",), _no_deadline, history=("notices",))
UNREACHABLE = Rule(
    "unreachable",
    unreachable,
    ("unreachable",),
    _no_deadline,
    look_back_min=_blind_look_back,
    history=("audit", "notices"),
)
BLIND = Rule(
    "blind", blind, ("unreachable",), _no_deadline, look_back_min=_blind_look_back, history=("audit",)
)

STATES = (
    State(
        "unreachable",
        "one alert; never a replace; billing, RunPod and the bucket still decide (finished, lost, the cap)",
        _no_deadline,
        "the cap, or the bucket's finished state, or RunPod stopping the pod",
    ),
    State(
        "unverified",
        "one alert; never a release (the pod may hold the only good checkpoint)",
        _no_deadline,
        "the cap; a person decides",
    ),
)
