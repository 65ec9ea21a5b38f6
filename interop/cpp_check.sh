#!/usr/bin/env bash
# Interop check: the Apache RocketMQ C++ client (apache/rocketmq-client-cpp, master, the 2.x line
# that rocketmq-client-python 2.x wraps) as a real producer and push consumer against mqnamesrv +
# mqbroker-stub on 127.0.0.1 (interop/cpp_check.cpp: 6 sends, TagA subscription).
#
# The client is built from a source tree you provide, in a temp dir (never in this repository),
# against Debian's packages:
#   apt-get install -y build-essential cmake libssl-dev zlib1g-dev libevent-dev libjsoncpp-dev \
#     libboost-{atomic,thread,system,chrono,date-time,log,regex,serialization,filesystem,locale,iostreams}-dev
#
# usage: ROCKETMQ_CPP_SRC=/path/to/rocketmq-client-cpp interop/cpp_check.sh
#        CPP_BUILD=/path/to/kept/build interop/cpp_check.sh   (reuse a build: skips the ~10 min compile)
# PYTHON, KEEP as for ali_ons_check.sh.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/cpp-check.XXXXXX")"
# shellcheck source=servers.sh
. "$HERE/servers.sh"
L=/usr/lib/x86_64-linux-gnu

if [ -n "${CPP_BUILD:-}" ]; then
    SRC="$CPP_BUILD"
else
    if [ -z "${ROCKETMQ_CPP_SRC:-}" ] || [ ! -f "$ROCKETMQ_CPP_SRC/CMakeLists.txt" ]; then
        echo "set ROCKETMQ_CPP_SRC to a checkout of apache/rocketmq-client-cpp (or CPP_BUILD to a kept build)" >&2
        exit 2
    fi
    SRC="$WORK/rocketmq-client-cpp"
    echo "== building rocketmq-client-cpp from $ROCKETMQ_CPP_SRC in $SRC"
    cp -r "$ROCKETMQ_CPP_SRC" "$SRC"
    # Its CMakeLists wants its own static deps under bin/: point them at Debian's.
    mkdir -p "$SRC/bin/lib" "$SRC/bin/include"
    for n in atomic thread system chrono date_time log log_setup regex serialization filesystem locale iostreams; do
        ln -sf "$L/libboost_$n.a" "$SRC/bin/lib/"
    done
    for n in event event_core event_extra event_pthreads event_openssl; do ln -sf "$L/lib$n.a" "$SRC/bin/lib/"; done
    ln -sf "$L/libjsoncpp.so" "$SRC/bin/lib/libjsoncpp.a"   # Debian ships jsoncpp shared only
    ln -sf "$L/libssl.a" "$SRC/bin/lib/libssl.a"
    ln -sf "$L/libcrypto.a" "$SRC/bin/lib/libcrypto.a"
    ln -sf /usr/include/jsoncpp "$SRC/bin/include/jsoncpp"
    # jsoncpp 1.9 (Debian 12) finds uint64 -> Json::Value ambiguous; the client targets 0.10.
    sed -i 's/outJson\["consumeFailedMsgs"\] = consumeFailedMsgs;/outJson["consumeFailedMsgs"] = (Json::UInt64)consumeFailedMsgs;/' \
        "$SRC/src/status/ConsumeStats.cpp"
    mkdir -p "$SRC/build"
    (cd "$SRC/build" && cmake .. -DBUILD_ROCKETMQ_SHARED=OFF -DCMAKE_BUILD_TYPE=Release >cmake.log 2>&1 &&
        timeout 3600 make -j"$(nproc)" rocketmq_static >make.log 2>&1) || { echo "build failed: see $SRC/build" >&2; KEEP=1; exit 1; }
fi

echo "== compiling interop/cpp_check.cpp"
g++ -std=c++11 -O1 -w -I "$SRC/include" -o "$WORK/cpp_check" "$HERE/cpp_check.cpp" \
    "$SRC/bin/librocketmq.a" "$SRC/libs/signature/lib/libSignature.a" \
    "$L/libboost_log.a" "$L/libboost_log_setup.a" "$L/libboost_thread.a" "$L/libboost_filesystem.a" \
    "$L/libboost_regex.a" "$L/libboost_serialization.a" "$L/libboost_locale.a" "$L/libboost_iostreams.a" \
    "$L/libboost_chrono.a" "$L/libboost_date_time.a" "$L/libboost_atomic.a" "$L/libboost_system.a" \
    "$L/libevent.a" "$L/libevent_openssl.a" "$L/libevent_core.a" "$L/libevent_extra.a" "$L/libevent_pthreads.a" \
    -ljsoncpp -lssl -lcrypto -lz -lpthread -ldl -lrt

start_servers

echo "== C++ producer and push consumer (client log under $WORK/home/logs)"
set +e
HOME="$WORK/home" timeout 120 "$WORK/cpp_check" "$NAMESRV" "CppInteropTopic"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then echo "FAILED (exit $rc)" >&2; KEEP=1; fi
exit "$rc"
