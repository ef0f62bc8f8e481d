# shellcheck shell=bash
# Sourced by every script that takes a stack name: `require_stack_name PROG STACK...` returns when each STACK
# is a valid stack name and otherwise exits 2 with a line per bad name. The rule is stated once, in
# common/stackname.py (standard library only, so the system python3 serves before scripts/bootstrap has run);
# call it before any path is built from the name (.state/local/<stack>, stacks/Pulumi.<stack>.yaml, locks).
require_stack_name() {
  local root python
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  python=$root/.venv/bin/python
  [[ -x $python ]] || python=python3
  PYTHONPATH="$root" "$python" -m common.stackname "$@" || exit 2
}
