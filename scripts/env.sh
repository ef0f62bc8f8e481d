# shellcheck shell=bash
# Source this file (`. scripts/env.sh`) to use the Pulumi CLI that scripts/bootstrap built, offline.
# It never downloads anything: no update check, no automatic plugin downloads, a local file backend unless
# PULUMI_BACKEND_URL says otherwise, and a passphrase only for that local demo backend.

_ts_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_ts_cache=${TRAINSTACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainstack}

export TRAINSTACK_ROOT="$_ts_root"
export PATH="$_ts_cache/bin:$_ts_root/.venv/bin:$PATH"
export PULUMI_HOME=${PULUMI_HOME:-$_ts_cache/pulumi-home}
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_CREDENTIAL_STORE=plaintext
export PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK=true
# Python dynamic providers run from this venv (the provider plugin script reads this), and must be able to
# import providers/ by module path whatever directory Pulumi starts them in.
export PULUMI_RUNTIME_VIRTUALENV="$_ts_root/.venv"
export PYTHONPATH="$_ts_root${PYTHONPATH:+:$PYTHONPATH}"
# Resource operations are waits on RunPod, not CPU work: let the engine run up to 64 at once (its default is
# 4 x cores, 8 on a 2-core machine) — as many as the dynamic-provider host serves (tools/pulumi/dynhost).
# The client's token bucket keeps the request rate under RunPod's quota however many run.
export PULUMI_PARALLEL=${PULUMI_PARALLEL:-64}

if [[ -z ${PULUMI_BACKEND_URL:-} ]]; then
  mkdir -p "$_ts_root/.state/pulumi"
  export PULUMI_BACKEND_URL="file://$_ts_root/.state/pulumi"
fi
# A fixed passphrase is fine for local demo stacks whose secrets are local test values, and only there:
# with any other backend, set PULUMI_CONFIG_PASSPHRASE (or a KMS secrets provider) yourself.
if [[ $PULUMI_BACKEND_URL == "file://$_ts_root/.state/pulumi" && -z ${PULUMI_CONFIG_PASSPHRASE+x} ]]; then
  export PULUMI_CONFIG_PASSPHRASE=trainstack-local-demo
fi
unset _ts_root _ts_cache
