# Sourced by the interop checks: start mqnamesrv + mqbroker-stub on free loopback ports in $WORK,
# stop them on exit (pass or fail). Sets NAMESRV and BROKER (host:port).
# Needs: ROOT (repository), WORK (temp dir), PYTHON (defaults to .venv/bin/python, else python3).
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
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

start_servers() {
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
}
