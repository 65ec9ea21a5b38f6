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
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ali-ons-check.XXXXXX")"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# wait_boot FILE REGEX: print the first match of REGEX in FILE within 20 s
wait_boot() {
    for _ in $(seq 200); do
        if grep -oE "$2" "$1" 2>/dev/null | head -1 | grep .; then return 0; fi
        sleep 0.1
    done
    echo "no boot line in $1:" >&2; cat "$1" >&2; return 1
}

echo "== installing ali-ons@$ALI_ONS_VERSION into $WORK/node"
mkdir -p "$WORK/node"
(cd "$WORK/node" && timeout 300 npm install --no-audit --no-fund --loglevel=error "ali-ons@$ALI_ONS_VERSION" >/dev/null)
echo "   $(node --version), ali-ons $(node -p "require('$WORK/node/node_modules/ali-ons/package.json').version")"

cat > "$WORK/namesrv.properties" <<PROPS
listenPort=0
bindAddress=127.0.0.1
kvConfigPath=$WORK/kvConfig.json
PROPS
(cd "$ROOT" && exec "$PYTHON" -m namesrv.cli -c "$WORK/namesrv.properties" >"$WORK/namesrv.out" 2>"$WORK/namesrv.log") &
PIDS+=($!)
NAMESRV="$(wait_boot "$WORK/namesrv.out" '127\.0\.0\.1:[0-9]+')"
echo "== mqnamesrv on $NAMESRV"

# Short delay levels so that a consumer's retry comes back within seconds (Java: 10 s for the first).
cat > "$WORK/broker.properties" <<PROPS
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
listenPort=0
brokerIP1=127.0.0.1
namesrvAddr=$NAMESRV
messageDelayLevel=1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s
PROPS
(cd "$ROOT" && exec "$PYTHON" -m broker_stub.cli -c "$WORK/broker.properties" >"$WORK/broker.out" 2>"$WORK/broker.log") &
PIDS+=($!)
BROKER="$(wait_boot "$WORK/broker.out" '127\.0\.0\.1:[0-9]+')"
echo "== mqbroker-stub on $BROKER"

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
