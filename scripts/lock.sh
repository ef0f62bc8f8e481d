# shellcheck shell=bash
# Sourced by scripts/up, scripts/recover and scripts/down: `stack_lock STACK` prints the path of the per-stack
# lock an up holds while it runs. One lock per stack and state backend (the default backend is
# scripts/env.sh's): the demo's `dev` and a `dev` kept in another backend (a test's throwaway one, a second
# checkout's state) are different stacks, and an up of one never waits on, or is refused by, the other.
stack_lock() {
  local root key
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  key=$(printf '%s' "${PULUMI_BACKEND_URL:-file://$root/.state/pulumi}" | sha256sum | cut -c1-12)
  printf '%s\n' "$root/.state/locks/$key/$1.lock"
}
