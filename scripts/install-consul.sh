#!/usr/bin/env bash
# Installs the Consul agent used by the consul topology, built from its Go
# module (Consul is not packaged in Debian). Only v1.14.5 is used: it is the
# last MPL-2.0 release that builds with the module proxy's copies of its
# dependencies. Never rebuilds when the right version is already installed.
set -euo pipefail

VERSION=v1.14.5
BIN="$(go env GOPATH)/bin/consul"

# The first line of "consul version". Read whole, not through head or
# grep -q: under pipefail, consul killed by SIGPIPE when they stop reading
# early would fail the pipeline, and a good install would read as missing.
first_line() { local out; out="$("$BIN" version 2>/dev/null)" || return 1; printf '%s\n' "${out%%$'\n'*}"; }

installed() { [[ -x "$BIN" ]] && [[ "$(first_line)" == "Consul ${VERSION}"* ]]; }

# --check: only report (exit status) whether the right version is installed.
if [[ "${1:-}" == --check ]]; then
  installed
  exit
fi

# Two builds at once (make test in two shells) would only slow each other:
# the second waits for the first, then finds consul installed.
exec 9>"${TMPDIR:-/tmp}/dlock-install-consul.lock"
flock 9

if installed; then
  echo "consul ${VERSION} already installed at ${BIN}"
  exit 0
fi

echo "building consul ${VERSION} from its Go module (one time, several minutes)"
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

export GOFLAGS=-mod=mod
dir="$(cd "$work" && go mod download -json "github.com/hashicorp/consul@${VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "$dir" || ! -d "$dir" ]]; then
  echo "install-consul: could not download github.com/hashicorp/consul@${VERSION}" >&2
  exit 1
fi
if ! grep -q "Mozilla Public License" "$dir/LICENSE"; then
  echo "install-consul: ${VERSION} is not under the MPL-2.0; refusing to build" >&2
  exit 1
fi
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"
# go build refuses replace directives pointing into the module's own tree
# once it is outside its repository; drop them so the published api, sdk and
# proto-public modules are used instead.
sed -i -E '/^replace[[:space:]]+github.com\/hashicorp\/consul\/(api|sdk|proto-public)[[:space:]]/d' go.mod
go build -trimpath -ldflags "-s -w" -o "$work/consul" .
mkdir -p "$(dirname "$BIN")"
install -m 0755 "$work/consul" "$BIN"
first_line
