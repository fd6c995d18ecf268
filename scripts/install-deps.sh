#!/usr/bin/env bash
# Installs what the test topologies need and is missing: the Debian packages
# of Redis, etcd, ZooKeeper (its jars and a JRE) and PostgreSQL, and Consul, built
# once from its Go module by install-consul.sh. Safe to run again: it does
# nothing when everything is there. Installing needs root (or sudo).
#
# Debian starts a packaged server as soon as it is installed, which would
# take ports the topologies use (6379, 2379). While installing, a
# policy-rc.d that forbids starting services is put in place (unless one
# exists), so no such service starts. Services already running are left
# alone; the launcher names any port they hold.
set -euo pipefail
cd "$(dirname "$0")/.."

have() { command -v "$1" >/dev/null 2>&1; }

pkgs=()
{ have redis-server && have redis-cli; } || pkgs+=(redis-server redis-tools)
have etcd || pkgs+=(etcd-server)
have etcdctl || pkgs+=(etcd-client)
# ZooKeeper runs straight from its jars (the launcher starts the JVM), so
# the jars and a headless JRE are enough: the zookeeper package would add
# scripts we do not use and a desktop JRE.
have java || pkgs+=(default-jre-headless)
[[ -f /usr/share/java/zookeeper.jar ]] || pkgs+=(libzookeeper-java)
[[ -f /usr/share/java/slf4j-simple.jar ]] || pkgs+=(libslf4j-java)
{ compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null && have psql && have pg_isready; } || pkgs+=(postgresql)
# Headless Chromium renders the lockctl bench HTML report in its test.
have chromium || pkgs+=(chromium)

consul_pid=
consul_log=
if ! scripts/install-consul.sh --check >/dev/null 2>&1; then
  # The build is CPU-bound and takes minutes; let it overlap the downloads.
  mkdir -p .dlock
  consul_log=.dlock/install-consul.log
  echo "install-deps: building consul in the background (log: $consul_log)"
  scripts/install-consul.sh >"$consul_log" 2>&1 &
  consul_pid=$!
fi

if ((${#pkgs[@]})); then
  echo "install-deps: installing ${pkgs[*]}"
  sudo=()
  if ((EUID != 0)); then
    if have sudo; then sudo=(sudo -n); else
      echo "install-deps: need root (or sudo) to install: ${pkgs[*]}" >&2
      exit 1
    fi
  fi
  policy=/usr/sbin/policy-rc.d
  if ! "${sudo[@]}" test -e "$policy"; then
    printf '#!/bin/sh\n# Placed by dlock scripts/install-deps.sh while installing.\nexit 101\n' |
      "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 0755 "$policy"
    trap '"${sudo[@]}" rm -f "$policy"' EXIT
  fi
  apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0)
  # Update the package lists only when installing from them fails (a fresh
  # machine has none; old ones may point at removed versions).
  if ! "${apt[@]}" install --no-install-recommends "${pkgs[@]}"; then
    "${apt[@]}" update
    "${apt[@]}" install --no-install-recommends "${pkgs[@]}"
  fi
fi

if [[ -n "$consul_pid" ]]; then
  if ! wait "$consul_pid"; then
    echo "install-deps: building consul failed:" >&2
    tail -n 40 "$consul_log" >&2
    exit 1
  fi
  tail -n 1 "$consul_log"
fi
echo "install-deps: all servers installed"
