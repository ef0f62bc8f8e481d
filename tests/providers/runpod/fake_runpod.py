"""A small stateful fake RunPod behind `httpx.MockTransport`, with a fake clock and scripted faults.

It records every call and fails the test on any route it does not know. Faults are queued per
(method, path) and consumed in order: an HTTP status (with optional headers and detail text), "lose"
(the request takes effect but the response is lost), or "connect" (nothing was sent).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from providers.runpod.client import RunPodClient
from providers.runpod.ratelimit import TokenBucket

API_KEY = "rpa_TEST-KEY-0123456789-never-print-me"
BODY_SECRET = "BODY-SECRET-must-not-leak"
NO_CAPACITY = (
    "There are no longer any instances available with the requested specifications. "
    "Please refresh and try again."
)
SPEND_LIMIT = "This deploy would raise your spend to $90.00/h, above your account spend limit of $80.00/h."
SPOT_WITHDRAWN = "Interruptible (spot) pods are no longer offered. Deploy on-demand instead."


class FakeClock:
    """Time that moves only when someone sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@dataclass
class Fault:
    kind: str  # "status", "lose", "connect"
    status: int = 500
    detail: str = BODY_SECRET
    headers: dict[str, str] = field(default_factory=dict)
    errors: list[str] | None = None  # the problem's `errors` array, e.g. ["$.image: ..."]


class FakeRunPod:
    """Pods, clusters, volumes, secrets and the GPU catalog, enough for the providers' verbs."""

    def __init__(
        self, *, ready_after_gets: int = 2, gpu_prices: dict[str, tuple[float, float]] | None = None
    ):
        self.clock = FakeClock()
        self.calls: list[tuple[str, str]] = []
        self.bodies: list[tuple[str, str, Any]] = []
        self.faults: dict[tuple[str, str], list[Fault]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.clusters: dict[str, dict[str, Any]] = {}
        self.volumes: dict[str, dict[str, Any]] = {}
        self.registries: dict[str, dict[str, Any]] = {}  # id -> the create body (password included)
        self.secrets: dict[str, dict[str, Any]] = {}
        self.secret_values: dict[str, str] = {}
        self.ready_after_gets = ready_after_gets
        self.spot_offered = True
        self.data_centers = ["US-TX-3", "EU-RO-1", "US-KS-2"]
        self.stock = {"US-TX-3": "HIGH", "EU-RO-1": "LOW", "US-KS-2": "MEDIUM"}  # the catalog's levels
        self.gpu_prices = gpu_prices or {"NVIDIA H100 80GB HBM3": (4.19, 2.79)}
        self._ids = itertools.count(1)
        self._gets: dict[str, int] = {}

    # ---- wiring -----------------------------------------------------------------------------------

    def client(self, **kwargs: Any) -> RunPodClient:
        limiter = TokenBucket(100_000, burst=1000, clock=self.clock.clock, sleep=self.clock.sleep)
        return RunPodClient(
            "https://api.runpod.test",
            API_KEY,
            transport=httpx.MockTransport(self.handle),
            sleep=self.clock.sleep,
            clock=self.clock.clock,
            limiter=limiter,
            rng=lambda: 0.5,
            **kwargs,
        )

    def factory(self) -> Callable[[], RunPodClient]:
        return self.client

    def fail(self, method: str, path: str, *faults: Fault) -> None:
        self.faults.setdefault((method, path), []).extend(faults)

    def count(self, method: str, path: str) -> int:
        return sum(1 for c in self.calls if c == (method, path))

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    # ---- dispatch ---------------------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == f"Bearer {API_KEY}"
        method, path = request.method, request.url.path
        body = json.loads(request.content) if request.content else None
        self.calls.append((method, path))
        self.bodies.append((method, path, body))
        queue = self.faults.get((method, path)) or self.faults.get((method, re.sub(r"/[^/]+$", "/*", path)))
        fault = queue.pop(0) if queue else None
        if fault and fault.kind == "connect":
            raise httpx.ConnectError("refused", request=request)
        if fault and fault.kind == "status":
            problem: dict[str, Any] = {"title": "Error", "status": fault.status, "detail": fault.detail}
            if fault.errors is not None:
                problem["errors"] = fault.errors
            return httpx.Response(fault.status, json=problem, headers=fault.headers)
        response = self.route(method, path, body)
        if fault and fault.kind == "lose":
            raise httpx.ReadTimeout("response lost", request=request)
        return response

    def route(self, method: str, path: str, body: Any) -> httpx.Response:
        parts = path.strip("/").split("/")
        if path == "/graphql":
            return self.graphql(body)
        if parts[:3] == ["v2", "catalog", "datacenters"]:
            return httpx.Response(200, json={"dataCenters": [{"id": d} for d in self.data_centers]})
        if parts[:3] == ["v2", "catalog", "gpus"] and len(parts) == 4:
            # getGpuType with include=AVAILABILITY: `stock` per data center (GPU and count are not modelled).
            rows = [{"id": d, "name": d, "availability": level} for d, level in self.stock.items()]
            return httpx.Response(200, json={"id": parts[3], "name": parts[3], "dataCenters": rows})
        if parts[:2] == ["v2", "catalog"]:
            gpus = [
                {"id": g, "price": {"secure": s, "community": c}} for g, (s, c) in self.gpu_prices.items()
            ]
            return httpx.Response(200, json={"gpus": gpus})
        handler = {
            "pods": self.pods_route,
            "clusters": self.clusters_route,
            "network-volumes": self.volumes_route,
            "registries": self.registries_route,
        }.get(parts[1])
        if handler is None:
            raise AssertionError(f"unexpected call {method} {path}")
        return handler(method, parts[2:], body)

    # ---- pods -------------------------------------------------------------------------------------

    def make_pod(
        self, name: str, body: dict[str, Any], *, cluster: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        pod = {
            "id": self.new_id("pod"),
            "name": name,
            "status": "PROVISIONING",
            "image": body.get("image"),
            "args": body.get("args", ""),
            "disk": body.get("disk", 50),
            "env": body.get("env", {}),
            "ports": body.get("ports", []),
            "cloud": body.get("cloud", "SECURE"),
            "dataCenterId": "US-TX-3",
            "gpu": body.get("gpu"),
            "cost": 3.99,
            "runtime": None,
            "ssh": {"proxy": None, "direct": None},
            "globalNetworking": {"enabled": False},
        }
        if cluster is not None:
            pod["cluster"] = cluster
        self.pods[pod["id"]] = pod
        return pod

    def tick(self, pod: dict[str, Any]) -> None:
        """Each GET moves a pod one step; RUNNING shows first without runtime (the observed quirk)."""
        n = self._gets[pod["id"]] = self._gets.get(pod["id"], 0) + 1
        if pod["status"] in ("PROVISIONING", "STARTING") and n >= self.ready_after_gets:
            pod["status"] = "RUNNING"
        elif pod["status"] == "RUNNING" and pod["runtime"] is None:
            port = 40000 + int(pod["id"][3:])
            pod["runtime"] = {
                "uptime": 1,
                "ports": [{"private": 22, "public": port, "type": "tcp", "ip": "1.2.3.4"}],
            }
            pod["ssh"]["direct"] = {"host": "1.2.3.4", "port": port}

    def pods_route(self, method: str, rest: list[str], body: Any) -> httpx.Response:
        if not rest and method == "GET":
            listed = [p for p in self.pods.values() if "cluster" not in p]
            for pod in listed:  # a listing is a poll too: time moves for every pod in it
                self.tick(pod)
            return httpx.Response(200, json={"pods": listed})
        if not rest and method == "POST":
            return httpx.Response(201, json=self.make_pod(body["name"], body))
        pod = self.pods.get(rest[0])
        if pod is None:
            return httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": BODY_SECRET})
        if method == "GET":
            self.tick(pod)
            return httpx.Response(200, json=pod)
        if method == "PATCH":
            renames = {"disk": "disk"}
            for key, value in body.items():
                pod[renames.get(key, key)] = value
            pod["status"], pod["runtime"], pod["ssh"]["direct"] = "STARTING", None, None
            self._gets[pod["id"]] = 0
            return httpx.Response(200, json=pod)
        if method == "DELETE":
            del self.pods[pod["id"]]
            return httpx.Response(204)
        raise AssertionError(f"unexpected pod call {method} {rest}")

    # ---- clusters ---------------------------------------------------------------------------------

    def clusters_route(self, method: str, rest: list[str], body: Any) -> httpx.Response:
        if not rest and method == "GET":
            return httpx.Response(200, json={"clusters": list(self.clusters.values())})
        if not rest and method == "POST":
            cid = self.new_id("cl")
            cluster = {
                "id": cid,
                "name": body["name"],
                "type": body["type"],
                "compute": body["compute"],
                "dataCenterId": (body.get("dataCenterIds") or ["US-TX-3"])[0],
                "network": {"cidr": "10.65.0.0/16"},
                "pods": {"total": body["compute"]["podCount"], "byStatus": {}},
            }
            self.clusters[cid] = cluster
            for rank in reversed(range(body["compute"]["podCount"])):  # out of order on purpose
                self.make_pod(
                    f"{body['name']}-{rank}",
                    body,
                    cluster={"id": cid, "rank": rank, "ip": f"10.65.0.{rank + 2}"},
                )
            return httpx.Response(201, json=cluster)
        cluster = self.clusters.get(rest[0])
        if cluster is None:
            return httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": BODY_SECRET})
        members = [p for p in self.pods.values() if p.get("cluster", {}).get("id") == cluster["id"]]
        if rest[1:] == ["pods"] and method == "GET":
            for pod in members:
                self.tick(pod)
            return httpx.Response(200, json={"pods": members})
        if method == "GET":
            return httpx.Response(200, json=cluster)
        if method == "PATCH":
            cluster["name"] = body["name"]
            return httpx.Response(200, json=cluster)
        if method == "DELETE":
            del self.clusters[cluster["id"]]
            for pod in members:
                del self.pods[pod["id"]]
            return httpx.Response(204)
        raise AssertionError(f"unexpected cluster call {method} {rest}")

    # ---- volumes ----------------------------------------------------------------------------------

    def volumes_route(self, method: str, rest: list[str], body: Any) -> httpx.Response:
        if not rest and method == "GET":
            return httpx.Response(200, json={"networkVolumes": list(self.volumes.values())})
        if not rest and method == "POST":
            vol = {
                "id": self.new_id("vol"),
                "name": body["name"],
                "size": body["size"],
                "dataCenter": body["dataCenter"],
                "type": body.get("type", "STANDARD"),
            }
            self.volumes[vol["id"]] = vol
            return httpx.Response(201, json=vol)
        vol = self.volumes.get(rest[0])
        if vol is None:
            return httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": BODY_SECRET})
        if method == "GET":
            return httpx.Response(200, json=vol)
        if method == "PATCH":
            if body.get("size", vol["size"]) < vol["size"]:
                return httpx.Response(
                    400, json={"title": "Bad Request", "status": 400, "detail": "cannot shrink"}
                )
            vol.update(body)
            return httpx.Response(200, json=vol)
        if method == "DELETE":
            del self.volumes[vol["id"]]
            return httpx.Response(204)
        raise AssertionError(f"unexpected volume call {method} {rest}")

    def registries_route(self, method: str, rest: list[str], body: Any) -> httpx.Response:
        """`/v2/registries`: credentials are write-only, so responses carry id and name only."""
        if not rest and method == "GET":
            listed = [{"id": i, "name": r["name"]} for i, r in self.registries.items()]
            return httpx.Response(200, json={"registries": listed})
        if not rest and method == "POST":
            ident = self.new_id("reg")
            self.registries[ident] = dict(body)
            return httpx.Response(201, json={"id": ident, "name": body["name"]})
        if rest[0] not in self.registries:
            return httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": BODY_SECRET})
        if method == "DELETE":
            del self.registries[rest[0]]
            return httpx.Response(204)
        raise AssertionError(f"unexpected registry call {method} {rest}")

    # ---- graphql ----------------------------------------------------------------------------------

    def graphql(self, body: dict[str, Any]) -> httpx.Response:
        query, variables = body["query"], body.get("variables") or {}
        assert "$" in query or not variables, "GraphQL must use variables"
        op = re.search(r"\{\s*(\w+)", query)
        assert op is not None, "not a GraphQL document"
        return httpx.Response(200, json=self.graphql_op(op.group(1), variables))

    def graphql_op(self, name: str, v: dict[str, Any]) -> dict[str, Any]:
        if name == "myself":
            return {"data": {"myself": {"secrets": list(self.secrets.values())}}}
        if name == "secretCreate":
            sid = self.new_id("sec")
            self.secrets[sid] = {"id": sid, "name": v["input"]["name"]}
            self.secret_values[sid] = v["input"]["value"]
            return {"data": {"secretCreate": self.secrets[sid]}}
        if name == "secretValueUpdate":
            sid = v["input"]["id"]
            if sid not in self.secrets:
                return {"data": None, "errors": [{"message": f"Secret {sid} was not found. {BODY_SECRET}"}]}
            self.secret_values[sid] = v["input"]["value"]
            return {"data": {"secretValueUpdate": self.secrets[sid]}}
        if name == "secretDelete":
            if v["id"] not in self.secrets:
                return {"data": None, "errors": [{"message": f"Secret {v['id']} was not found."}]}
            del self.secrets[v["id"]]
            return {"data": {"secretDelete": None}}  # Void, as RunPod answers
        if name == "podRentInterruptable":
            if not self.spot_offered:
                return {"data": None, "errors": [{"message": SPOT_WITHDRAWN}]}
            i = v["input"]
            pod = self.make_pod(
                i["name"],
                {
                    "image": i["imageName"],
                    "ports": i["ports"].split(","),
                    "gpu": {"id": i["gpuTypeId"], "count": i["gpuCount"]},
                },
            )
            return {"data": {"podRentInterruptable": {"id": pod["id"]}}}
        raise AssertionError(f"unexpected GraphQL operation {name}")
