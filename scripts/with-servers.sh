#!/usr/bin/env bash
# Runs a command against every test topology: installs what is missing,
# starts all servers, exports their endpoints with DLOCK_REQUIRE_BACKENDS=all
# (so no backend test can skip), runs the command, and stops the servers
# again whether it passed or not. Exits with the command's status.
#
# KEEP_UP=1 leaves the servers running afterwards.
# TOPOLOGIES="redis etcd" starts only those (DLOCK_REQUIRE_BACKENDS then
# stays as set by the caller, default all).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
go build -o bin/dlockenv ./tools/cmd/dlockenv

down() {
  if [[ "${KEEP_UP:-}" == 1 ]]; then
    echo "with-servers: KEEP_UP=1, servers left running (make down stops them)"
  else
    bin/dlockenv down || echo "with-servers: dlockenv down failed" >&2
  fi
}
trap down EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck disable=SC2086 # TOPOLOGIES is a list
bin/dlockenv up ${TOPOLOGIES:-}
set -a
# shellcheck disable=SC1090
source <(bin/dlockenv env)
set +a
export DLOCK_REQUIRE_BACKENDS="${DLOCK_REQUIRE_BACKENDS:-all}"

status=0
"$@" || status=$?
exit "$status"
