"""What every RunPod dynamic provider shares: the cost keys and catalog checks on top of the one provider base
(`providers.resource.CheckedProvider`), client construction, bounded polling.

The contract each subclass keeps (see providers/README.md):
- `check` validates inputs and adds `cost_per_hour`, `storage_cost_per_month`, `price_source`, so
  policies can read them at preview; unknown (not yet computed) values are tolerated.
- `create` is transactional: if it raises, nothing billable is left behind.
- `read` returns `ReadResult(None, {})` when the thing is gone, so Pulumi drops it from state.
- `update` returns the full outputs (inputs plus computed outputs), never None.
- `delete` of something already gone succeeds.
- The provider object holds plain data only (it is pickled into state); clients are built per call.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, ConfigureRequest, DiffResult

from facts import secrets
from facts.pods import OWNER_ENV, OWNER_ID_ENV
from providers import settings
from providers.common import (
    PROVIDER_KEY,
    UNKNOWN,
    args_of,
    is_unknown,
)
from providers.resource import COST_KEYS, CheckedProvider
from providers.runpod import errors

if TYPE_CHECKING:  # the client (and httpx) load only where a verb runs, not in the Pulumi program
    from providers.runpod.client import RunPodClient

__all__ = ["UNKNOWN", "RunPodProvider", "args_of", "boot_floor_s", "is_unknown", "ready_timeout", "wait_for"]


READY_ENV = "TRAINSTACK_READY_TIMEOUT_S"

T = TypeVar("T")


def ready_timeout(explicit: float | None) -> float:
    return explicit if explicit is not None else settings.current().ready_timeout_s


def boot_floor_s() -> float:
    """No new pod is ready sooner: a cached image still takes ~33 s (dstack's RunPod backend measured ~33 s
    cached, ~165 s cold for 16 GB), so the first
    poll of a create waits 3 poll intervals (30 s by default) instead of asking while nothing can change."""
    return 3 * settings.current().poll_interval_s


def wait_for(
    client: RunPodClient,
    fetch: Callable[[], T],
    probe: Callable[[T], tuple[bool, str | None]],
    timeout_s: float,
    what: str,
    *,
    first_poll_s: float = 0.0,
) -> T:
    """Poll `fetch` until `probe` says ready, fails, or `timeout_s` passes.

    `probe(x)` returns (ready, failure); a failure string ends the wait at once. The first poll comes after
    `first_poll_s`, then one every poll interval: never more than one GET per interval per resource (and
    pods share one listing per poll, see listing.py), and ready is seen at most one interval late.
    """
    interval = settings.current().poll_interval_s
    deadline = client.clock() + timeout_s
    if first_poll_s > 0:
        client.sleep(min(first_poll_s, timeout_s))
    while True:
        current = fetch()
        ready, failure = probe(current)
        if ready:
            return current
        if failure:
            raise errors.RunPodError(f"{what} failed while starting: {failure}")
        if client.clock() + interval > deadline:
            raise errors.DeadlineExceeded(
                f"{what} was not ready after {timeout_s:.0f} s; raise ready_timeout_s or {READY_ENV}, "
                "or pick a data center with capacity"
            )
        client.sleep(interval)


def is_blank(value: Any) -> bool:
    """Unset or empty: how RunPod reports a field nobody set."""
    return value is None or value == "" or value == [] or value == {}


class RunPodProvider(CheckedProvider):
    """Base of the RunPod providers: subclasses set the class attributes and implement the verbs; check adds
    the cost keys (`costs`) and refuses what RunPod's catalog refutes."""

    computed_keys: ClassVar[frozenset[str]] = frozenset(COST_KEYS)
    update_warning: ClassVar[str | None] = None  # shown by diff when an in-place update is planned
    owner_id_in_env: ClassVar[bool] = False  # pods and clusters: check writes OWNER_ID_ENV into `env`

    def __init__(self, client_factory: Callable[[], RunPodClient] | None = None) -> None:
        super().__init__()
        # None in real use (picklable); tests pass a factory that injects a fake transport.
        self._client_factory = client_factory

    def configure(self, req: ConfigureRequest) -> None:
        from providers.runpod.settings import set_process_config

        set_process_config(req.config.get("runpod:apiUrl"), req.config.get("runpod:apiKey"))

    def client(self) -> RunPodClient:
        from providers.runpod.client import RunPodClient

        return self._client_factory() if self._client_factory is not None else RunPodClient.from_env()

    # ---- preview ----------------------------------------------------------------------------------

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        """The shared check; a pod's or cluster's env then gains its owner id (facts/pods.py OWNER_ID_ENV):
        the one its previous inputs hold, else a new random one. The engine records the checked inputs
        before it creates, so the stack's state holds the id even of a create cut short."""
        result = super().check(olds, news)
        env = result.inputs.get("env") if result.inputs is not None else None
        if not self.owner_id_in_env or result.failures or not isinstance(env, dict):
            return result
        old_env = olds.get("env")
        kept = old_env.get(OWNER_ID_ENV) if isinstance(old_env, dict) else None
        owner_id = kept or env.get(OWNER_ID_ENV) or uuid.uuid4().hex
        return CheckResult({**(result.inputs or {}), "env": {**env, OWNER_ID_ENV: owner_id}}, [])

    def known_failures(self, values: Mapping[str, Any]) -> list[CheckFailure]:
        return self.catalog_failures(values)

    def computed(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return self.costs(values)

    def costs(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """`cost_per_hour`, `storage_cost_per_month`, `price_source` from checked values (may be unknown)."""
        return {"cost_per_hour": 0.0, "storage_cost_per_month": 0.0, "price_source": "none"}

    def catalog_failures(self, values: Mapping[str, Any]) -> list[CheckFailure]:
        """Inputs RunPod's catalog refutes (unknown values are skipped); subclasses add their own."""
        return self.data_center_failures(values)

    def data_center_failures(self, values: Mapping[str, Any]) -> list[CheckFailure]:
        """Data center ids RunPod's catalog does not list, refused at preview rather than at create."""
        wanted: dict[str, list[str]] = {}
        plan = values.get("placement")
        candidates = plan.get("candidates") if isinstance(plan, dict) else None
        for key in ("data_center_id", "data_center_ids", "placement.candidates"):
            value = candidates if key == "placement.candidates" else values.get(key)
            items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
            ids = [v for v in items if isinstance(v, str) and v and not is_unknown(v)]
            if ids:
                wanted[key] = ids
        if not wanted:
            return []
        from providers.runpod import catalog

        known = catalog.data_center_ids(self.client)
        if known is None:
            return []
        return [
            CheckFailure(
                key,
                f"{unknown} not in RunPod's data center catalog (GET /v2/catalog/datacenters lists "
                f"{', '.join(sorted(known))}); pick one of those",
            )
            for key, ids in wanted.items()
            if (unknown := [i for i in ids if i not in known])
        ]

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """The shared diff, with the ownership mark alone never a change (`_unmarked`), nor the owner id
        (check keeps the one the previous inputs hold; it is an identity, not a setting), nor the secret
        references a stack made before secrets came over SSH leaves behind (`_unreferenced`)."""
        old_env = _unreferenced(olds.get("env"), news.get("env"))
        olds = olds if old_env is None else {**olds, "env": old_env}
        news = {**news, "env": _unmarked("env", olds.get("env"), news.get("env"))}
        return super().diff(_id, _without_owner_id(olds), _without_owner_id(news))

    def planned(self, changed: set[str], replaces: list[str]) -> None:
        if changed and not replaces and self.update_warning:
            pulumi.log.warn(f"{self.update_warning} (changing: {', '.join(sorted(changed))})")

    def same(self, key: str, old: Any, new: Any) -> bool:
        """Whether an input is unchanged; subclasses relax this for inputs that outputs fill in.

        RunPod answers unset fields with empty values ("" args, [] ports), so unset and empty are the same.
        """
        return bool(old == new) or (is_blank(old) and is_blank(new))

    # ---- helpers for the verbs --------------------------------------------------------------------

    def carried(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Inputs and cost figures to echo into outputs (everything but the provider and old outputs)."""
        return {k: v for k, v in props.items() if k != PROVIDER_KEY and k not in self.output_keys}


def _unreferenced(old: Any, new: Any) -> dict[str, Any] | None:
    """`old` env without the `{{ RUNPOD_SECRET_<name> }}` references `new` no longer has, or None when there
    are none. Dropping them alone is no change: an env PATCH restarts the container and a cluster would be
    replaced, just to lose a reference that names no value; they go with the resource's next real change.
    The node reads its secrets from its delivered file first either way (docs/OPERATING.md)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None
    stale = {k for k, v in old.items() if k not in new and isinstance(v, str) and secrets.is_reference(v)}
    return {k: v for k, v in old.items() if k not in stale} if stale else None


def _without_owner_id(props: dict[str, Any]) -> dict[str, Any]:
    env = props.get("env")
    if not isinstance(env, dict) or OWNER_ID_ENV not in env:
        return props
    return {**props, "env": {k: v for k, v in env.items() if k != OWNER_ID_ENV}}


def _unmarked(key: str, old: Any, new: Any) -> Any:
    """`new` env without the ownership mark where `old` (made before it existed) lacks it: adding it alone
    is no change. Otherwise every pod's container would restart (an env PATCH resets
    it) and a cluster would be replaced (refused on protected prod) just to gain it; a resource the state
    holds is never an orphan anyway, and it lands with its next real change or create."""
    if key == "env" and isinstance(old, dict) and isinstance(new, dict) and OWNER_ENV not in old:
        return {k: v for k, v in new.items() if k != OWNER_ENV}
    return new
