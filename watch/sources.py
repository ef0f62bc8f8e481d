"""Where `scripts/watch` reads from: the stack's outputs, node 0 over SSH, RunPod's billing, and for a node
whose agent does not answer its training log over SSH (else RunPod's container log).

Every source may fail on its own (a node not up yet, no API key, an old stack without an output); a failure
becomes one line in the snapshot's problems and the rest is still shown.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.delivery import known_hosts_file
from providers.delivery.ssh import DeliveryError, Ssh, SshTarget
from providers.errors import TrainstackError
from train.node import exitrecord

if TYPE_CHECKING:
    from providers.runpod.client import RunPodClient

STATE_FILE = "metrics/aggregator.json"  # under training.workdir on node 0 (train/monitor/aggregator.py)
# RunPod reads here are a view, not an action: a RunPod that does not answer (the local one stopped) is one
# problem line after seconds, not the providers' 180 s retry deadline (issue #34: 179 s before anything).
WATCH_TIMEOUT_S = 5.0
WATCH_DEADLINE_S = 10.0


def _client() -> RunPodClient:
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
    proc = subprocess.run(
        ["pulumi", "stack", "output", "--json", "--stack", stack, "--non-interactive"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        if "no stack named" in last or "not found" in last:
            raise NotUpError(f"stack '{stack}' is not up here ({last.strip()}); run scripts/up {stack}")
        raise WatchError(
            f"cannot read the outputs of stack '{stack}' in {cwd}: {last}; run scripts/up {stack}"
        )
    try:
        data = json.loads(proc.stdout or "{}")
    except ValueError:
        raise WatchError(f"pulumi printed no JSON for the outputs of '{stack}'") from None
    if not isinstance(data, dict):
        raise WatchError(f"pulumi printed no JSON object for the outputs of '{stack}'")
    if require_nodes and not data.get("nodes"):
        raise NotUpError(f"stack '{stack}' has no nodes in its outputs; run scripts/up {stack} first")
    return data


def aggregator_state(
    stack: str,
    outputs: Mapping[str, Any],
    timeout_s: float = 10.0,
    run: Callable[[SshTarget, str], str] | None = None,
) -> dict[str, Any]:
    """The aggregator's newest round, read from node 0 with the stack's own known_hosts (batch mode).

    `run` runs a command on the target (default: ssh); NoStateError when node 0 answers without a state file.
    """
    node0 = outputs["nodes"][0]
    workdir = str(outputs.get("workdir") or "/workspace/trainstack")
    host, _, port = str(node0.get("ssh_endpoint") or "").rpartition(":")
    if not host or not port.isdigit():
        raise WatchError(f"node 0 ({node0.get('pod_id')}) has no SSH endpoint yet; it may still be starting")
    target = SshTarget(host, int(port), "root", str(node0["pod_id"]), Path(known_hosts_file(stack)))
    path = f"{workdir}/{STATE_FILE}"
    run = run or _over_ssh(timeout_s)
    try:  # a missing file is an answer (empty output), not a failed command: it must not read as unreachable
        text = run(target, f"if [ -e {shlex.quote(path)} ]; then cat {shlex.quote(path)}; fi")
    except DeliveryError as exc:
        raise WatchError(f"node 0 ({node0['pod_id']}): {exc}") from None
    if not text.strip():
        raise NoStateError(
            f"node 0 ({node0['pod_id']}) answered but has no {path}: the aggregator writes it after its "
            "first round (trainstack:alerts.interval_min); with trainstack:alerts.enabled false or no "
            "delivered start scripts there is none"
        )
    try:
        state = json.loads(text)
    except ValueError:
        raise WatchError("node 0's aggregator state is not JSON (the aggregator may be starting)") from None
    if not isinstance(state, dict):
        raise WatchError("node 0's aggregator state is not a JSON object")
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
    workdir = str(outputs.get("workdir") or "/workspace/trainstack")
    run = run or _over_ssh(timeout_s)
    out: dict[str, list[str]] = {}
    for node, pod_id, target in _targets(stack, outputs, pod_ids):
        log = shlex.quote(f"{workdir}/logs/start-node-{node.get('rank')}.{pod_id}.log")
        try:
            text = run(target, f"if [ -e {log} ]; then tail -n {int(lines)} {log}; fi")
        except DeliveryError:
            continue
        if text.strip():
            out[pod_id] = text.rstrip("\n").splitlines()[-lines:]
    return out


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
    workdir = str(outputs.get("workdir") or "/workspace/trainstack")
    run = run or _over_ssh(timeout_s)
    out: dict[str, exitrecord.ExitRecord] = {}
    for _node, pod_id, target in _targets(stack, outputs, pod_ids):
        # The pod index is the job's; a pool pod's job has rank 0 on every pod: match by pod id.
        pattern = f"{shlex.quote(workdir + '/metrics/exit-node-')}*.{shlex.quote(pod_id)}.json"
        try:
            text = run(target, f'for f in {pattern}; do [ -e "$f" ] && head -c 65536 "$f"; done; true')
        except DeliveryError:
            continue
        record = exitrecord.parse(text.strip()) if text.strip() else None
        if record is not None:
            out[pod_id] = record
    return out


def _targets(
    stack: str, outputs: Mapping[str, Any], pod_ids: Sequence[str]
) -> Iterator[tuple[Mapping[str, Any], str, SshTarget]]:
    """(node, pod id, SSH target) of each listed node that has an SSH endpoint, in the outputs' order."""
    for node in outputs.get("nodes") or []:
        pod_id = str(node.get("pod_id") or "")
        host, _, port = str(node.get("ssh_endpoint") or "").rpartition(":")
        if pod_id in pod_ids and host and port.isdigit():
            yield node, pod_id, SshTarget(host, int(port), "root", pod_id, Path(known_hosts_file(stack)))


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
    pods = {str(n["pod_id"]) for n in outputs.get("nodes") or [] if n.get("pod_id")}
    pods |= {r.split(":", 1)[1] for r in replaced if r.startswith("pod:")}
    clusters = {r.split(":", 1)[1] for r in replaced if r.startswith("cluster:")}
    if outputs.get("cluster_id"):
        clusters.add(str(outputs["cluster_id"]))
    total = 0.0
    with client or _client() as client:
        if pods:
            body = client.request("GET", "/v2/billing/pods", query={"bucketSize": "day"})
            total += _sum(body, lambda record: record.get("podId") in pods)
        if len(clusters) == 1:
            query = {"clusterId": next(iter(clusters)), "bucketSize": "day"}
            total += _sum(client.request("GET", "/v2/billing/clusters", query=query))
        elif clusters:
            body = client.request("GET", "/v2/billing/clusters", query={"bucketSize": "day"})
            total += _sum(body, lambda record: record.get("clusterId") in clusters)
        if outputs.get("volume_id"):
            query = {"networkVolumeId": str(outputs["volume_id"]), "bucketSize": "day"}
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
    with client or _client() as client:
        for pod_id in pod_ids:
            out[pod_id] = client.pod_log_tail(pod_id, lines)
    return out
