#!/usr/bin/env bash
# The watch loop on a real GPU: the metrics agent on real NVML, train/train.py on the GPU, and
# the aggregator over them posting to a local Slack-compatible receiver; training is stopped (SIGSTOP) to
# force the stall alert, then resumed. Usage on the GPU machine, from the repo root:
#   bash bench/gpu/watch-run.sh OUT_DIR
set -uo pipefail
# Copied alone to the GPU machine (bench/gpu_validate.py), so no help.sh beside it: the same check inline.
case ${1:-} in -h | --help) sed -n '2,/^[^#]/{/^#/!d;/^# shellcheck/d;s/^# \{0,1\}//;p}' "$0" && exit 0 ;; esac
out=${1:?usage: bench/gpu/watch-run.sh OUT_DIR}
mkdir -p "$out"
work=$(mktemp -d)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
export TRAINSTACK_PROGRESS_FILE=$work/progress.jsonl TRAINSTACK_CHECKPOINT_DIR=$work/ckpt TRAINSTACK_DEVICE=${DEVICE:-cuda}
export TRAINSTACK_STEPS=2000000 TRAINSTACK_CHECKPOINT_EVERY=100000 TRAINSTACK_LOG_EVERY=200
pids=()
cleanup() { kill -CONT "${pids[@]}" 2>/dev/null; kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT
# The team's chat: every POST body, one JSON line each.
python3 - "$out/webhook.jsonl" <<'PY' &
import http.server, sys
path = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open(path, "ab") as f:
            f.write(body + b"\n")
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", 18080), H).serve_forever()
PY
pids+=($!)
python3 -m train.node.agent --port 9400 --bind 127.0.0.1 --interval-s 1 --checkpoint-dir "$work/ckpt" \
  --progress-file "$TRAINSTACK_PROGRESS_FILE" --device "$TRAINSTACK_DEVICE" --node gpu-node --rank 0 2>"$out/agent.log" &
pids+=($!)
torchrun --standalone --nproc-per-node 1 train/train.py >"$out/train.log" 2>&1 &
train=$!
pids+=("$train")
python3 - "$work/alerts.json" <<'PY'
import sys
from train.monitor.rules import AlertRules
rules = AlertRules(interval_s=2, stalled_after_s=10, startup_grace_s=120, util_low_for_s=3600,
                   memory_idle_for_s=3600, digest_every_s=20, gpu_memory_bytes=141e9)
open(sys.argv[1], "w").write(rules.to_json())
PY
echo "127.0.0.1 slots=1" >"$work/hostfile"
ALERT_WEBHOOK_URL=http://127.0.0.1:18080/services/T0/B0/secret python3 -m train.monitor.aggregator \
  --rules "$work/alerts.json" --hostfile "$work/hostfile" --agent-port 9400 --stack gpu \
  --state "$out/aggregator.json" 2>"$out/aggregator.log" &
pids+=($!)
said() { grep -q "$1" "$out/webhook.jsonl" 2>/dev/null; }
wait_for() { for _ in $(seq 1 "$2"); do if said "$1"; then return 0; fi; sleep 1; done; echo "timeout: $1"; return 1; }
for _ in $(seq 1 90); do [[ -s $TRAINSTACK_PROGRESS_FILE ]] && break; sleep 1; done
sleep 25  # a digest of the golden metrics while training runs
curl -s http://127.0.0.1:9400/metrics >"$out/scrape-training.txt"
echo "$(date -u +%T) SIGSTOP training" >>"$out/events.txt"
kill -STOP "$train"; pkill -STOP -f train/train.py
wait_for training_stalled 40
echo "$(date -u +%T) SIGCONT training" >>"$out/events.txt"
kill -CONT "$train"; pkill -CONT -f train/train.py
wait_for "resolved training_stalled" 30
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader >"$out/machine.txt"
echo "done" >>"$out/events.txt"
