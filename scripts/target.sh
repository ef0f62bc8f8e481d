#!/usr/bin/env bash
# Sourced by scripts/up, scripts/recover and scripts/preview-report (never run): which RunPod they target.
#
# The target URL decides, never the mere presence of an API key: `eval "$(scripts/local-runpod start)"`
# exports RUNPOD_API_KEY too, and a loopback RunPod is the local one whatever key it was given.
#   TRAINSTACK_LOCAL=1                          local (forces it)
#   RUNPOD_API_URL on 127.0.0.0/8, localhost or [::1]   local
#   RUNPOD_API_URL anywhere else                real
#   no RUNPOD_API_URL: RUNPOD_API_KEY set       real (https://api.runpod.io); unset: local (started here)
# Local runs work from .state/local/<stack>/, so tracked stack files never receive local salts or secrets;
# real runs work from the repo, whose stacks/Pulumi.<stack>.yaml the team commits.

trainstack_targets_local() {
  [[ ${TRAINSTACK_LOCAL:-0} == 1 ]] && return 0
  local url=${RUNPOD_API_URL:-}
  if [[ -z $url ]]; then
    [[ -z ${RUNPOD_API_KEY:-} ]]
    return
  fi
  [[ $url =~ ^[A-Za-z][A-Za-z0-9+.-]*://(localhost|127(\.[0-9]{1,3}){3}|\[::1\])(:[0-9]+)?(/.*)?$ ]]
}
