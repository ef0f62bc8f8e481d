#!/usr/bin/env bash
# start-node-0.sh: trainstack stack 'prod', node 0 of 8 (topology cluster, job prod).
# Rendered by components/render.py: do not edit, re-render. RunPod's injected cluster variables
# (MASTER_ADDR, NODE_RANK, ...) win over the RENDERED_* values; every TRAINSTACK_* value below
# can be overridden from the environment. No secret value is ever written here.
set -euo pipefail

# Identity of this node; RunPod's injected variables take precedence (see section 1 below).
RENDERED_NODE_RANK=0
RENDERED_NUM_NODES=8
RENDERED_GPUS_PER_NODE=8
RENDERED_MASTER_ADDR=10.65.0.10
RENDERED_MASTER_PORT=29500

# Settings; each may be overridden from the environment.
TRAINSTACK_STACK=${TRAINSTACK_STACK:-prod}
TRAINSTACK_JOB=${TRAINSTACK_JOB:-prod}
TRAINSTACK_DEVICE=${TRAINSTACK_DEVICE:-cuda}
TRAINSTACK_WORKDIR=${TRAINSTACK_WORKDIR:-/workspace/trainstack}
TRAINSTACK_SECRETS_DIR=${TRAINSTACK_SECRETS_DIR:-/run/trainstack/secrets}
TRAINSTACK_CHECKPOINT_DIR=${TRAINSTACK_CHECKPOINT_DIR:-/workspace/checkpoints/prod}
TRAINSTACK_CHECKPOINT_BUCKET=${TRAINSTACK_CHECKPOINT_BUCKET:-trainstack-prod-checkpoints}
TRAINSTACK_CHECKPOINT_PREFIX=${TRAINSTACK_CHECKPOINT_PREFIX:-trainstack/prod}
TRAINSTACK_CHECKPOINT_INTERVAL_S=${TRAINSTACK_CHECKPOINT_INTERVAL_S:-900}
TRAINSTACK_MAX_RUN_S=${TRAINSTACK_MAX_RUN_S:-86400}
TRAINSTACK_STOP_GRACE_S=${TRAINSTACK_STOP_GRACE_S:-300}
TRAINSTACK_TERM_UPLOAD_S=${TRAINSTACK_TERM_UPLOAD_S:-4}
TRAINSTACK_MAX_RESTARTS=${TRAINSTACK_MAX_RESTARTS:-3}
TRAINSTACK_MIN_FREE_DISK_GB=${TRAINSTACK_MIN_FREE_DISK_GB:-100}
TRAINSTACK_NCCL_MIN_BUSBW_GB_PER_S=${TRAINSTACK_NCCL_MIN_BUSBW_GB_PER_S:-100}
TRAINSTACK_GEMM_FLOOR_TFLOPS=${TRAINSTACK_GEMM_FLOOR_TFLOPS:-494.7}
TRAINSTACK_STRAGGLER_TOLERANCE_PCT=${TRAINSTACK_STRAGGLER_TOLERANCE_PCT:-10}
TRAINSTACK_BURN_IN_S=${TRAINSTACK_BURN_IN_S:-600}
TRAINSTACK_BURN_IN_CLOCK_DROP_PCT=${TRAINSTACK_BURN_IN_CLOCK_DROP_PCT:-20}
TRAINSTACK_BURN_IN_BUSBW_DROP_PCT=${TRAINSTACK_BURN_IN_BUSBW_DROP_PCT:-50}
TRAINSTACK_METRICS_PORT=${TRAINSTACK_METRICS_PORT:-9400}
TRAINSTACK_METRICS_INTERVAL_S=${TRAINSTACK_METRICS_INTERVAL_S:-5}
TRAINSTACK_SHARD_BY_NODE=${TRAINSTACK_SHARD_BY_NODE:-1}
TRAINSTACK_POD_INDEX=${TRAINSTACK_POD_INDEX:-0}
TRAINSTACK_RUN_ID=${TRAINSTACK_RUN_ID:-prod.pod000}
TRAINSTACK_HOSTFILE=${TRAINSTACK_HOSTFILE:-hostfile}
TRAINSTACK_AGGREGATOR_STATE=${TRAINSTACK_AGGREGATOR_STATE:-metrics/aggregator.json}
AWS_ENDPOINT_URL_S3=${AWS_ENDPOINT_URL_S3:-http://127.0.0.1:9000}
export AWS_ENDPOINT_URL_S3

# torchrun's script and arguments, run from TRAINSTACK_WORKDIR.
TRAIN_COMMAND=(train/train.py)
# Env vars read from the node's secrets file (delivery:SecretsFile); checked, never printed.
SECRET_NAMES=(HF_TOKEN WANDB_API_KEY AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY)
# Appended to the hosts file between marker lines, replacing any earlier block of this stack.
HOSTS_BLOCK=$(cat <<'EOF'
10.65.0.10 node-0
10.65.0.11 node-1
10.65.0.12 node-2
10.65.0.13 node-3
10.65.0.14 node-4
10.65.0.15 node-5
10.65.0.16 node-6
10.65.0.17 node-7
EOF
)

# ---------------------------------------------------------------------------------------------------
# Static body (components/templates/start-node.body.bash). Test hooks, all optional:
#   TRAINSTACK_DRY_RUN=1        bucket transfers are logged instead of run (no boto3, no network)
#   TRAINSTACK_HOSTS_FILE       hosts file to update (default /etc/hosts)
#   TRAINSTACK_SYS_NET_DIR      where network interfaces are listed (default /sys/class/net)
#   TRAINSTACK_SYS_IB_DIR       where RDMA devices are listed (default /sys/class/infiniband)
#   TRAINSTACK_FABRIC_IFNAME    skip detection and use this interface for NCCL/gloo
#   TRAINSTACK_PYTHON           interpreter for the node tools in train/node/ (default python3)
#   TRAINSTACK_GATE_REPLAY      FILE[:SNAPSHOT]: the health gate reads these recorded NVML readings
#   TRAINSTACK_CPU_PROCS_PER_NODE  processes per node when TRAINSTACK_DEVICE=cpu (default 1)
#   TRAINSTACK_AGENT_REPLAY_DIR  the metrics agent serves the GPU readings of DIR/<pod id>.json (re-read when
#                               it changes) instead of NVML: a CPU host's recorded GPUs, an injected XID
# ---------------------------------------------------------------------------------------------------

log() { printf '[trainstack %s node %s] %s\n' "$(date -u +%H:%M:%S)" "${NODE_RANK:-?}" "$*" >&2; }
# What the exit record (train/node/exitrecord.py) says: the phase the script was in and the FATAL reason.
TRAINSTACK_PHASE=identity
TRAINSTACK_FATAL=""
die() {
  log "FATAL: $*"
  TRAINSTACK_FATAL="$*"
  exit 1
}
is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
PYTHON=${TRAINSTACK_PYTHON:-python3}
# The node tools (GPU health gate, preflight, metrics agent, bucket transfer) live in train/node/ (delivered
# with train/); every one of them runs as a module from the workdir, never as Python embedded here.
node_py() { PYTHONPATH="$TRAINSTACK_WORKDIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m "train.node.$1" "${@:2}"; }

# --- 1. identity: RunPod injects these on Instant Cluster nodes; rendered values are the fallback ------
MASTER_ADDR=${MASTER_ADDR:-${PRIMARY_ADDR:-$RENDERED_MASTER_ADDR}}
MASTER_PORT=${MASTER_PORT:-${PRIMARY_PORT:-$RENDERED_MASTER_PORT}}
NODE_RANK=${NODE_RANK:-$RENDERED_NODE_RANK}
NUM_NODES=${NUM_NODES:-$RENDERED_NUM_NODES}
NPROC_PER_NODE=${NUM_TRAINERS:-$RENDERED_GPUS_PER_NODE}
for var in MASTER_PORT NODE_RANK NUM_NODES NPROC_PER_NODE; do
  is_uint "${!var}" || die "$var='${!var}' is not a whole number; fix or unset it"
done
((NODE_RANK < NUM_NODES)) || die "NODE_RANK=$NODE_RANK but NUM_NODES=$NUM_NODES; unset the stale one"
# RunPod's WORLD_SIZE counts GPUs across the cluster: a mismatch means this script is for another shape.
if [[ -n "${WORLD_SIZE:-}" && "$WORLD_SIZE" != "$((NUM_NODES * NPROC_PER_NODE))" ]]; then
  die "WORLD_SIZE=$WORLD_SIZE but $NUM_NODES nodes x $NPROC_PER_NODE GPUs; re-render for this cluster"
fi
# A CPU test cluster (no GPUs, gloo) runs TRAINSTACK_CPU_PROCS_PER_NODE processes per node, not one per GPU.
if [[ "$TRAINSTACK_DEVICE" == cpu ]]; then
  NPROC_PER_NODE=${TRAINSTACK_CPU_PROCS_PER_NODE:-1}
  if ! is_uint "$NPROC_PER_NODE" || ((NPROC_PER_NODE < 1)); then
    die "TRAINSTACK_CPU_PROCS_PER_NODE='$NPROC_PER_NODE' is not a positive whole number"
  fi
fi
export MASTER_ADDR MASTER_PORT NODE_RANK NUM_NODES

# --- 2. network: NCCL must use the cluster fabric; eth0 (172.x) is internet-only and times out --------
detect_fabric_ifname() {
  local dir=${TRAINSTACK_SYS_NET_DIR:-/sys/class/net} candidate
  if [[ -n "${TRAINSTACK_FABRIC_IFNAME:-}" ]]; then
    printf '%s\n' "$TRAINSTACK_FABRIC_IFNAME"
    return 0
  fi
  # RunPod documents ens1 (of ens1-ens8); older docs and images said eth1.
  for candidate in ens1 eth1; do
    if [[ -e "$dir/$candidate" ]]; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  return 1
}

setup_network() {
  local fabric
  if fabric=$(detect_fabric_ifname); then
    # Bootstrap/socket traffic of NCCL and of gloo (rendezvous, CPU collectives) stays on the fabric.
    export NCCL_SOCKET_IFNAME=$fabric GLOO_SOCKET_IFNAME=$fabric
    log "fabric interface: $fabric"
  elif ((NUM_NODES > 1)); then
    die "no fabric interface (ens1 or eth1) on a $NUM_NODES-node job; set TRAINSTACK_FABRIC_IFNAME"
  else
    log "single node and no fabric interface: NCCL stays on NVLink/shared memory"
  fi
  # Disable NCCL's RDMA transport only where no RDMA device exists: it would probe, then fall back to
  # sockets anyway, and saying so keeps the log honest. On the fabric it must stay enabled.
  if [[ -z "${NCCL_IB_DISABLE:-}" ]] && ! compgen -G "${TRAINSTACK_SYS_IB_DIR:-/sys/class/infiniband}/*" >/dev/null; then
    export NCCL_IB_DISABLE=1
  fi
  # WARN: INFO from dozens of ranks buries the line that matters; export NCCL_DEBUG=INFO to debug.
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  # A dead peer then fails the collective (and torchrun restarts the group) instead of hanging forever.
  export TORCH_NCCL_ASYNC_ERROR_HANDLING=${TORCH_NCCL_ASYNC_ERROR_HANDLING:-1}
}

# --- 3. hosts: rank names without DNS, appended idempotently between marker lines ---------------------
update_hosts() {
  local file=${TRAINSTACK_HOSTS_FILE:-/etc/hosts} kept=""
  local begin="# >>> trainstack $TRAINSTACK_STACK >>>" end="# <<< trainstack $TRAINSTACK_STACK <<<"
  if [[ -e "$file" ]]; then
    kept=$(awk -v b="$begin" -v e="$end" '$0 == b {skip = 1; next} $0 == e {skip = 0; next} !skip' "$file") ||
      die "cannot read $file"
  fi
  # Rewrite in place, never rename over it: /etc/hosts is bind-mounted into containers.
  {
    if [[ -n "$kept" ]]; then printf '%s\n' "$kept"; fi
    printf '%s\n' "$begin" "$HOSTS_BLOCK" "$end"
  } >"$file"
}

# --- 4. data shards: cluster nodes split the data by node rank; a pool pod's trial reads all of it ------
setup_shards() {
  if [[ "$TRAINSTACK_SHARD_BY_NODE" == 1 ]]; then
    export TRAINSTACK_SHARD_INDEX=$NODE_RANK TRAINSTACK_NUM_SHARDS=$NUM_NODES
  else
    export TRAINSTACK_SHARD_INDEX=0 TRAINSTACK_NUM_SHARDS=1
  fi
  export TRAINSTACK_POD_INDEX TRAINSTACK_JOB TRAINSTACK_DEVICE TRAINSTACK_CHECKPOINT_DIR
  export TRAINSTACK_STOP_FILE="$TRAINSTACK_CHECKPOINT_DIR/.trainstack-stop"
  # Node-scoped files: the workdir may be a volume that every node of the cluster mounts.
  NODE_ID=${RUNPOD_POD_ID:-$(hostname)}
  # The gate between this node's preflight and its training in the one torchrun launch (train/node/launch.py).
  GATE_DIR="$TRAINSTACK_WORKDIR/.run/gate.$NODE_ID"
  METRICS_DIR="$TRAINSTACK_WORKDIR/metrics"
  # The training-progress contract (train/node/progress.py): the job appends one JSON line per logged step.
  export TRAINSTACK_PROGRESS_FILE=${TRAINSTACK_PROGRESS_FILE:-$METRICS_DIR/progress-node-$TRAINSTACK_POD_INDEX.$NODE_ID.jsonl}
  # Its busy marker (a save, an evaluation: never a hang) and the pace the node's watchdog learned, which
  # sets the process group's timeout of each (re)start (train/node/hang.py, watchdog.py, launch.py).
  export TRAINSTACK_BUSY_FILE=${TRAINSTACK_BUSY_FILE:-${TRAINSTACK_PROGRESS_FILE%.jsonl}.busy}
  export TRAINSTACK_PACE_FILE="$TRAINSTACK_WORKDIR/.run/pace.$NODE_ID.json"
  # The machine-readable health record, beside this script's log (docs/NODE-HEALTH.md).
  HEALTH_RECORD="$TRAINSTACK_WORKDIR/logs/health-node-$TRAINSTACK_POD_INDEX.$NODE_ID.json"
  # What a failed node asks for: an Instant Cluster node cannot be swapped alone, a pool pod can.
  REPLACE=pod
  if [[ "$TRAINSTACK_SHARD_BY_NODE" == 1 ]]; then REPLACE=cluster; fi
}

# The node's secrets arrive over SSH in a file only root reads (delivery:SecretsFile; docs/OPERATING.md,
# "Secrets on the node"): sourced here, its values exported for the run and never printed. A value already
# in the environment (a stack that starts its nodes its own way) stands when there is no file.
load_secrets() {
  local file="$TRAINSTACK_SECRETS_DIR/$NODE_ID.env"
  ((${#SECRET_NAMES[@]})) || return 0
  if [[ -f $file ]]; then
    # shellcheck disable=SC1090  # written by delivery:SecretsFile: `export NAME='value'` lines
    source "$file" || die "the secrets file $file does not read; run scripts/up to deliver it again"
  fi
  local name
  for name in "${SECRET_NAMES[@]}"; do
    # Values are never printed; a `{{ RUNPOD_SECRET_... }}` left by an older trainstack fills nothing.
    if [[ -z "${!name:-}" || "${!name}" == "{{ RUNPOD_SECRET_"* ]]; then
      die "secret $name did not reach this node (no $file, or no $name in it); set it (pulumi config set --secret trainstack:secrets.$name) and run scripts/up"
    fi
    export "${name?}"
  done
}

# --- 5. preflight -----------------------------------------------------------------------------------
preflight_gpus() {
  local out status=0
  rm -f "$HEALTH_RECORD"
  # The GPU health gate (train/node/healthgate.py): NVML checks of every GPU; a CPU test cluster skips it.
  # The bucket: a host that failed on this stack before is refused, one failing now recorded (hostid.py).
  out=$(TRAINSTACK_CHECKPOINT_BUCKET="$TRAINSTACK_CHECKPOINT_BUCKET" \
    node_py healthgate --record "$HEALTH_RECORD" --expected-gpus "$NPROC_PER_NODE" --replace "$REPLACE" \
    --device "$TRAINSTACK_DEVICE" 2>&1) || status=$?
  if ((status != 0)); then
    printf '%s\n' "$out" | sed '$d' >&2
    die "health gate: $(tail -n 1 <<<"$out") (record: $HEALTH_RECORD)"
  fi
  log "$out"
}

preflight_disk() {
  local avail_kb
  mkdir -p "$TRAINSTACK_CHECKPOINT_DIR"
  avail_kb=$(df -Pk "$TRAINSTACK_CHECKPOINT_DIR" | awk 'NR == 2 {print $4}')
  is_uint "$avail_kb" || die "cannot read free space of $TRAINSTACK_CHECKPOINT_DIR"
  if ((avail_kb < TRAINSTACK_MIN_FREE_DISK_GB * 1024 * 1024)); then
    die "$TRAINSTACK_CHECKPOINT_DIR has $((avail_kb / 1024 / 1024)) GB free, needs $TRAINSTACK_MIN_FREE_DISK_GB; grow the disk"
  fi
  log "free disk: $((avail_kb / 1024 / 1024)) GB at $TRAINSTACK_CHECKPOINT_DIR (floor $TRAINSTACK_MIN_FREE_DISK_GB GB)"
}

# Sets RDZV_ARGS for a torchrun over this job's nodes on rendezvous port $1 with id $2.
set_rdzv_args() {
  local is_host=false
  if ((NODE_RANK == 0)); then is_host=true; fi
  RDZV_ARGS=(--nnodes="$NUM_NODES" --nproc-per-node="$NPROC_PER_NODE" --node-rank="$NODE_RANK"
    --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$1" --rdzv-id="$2" --rdzv-conf="is_host=$is_host")
  # Publish this node's fabric address, not its hostname: peers may not resolve a pod's hostname.
  if [[ -n "${NODE_ADDR:-}" ]]; then RDZV_ARGS+=(--local-addr="$NODE_ADDR"); fi
}

# One torchrun launch per boot (train/node/launch.py): each worker runs the preflight first (straggler GEMM on
# every GPU at once, the NCCL all-reduce sweep against the floor, then the burn-in when training.burn_in_min
# is set), then waits at the node's gate until this script has fetched the checkpoint (`go`), then trains.
# The preflight's figures go into the health record; a failure is one `failed` line in the gate folder.
# Sets TRAIN_PID (torchrun) and returns once every rank passed; dies on a refusal.
launch_torchrun() {
  local status=0 busbw fail floor=$TRAINSTACK_NCCL_MIN_BUSBW_GB_PER_S burn_in_s=$TRAINSTACK_BURN_IN_S
  # Burn-in is for new hardware: a node that passed it in this run (the same pod, restarted) skips it.
  local burned="$TRAINSTACK_WORKDIR/.run/burned-in.$NODE_ID"
  if [[ $burn_in_s != 0 && -f $burned ]]; then
    log "burn-in skipped: this node passed it earlier in this run ($burned)"
    burn_in_s=0
  fi
  # A floor that is not a plain number ("nan", "", "fast") would compare as 0 and pass any fabric.
  [[ "$floor" =~ ^[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]] ||
    die "TRAINSTACK_NCCL_MIN_BUSBW_GB_PER_S='$floor' is not a number of GB/s; set a floor such as 300 (0 only reports)"
  rm -rf "$GATE_DIR"
  mkdir -p "$GATE_DIR"
  set_rdzv_args "$MASTER_PORT" "$TRAINSTACK_JOB"
  log "torchrun: $NUM_NODES node(s) x $NPROC_PER_NODE, rank $NODE_RANK, shard $TRAINSTACK_SHARD_INDEX/$TRAINSTACK_NUM_SHARDS"
  # TORCH_DISABLE_SHARE_RDZV_TCP_STORE: a restart of the worker group in place (the node's watchdog, a
  # crashed rank) gets a fresh store; the shared one keeps the old group's keys, and the restarted ranks read
  # them (gloo dialled the dead ranks' addresses; seen with torch 2.15 on two CPU ranks).
  PYTHONPATH="$TRAINSTACK_WORKDIR${PYTHONPATH:+:$PYTHONPATH}" CUDA_DEVICE_ORDER=PCI_BUS_ID TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 \
    torchrun "${RDZV_ARGS[@]}" --max-restarts="$TRAINSTACK_MAX_RESTARTS" -m train.node.launch --gate "$GATE_DIR" \
    --record "$HEALTH_RECORD" --replace "$REPLACE" --gemm-floor-tflops "$TRAINSTACK_GEMM_FLOOR_TFLOPS" \
    --straggler-tolerance-pct "$TRAINSTACK_STRAGGLER_TOLERANCE_PCT" \
    --busbw-floor-gb-per-s "$floor" --burn-in-s "$burn_in_s" \
    --burn-in-clock-drop-pct "$TRAINSTACK_BURN_IN_CLOCK_DROP_PCT" \
    --burn-in-busbw-drop-pct "$TRAINSTACK_BURN_IN_BUSBW_DROP_PCT" -- "${TRAIN_COMMAND[@]}" &
  TRAIN_PID=$!
  # The verdict: a file in the gate folder, or torchrun gone without one (a bounded wait: the preflight's
  # collectives time out, and torchrun ends when its workers do).
  while [[ ! -e $GATE_DIR/passed && ! -e $GATE_DIR/failed ]] && kill -0 "$TRAIN_PID" 2>/dev/null; do
    sleep 0.2
  done
  if [[ -f $GATE_DIR/preflight.out ]]; then
    while read -r tag fields; do
      case $tag in
        TRAINSTACK_GEMM) log "straggler test: $fields" ;;
        TRAINSTACK_ALLREDUCE) log "all-reduce $fields" ;;
        TRAINSTACK_BURNIN) log "burn-in: $fields" ;;
      esac
    done <"$GATE_DIR/preflight.out"
  fi
  if [[ ! -e $GATE_DIR/passed ]]; then
    if [[ -e $GATE_DIR/failed ]]; then
      fail=$(head -n 1 "$GATE_DIR/failed")
      stop_training wait
      die "preflight: $fail (record: $HEALTH_RECORD)"
    fi
    wait "$TRAIN_PID" || status=$?
    TRAIN_PID=""
    die "preflight failed (exit $status); see above"
  fi
  if [[ $burn_in_s != 0 ]]; then mkdir -p "$(dirname "$burned")" && : >"$burned"; fi
  busbw=$(sed -n 's/^TRAINSTACK_BUSBW_GB_PER_S=//p' "$GATE_DIR/preflight.out" 2>/dev/null | tail -n 1)
  [[ "$busbw" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "all-reduce preflight printed no usable bandwidth ('$busbw')"
  if ((NUM_NODES * NPROC_PER_NODE < 2)); then
    # One rank moves no data between GPUs: bus bandwidth is 0 by definition, so no floor applies.
    log "one rank: all-reduce ran (see algbw above); the bus-bandwidth floor applies to 2 or more ranks"
  else
    log "all-reduce bus bandwidth: $busbw GB/s at the largest size (floor $floor GB/s)"
  fi
}

# torchrun, if it still runs: TERM (torchrun passes it to its workers and ends them). `stop_training wait`
# also waits for it (a preflight refusal: its workers are in no collective any more, they end at once); the
# EXIT trap does not (a SIGTERM's 5 s notice never waits for training).
stop_training() {
  if [[ -n "$TRAIN_PID" ]]; then
    kill -TERM "$TRAIN_PID" 2>/dev/null || true
    if [[ ${1:-} == wait ]]; then wait "$TRAIN_PID" 2>/dev/null || true; fi
    TRAIN_PID=""
  fi
}

# --- 6. checkpoints in the bucket ---------------------------------------------------------------------
# bucket resume|sync|newest [seconds]: fetch the newest checkpoint / upload missing ones / upload only
# the newest, giving up after the given seconds (0, the default, means no limit).
# The run's identity and bucket, for the node tools and for training (whose ranks the diagnostics read them
# from): exported once, before the one torchrun launch.
export_run() {
  export TRAINSTACK_CHECKPOINT_BUCKET TRAINSTACK_CHECKPOINT_PREFIX TRAINSTACK_RUN_ID TRAINSTACK_STARTED_AT
}
bucket() {
  if [[ -z "$TRAINSTACK_CHECKPOINT_BUCKET" ]]; then
    return 0
  fi
  if [[ "${TRAINSTACK_DRY_RUN:-0}" == 1 ]]; then
    log "dry run: bucket $1 s3://$TRAINSTACK_CHECKPOINT_BUCKET/$TRAINSTACK_CHECKPOINT_PREFIX/ <-> $TRAINSTACK_CHECKPOINT_DIR"
    return 0
  fi
  if [[ $1 == finish ]]; then
    # train/node/transfer.py finish STATUS: waits for every node's sync mark on the job's rank 0.
    env PYTHONPATH="$TRAINSTACK_WORKDIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m train.node.transfer finish "$2"
    return
  fi
  # train/node/transfer.py; `timeout` needs a command, not a shell function, hence env.
  timeout "${2:-0}" env PYTHONPATH="$TRAINSTACK_WORKDIR${PYTHONPATH:+:$PYTHONPATH}" \
    "$PYTHON" -m train.node.transfer "$1"
}

# Every node uploads the checkpoints of its own directory: global rank 0 writes them, and torchrun's c10d
# rendezvous does not keep global rank 0 on NODE_RANK 0 (seen on 2 x H200: docs/GPU-VALIDATION.md). A node
# without checkpoints uploads nothing; one shared volume seen by every node costs only repeated listings.

# --- 7. background jobs: checkpoint sync timer and max_run_hours watchdog ----------------------------
SLEEP_PID=""
TRAIN_PID=""
BACKGROUND_PIDS=()

# A TERM to the background subshell kills its sleep too, so no stray `sleep` outlives the script.
# shellcheck disable=SC2317  # run by trap
on_background_term() {
  if [[ -n "$SLEEP_PID" ]]; then kill "$SLEEP_PID" 2>/dev/null || true; fi
  exit 0
}
nap() {
  sleep "$1" &
  SLEEP_PID=$!
  wait "$SLEEP_PID"
}

# The checkpoints in the node's directory, one name a line: what a sync would look at.
checkpoint_names() {
  local f
  for f in "$TRAINSTACK_CHECKPOINT_DIR"/step-*.pt; do
    if [[ -e "$f" ]]; then printf '%s\n' "${f##*/}"; fi
  done
}

# A sync only when the directory holds a checkpoint name the last sync that succeeded did not see: an
# unchanged directory has nothing the bucket lacks (sync uploads what it lacks), and each sync is a Python
# process with boto3 and a bucket listing. The final sync after training always runs.
sync_timer() {
  trap on_background_term TERM
  local synced=$'\n(none yet)' names
  while nap "$TRAINSTACK_CHECKPOINT_INTERVAL_S"; do
    names=$(checkpoint_names)
    if [[ "$names" == "$synced" ]]; then continue; fi
    if bucket sync; then
      synced=$names
    else
      log "checkpoint sync failed; retrying in ${TRAINSTACK_CHECKPOINT_INTERVAL_S}s"
    fi
  done
}

watchdog() {
  trap on_background_term TERM
  nap "$TRAINSTACK_MAX_RUN_S"
  log "max run time reached: asking training to checkpoint and stop"
  touch "$TRAINSTACK_STOP_FILE"
  nap "$TRAINSTACK_STOP_GRACE_S"
  log "training did not stop within ${TRAINSTACK_STOP_GRACE_S}s: sending SIGTERM"
  kill -TERM "$1" 2>/dev/null || true
}

# The metrics agent (train/node/agent.py) beside training: loopback and the fabric address only, never
# the public interface. TRAINSTACK_METRICS_PORT=0 turns it off.
start_agent() {
  is_uint "$TRAINSTACK_METRICS_PORT" ||
    die "TRAINSTACK_METRICS_PORT='$TRAINSTACK_METRICS_PORT' is not a port; set training.metrics_port (0 = no agent)"
  if ((TRAINSTACK_METRICS_PORT == 0)); then
    log "metrics agent off (training.metrics_port is 0)"
    return 0
  fi
  local args=(--port "$TRAINSTACK_METRICS_PORT" --bind 127.0.0.1 --interval-s "$TRAINSTACK_METRICS_INTERVAL_S"
    --checkpoint-dir "$TRAINSTACK_CHECKPOINT_DIR" --progress-file "$TRAINSTACK_PROGRESS_FILE"
    --health-record "$HEALTH_RECORD"
    --jsonl "$METRICS_DIR/agent-node-$TRAINSTACK_POD_INDEX.$NODE_ID.jsonl" --node "$NODE_ID"
    --rank "$NODE_RANK" --device "$TRAINSTACK_DEVICE"
    --watchdog "$TRAINSTACK_WORKDIR/.run" --busy-file "$TRAINSTACK_BUSY_FILE")
  if [[ -n "${NCCL_SOCKET_IFNAME:-}" ]]; then args+=(--interface "$NCCL_SOCKET_IFNAME"); fi
  if [[ -n "${TRAINSTACK_AGENT_REPLAY_DIR:-}" ]]; then args+=(--replay "$TRAINSTACK_AGENT_REPLAY_DIR/$NODE_ID.json"); fi
  # The aggregator scrapes the hostfile's addresses: this node's own line too (a pool pod's hostfile,
  # hostfile-pod-<index>, has its own line alone, and its node rank is 0: each trial is its own job).
  local own
  own=$(awk -v n=$((NODE_RANK + 1)) 'NR == n {print $1}' "$TRAINSTACK_WORKDIR/$TRAINSTACK_HOSTFILE" 2>/dev/null) || own=""
  if [[ -n "$own" ]]; then args+=(--own-address "$own"); fi
  # exec: $! is then the agent itself, so stop_background's TERM reaches it (not a subshell around it).
  (exec env PYTHONPATH="$TRAINSTACK_WORKDIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m train.node.agent "${args[@]}") &
  BACKGROUND_PIDS+=("$!")
}

# The aggregator (train/monitor/aggregator.py) on each job's first node (a cluster's node 0, every pool
# pod), beside training: it scrapes the job's agents over the private network, applies alerts.json
# (trainstack:alerts) and posts to the team's webhook, $ALERT_WEBHOOK_URL (a RunPod secret; without it alerts stay in its state file). docs/MONITORING.md.
start_aggregator() {
  if ((NODE_RANK != 0 || TRAINSTACK_METRICS_PORT == 0)); then return 0; fi
  if [[ ! -f "$TRAINSTACK_WORKDIR/alerts.json" ]]; then
    log "alert aggregator off (trainstack:alerts.enabled is false)"
    return 0
  fi
  local args=(--rules "$TRAINSTACK_WORKDIR/alerts.json" --hostfile "$TRAINSTACK_WORKDIR/$TRAINSTACK_HOSTFILE"
    --agent-port "$TRAINSTACK_METRICS_PORT" --stack "$TRAINSTACK_STACK"
    --state "$TRAINSTACK_WORKDIR/$TRAINSTACK_AGGREGATOR_STATE")
  (exec env PYTHONPATH="$TRAINSTACK_WORKDIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m train.monitor.aggregator \
    "${args[@]}" 2>>"$METRICS_DIR/aggregator.log") &
  BACKGROUND_PIDS+=("$!")
}

stop_background() {
  local pid
  for pid in "${BACKGROUND_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  BACKGROUND_PIDS=()
}

# A spot pod gets SIGTERM and is killed 5 s later: stop training, upload only the newest checkpoint
# (written earlier by the step timer), within a hard time limit.
# shellcheck disable=SC2317  # run by trap
on_term() {
  trap - TERM INT
  log "SIGTERM: stopping training, uploading the newest checkpoint"
  if [[ -n "$TRAIN_PID" ]]; then kill -TERM "$TRAIN_PID" 2>/dev/null || true; fi
  stop_background
  bucket newest "$TRAINSTACK_TERM_UPLOAD_S" ||
    log "newest checkpoint not uploaded in ${TRAINSTACK_TERM_UPLOAD_S}s; the last timer sync stands"
  exit 143
}

# --- 7b. a hang says where it hangs (train/node/diagnostics.py) ----------------------------
# PyTorch's NCCL flight recorder: every rank keeps its last collectives in a ring buffer and, when the
# watchdog times a collective out, dumps it to $TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank> on the workdir's
# volume, where scripts/supervise's diagnostics collect it with every rank's py-spy stack. Then the
# heartbeat: every 30 s, each training rank's process state on this node ($TRAINSTACK_HEARTBEAT_DIR). The
# recorder's variables are exported before the launch (export_flight_recorder), the heartbeat once training starts.
export_flight_recorder() {
  export TORCH_NCCL_TRACE_BUFFER_SIZE=${TORCH_NCCL_TRACE_BUFFER_SIZE:-2000}
  export TORCH_NCCL_DUMP_ON_TIMEOUT=${TORCH_NCCL_DUMP_ON_TIMEOUT:-1}
  local trace="$TRAINSTACK_WORKDIR/diagnostics/nccl-trace-$NODE_ID-rank"
  export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=${TORCH_NCCL_DEBUG_INFO_TEMP_FILE:-$trace}
  export TRAINSTACK_HEARTBEAT_DIR=${TRAINSTACK_HEARTBEAT_DIR:-$TRAINSTACK_WORKDIR/.run/heartbeat}
  mkdir -p "$(dirname "$TORCH_NCCL_DEBUG_INFO_TEMP_FILE")"
}
start_heartbeat() {
  (exec env PYTHONPATH="$TRAINSTACK_WORKDIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m train.node.diagnostics \
    heartbeat --every-s 30 2>>"$METRICS_DIR/heartbeat.log") &
  BACKGROUND_PIDS+=("$!")
}

# A failed job's cause from this script's own log (nccl_timeout | oom | config | empty), for the run state:
# scripts/supervise retries an NCCL timeout and never an out-of-memory or config failure.
failure_cause() {
  local log
  log=$(readlink "/proc/$$/fd/1" 2>/dev/null) || return 0
  [[ -f $log ]] || return 0
  env PYTHONPATH="$TRAINSTACK_WORKDIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m train.node.diagnostics classify "$log" ||
    true
}

# Once, whatever the way out (die, a failed command under set -e, SIGTERM, the end): the node's exit record,
# on the node (read over SSH by scripts/watch and scripts/supervise) and, for a failed one, in the bucket.
# The normal end writes it before its last log line, so that "start script ends with status" still means
# that this node's last write to the bucket is done. Only the script's own shell runs on_exit: bash resets
# an EXIT trap in subshells.
EXIT_RECORD_WRITTEN=0
write_exit_record() {
  local log
  ((EXIT_RECORD_WRITTEN == 0)) || return 0
  EXIT_RECORD_WRITTEN=1
  log=$(readlink "/proc/$$/fd/1" 2>/dev/null) || log=""
  [[ -f $log ]] || log=""
  # The run's identity and bucket are exported only just before the launch (export_run): a script that
  # failed before that (secrets, health gate, disk: a run that never started) passes them here, or its
  # record never reached the bucket.
  TRAINSTACK_SECRET_NAMES="${SECRET_NAMES[*]}" PYTHONPATH="$TRAINSTACK_WORKDIR${PYTHONPATH:+:$PYTHONPATH}" \
    TRAINSTACK_CHECKPOINT_BUCKET="${TRAINSTACK_CHECKPOINT_BUCKET:-}" TRAINSTACK_RUN_ID="${TRAINSTACK_RUN_ID:-}" \
    TRAINSTACK_JOB="${TRAINSTACK_JOB:-}" TRAINSTACK_POD_INDEX="${TRAINSTACK_POD_INDEX:-0}" \
    NODE_RANK="${NODE_RANK:-0}" TRAINSTACK_STOP_FILE="${TRAINSTACK_STOP_FILE:-}" \
    "$PYTHON" -m train.node.exitrecord --exit-status "$1" --phase "$TRAINSTACK_PHASE" \
    --reason "$TRAINSTACK_FATAL" ${log:+--log "$log"} --metrics-dir "$TRAINSTACK_WORKDIR/metrics" ||
    log "exit record not written (status $1)"
}

# shellcheck disable=SC2317  # run by trap
on_exit() {
  local status=$?
  trap - EXIT
  stop_training # a death after the launch (a refused preflight, a failed resume) leaves no worker behind
  write_exit_record "$status"
  exit "$status"
}

# --- 8. main ----------------------------------------------------------------------------------------
main() {
  local status=0
  TRAINSTACK_STARTED_AT=$(date +%s)
  trap on_exit EXIT
  trap on_term TERM INT
  setup_network
  update_hosts
  setup_shards
  TRAINSTACK_PHASE=secrets
  load_secrets
  TRAINSTACK_PHASE=health_gate
  preflight_gpus
  TRAINSTACK_PHASE=disk
  preflight_disk
  rm -f "$TRAINSTACK_STOP_FILE"
  # What the training processes inherit is set before the one launch: run identity, flight recorder, dirs.
  export_run
  export_flight_recorder
  mkdir -p "$METRICS_DIR" "$(dirname "$TRAINSTACK_PROGRESS_FILE")"
  cd "$TRAINSTACK_WORKDIR"
  TRAINSTACK_PHASE=preflight
  launch_torchrun
  TRAINSTACK_PHASE=resume
  bucket resume
  TRAINSTACK_PHASE=training
  start_agent
  start_aggregator
  start_heartbeat
  : >"$GATE_DIR/go" # the workers leave the gate and train
  sync_timer &
  BACKGROUND_PIDS+=("$!")
  watchdog "$TRAIN_PID" &
  BACKGROUND_PIDS+=("$!")
  wait "$TRAIN_PID" || status=$?
  TRAIN_PID=""
  stop_background
  TRAINSTACK_PHASE=sync
  bucket sync || status=1
  if [[ -e "$TRAINSTACK_STOP_FILE" ]]; then log "stopped at the max run time"; fi
  log "training exited with status $status"
  if ((status != 0)); then
    TRAINSTACK_FAILURE=$(failure_cause)
    export TRAINSTACK_FAILURE
    log "failure cause: ${TRAINSTACK_FAILURE:-not recognised}"
  fi
  # The run's own record (run/<run id>/state.json, written by the job's rank 0 once every node has marked
  # its final sync): what scripts/supervise verifies before it releases the compute.
  TRAINSTACK_PHASE=finish
  bucket finish "$status" || log "run state not written to the bucket; scripts/supervise will not call it finished"
  write_exit_record "$status"
  log "start script ends with status $status" # the last write to the bucket is done
  exit "$status"
}

main "$@"
