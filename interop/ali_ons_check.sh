#!/usr/bin/env bash
# Interop check: the npm package ali-ons (a pure-JavaScript RocketMQ remoting client) as a real
# producer and push consumer against mqnamesrv + mqbroker-stub on 127.0.0.1.
#
# ali-ons is installed into a temporary directory (never into the repository) and removed
# afterwards; both servers run on free loopback ports and are stopped on exit, pass or fail.
#
# usage: interop/ali_ons_check.sh            (needs node >= 16 and npm; PYTHON defaults to
#        PYTHON=/path/to/python interop/...   .venv/bin/python, else python3, with this project
#                                             installed: `make test` or `pip install -e .`)
# KEEP=1 keeps the temp dir (logs of all three processes) for a look afterwards.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
ALI_ONS_VERSION="${ALI_ONS_VERSION:-3.12.0}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ali-ons-check.XXXXXX")"
# shellcheck source=servers.sh
. "$HERE/servers.sh"

echo "== installing ali-ons@$ALI_ONS_VERSION into $WORK/node"
mkdir -p "$WORK/node"
(cd "$WORK/node" && timeout 300 npm install --no-audit --no-fund --loglevel=error "ali-ons@$ALI_ONS_VERSION" >/dev/null)
echo "   $(node --version), ali-ons $(node -p "require('$WORK/node/node_modules/ali-ons/package.json').version")"

start_servers

echo "== ali-ons producer and push consumer (client log: $WORK/client.log)"
set +e
NODE_PATH="$WORK/node/node_modules" timeout 120 node "$HERE/ali_ons_check.js" "$NAMESRV" 2>"$WORK/client.log"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
    echo "FAILED (exit $rc); last client log lines:" >&2
    tail -20 "$WORK/client.log" >&2
    KEEP=1
fi
exit "$rc"
