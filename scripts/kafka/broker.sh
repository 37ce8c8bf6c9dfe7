#!/usr/bin/env bash
# A real single-node Apache Kafka broker (KRaft, broker+controller) on free loopback ports, for
# needle's Kafka tests and demos. Kafka's jars come from Maven Central into .cache/kafka/lib.
#
#   scripts/kafka/broker.sh fetch              download the jars (idempotent)
#   scripts/kafka/broker.sh start DIR [--owner PID] [--max-seconds N] [--set KEY=VALUE]...
#                                              start a broker whose data, config and log live in
#                                              DIR; prints the bootstrap address and writes it to
#                                              DIR/bootstrap. The broker stops itself when PID
#                                              (default: the caller) exits, or after N seconds
#                                              (default 7200). --set adds or overrides a
#                                              server.properties setting.
#   scripts/kafka/broker.sh restart DIR [--owner PID] [--max-seconds N]
#                                              stop the broker of DIR and start it again on the
#                                              same ports with the same data (a broker outage)
#   scripts/kafka/broker.sh stop DIR           stop it (and its watchdog) and wait for the exit
#   scripts/kafka/broker.sh status DIR         exit 0 when running
#
# KAFKA_LIB_DIR puts the jars elsewhere than .cache/kafka/lib (a shared cache).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# (not a NEEDLE_* name: needle reads every NEEDLE_* variable as one of its settings)
lib=${KAFKA_LIB_DIR:-$root/.cache/kafka/lib}

die() { echo "broker.sh: $*" >&2; exit 1; }

java_opts=(-Xms256m -Xmx1g -XX:+UseSerialGC "-Dlog4j2.configurationFile=$here/log4j2.properties")

fetch() {
  if [ -f "$lib/.complete" ]; then return 0; fi
  command -v mvn >/dev/null || die "Maven (mvn) is needed to fetch Kafka's jars"
  mkdir -p "$lib"
  echo "fetching Apache Kafka jars from Maven Central into $lib" >&2
  mvn -B -q -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$lib" >&2
  touch "$lib/.complete"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start() {
  local dir=$1; shift
  local owner=$PPID max_seconds=7200
  local extra=()
  while [ $# -gt 0 ]; do
    case $1 in
      --owner) owner=$2; shift 2 ;;
      --max-seconds) max_seconds=$2; shift 2 ;;
      --set) [[ $2 == *=* ]] || die "--set takes KEY=VALUE"; extra+=("$2"); shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  fetch
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    die "a broker is already running from $dir (pid $(cat "$dir/pid"))"
  fi
  local port cport
  port=$(free_port)
  cport=$(free_port)
  while [ "$cport" = "$port" ]; do cport=$(free_port); done
  rm -rf "$dir/data" "$dir/bootstrap"
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
controller.quorum.voters=1@127.0.0.1:$cport
log.dirs=$dir/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
PROPS
  # later lines win in a properties file
  local setting
  for setting in "${extra[@]}"; do echo "$setting" >>"$dir/server.properties"; done
  local uuid
  uuid=$(java "${java_opts[@]}" -cp "$lib/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  java "${java_opts[@]}" -cp "$lib/*" kafka.tools.StorageTool format -t "$uuid" \
    -c "$dir/server.properties" >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "format failed"; }
  echo "127.0.0.1:$port" >"$dir/address"
  launch "$dir" "$owner" "$max_seconds"
}

# Starts the broker configured in DIR (formatted already) with its watchdog, and waits for it.
launch() {
  local dir=$1 owner=$2 max_seconds=$3
  echo "$owner" >"$dir/owner"
  nohup java "${java_opts[@]}" -cp "$lib/*" kafka.Kafka "$dir/server.properties" \
    >"$dir/broker.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  # The watchdog: the broker stops itself when its owner is gone or its time is up.
  nohup bash -c '
    owner=$1 pid=$2 deadline=$(( $(date +%s) + $3 ))
    while kill -0 "$pid" 2>/dev/null; do
      if ! kill -0 "$owner" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
        kill "$pid" 2>/dev/null; sleep 5; kill -9 "$pid" 2>/dev/null; exit 0
      fi
      sleep 1
    done' watchdog "$owner" "$pid" "$max_seconds" >/dev/null 2>&1 </dev/null &
  echo $! >"$dir/watchdog.pid"
  local waited=0
  until grep -q "Kafka Server started" "$dir/broker.log" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$dir/broker.log" >&2
      die "the broker exited during start-up"
    fi
    if [ $waited -ge 600 ]; then stop "$dir"; die "the broker did not start within 60 s"; fi
    sleep 0.1
    waited=$((waited + 1))
  done
  cp "$dir/address" "$dir/bootstrap"
  cat "$dir/address"
}

restart() {
  local dir=$1; shift
  [ -f "$dir/server.properties" ] && [ -f "$dir/address" ] || die "no broker was started from $dir"
  local owner max_seconds=7200
  owner=$(cat "$dir/owner" 2>/dev/null || echo $PPID)
  while [ $# -gt 0 ]; do
    case $1 in
      --owner) owner=$2; shift 2 ;;
      --max-seconds) max_seconds=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  dir=$(cd "$dir" && pwd)
  stop "$dir"
  launch "$dir" "$owner" "$max_seconds"
}

stop() {
  local dir=$1
  [ -f "$dir/pid" ] || return 0
  local pid
  pid=$(cat "$dir/pid")
  [ -f "$dir/watchdog.pid" ] && kill "$(cat "$dir/watchdog.pid")" 2>/dev/null || true
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pid" "$dir/watchdog.pid"
}

status() {
  local dir=$1
  [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null
}

case ${1:-} in
  fetch) fetch ;;
  start) [ $# -ge 2 ] || die "usage: broker.sh start DIR [--owner PID] [--max-seconds N] [--set KEY=VALUE]..."; shift; start "$@" ;;
  restart) [ $# -ge 2 ] || die "usage: broker.sh restart DIR [--owner PID] [--max-seconds N]"; shift; restart "$@" ;;
  stop) [ $# -eq 2 ] || die "usage: broker.sh stop DIR"; stop "$2" ;;
  status) [ $# -eq 2 ] || die "usage: broker.sh status DIR"; status "$2" ;;
  *) die "usage: broker.sh fetch | start DIR [--owner PID] [--max-seconds N] | restart DIR | stop DIR | status DIR" ;;
esac
