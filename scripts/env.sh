# shellcheck shell=bash
# Source this file (`. scripts/env.sh`) to use the Pulumi CLI that scripts/bootstrap built, offline: the
# settings of common/pulumi.py's `environment`, the one place they are written (no update check, no automatic
# plugin downloads, a local file backend unless PULUMI_BACKEND_URL says otherwise, and a passphrase only for
# that local demo backend).
_ts_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The venv has the repo on its path (its editable install), so nothing is needed before this.
eval "$("$_ts_root/.venv/bin/python" -m common.pulumi)"
unset _ts_root
