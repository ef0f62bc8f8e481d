"""The one HTTP client for RunPod (REST v2 and the GraphQL subset): the only code that knows URLs.

Credentials are read at run time in the provider process, never from resource inputs, never stored in
outputs or on a pickled provider:
  1. env `RUNPOD_API_URL` / `RUNPOD_API_KEY` (the primary path: the Pulumi program exports stack config
     `runpod:apiUrl` / `runpod:apiKey` into the environment, and the provider process inherits it);
  2. stack config `runpod:apiUrl` / `runpod:apiKey` handed to a provider's `configure()` (kept in
     settings.py's process-level settings, not on the provider object).

Every request goes through `HttpCore.request` (http.py): timeout, shared token bucket, mapped errors,
bounded retries, and no blind POST replays (creates are reconciled by listing and matching the name).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from facts.pods import PodStatus
from providers import settings
from providers.runpod import adopt, errors, gql
from providers.runpod.http import HttpCore
from providers.runpod.listing import shared
from providers.runpod.records import (
    ApiCluster,
    ApiGpuStock,
    ApiGpuType,
    ApiPod,
    ApiRegistry,
    ApiSecret,
    ApiVolume,
    ClusterCreate,
    PodCreate,
    PodPatch,
    RegistryCreate,
    SpotPodRent,
    VolumeCreate,
    VolumePatch,
)
from providers.runpod.settings import resolve_credentials

GRAPHQL_PATH = "/graphql"

T = TypeVar("T")


class RunPodClient(HttpCore):
    """RunPod endpoints as typed methods; build one per provider call and use it as a context manager."""

    graphql_path = GRAPHQL_PATH

    @classmethod
    def from_env(cls, **kwargs: Any) -> RunPodClient:
        """A client for the configured account; `TRAINSTACK_HTTP_TIMEOUT_S` (per request, default 30) and
        `TRAINSTACK_HTTP_DEADLINE_S` (retries of one call, default 180) tune the chokepoint."""
        url, key = resolve_credentials()
        knobs = settings.current()
        kwargs.setdefault("timeout_s", knobs.http_timeout_s)
        kwargs.setdefault("deadline_s", knobs.http_deadline_s)
        kwargs.setdefault("read_only", knobs.read_only)
        return cls(url, key, **kwargs)

    def _create(
        self,
        template: str,
        body: Any,
        parse: Callable[[Any], T],
        list_named: Callable[[], list[T]],
        ident: Callable[[T], str],
        what: str,
        adopt: Callable[[T], bool],
    ) -> T:
        existing = list_named()
        # A live same-name resource of this spec is one an interrupted `up` already rented (adopt.py).
        ours = [r for r in existing if adopt(r)]
        if len(ours) == 1:
            # Pulumi's display says "created" for every create step: say what really happened.
            _notice(
                f"adopted the live {what} {ident(ours[0])} that an interrupted up had already rented under "
                "this name, instead of renting a second one"
            )
            return ours[0]
        if len(ours) > 1:
            raise errors.ConflictError(
                f"{len(ours)} live {what}s already carry this name; delete the extras in the RunPod console",
                status=409,
                method="POST",
                path=template,
            )
        before = {ident(r) for r in existing}
        return self.create_reconciled(
            lambda: parse(self.request("POST", template, body=body)),
            lambda known: [r for r in list_named() if ident(r) not in known],
            before,
            what,
        )

    def _delete(self, template: str, resource_id: str) -> bool:
        """DELETE; False when it was already gone (404), which callers treat as success."""
        try:
            self.request("DELETE", template, path={"id": resource_id})
        except errors.NotFoundError:
            return False
        return True

    def list_pods(self, name: str | None = None) -> list[ApiPod]:
        # One GET serves every thread of this process that asks meanwhile (listing.py): a pool of
        # pods creating and waiting together costs one listing per poll, not one request per pod.
        listing = shared(f"{self._http.base_url} /v2/pods")
        pods = cast(list[ApiPod], listing.get(self._list_all_pods))
        return [p for p in pods if (name is None or p.name == name) and p.status != PodStatus.TERMINATED]

    def _list_all_pods(self) -> list[ApiPod]:
        return [ApiPod.model_validate(p) for p in _items(self.request("GET", "/v2/pods"), "pods")]

    def list_all_pods(self) -> list[ApiPod]:
        """Every pod of the account, Instant Cluster members too (`GET /v2/pods` leaves them out unless
        `includeClusterPods=true`), with their status as RunPod reports it: one listing, not cached."""
        data = self.request("GET", "/v2/pods", query={"includeClusterPods": "true"})
        return [ApiPod.model_validate(p) for p in _items(data, "pods")]

    def find_pod(self, pod_id: str) -> ApiPod:
        """A pod's state from the shared listing; a GET of its own only when the listing lacks it."""
        for pod in self.list_pods():
            if pod.id == pod_id:
                return pod
        return self.get_pod(pod_id)  # raises NotFoundError when it is really gone

    def get_pod(self, pod_id: str) -> ApiPod:
        return ApiPod.model_validate(self.request("GET", "/v2/pods/{id}", path={"id": pod_id}))

    def create_pod(self, body: PodCreate) -> ApiPod:
        return self._create(
            "/v2/pods",
            _dump(body),
            ApiPod.model_validate,
            lambda: self.list_pods(body.name),
            lambda p: p.id,
            "pod",
            lambda p: adopt.pod_matches(p, body),
        )

    def update_pod(self, pod_id: str, body: PodPatch) -> ApiPod:
        data = self.request("PATCH", "/v2/pods/{id}", path={"id": pod_id}, body=_dump(body))
        return ApiPod.model_validate(data)

    def delete_pod(self, pod_id: str) -> bool:
        return self._delete("/v2/pods/{id}", pod_id)

    def pod_action(self, pod_id: str, action: str) -> ApiPod | None:
        """POST /v2/pods/{id}/action (`start` or `stop`); the pod as it is after. A 409 (not valid in the
        pod's status, e.g. a stop of a pod already EXITED) is for the caller, which reads the status."""
        data = self.request("POST", "/v2/pods/{id}/action", path={"id": pod_id}, body={"action": action})
        return ApiPod.model_validate(data) if data else None

    def rent_spot_pod(self, body: SpotPodRent) -> str:
        """Legacy GraphQL spot rent (REST v2 has no spot); returns the new pod id."""

        def post() -> str:
            data = self.graphql(gql.SPOT_RENT, {"input": _dump(body)}, mutation=True)
            pod = data.get("podRentInterruptable")
            if not isinstance(pod, dict) or not pod.get("id"):
                raise errors.SpotRefusedError(
                    "RunPod returned no pod for the spot request",
                    status=200,
                    method="POST",
                    path="/graphql podRentInterruptable",
                )
            return str(pod["id"])

        before = {p.id for p in self.list_pods(body.name)}
        return self.create_reconciled(
            post, lambda known: [p.id for p in self.list_pods(body.name) if p.id not in known], before, "pod"
        )

    def list_clusters(self, name: str | None = None) -> list[ApiCluster]:
        items = _items(self.request("GET", "/v2/clusters"), "clusters")
        return [c for c in map(ApiCluster.model_validate, items) if name is None or c.name == name]

    def get_cluster(self, cluster_id: str) -> ApiCluster:
        return ApiCluster.model_validate(self.request("GET", "/v2/clusters/{id}", path={"id": cluster_id}))

    def list_cluster_pods(self, cluster_id: str) -> list[ApiPod]:
        data = self.request("GET", "/v2/clusters/{id}/pods", path={"id": cluster_id})
        return [ApiPod.model_validate(p) for p in _items(data, "pods")]

    def create_cluster(self, body: ClusterCreate) -> ApiCluster:
        return self._create(
            "/v2/clusters",
            _dump(body),
            ApiCluster.model_validate,
            lambda: self.list_clusters(body.name),
            lambda c: c.id,
            "cluster",
            lambda c: adopt.cluster_matches(c, body),
        )

    def rename_cluster(self, cluster_id: str, name: str) -> ApiCluster:
        data = self.request("PATCH", "/v2/clusters/{id}", path={"id": cluster_id}, body={"name": name})
        return ApiCluster.model_validate(data)

    def delete_cluster(self, cluster_id: str) -> bool:
        return self._delete("/v2/clusters/{id}", cluster_id)

    def list_volumes(self, name: str | None = None) -> list[ApiVolume]:
        items = _items(self.request("GET", "/v2/network-volumes"), "networkVolumes")
        return [v for v in map(ApiVolume.model_validate, items) if name is None or v.name == name]

    def get_volume(self, volume_id: str) -> ApiVolume:
        data = self.request("GET", "/v2/network-volumes/{id}", path={"id": volume_id})
        return ApiVolume.model_validate(data)

    def create_volume(self, body: VolumeCreate) -> ApiVolume:
        return self._create(
            "/v2/network-volumes",
            _dump(body),
            ApiVolume.model_validate,
            lambda: self.list_volumes(body.name),
            lambda v: v.id,
            "network volume",
            lambda v: adopt.volume_matches(v, body),
        )

    def update_volume(self, volume_id: str, body: VolumePatch) -> ApiVolume:
        data = self.request("PATCH", "/v2/network-volumes/{id}", path={"id": volume_id}, body=_dump(body))
        return ApiVolume.model_validate(data)

    def delete_volume(self, volume_id: str) -> bool:
        return self._delete("/v2/network-volumes/{id}", volume_id)

    def list_registries(self, name: str | None = None) -> list[ApiRegistry]:
        found = [
            ApiRegistry.model_validate(r) for r in _items(self.request("GET", "/v2/registries"), "registries")
        ]
        return [r for r in found if name is None or r.name == name]

    def create_registry(self, body: RegistryCreate) -> ApiRegistry:
        # Never adopt a same-name credential: its username and password cannot be read back to compare.
        return self._create(
            "/v2/registries",
            _dump(body),
            ApiRegistry.model_validate,
            lambda: self.list_registries(body.name),
            lambda r: r.id,
            "registry credential",
            lambda _r: False,
        )

    def get_registry(self, registry_id: str) -> ApiRegistry:
        data = self.request("GET", "/v2/registries/{id}", path={"id": registry_id})
        return ApiRegistry.model_validate(data)

    def delete_registry(self, registry_id: str) -> bool:
        return self._delete("/v2/registries/{id}", registry_id)

    def list_gpu_types(self, *, deadline_s: float | None = None) -> list[ApiGpuType]:
        data = self.request("GET", "/v2/catalog/gpus", deadline_s=deadline_s)
        return [ApiGpuType.model_validate(g) for g in _items(data, "gpus")]

    def gpu_stock(
        self, gpu_type_id: str, *, product: str, count: int, cloud: str, deadline_s: float | None = None
    ) -> ApiGpuStock:
        """A GPU type's stock for `count` GPUs per machine in one product context (POD or CLUSTER) and
        cloud: `GET /v2/catalog/gpus/{id}?include=AVAILABILITY` (REST v2's catalog; no GraphQL needed).
        Raises pydantic's ValidationError on an answer that is not a GpuType."""
        query = {"include": "AVAILABILITY", "product": product, "count": str(count), "cloud": cloud}
        data = self.request(
            "GET", "/v2/catalog/gpus/{id}", path={"id": gpu_type_id}, query=query, deadline_s=deadline_s
        )
        return ApiGpuStock.model_validate(data)

    def list_data_center_ids(self, *, deadline_s: float | None = None) -> list[str]:
        """Ids of the data centers RunPod's catalog lists (`GET /v2/catalog/datacenters`)."""
        data = self.request("GET", "/v2/catalog/datacenters", deadline_s=deadline_s)
        return [str(d["id"]) for d in _items(data, "dataCenters") if isinstance(d, dict) and "id" in d]

    def list_secrets(self) -> list[ApiSecret]:
        # Each create lists first (names are unique); concurrent creates share one query (listing.py).
        listing = shared(f"{self._http.base_url} secrets")
        return list(cast(list[ApiSecret], listing.get(self._list_all_secrets)))

    def secrets_if_listed(self) -> tuple[list[ApiSecret], str | None]:
        """The account's console secrets; or none, and why, when GraphQL (their only API) is retired (410) or
        rate-limited past the deadline (429): an account sweep (reconcile, orphans) goes on without them."""
        try:
            return self.list_secrets(), None
        except errors.ApiError as exc:
            if not errors.graphql_unavailable(exc):
                raise
            return [], (
                f"RunPod console secrets not listed: GraphQL, their only API, answered HTTP {exc.status}; "
                "any `trainstack-*` secret an older trainstack made stays in the console (Settings > "
                "Secrets) for a person to delete"
            )

    def graphql_gone(self, deadline_s: float = 5.0) -> str | None:
        """Why RunPod's GraphQL cannot be used now (410 Gone, or 429 past the deadline), else None. One
        query; any other failure says nothing about retirement and reads as None (the verb that needs
        GraphQL then meets it)."""
        try:  # a read (safe to retry), bounded like the preview's catalog reads
            body = {"query": gql.PROBE, "variables": {}}
            self.request("POST", self.graphql_path, body=body, write=False, deadline_s=deadline_s)
        except errors.ApiError as exc:
            if errors.graphql_unavailable(exc):
                return (
                    "retired (HTTP 410 Gone)" if exc.status == 410 else "rate-limited past the deadline (429)"
                )
        except errors.RunPodError:
            pass
        return None

    def _list_all_secrets(self) -> list[ApiSecret]:
        data = self.graphql(gql.SECRETS_QUERY, {}, mutation=False)
        me = data.get("myself")
        items = me.get("secrets") if isinstance(me, dict) else None
        return [ApiSecret.model_validate(s) for s in items or []]

    def create_secret(self, name: str, value: str, description: str | None) -> ApiSecret:
        variables = {"input": {"name": name, "value": value, "description": description or ""}}

        def post() -> ApiSecret:
            data = self.graphql(gql.SECRET_CREATE, variables, mutation=True)
            return ApiSecret.model_validate(data.get("secretCreate"))

        def named() -> list[ApiSecret]:
            return [s for s in self.list_secrets() if s.name == name]

        before = {s.id for s in named()}
        if len(before) == 1:
            # Secret names are unique per account and trainstack derives them from the stack: a secret
            # with this name is one an interrupted `up` created. Adopt it and make its value the new one.
            (existing,) = named()
            self.update_secret_value(existing.id, value)
            return existing
        return self.create_reconciled(
            post, lambda known: [s for s in named() if s.id not in known], before, "secret"
        )

    def update_secret_value(self, secret_id: str, value: str) -> None:
        # Setting a value twice is harmless, so an uncertain outcome may simply be retried.
        self._as_idempotent(
            lambda: self.graphql(
                gql.SECRET_VALUE_UPDATE, {"input": {"id": secret_id, "value": value}}, mutation=True
            )
        )

    def delete_secret(self, secret_id: str) -> bool:
        try:
            self._as_idempotent(lambda: self.graphql(gql.SECRET_DELETE, {"id": secret_id}, mutation=True))
        except errors.NotFoundError:
            return False
        return True

    def pod_log_tail(self, pod_id: str, lines: int = 5) -> list[str]:
        """The pod's last log lines (REST v2 getPodLogs: an SSE stream that first backfills `tail` lines)."""
        events = self.stream_events(
            "/v2/pods/{id}/logs", path={"id": pod_id}, query={"tail": str(lines)}, max_events=lines
        )
        return [str(e.get("line", "")) for e in events if isinstance(e, dict)]


def _items(data: Any, key: str) -> list[Any]:
    """v2 lists are wrapped (`{"pods": [...]}`); tolerate a bare list too."""
    if isinstance(data, dict):
        data = data.get(key, [])
    return data if isinstance(data, list) else []


def _dump(body: Any) -> Any:
    return body.model_dump(by_alias=True, exclude_none=True)


def _notice(message: str) -> None:
    """A line on the resource's row of `pulumi up` (the SDK prints it to stderr outside the engine)."""
    import pulumi

    pulumi.log.warn(message)
