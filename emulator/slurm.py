"""A real Slurm on the local RunPod's `type: SLURM` clusters: slurmctld on the controller, slurmd on each.

RunPod's Slurm clusters come with Slurm and munge configured: rank 0 is the controller (`SLURM_CONTROLLER`),
every member a compute node (`SLURM_COMPUTE`), `/etc/slurm/slurm.conf` and `gres.conf` in place, jobs sent
with `sbatch` over SSH on the controller (docs.runpod.io/instant-clusters/slurm-clusters). Here Debian's
`slurm-wlm` and `munge` (installed by scripts/bootstrap) run inside each emulated host's namespaces:

- `render_slurm_conf` / `render_gres_conf`: the cluster's configuration, pure. Each node offers its GPU
  slots as CPUs (no GRES: there is no GPU device to count). Node names are the pod ids
  (each host's hostname), in rank order, so `SLURM_NODEID` of a job over every node is the RunPod rank.
- `prepare_node`: writes the cluster's `/etc/slurm` (bind-mounted over the host's) and munge key, once per
  cluster, and the node's own directories; returns the bind mounts and the shell that starts munged,
  slurmctld (controller only) and slurmd before it execs the host's own command (sshd).

Where MariaDB and slurmdbd are installed (scripts/bootstrap), the controller's host also runs them, started in
the background so that its sshd is not held up: `mariadbd` on its loopback with a database of its own, then
`slurmdbd`, which slurmctld sends every job's record to, so `sacct` answers on the controller as on a cluster
that keeps accounting. Without them, accounting is off and jobs are read with `scontrol show job`.

Every daemon runs in the host's network and mount namespace, so removing the host (the pod leaving RUNNING)
kills them with it: to Slurm, that node stops answering and its job ends NODE_FAIL.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
MUNGED = "/usr/sbin/munged"
SLURMDBD = "/usr/sbin/slurmdbd"
MARIADBD = "/usr/sbin/mariadbd"
MARIADB_INSTALL_DB = "/usr/bin/mariadb-install-db"
DBD_PORT = 6819
# A node that stops answering is DOWN (and its job NODE_FAIL) after this many seconds; Slurm's default of
# 300 would make a lost node wait five minutes. RunPod's own value is not published.
SLURMD_TIMEOUT_S = 20
# Finished jobs stay in `scontrol show job` this long: without slurmdbd (RunPod's clusters have none either,
# as far as its docs say) it and the job completion log are where a job's end state can be read.
MIN_JOB_AGE_S = 86400
PARTITION = "train"
SPOOL = "/var/spool/slurmd"


def slurm_unavailable() -> str | None:
    """Why this machine cannot run Slurm's daemons, or None."""
    missing = [p for p in (SLURMCTLD, SLURMD, MUNGED) if not os.access(p, os.X_OK)]
    if missing:
        return f"{', '.join(missing)} missing (scripts/bootstrap installs slurm-wlm and munge as root)"
    return None


def accounting_unavailable() -> str | None:
    """Why the controller cannot run MariaDB and slurmdbd here (so no `sacct`), or None."""
    missing = [p for p in (SLURMDBD, MARIADBD, MARIADB_INSTALL_DB) if not os.access(p, os.X_OK)]
    if missing:
        return f"{', '.join(missing)} missing (scripts/bootstrap installs slurmdbd, mariadb-server as root)"
    return None


@dataclass(frozen=True)
class SlurmNode:
    """What a host of a SLURM cluster needs besides its HostSpec: the cluster's members and its role."""

    cluster_id: str
    cluster_name: str
    members: tuple[tuple[str, str], ...]  # (pod id, fabric IP) in rank order; rank 0 is the controller
    cpus: int  # CPUs Slurm offers per node: the GPU count (one slot per GPU the pod rents)
    gpus: int

    @property
    def controller(self) -> str:
        return self.members[0][0]

    def role(self, pod_id: str) -> str:
        """RunPod's member role (openapi-v2 `PodCluster`)."""
        return "SLURM_CONTROLLER" if pod_id == self.controller else "SLURM_COMPUTE"


def cluster_name(name: str) -> str:
    """Slurm's ClusterName: lowercase letters, digits and '_' (at most 40), from the RunPod cluster's name."""
    slug = re.sub(r"[^a-z0-9_]", "_", name.lower()).strip("_") or "cluster"
    return slug[:40]


def render_slurm_conf(node: SlurmNode, state_root: str, accounting: bool = False) -> str:
    """slurm.conf for the whole cluster; `state_root` holds each node's `<pod id>/slurm` directory.
    `accounting`: jobs are recorded by slurmdbd on the controller (render_slurmdbd_conf)."""
    controller, controller_ip = node.members[0]
    per_node = f"{state_root}/%n/slurm"
    storage = (
        [
            "AccountingStorageType=accounting_storage/slurmdbd",
            # the address: the hosts resolve no other host's name
            f"AccountingStorageHost={controller_ip}",
            f"AccountingStoragePort={DBD_PORT}",
        ]
        if accounting
        else ["AccountingStorageType=accounting_storage/none"]
    )
    lines = [
        "# Rendered by the local RunPod (emulator/slurm.py) for a type: SLURM Instant Cluster.",
        f"ClusterName={cluster_name(node.cluster_name)}",
        f"SlurmctldHost={controller}({controller_ip})",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # Hosts share the machine's cgroups: track processes by process group, bind nothing.
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        *storage,
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={state_root}/{controller}/slurm/jobcomp.log",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        # The configured CPUs and GPUs, not what the shared machine has, are each node's.
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        f"SlurmdTimeout={SLURMD_TIMEOUT_S}",
        f"MinJobAge={MIN_JOB_AGE_S}",
        "SlurmctldPort=6817",
        "SlurmdPort=6818",
        f"StateSaveLocation={state_root}/{controller}/slurm/ctld",
        f"SlurmctldPidFile={state_root}/{controller}/slurm/slurmctld.pid",
        f"SlurmctldLogFile={state_root}/{controller}/slurm/slurmctld.log",
        # slurmstepd's sockets live here, and a Unix socket path has at most 108 bytes: each host bind-mounts
        # its own spool directory (under the state directory, however deep) on this short path.
        f"SlurmdSpoolDir={SPOOL}",
        f"SlurmdPidFile={per_node}/slurmd.pid",
        f"SlurmdLogFile={per_node}/slurmd.log",
    ]
    lines += [f"NodeName={pod} NodeAddr={ip} CPUs={node.cpus} State=UNKNOWN" for pod, ip in node.members]
    names = ",".join(pod for pod, _ in node.members)
    lines.append(f"PartitionName={PARTITION} Nodes={names} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def render_slurmdbd_conf(node: SlurmNode, own_dir: str, password: str) -> str:
    """slurmdbd.conf: slurmdbd on the controller's fabric address, its database on the host's loopback
    (MariaDB's user `slurm`, with a password made for the cluster, kept only in this file and the database;
    the file is the controller's, mode 0600, as slurmdbd requires)."""
    controller, controller_ip = node.members[0]
    lines = [
        "# Rendered by the local RunPod (emulator/slurm.py): slurmdbd on the controller's host.",
        f"DbdHost={controller}",
        f"DbdAddr={controller_ip}",
        f"DbdPort={DBD_PORT}",
        "SlurmUser=root",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        "StoragePort=3306",
        "StorageUser=slurm",
        f"StoragePass={password}",
        "StorageLoc=slurm_acct_db",
        f"LogFile={own_dir}/slurmdbd.log",
        f"PidFile={own_dir}/slurmdbd.pid",
    ]
    return "\n".join(lines) + "\n"


def _database_sql(password: str) -> str:
    return (
        "CREATE DATABASE IF NOT EXISTS slurm_acct_db;\n"
        f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}';\n"
        "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';\n"
    )


def render_gres_conf(node: SlurmNode) -> str:
    """gres.conf: empty here. slurmd 22.05 counts a GPU only through a device file (`File=/dev/nvidia<i>`),
    which the emulated hosts do not have (it drains a node declaring `Gres=gpu:8` with "gres/gpu count
    reported lower than configured (0 < 8)"), so each node offers its slots as CPUs instead."""
    return f"# {node.gpus} GPU slots per node, offered as CPUs: the emulated hosts have no /dev/nvidia*\n"


CGROUP_CONF = "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nCgroupAutomount=no\n"

# The controller's accounting, in the background (sshd is not held up): a database in the node's directory
# on first start, mariadbd on loopback (its socket in the munge directory, a short path), its user from $6
# (SQL), slurmdbd (it forks), and once slurmdbd answers, slurmctld. Log: $4/accounting.log.
_SOCK = "/run/munge/mariadb.sock"
_ACCOUNTING = (
    f'( {{ [ -d "$4/db/mysql" ] || {MARIADB_INSTALL_DB} --user=root --datadir="$4/db" --skip-test-db '
    "--auth-root-authentication-method=normal; } && "
    f'{{ {MARIADBD} --no-defaults --user=root --datadir="$4/db" --socket={_SOCK} --port=3306 '
    '--bind-address=127.0.0.1 --pid-file="$4/mariadb.pid" --skip-log-bin --innodb-buffer-pool-size=32M '
    '--log-error="$4/mariadb.err" & } && i=0 && '
    f"until mariadb-admin --no-defaults --socket={_SOCK} -uroot ping; do "
    '[ "$i" -lt 600 ] || exit 1; i=$((i + 1)); sleep 0.1; done && '
    f'mariadb --no-defaults --socket={_SOCK} -uroot <"$6" && {SLURMDBD} && i=0 && '
    "until sacctmgr -n show cluster; do "
    '[ "$i" -lt 600 ] || exit 1; i=$((i + 1)); sleep 0.1; done && '
    # slurmctld's first start needs the database (it reads the cluster's TRES from it), so it comes last
    f'{SLURMCTLD} ) >"$4/accounting.log" 2>&1 &'
)
# Runs inside the host's namespaces after its own mounts: Slurm's and munge's directories, then the daemons
# (they fork into the background), then the host's command. $1 etc dir, $2 munge dir, $3 key, $4 node dir,
# $5 "controller" or "compute", $6 the accounting database's SQL ("": no accounting).
_START = (
    'mount --bind "$1" /etc/slurm && mount --bind "$2" /run/munge && mount --bind "$4/spool" '
    f"{SPOOL} && "
    # `ip netns exec` mounts a fresh /sys, without cgroups; slurmd 22.05 will not start without its cgroup
    # plugin, though process tracking (pgid) and task binding (none) use none of it: a v1 freezer is enough.
    "mount -t tmpfs slurm-cgroup /sys/fs/cgroup && mkdir -p /sys/fs/cgroup/freezer && "
    "mount -t cgroup -o freezer slurm-freezer /sys/fs/cgroup/freezer && "
    f'{MUNGED} --force --key-file="$3" --socket=/run/munge/munge.socket.2 --pid-file="$2/munged.pid" '
    '--log-file="$4/munged.log" --seed-file="$4/munged.seed" && '
    f'if [ "$5" = controller ] && [ -n "$6" ]; then {_ACCOUNTING} '
    f'elif [ "$5" = controller ]; then {SLURMCTLD} || exit 1; fi && {SLURMD} && shift 6 && exec "$@"'
)


def prepare_node(state_dir: Path, node: SlurmNode, pod_id: str) -> tuple[list[str], list[str]]:
    """Write the cluster's and the node's files; return (mount points to create, the start command prefix).

    The prefix is `/bin/sh -c <start> sh <args...>`; the host's own command follows it."""
    state_root = state_dir / "hosts"
    cluster_dir = state_dir / "slurm" / node.cluster_id
    etc = cluster_dir / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    accounting = accounting_unavailable() is None
    (etc / "slurm.conf").write_text(render_slurm_conf(node, str(state_root), accounting))
    (etc / "gres.conf").write_text(render_gres_conf(node))
    (etc / "cgroup.conf").write_text(CGROUP_CONF)
    key = cluster_dir / "munge.key"
    if not key.exists():
        # One key shared by the cluster's nodes, as on RunPod; munged refuses a key others can read.
        key.write_bytes(secrets.token_bytes(128))
    key.chmod(0o400)
    own = state_root / pod_id / "slurm"
    munge = own / "munge"
    for path in (own / "spool", own / "ctld", munge):
        path.mkdir(parents=True, exist_ok=True)
    munge.chmod(0o755)
    role = "controller" if pod_id == node.controller else "compute"
    sql = ""
    if accounting and role == "controller":
        password = secrets.token_hex(16)  # the cluster's own, for its own loopback database
        conf = etc / "slurmdbd.conf"
        conf.write_text(render_slurmdbd_conf(node, str(own), password))
        conf.chmod(0o600)
        sql_file = own / "accounting.sql"
        sql_file.write_text(_database_sql(password))
        sql_file.chmod(0o600)
        sql = str(sql_file)
    command = ["/bin/sh", "-c", _START, "sh", str(etc), str(munge), str(key), str(own), role, sql]
    return ["/etc/slurm", "/run/munge", SPOOL], command


def forget_cluster(state_dir: Path, cluster_ids: Sequence[str]) -> None:
    """Drop the configuration of clusters no host uses any more."""
    root = state_dir / "slurm"
    if not root.is_dir():
        return
    for path in root.iterdir():
        if path.name not in cluster_ids:
            shutil.rmtree(path, ignore_errors=True)
