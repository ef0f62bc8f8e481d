"""The emulated account: records, the clock, limits, placement rules and the audit trail."""

from __future__ import annotations

import ipaddress
import math
import re
import uuid
from dataclasses import asdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from emulator.billing import Segment, meter
from emulator.catalog import Catalog, cuda_key
from emulator.clock import ScaledClock
from emulator.config import Settings
from emulator.faults import FaultConfig, Faults
from emulator.hosts import ControlPlaneOnly, Hosts, HostSpec
from emulator.latency import BootLatency
from emulator.models import (
    ClusterRecord,
    PodRecord,
    RegistryRecord,
    SecretRecord,
    VolumeRecord,
    injected_env,
    public_port,
)
from emulator.netslot import POD_NET_PREFIX, NetSlot
from emulator.problems import NO_CAPACITY, ApiError
from emulator.slurm import SlurmNode
from emulator.store import Store
from facts.limits import RATE_PER_DAY, RATE_PER_HOUR, RATE_PER_MINUTE

Record = PodRecord | ClusterRecord | VolumeRecord | SecretRecord | RegistryRecord

# The example quota of the v2 spec's RateLimit-Policy header: "minute";q=60, "hour";q=3000, "day";q=50000.
SPEC_MINUTE_QUOTA, SPEC_HOUR_QUOTA, SPEC_DAY_QUOTA = RATE_PER_MINUTE, RATE_PER_HOUR, RATE_PER_DAY


class Limits(BaseModel):
    """Account limits; the admin API changes them and they survive a restart."""

    model_config = ConfigDict(extra="forbid")

    spendLimit: float = Field(ge=0)
    balance: float = Field(ge=0)  # USD of credit
    ratePerMinute: int = Field(ge=1)
    # None: the spec example's ratio to the minute quota (3000/h and 50000/day for 60/min), so a test
    # that lifts the minute quota is not stopped by the hour or day window it never thought about.
    ratePerHour: int | None = Field(default=None, ge=1)
    ratePerDay: int | None = Field(default=None, ge=1)
    offerSpot: bool
    # RunPod's legacy GraphQL API: "on" answers, "gone" answers 410 Gone to every request (as RunPod says it
    # will in early 2027), "limited" answers 429 with Retry-After `graphqlRetryAfterS` (its staged limits).
    graphql: Literal["on", "gone", "limited"] = "on"
    graphqlRetryAfterS: int = Field(default=3600, ge=0)

    def quotas(self) -> dict[str, int]:
        """Requests allowed per window (emulator/quota.py)."""
        minute = self.ratePerMinute
        hour = self.ratePerHour or math.ceil(minute * SPEC_HOUR_QUOTA / SPEC_MINUTE_QUOTA)
        day = self.ratePerDay or math.ceil(minute * SPEC_DAY_QUOTA / SPEC_MINUTE_QUOTA)
        return {"minute": minute, "hour": hour, "day": day}


class CapacityFaults(BaseModel):
    """Capacity taken away by the admin API, on top of the catalog's stock."""

    model_config = ConfigDict(extra="forbid")

    exhaustNext: int = Field(default=0, ge=0)
    exhausted: bool = False  # refuse every create until reset
    # "gpu id@dc id" -> GPUs in stock there, replacing the catalog figure.
    stock: dict[str, int] = Field(default_factory=dict)


# The emulator reads secret references as RunPod does, independently of facts.secrets, so that a wrong
# reference built by the stack is caught here rather than agreed with; tests/facts/test_secrets.py checks
# that the two patterns accept the same names.
SECRET_REF = re.compile(r"\{\{\s*RUNPOD_SECRET_([A-Za-z0-9_-]+)\s*\}\}")


def new_id() -> str:
    return uuid.uuid4().hex[:14]


class World:
    """All state of one server. Handlers run on one event loop, so no locking is needed."""

    def __init__(
        self, settings: Settings, store: Store, catalog: Catalog, hosts: Hosts | None = None
    ) -> None:
        self.settings = settings
        self.net = NetSlot(settings.net_slot)  # the addresses this server's hosts use
        self.hosts: Hosts = hosts or ControlPlaneOnly("hosts are off (in-process world)")
        # Secret values, in memory only (never stored or audited): filled into hosts' env at pod start.
        self.secret_values: dict[str, str] = {}
        self.timing = settings.timing
        self.latency = BootLatency(settings.latency_model, settings.timing, settings.image_gb)
        self.store = store
        self.catalog = catalog
        self.clock = ScaledClock(settings.time_scale, store.get_setting("clock"))
        self.faults = Faults(
            FaultConfig(errorRate=settings.error_rate, latencyMs=settings.latency_ms, seed=settings.seed)
        )
        self.capacity = CapacityFaults(exhausted=settings.no_capacity)
        self.limits = Limits.model_validate(store.get_setting("limits") or self.default_limits())
        self.ssh_keys: list[str] = store.get_setting("ssh_keys") or []
        self.reload()

    def reload(self) -> None:
        """Read every record back from the store: after a rolled-back request, memory equals the file."""
        store = self.store
        self.pods = {r["id"]: PodRecord.model_validate(r) for r in store.load("pod")}
        self.clusters = {r["id"]: ClusterRecord.model_validate(r) for r in store.load("cluster")}
        self.volumes = {r["id"]: VolumeRecord.model_validate(r) for r in store.load("volume")}
        self.secrets = {r["id"]: SecretRecord.model_validate(r) for r in store.load("secret")}
        self.registries = {r["id"]: RegistryRecord.model_validate(r) for r in store.load("registry")}
        self.segments = [Segment(**doc) for doc in store.load("meter")]
        names = {s.name for s in self.secrets.values()}
        self.secret_values = {k: v for k, v in self.secret_values.items() if k in names}

    def default_limits(self) -> dict[str, Any]:
        s = self.settings
        return {
            "spendLimit": s.spend_limit,
            "balance": s.balance,
            "ratePerMinute": s.rate_per_minute,
            "ratePerHour": s.rate_per_hour,
            "ratePerDay": s.rate_per_day,
            "offerSpot": s.offer_spot,
            "graphql": s.graphql,
            "graphqlRetryAfterS": s.graphql_retry_after_s,
        }

    def now(self) -> float:
        return self.clock.now()

    # -- persistence -----------------------------------------------------------------------------

    def save(self, record: Record) -> None:
        kind, table = self._table(record)
        if self.faults.take_write_failure():
            raise OSError("injected storage failure (admin fault failWrite)")
        # The file first: if the write fails, memory is still what it was.
        self.store.put(kind, record.id, record.model_dump(mode="json"))
        table[record.id] = record
        if isinstance(record, PodRecord | VolumeRecord):
            self._meter(record, record.id)
        self.store.set_setting("clock", self.now())
        self.sync_hosts()

    def forget(self, record: Record, *, sync: bool = True) -> None:
        kind, table = self._table(record)
        self.store.delete(kind, record.id)
        table.pop(record.id, None)
        if isinstance(record, PodRecord | VolumeRecord):
            self._meter(None, record.id)
        if sync:
            self.sync_hosts()

    def lose_what_lived_in_memory(self) -> list[str]:
        """At the start of a server with emulated hosts, after a stop or a crash: the last server's hosts
        (network namespaces, sshd, whatever the pods ran) went with it, and secret values were only ever in
        its memory. A host that came back empty would read RUNNING while nothing the stack started runs on
        it, and its env would hold `{{ RUNPOD_SECRET_... }}` unfilled. So every pod that was not halted reads
        as lost (deleted, audited `pod.lost`, as a dead RunPod host does), a cluster left with no member
        with them (`cluster.lost`), and every secret reads as gone (`secret.lost`): a refresh drops them and
        the next `up` recreates them, values and all. Control-plane-only servers run nothing and use no
        values: they keep everything. Returns what was lost."""
        if not self.hosts.enabled:
            return []
        # A cluster with no member left is lost whole, as when every host of one dies: a refresh then drops
        # it and `up` creates a new one, which even a protected (prod) stack allows, where a replace is not.
        pods = [p for p in self.pods.values() if p.halted is None]
        kept = {p.cluster_id for p in self.pods.values() if p.halted is not None}
        clusters = [c for c in self.clusters.values() if c.id not in kept]
        gone: list[PodRecord | ClusterRecord | SecretRecord] = [*pods, *clusters, *self.secrets.values()]
        lost = []
        for record in gone:
            kind, _table = self._table(record)
            self.forget(record, sync=False)
            why = "its value lived in memory" if kind == "secret" else "its host stopped with the server"
            self.audit(f"{kind}.lost", kind, record.id, record.name, reason=why)
            lost.append(f"{kind} {record.name} ({record.id})")
        self.secret_values.clear()
        return lost

    def _meter(self, record: PodRecord | VolumeRecord | None, ident: str) -> None:
        """Billing follows every write: rate changes close and open meter segments (emulator/billing.py)."""
        closed, opened = meter(self.segments, record, ident, self.now())
        for segment in opened:
            segment.seq = len(self.segments) + 1
            self.segments.append(segment)
        for segment in closed + opened:
            self.store.put("meter", str(segment.seq), asdict(segment))

    def _table(self, record: object) -> tuple[str, dict[str, Any]]:
        tables: dict[type, tuple[str, dict[str, Any]]] = {
            PodRecord: ("pod", self.pods),
            ClusterRecord: ("cluster", self.clusters),
            VolumeRecord: ("volume", self.volumes),
            SecretRecord: ("secret", self.secrets),
            RegistryRecord: ("registry", self.registries),
        }
        return tables[type(record)]

    def audit(self, event: str, kind: str, ident: str | None, name: str | None, **detail: Any) -> None:
        self.store.audit(self.now(), event, kind, ident, name, detail)

    def set_limits(self, limits: Limits) -> None:
        self.limits = limits
        self.store.set_setting("limits", limits.model_dump())
        self.audit("account.limits", "account", None, None, **limits.model_dump())

    # -- pod lifecycle, derived from the clock ---------------------------------------------------

    def status(self, pod: PodRecord) -> str:
        """What the API shows. With emulated hosts a pod is RUNNING once its host is up, not when the clock
        says its container should be: a host made by the next sync, or one that cannot be made (ERROR), is
        never read as RUNNING first (RunPod, too, shows RUNNING for a container that runs)."""
        scheduled = self.scheduled_status(pod)
        if scheduled == "RUNNING" and self.hosts.enabled and self.hosts.endpoint(pod.id) is None:
            return "STARTING"
        return scheduled

    def scheduled_status(self, pod: PodRecord) -> str:
        """The status the clock alone gives: PROVISIONING, STARTING, then RUNNING (or the halted one)."""
        if pod.halted:
            return pod.halted
        elapsed = self.now() - pod.boot_at
        provisioning = self.latency.provisioning_s(pod)
        if elapsed < provisioning:
            return "PROVISIONING"
        if elapsed < provisioning + self.timing.starting_s:
            return "STARTING"
        return "RUNNING"

    def running_since(self, pod: PodRecord) -> float:
        return pod.boot_at + self.latency.provisioning_s(pod) + self.timing.starting_s

    def runtime_ready(self, pod: PodRecord) -> bool:
        ready = pod.halted is None and self.now() >= self.running_since(pod) + self.timing.runtime_lag_s
        # With emulated hosts, the runtime exists once the pod's host does (its ports point there).
        return ready and (not self.hosts.enabled or self.hosts.endpoint(pod.id) is not None)

    def ssh_address(self, pod: PodRecord) -> tuple[str, int] | None:
        """Where `ssh root@<host> -p <port>` reaches the ready pod: its host, or the mapped public port."""
        if not self.runtime_ready(pod):
            return None
        if self.hosts.enabled:
            return self.hosts.endpoint(pod.id)
        port = public_port(pod, 22)
        return (pod.public_ip, port) if port is not None else None

    # -- emulated hosts --------------------------------------------------------------------------

    def sync_hosts(self) -> None:
        """Tell the host backend which pods the clock has RUNNING (each then reads RUNNING once its host is
        up); called on every change and by a ticker."""
        if not self.hosts.enabled:
            return
        specs = [self.host_spec(p) for p in self.pods.values() if self.scheduled_status(p) == "RUNNING"]
        wanted = [s for s in specs if s is not None]
        self.hosts.sync(wanted, set(self.volumes), list(self.ssh_keys))
        # A pod whose host could not be made fails now, visibly, instead of reading RUNNING with no runtime
        # until a client's readiness timeout (RunPod shows an unrecoverable container as ERROR too).
        for spec in wanted:
            reason = self.hosts.failure(spec.pod_id)
            pod = self.pods.get(spec.pod_id)
            if reason is not None and pod is not None and pod.halted is None:
                pod.halted = "ERROR"
                self.save(pod)
                self.audit("pod.error", "pod", pod.id, pod.name, reason=reason)

    def host_spec(self, pod: PodRecord) -> HostSpec | None:
        if pod.cluster_id is not None:
            cluster = self.clusters.get(pod.cluster_id)
            if cluster is None or pod.fabric_ip is None:
                return None  # a member saved before its cluster: the next sync sees both
            net = ipaddress.ip_network(cluster.cidr)
            address, gateway, iface = f"{pod.fabric_ip}/{net.prefixlen}", str(net.network_address + 1), "ens1"
        else:
            # Loose pods' private (global networking) addresses: this server's /16; the bridge holds .0.1.
            if not pod.gn_ip or pod.gn_ip == self.net.pod_net_gateway:
                return None
            gateway, iface = self.net.pod_net_gateway, "eth0"
            address = f"{pod.gn_ip}/{POD_NET_PREFIX}"
        env = {k: self._fill_secrets(v) for k, v in pod.env.items()} | injected_env(pod)
        ip = address.split("/")[0]
        env |= {"RUNPOD_PUBLIC_IP": ip, "RUNPOD_TCP_PORT_22": "22"}
        return HostSpec(
            pod_id=pod.id,
            address=address,
            gateway=gateway,
            iface=iface,
            volume_id=pod.volume_id,
            mount_path=pod.volume_path or "/workspace",
            env=env,
            start_ssh=pod.start_ssh,
            slurm=self._slurm_node(pod),
        )

    def _slurm_node(self, pod: PodRecord) -> SlurmNode | None:
        """A member of a `type: SLURM` cluster runs Slurm (emulator/slurm.py); every other pod does not."""
        cluster = self.clusters.get(pod.cluster_id) if pod.cluster_id else None
        if cluster is None or cluster.type != "SLURM":
            return None
        members = [self.pods[i] for i in cluster.pod_ids if i in self.pods]
        addresses = tuple((m.id, m.fabric_ip or "") for m in members)
        gpus = cluster.gpu_count_per_pod
        return SlurmNode(cluster.id, cluster.name, addresses, gpus, gpus)

    def _fill_secrets(self, value: str) -> str:
        """RunPod substitutes `{{ RUNPOD_SECRET_<name> }}` at pod start; unknown names stay as written."""
        return SECRET_REF.sub(lambda m: self.secret_values.get(m.group(1), m.group(0)), value)

    def tick(self) -> None:
        """Settle what time alone changes: spot pods whose 5 s notice ran out are now EXITED."""
        now = self.now()
        for pod in list(self.pods.values()):
            if pod.preempt_at is not None and pod.halted is None and now >= pod.preempt_at:
                pod.halted, pod.preempt_at = "EXITED", None
                self.save(pod)
                self.audit("pod.preempted", "pod", pod.id, pod.name, signal="SIGKILL")
        self.sync_hosts()

    # -- placement rules -------------------------------------------------------------------------

    def free_gpus(self, gpu_id: str, dc_id: str) -> int:
        dc = self.catalog.data_center(dc_id)
        stock = self.capacity.stock.get(f"{gpu_id}@{dc_id}", dc.stock.get(gpu_id, 0) if dc else 0)
        used = sum(
            p.gpu_count
            for p in self.pods.values()
            if p.halted is None and p.gpu_id == gpu_id and p.data_center_id == dc_id
        )
        return stock - used

    def live_spend(self) -> float:
        return round(sum(p.hourly_cost for p in self.pods.values() if p.halted is None), 4)

    def check_money(self, hourly_cost: float) -> None:
        """402 below one hour of credit; 400 naming the limit if spend would pass it
        (docs.runpod.io/pods/pricing: one hour of credit, $80/h default limit)."""
        if self.limits.balance < hourly_cost:
            raise ApiError(
                402,
                f"Insufficient balance: ${self.limits.balance:.2f} is less than one hour "
                f"(${hourly_cost:.2f}) of this deploy. Add credit, then retry.",
            )
        after = self.live_spend() + hourly_cost
        if after > self.limits.spendLimit + 1e-9:
            raise ApiError(
                400,
                f"This deploy would raise your spend to ${after:.2f}/h, above your account spend limit of "
                f"${self.limits.spendLimit:.2f}/h. Ask RunPod to raise the spend limit, or deploy less.",
                title="Spend limit exceeded",
            )

    def place(self, gpu_id: str, candidates: list[str], gpus_needed: int) -> str:
        """The first candidate data center with `gpus_needed` free GPUs, or RunPod's no-capacity 400."""
        if self.capacity.exhausted or self.capacity.exhaustNext > 0:
            self.capacity.exhaustNext = max(0, self.capacity.exhaustNext - 1)
            raise ApiError(400, NO_CAPACITY)
        for dc_id in candidates:
            if self.free_gpus(gpu_id, dc_id) >= gpus_needed:
                return dc_id
        raise ApiError(400, NO_CAPACITY)

    def host_cuda(self, dc_id: str, gpu: dict[str, Any] | None = None) -> str | None:
        """The newest CUDA version a machine in `dc_id` reports that meets the pod's `gpu` constraint:
        `allowedCudaVersions` matched exactly, `minCudaVersion` compared numerically (CreateGpuConfig)."""
        dc = self.catalog.data_center(dc_id)
        if dc is None:
            return None
        allowed = (gpu or {}).get("allowedCudaVersions") or []
        floor = (gpu or {}).get("minCudaVersion")
        for version in sorted(dc.cudaVersions, key=cuda_key, reverse=True):
            if allowed and version not in allowed:
                continue
            if floor is not None and cuda_key(version) < cuda_key(floor):
                continue
            return version
        return None

    def candidates(self, gpu_id: str, requested: list[str] | None) -> list[str]:
        if not requested:
            return [dc.id for dc in self.catalog.dataCenters if gpu_id in dc.stock]
        unknown = [d for d in requested if self.catalog.data_center(d) is None]
        if unknown:
            raise ApiError(
                400, f"Unknown data center id(s): {', '.join(unknown)}. See GET /v2/catalog/datacenters."
            )
        return list(requested)

    def gpu_price(self, gpu_id: str, cloud: str, count: int) -> float:
        gpu = self.catalog.gpu(gpu_id)
        if gpu is None:
            raise ApiError(400, f"GPU type {gpu_id!r} is not offered. See GET /v2/catalog/gpus for ids.")
        ceiling = gpu.maxCount.secure if cloud == "SECURE" else gpu.maxCount.community
        if count > ceiling:
            raise ApiError(
                400, f"{gpu_id} allows at most {ceiling} GPUs per pod on {cloud} cloud; asked for {count}."
            )
        return self.catalog.price(gpu_id, cloud)

    def reset(self) -> None:
        """Forget every resource and fault; limits go back to the start settings."""
        for table in (self.pods, self.clusters, self.volumes, self.secrets, self.registries):
            table.clear()
        self.segments = []
        self.store.clear_resources()
        self.capacity = CapacityFaults(exhausted=self.settings.no_capacity)
        self.faults.set(
            FaultConfig(
                errorRate=self.settings.error_rate,
                latencyMs=self.settings.latency_ms,
                seed=self.settings.seed,
            )
        )
        self.set_limits(Limits.model_validate(self.default_limits()))
        self.audit("admin.reset", "account", None, None)
        self.sync_hosts()
