"""A `scheduler: slurm` stack's job as a Slurm job: the sbatch script, the task each node runs, the submitter.

Pure rendering. On a RunPod Slurm cluster (`type: SLURM`) Slurm starts the training, not delivery:

- `slurm-submit.sh` is what delivery starts on every node. On the controller (rank 0) it waits until
  Slurm sees every node, then `sbatch`es `trainstack.sbatch` unless a job of this name is already queued,
  running or done (a re-delivery submits nothing twice); on the other nodes it says slurmd runs their part.
- `trainstack.sbatch` asks for every node, one task each, and `srun`s `slurm-task.sh` on them.
- `slurm-task.sh` finds this node's RunPod rank (its address's line in the hostfile), puts back the
  per-node identity that `srun` overwrote with the submitter's (`NODE_RANK`, `NODE_ADDR`, `RUNPOD_POD_ID`)
  and execs the node's usual `start-node-<rank>.sh` with its usual log: the same health gate, straggler
  test, all-reduce floor, checkpoint resume and sync, metrics agent and exit record as without Slurm.

What Slurm adds: the queue (`squeue`), the job's own state (`scontrol show job`: COMPLETED, FAILED,
NODE_FAIL, ...), `scancel`, and a requeue when a node fails. docs/SLURM.md.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping

from stackconfig.config import StackConfig

SUBMIT = "slurm-submit.sh"
SBATCH = "trainstack.sbatch"
TASK = "slurm-task.sh"
FILES = (SUBMIT, SBATCH, TASK)
# How long the submitter waits for Slurm to see every node before it gives up (its log says so).
NODES_READY_S = 300


def is_slurm(config: StackConfig) -> bool:
    return config.cluster.scheduler == "slurm"


def start_script(config: StackConfig, rank: int) -> str:
    """The script delivery starts on node `rank`: the submitter under Slurm, else the node's own."""
    return SUBMIT if is_slurm(config) else f"start-node-{rank}.sh"


def node_files(scripts: Mapping[str, str]) -> dict[str, str]:
    """The Slurm files every node gets (none for a stack without Slurm)."""
    return {name: scripts[name] for name in FILES if name in scripts}


def slurm_job_name(stack: str, config: StackConfig) -> str:
    """The cluster's job and its identity: `trainstack:cluster.slurm.job` on a Slurm stack, else the stack's
    name. It is the Slurm job's name (what the submitter, the supervisor and `squeue -n` look for), the job's
    checkpoint folder and bucket prefix and its run id's first part (components/render.py): a new name is a
    new job on the same cluster, and the earlier job's records stay under its own name."""
    return (config.cluster.slurm.job if is_slurm(config) else None) or stack


def time_limit_min(config: StackConfig, stop_grace_s: int) -> int:
    """sbatch's --time: the run's max hours, the watchdog's grace for training to stop, and a minute."""
    return math.ceil(config.training.max_run_hours * 60 + stop_grace_s / 60) + 1


def render_slurm_files(stack: str, config: StackConfig, hostfile: str, stop_grace_s: int) -> dict[str, str]:
    """name -> text of the Slurm files; empty unless `cluster.scheduler` is slurm. `hostfile` is the job's
    hostfile name and `stop_grace_s` the start script's grace after max_run_hours (components/render.py)."""
    if not is_slurm(config):
        return {}
    return {
        SUBMIT: render_submit(stack, config),
        SBATCH: render_sbatch(stack, config, stop_grace_s),
        TASK: render_task(config, hostfile),
    }


def render_sbatch(stack: str, config: StackConfig, stop_grace_s: int) -> str:
    workdir = config.training.workdir
    lines = [
        "#!/usr/bin/env bash",
        f"#SBATCH --job-name={slurm_job_name(stack, config)}",
        f"#SBATCH --nodes={config.cluster.nodes}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        f"#SBATCH --time={time_limit_min(config, stop_grace_s)}",
        f"#SBATCH --chdir={workdir}",
        f"#SBATCH --output={workdir}/logs/slurm-%x-%j.out",
        # A failed node requeues the batch job (Slurm's JobRequeue); it resumes from the bucket.
        "#SBATCH --requeue",
        f"# trainstack stack '{stack}': rendered by components/slurm.py, do not edit. Submitted by {SUBMIT}",
        "# on the controller; resubmit by hand with `sbatch trainstack.sbatch` from the workdir.",
        "set -euo pipefail",
        'echo "trainstack: Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST"'
        ' "(restart ${SLURM_RESTART_COUNT:-0})"',
        # One task a node; a task that fails ends the step, so no node trains alone.
        f"srun --kill-on-bad-exit=1 --ntasks-per-node=1 bash {shlex.quote(workdir)}/{TASK}",
        "",
    ]
    return "\n".join(lines)


def render_task(config: StackConfig, hostfile: str) -> str:
    return f"""#!/usr/bin/env bash
# {TASK}: one Slurm task per node (components/slurm.py). srun gives every task the submitter's environment,
# so this node's own identity is found here: its RunPod rank is its address's line in the hostfile.
set -euo pipefail
cd {shlex.quote(config.training.workdir)}
own=" $(hostname -I 2>/dev/null || true) "
rank="" address="" line=0
while read -r ip _; do
  if [[ "$own" == *" $ip "* ]]; then rank=$line address=$ip; fi
  line=$((line + 1))
done <{hostfile}
if [[ -z "$rank" ]]; then
  echo "trainstack: none of this node's addresses ($own) is in {hostfile}; re-deliver the stack" >&2
  exit 1
fi
pod=$(hostname)
export NODE_RANK=$rank NODE_ADDR=$address RUNPOD_POD_ID=$pod
# WORLD_SIZE and the rest of RunPod's cluster variables are the same on every node; these three are not.
mkdir -p logs
exec >>"logs/start-node-$rank.$RUNPOD_POD_ID.log" 2>&1
echo "trainstack: Slurm job $SLURM_JOB_ID step $SLURM_STEP_ID on $SLURMD_NODENAME is node $rank"
exec bash "start-node-$rank.sh"
"""


def render_submit(stack: str, config: StackConfig) -> str:
    job = shlex.quote(slurm_job_name(stack, config))
    nodes = config.cluster.nodes
    return f"""#!/usr/bin/env bash
# {SUBMIT}: started by delivery on every node of trainstack stack '{stack}' (components/slurm.py). The
# controller (rank 0) submits {SBATCH} once Slurm sees all {nodes} node(s); the others leave their
# part to slurmd.
set -euo pipefail
log() {{ printf '[trainstack %s slurm] %s\\n' "$(date -u +%H:%M:%S)" "$*" >&2; }}
if [[ "${{NODE_RANK:-0}}" != 0 ]]; then
  log "node ${{NODE_RANK}}: slurmd runs this node's part of the job; nothing to start here"
  exit 0
fi
cd {shlex.quote(config.training.workdir)}
deadline=$((SECONDS + {NODES_READY_S}))
while true; do
  up=$(sinfo -h -N -t idle,alloc,mix,comp -o '%N' 2>/dev/null | sort -u | wc -l) || up=0
  if ((up >= {nodes})); then break; fi
  if ((SECONDS >= deadline)); then
    log "Slurm sees $up of {nodes} node(s) after {NODES_READY_S}s; sinfo:"
    sinfo -N >&2 || true
    exit 1
  fi
  sleep 2
done
# One job of this name at a time: a re-delivery (any changed file) must not queue the run twice. A new name
# (trainstack:cluster.slurm.job) is a new job: it is queued behind any other the cluster runs. A job a person
# cancelled (scancel) is their stop: never submitted again, also after slurmctld forgot it (MinJobAge), as
# long as slurmdbd remembers it (sacct).
states=PENDING,RUNNING,CONFIGURING,COMPLETING,REQUEUED,SUSPENDED,COMPLETED,CANCELLED
existing=$(squeue -h -t "$states" -n {job} -o '%i %T' 2>/dev/null | head -n 1)
if [[ -z "$existing" ]]; then
  existing=$(sacct -X -n -P --name {job} -o JobIDRaw,State 2>/dev/null | grep -m 1 '|CANCELLED') || true
fi
if [[ -n "$existing" ]]; then
  log "job {job} is already in Slurm or was cancelled there ($existing); not submitting it again"
  exit 0
fi
id=$(sbatch --parsable {SBATCH})
log "submitted job {job} as Slurm job $id (squeue, scontrol show job $id, scancel $id)"
"""
