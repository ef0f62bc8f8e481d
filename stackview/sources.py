"""Where `scripts/watch` reads from: the stack's outputs, node 0 over SSH, RunPod's billing, and for a node
whose agent does not answer its training log over SSH (else RunPod's container log).

Every source may fail on its own (a node not up yet, no API key, an old stack without an output); a failure
becomes one line in the snapshot's problems and the rest is still shown.
"""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.outputs import BilledIds, ContractError, NodeOutput, forecast_of, nodes_of
from common.pulumi import PulumiError
from common.stack import Stack
from components.render import job_files
from providers.delivery.ssh import DeliveryError, Ssh, SshTarget, UnreachableError
from providers.errors import TrainstackError
from providers.settings import known_hosts_file
from stackconfig.config import TrainingConfig
from train.node import exitrecord

if TYPE_CHECKING:
    from providers.runpod.client import RunPodClient

# RunPod reads here are a view, not an action: a RunPod that does not answer (the local one stopped) is one
# problem line after seconds, not the providers' 180 s retry deadline (179 s before anything).
WATCH_TIMEOUT_S = 5.0
WATCH_DEADLINE_S = 10.0


def view_client() -> RunPodClient:
    """The RunPod client of every read a view makes (billing, logs, the account's unowned resources): the
    short per-request timeout and retry deadline above."""
    from providers.runpod.client import RunPodClient  # the RunPod records load only when RunPod is asked

    return RunPodClient.from_env(timeout_s=WATCH_TIMEOUT_S, deadline_s=WATCH_DEADLINE_S)


class WatchError(TrainstackError, RuntimeError):
    """A source that `scripts/watch` cannot do without (the stack's outputs)."""


class NotUpError(WatchError):
    """The stack is not up here: no workspace, no such stack in the backend, or no nodes in its outputs."""


class NoStateError(WatchError):
    """Node 0 answered over SSH but holds no aggregator state: alerts are off, or no round has ended yet."""


def stack_outputs(cwd: Path, stack: str, require_nodes: bool = True) -> dict[str, Any]:
    """`pulumi stack output --json` of the stack, run in its workspace (scripts/watch picks it).

    `require_nodes=False` (scripts/supervise): a stack whose compute is released has no nodes, and says so."""
    if not (cwd / "Pulumi.yaml").is_file():
        raise NotUpError(f"stack '{stack}' is not up here (no workspace at {cwd}); run scripts/up {stack}")
    try:
        data = Stack(stack, cwd, timeout=60).outputs()
    except PulumiError as exc:
        last = exc.last.strip()
        if not last:
            raise WatchError(f"pulumi printed no JSON object for the outputs of '{stack}'") from None
        if "no stack named" in last or "not found" in last:
            raise NotUpError(f"stack '{stack}' is not up here ({last}); run scripts/up {stack}") from None
        raise WatchError(
            f"cannot read the outputs of stack '{stack}' in {cwd}: {last}; run scripts/up {stack}"
        ) from None
    if require_nodes and not data.get("nodes"):
        raise NotUpError(f"stack '{stack}' has no nodes in its outputs; run scripts/up {stack} first")
    return data


def stack_nodes(stack: str, outputs: Mapping[str, Any]) -> list[NodeOutput]:
    """The stack's `nodes` output as records (common/outputs.py); WatchError naming a malformed key."""
    try:
        return nodes_of(outputs)
    except ContractError as exc:
        raise WatchError(f"stack '{stack}': {exc}") from None


def billed_ids(outputs: Mapping[str, Any]) -> BilledIds:
    """The ids RunPod bills the stack's cluster and volume under (the stack exports them at its top level);
    a stack from before either output has none."""
    try:
        return BilledIds.from_output(outputs, "outputs")
    except ContractError:
        return BilledIds.from_output({"cluster_id": None, "volume_id": None, **outputs}, "outputs")


def forecast_run_cost(outputs: Mapping[str, Any], problems: list[str]) -> float | None:
    """The forecast run cost the stack exports (None without a model); a malformed forecast is one line in
    `problems`, not the end of the view."""
    try:
        forecast = forecast_of(outputs)
    except ContractError as exc:
        problems.append(f"forecast: {exc}")
        return None
    return None if forecast is None else forecast.run_cost_usd


def node_target(stack: str, node: NodeOutput) -> SshTarget:
    """A node's SSH target, with the stack's own known_hosts (host keys keyed by pod id)."""
    return SshTarget(node.ssh.host, node.ssh.port, "root", node.pod_id, Path(known_hosts_file(stack)))


def is_pool(outputs: Mapping[str, Any]) -> bool:
    """A pool of pods (each its own job, each pod its own aggregator), not an Instant Cluster (one job, one
    aggregator on node 0). Stacks from before the `topology` output: a cluster has a cluster id."""
    topology = outputs.get("topology")
    return topology == "pods" if isinstance(topology, str) else not billed_ids(outputs).cluster_id


def aggregator_state(
    stack: str,
    outputs: Mapping[str, Any],
    timeout_s: float = 10.0,
    run: Callable[[SshTarget, str], str] | None = None,
) -> dict[str, Any]:
    """The aggregator's newest round, read over SSH with the stack's own known_hosts (batch mode): node 0's
    for a cluster; for a pool, every pod's own (each trial is its own job), joined in node order.

    `run` runs a command on the target (default: ssh); NoStateError when node 0 (a pool: every pod that
    answered) answers without a state file.
    """
    nodes = stack_nodes(stack, outputs)
    if not nodes:
        raise WatchError(f"stack '{stack}' has no nodes in its outputs")
    run = run or _over_ssh(timeout_s)
    if not is_pool(outputs):
        return _node_state(stack, outputs, nodes[0], run)
    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        found = list(pool.map(lambda n: _read_or_error(stack, outputs, n, run), nodes))
    if len(found) == 1 and isinstance(found[0], dict):
        return found[0]
    states = [f for f in found if isinstance(f, dict)]
    errors = [f for f in found if isinstance(f, WatchError)]
    if not states:
        raise next((e for e in errors if not isinstance(e, NoStateError)), errors[0])
    return _joined(found, errors)


def _read_or_error(
    stack: str, outputs: Mapping[str, Any], node: NodeOutput, run: Callable[[SshTarget, str], str]
) -> dict[str, Any] | WatchError:
    try:
        return _node_state(stack, outputs, node, run)
    except WatchError as exc:
        return exc


def _joined(found: Sequence[dict[str, Any] | WatchError], errors: Sequence[WatchError]) -> dict[str, Any]:
    """A pool's aggregator states as one: each pod's own row in node order (an empty row where a pod did not
    answer), every firing alert, the newest round (a pool has stopped only when every aggregator has), the
    earliest start, and the money projection of the trial that runs longest."""
    states = [f for f in found if isinstance(f, dict)]
    rows: list[Any] = []
    for f in found:
        own = f.get("nodes") if isinstance(f, dict) else None
        rows.append(own[0] if isinstance(own, list) and own else {})
    times = [s["time"] for s in states if isinstance(s.get("time"), int | float)]
    starts = [s["started_at"] for s in states if isinstance(s.get("started_at"), int | float)]
    monies = [s["money"] for s in states if isinstance(s.get("money"), dict)]
    return {
        "nodes": rows,
        "firing": [a for s in states for a in s.get("firing") or []],
        "time": max(times) if times else None,
        "started_at": min(starts) if starts else None,
        "money": max(monies, key=lambda m: float(m.get("projected_usd") or 0.0)) if monies else None,
        "unread": [str(e) for e in errors],
    }


def _node_state(
    stack: str, outputs: Mapping[str, Any], node: NodeOutput, run: Callable[[SshTarget, str], str]
) -> dict[str, Any]:
    """One node's aggregator state file (its job's first node)."""
    workdir = workdir_of(outputs)
    who = f"node {node.rank} ({node.pod_id})"
    target = node_target(stack, node)
    path = f"{workdir}/{job_files(is_pool(outputs), node.rank)[2]}"
    try:  # a missing file is an answer (empty output), not a failed command: it must not read as unreachable
        text = run(target, f"if [ -e {shlex.quote(path)} ]; then cat {shlex.quote(path)}; fi")
    except DeliveryError as exc:
        raise WatchError(f"{who}: {exc}") from None
    if not text.strip():
        raise NoStateError(
            f"{who} answered but has no {path}: the aggregator writes it after its "
            "first round (trainstack:alerts.interval_min); with trainstack:alerts.enabled false or no "
            "delivered start scripts there is none"
        )
    try:
        state = json.loads(text)
    except ValueError:
        raise WatchError(f"{who}'s aggregator state is not JSON (the aggregator may be starting)") from None
    if not isinstance(state, dict):
        raise WatchError(f"{who}'s aggregator state is not a JSON object")
    return state


def training_log_tails(
    stack: str,
    outputs: Mapping[str, Any],
    pod_ids: Sequence[str],
    lines: int = 5,
    timeout_s: float = 10.0,
    run: Callable[[SshTarget, str], str] | None = None,
) -> dict[str, list[str]]:
    """The last lines of each node's *training* log, the start script's own
    (`<workdir>/logs/start-node-<rank>.<pod id>.log`, on the node or its volume), read over SSH for the nodes
    whose agent did not answer. A node SSH cannot reach, or without that log yet, is left out (the caller
    then reads RunPod's container log)."""
    workdir = workdir_of(outputs)

    def tail(node: NodeOutput) -> str:
        log = shlex.quote(f"{workdir}/logs/start-node-{node.rank}.{node.pod_id}.log")
        return f"if [ -e {log} ]; then tail -n {int(lines)} {log}; fi"

    read = _read_on_nodes(stack, outputs, pod_ids, tail, run or _over_ssh(timeout_s))
    return {pod_id: text.rstrip("\n").splitlines()[-lines:] for pod_id, text in read if text.strip()}


def exit_records(
    stack: str,
    outputs: Mapping[str, Any],
    pod_ids: Sequence[str],
    timeout_s: float = 10.0,
    run: Callable[[SshTarget, str], str] | None = None,
) -> dict[str, exitrecord.ExitRecord]:
    """The exit record of each listed node whose start script has ended (train/node/exitrecord.py, written by
    its EXIT trap at `<workdir>/metrics/exit-node-<pod index>.<pod id>.json`), read over SSH. A node without
    one (still running, or SSH cannot reach it) is left out; a record that does not parse is left out too."""
    workdir = workdir_of(outputs)

    def cat(node: NodeOutput) -> str:
        # The pod index is the job's; a pool pod's job has rank 0 on every pod: match by pod id.
        pattern = f"{shlex.quote(workdir + '/metrics/exit-node-')}*.{shlex.quote(node.pod_id)}.json"
        return f'for f in {pattern}; do [ -e "$f" ] && head -c 65536 "$f"; done; true'

    out: dict[str, exitrecord.ExitRecord] = {}
    for pod_id, text in _read_on_nodes(stack, outputs, pod_ids, cat, run or _over_ssh(timeout_s)):
        record = exitrecord.parse(text.strip()) if text.strip() else None
        if record is not None:
            out[pod_id] = record
    return out


def is_slurm_stack(outputs: Mapping[str, Any]) -> bool:
    """A `scheduler: slurm` stack's outputs list its sbatch script among the rendered scripts."""
    from components.slurm import SBATCH

    return SBATCH in (outputs.get("start_script_sha256") or {})


def slurm_queue(stack: str, outputs: Mapping[str, Any], timeout_s: float = 10.0) -> list[str]:
    """`squeue` on the controller of a `scheduler: slurm` stack, one line a job (jobs Slurm still holds,
    finished ones included); [] when node 0 cannot be reached."""
    command = "squeue -h -t all -o '%i %j %T %M %D %R' 2>/dev/null | head -n 20; true"
    return _on_controller(stack, outputs, command, _over_ssh(timeout_s)).splitlines()


# The lines slurm_jobs adds after sacct's and scontrol's answers: an empty queue read, not a command that
# failed (no slurmdbd for sacct, slurmctld down) or a controller that did not answer.
SACCT_READ = "#trainstack: sacct answered"
SLURM_READ = "#trainstack: scontrol answered"
SACCT_COMMAND = "sacct -X -n -P -a -S now-7days -o JobIDRaw,JobName,State,ExitCode,NodeList"


def slurm_jobs(
    stack: str,
    outputs: Mapping[str, Any],
    timeout_s: float = 10.0,
    run: Callable[[SshTarget, str], str] | None = None,
) -> str:
    """The controller's (node 0's) jobs of a `scheduler: slurm` stack, in one SSH command: `sacct` (the
    last week's job allocations, where the cluster runs slurmdbd) then `SACCT_READ`, and `scontrol show job
    -o` (every job slurmctld still holds) then `SLURM_READ`, each mark only when its command answered (an
    empty queue reads "No jobs in the system" and the mark). supervisor/slurm.py parses both. Empty when
    node 0 cannot be reached."""
    command = " ".join(
        f"out=$({cmd} 2>/dev/null) && "
        f"{{ printf '%s\\n' \"$out\" | head -c 65536; printf '\\n%s\\n' '{mark}'; }};"
        for cmd, mark in ((SACCT_COMMAND, SACCT_READ), ("scontrol show job -o", SLURM_READ))
    )
    command += " true"
    return _on_controller(stack, outputs, command, run or _over_ssh(timeout_s))


def _on_controller(
    stack: str, outputs: Mapping[str, Any], command: str, run: Callable[[SshTarget, str], str]
) -> str:
    """`command`'s output on node 0 (a Slurm cluster's controller); "" when it cannot be reached."""
    for node in stack_nodes(stack, outputs):
        if node.rank == 0:
            try:
                return run(node_target(stack, node), command)
            except DeliveryError:
                return ""
    return ""


def _targets(
    stack: str, outputs: Mapping[str, Any], pod_ids: Sequence[str]
) -> Iterator[tuple[NodeOutput, SshTarget]]:
    """(node, SSH target) of each listed node, in the outputs' order."""
    for node in stack_nodes(stack, outputs):
        if node.pod_id in pod_ids:
            yield node, node_target(stack, node)


def _read_on_nodes(
    stack: str,
    outputs: Mapping[str, Any],
    pod_ids: Sequence[str],
    command: Callable[[NodeOutput], str],
    run: Callable[[SshTarget, str], str],
) -> Iterator[tuple[str, str]]:
    """(pod id, what `command(node)` printed) of each listed node over SSH, in node order; a node SSH cannot
    reach: none. The nodes are asked at once (at most 16 at a time), as a pool's aggregators are: one after
    the other, a view of 8 nodes that do not answer waited out 8 SSH deadlines (80 s) for their exit records
    and 8 more for their logs (issue #47 found it: `watch --once` on prod with no hosts took 100 s)."""
    targets = list(_targets(stack, outputs, pod_ids))
    if not targets:
        return

    def read(pair: tuple[NodeOutput, SshTarget]) -> tuple[str, str] | None:
        node, target = pair
        try:
            return node.pod_id, run(target, command(node))
        except DeliveryError:
            return None

    with ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
        found = list(pool.map(read, targets))
    yield from (f for f in found if f is not None)


def workdir_of(outputs: Mapping[str, Any]) -> str:
    """The nodes' workdir: the stack's output, else the default written on the model (`training.workdir`)."""
    return str(outputs.get("workdir") or TrainingConfig.model_fields["workdir"].default)


class ViewSsh:
    """One view's SSH runner (`run` of aggregator_state, exit_records and training_log_tails): a node that
    did not answer within its deadline is not asked again in the same view, its first error stands for the
    later asks. A view asks a node that does not answer up to three times (its aggregator, its exit record,
    its log), and each ask waited out the whole deadline (issue #47: 30 s a view of one dead pod)."""

    def __init__(self, timeout_s: float = 10.0, run: Callable[[SshTarget, str], str] | None = None) -> None:
        self._run = run or _over_ssh(timeout_s)
        self._lock = threading.Lock()
        self._unreachable: dict[str, UnreachableError] = {}

    def __call__(self, target: SshTarget, command: str) -> str:
        with self._lock:
            known = self._unreachable.get(target.alias)
        if known is not None:
            raise UnreachableError(f"{known} (not asked again in this view)")
        try:
            return self._run(target, command)
        except UnreachableError as exc:
            with self._lock:
                self._unreachable.setdefault(target.alias, exc)
            raise


def _over_ssh(timeout_s: float) -> Callable[[SshTarget, str], str]:
    """Run a command on a target with ssh, in batch mode, within `timeout_s` in all."""
    return lambda target, command: Ssh(
        target, connect_timeout_s=timeout_s, deadline_s=timeout_s, step_timeout_s=timeout_s
    ).run(command)


def billed_usd(
    outputs: Mapping[str, Any], client: RunPodClient | None = None, replaced: Sequence[str] = ()
) -> float:
    """What RunPod billed so far for this stack's pods, cluster and volume (REST v2 `/v2/billing/*`), and for
    the clusters and pods a recovery replaced in this run (`replaced`: "cluster:<id>" / "pod:<id>", from the
    supervisor's recovery records): RunPod bills a deleted cluster under its own id, not its successor's.

    Pod and cluster ids are unique to this stack, so RunPod's default window (30 days) holds the whole run.
    The pods take one unfiltered request, whose records each carry their `podId` (ListPodBillingResponse),
    summed for this stack's pods only: a request per pod would spend the client's burst of the 60/min quota
    and then wait a second for each further pod (about 5 s for prod's 8). Clusters likewise: one filtered
    request for the stack's only cluster, one unfiltered request summed by `clusterId` once it had more."""
    ids = billed_ids(outputs)
    pods = {n.pod_id for n in nodes_of(outputs)}
    pods |= {r.split(":", 1)[1] for r in replaced if r.startswith("pod:")}
    clusters = {r.split(":", 1)[1] for r in replaced if r.startswith("cluster:")}
    if ids.cluster_id:
        clusters.add(ids.cluster_id)
    total = 0.0
    with client or view_client() as client:
        if pods:
            body = client.request("GET", "/v2/billing/pods", query={"bucketSize": "day"})
            total += _sum(body, lambda record: record.get("podId") in pods)
        if len(clusters) == 1:
            query = {"clusterId": next(iter(clusters)), "bucketSize": "day"}
            total += _sum(client.request("GET", "/v2/billing/clusters", query=query))
        elif clusters:
            body = client.request("GET", "/v2/billing/clusters", query={"bucketSize": "day"})
            total += _sum(body, lambda record: record.get("clusterId") in clusters)
        if ids.volume_id:
            query = {"networkVolumeId": ids.volume_id, "bucketSize": "day"}
            total += _sum(client.request("GET", "/v2/billing/network-volumes", query=query))
    return total


def _sum(body: Any, keep: Callable[[dict[str, Any]], bool] = lambda _record: True) -> float:
    records = body.get("records") if isinstance(body, dict) else None
    if not isinstance(records, list):
        raise WatchError("RunPod's billing answer has no records list")
    return float(sum(r.get("totalAmount") or 0 for r in records if isinstance(r, dict) and keep(r)))


def pod_logs(
    pod_ids: Sequence[str], lines: int = 5, client: RunPodClient | None = None
) -> dict[str, list[str]]:
    """The last log lines of pods SSH never reached (REST v2 `GET /v2/pods/{id}/logs`, an SSE backfill)."""
    out: dict[str, list[str]] = {}
    with client or view_client() as client:
        for pod_id in pod_ids:
            out[pod_id] = client.pod_log_tail(pod_id, lines)
    return out
