#!/usr/bin/env bash
# A real S3-compatible server (MinIO) on free loopback ports, for needle's object-storage tests
# and demos. MinIO is built from source through the Go module proxy into .cache/minio/bin (once;
# later runs reuse it).
#
#   scripts/s3/minio.sh fetch                 build the server (idempotent)
#   scripts/s3/minio.sh start DIR [--owner PID] [--max-seconds N] [--bucket NAME] [--in-memory]
#                                 [--temporary]
#                                             start a server whose data and log live in DIR, with
#                                             the bucket NAME (default: history); prints the
#                                             endpoint (http://127.0.0.1:PORT) and writes it to
#                                             DIR/endpoint, the access key and secret to
#                                             DIR/access_key and DIR/secret_key. The server stops
#                                             itself when PID (default: the caller) exits, or
#                                             after N seconds (default 7200).
#                                             --in-memory: the objects live in a new directory
#                                             of /dev/shm (memory) when it has 4 GiB free, else
#                                             in DIR; removed by `remove` and by the watchdog.
#                                             MinIO refuses every write once its drive is 99%
#                                             full (2.5 GB free of 250 GB), which a build
#                                             machine's disk can be while the tests' few
#                                             megabytes would fit easily: the tests use this.
#                                             --temporary: DIR itself is removed by the watchdog
#                                             when the server stops itself (its owner gone),
#                                             for callers that cannot clean up at exit.
#   scripts/s3/minio.sh restart DIR           stop the server of DIR and start it again on the
#                                             same port with the same data (an outage)
#   scripts/s3/minio.sh stop DIR              stop it (and its watchdog) and wait for the exit;
#                                             its objects stay for a restart
#   scripts/s3/minio.sh remove DIR            stop it and remove its objects kept in memory
#   scripts/s3/minio.sh status DIR            exit 0 when running
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin_dir=${MINIO_BIN_DIR:-$root/.cache/minio/bin}
# MinIO tags releases by date, not by semantic version: the module proxy serves it by commit.
version=v0.0.0-20260212201848-7aac2a2c5b7c
user=needle-test
secret=needle-test-secret

die() { echo "minio.sh: $*" >&2; exit 1; }

fetch() {
  if [ -x "$bin_dir/minio" ] && [ "$(cat "$bin_dir/.version" 2>/dev/null)" = "$version" ]; then
    return 0
  fi
  command -v go >/dev/null || die "Go is needed to build MinIO (go install through the module proxy)"
  mkdir -p "$bin_dir"
  echo "building MinIO $version through the Go module proxy into $bin_dir (a few minutes, once)" >&2
  GOBIN="$bin_dir" GOFLAGS=-mod=mod go install "github.com/minio/minio@$version" >&2
  echo "$version" >"$bin_dir/.version"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start() {
  local dir=$1; shift
  local owner=$PPID max_seconds=7200 bucket=history in_memory=no temporary=no
  while [ $# -gt 0 ]; do
    case $1 in
      --owner) owner=$2; shift 2 ;;
      --max-seconds) max_seconds=$2; shift 2 ;;
      --bucket) bucket=$2; shift 2 ;;
      --in-memory) in_memory=yes; shift ;;
      --temporary) temporary=yes; shift ;;
      *) die "unknown option $1" ;;
    esac
  done
  fetch
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    die "a server is already running from $dir (pid $(cat "$dir/pid"))"
  fi
  local port cport
  port=$(free_port)
  cport=$(free_port)
  while [ "$cport" = "$port" ]; do cport=$(free_port); done
  rm -rf "$dir/data"
  [ -f "$dir/data_in_memory" ] && rm -rf "$(cat "$dir/data_in_memory")"
  rm -f "$dir/data_in_memory"
  if [ $in_memory = yes ]; then
    local shm_free_kb
    shm_free_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
    if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "${shm_free_kb:-0}" -ge $((4 * 1024 * 1024)) ]; then
      mktemp -d /dev/shm/needle-minio-data-XXXXXX >"$dir/data_in_memory"
    else
      echo "minio.sh: /dev/shm has not 4 GiB free: the objects live in $dir/data" >&2
    fi
  fi
  echo "$port" >"$dir/port"
  echo "$cport" >"$dir/console_port"
  echo "$bucket" >"$dir/bucket"
  if [ $temporary = yes ]; then touch "$dir/temporary"; else rm -f "$dir/temporary"; fi
  launch "$dir" "$owner" "$max_seconds"
  # the bucket, by S3's own CreateBucket call, signed by curl; a server that says it is ready
  # may still answer 503 for a moment on a loaded machine: tried for up to 10 s
  # (409: a try the server took though its answer was lost: the bucket is there)
  local tries=0 code
  until code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$user:$secret" "http://127.0.0.1:$port/$bucket") && { [ "$code" = 200 ] || [ "$code" = 409 ]; }; do
    tries=$((tries + 1))
    if [ $tries -ge 20 ]; then remove "$dir"; die "could not create the bucket $bucket"; fi
    sleep 0.5
  done
  cat "$dir/endpoint"
}

# Starts the server configured in DIR with its watchdog, and waits until it is ready.
launch() {
  local dir=$1 owner=$2 max_seconds=$3
  local port cport data
  port=$(cat "$dir/port")
  cport=$(cat "$dir/console_port")
  data=$(data_dir "$dir")
  echo "$owner" >"$dir/owner"
  echo "$user" >"$dir/access_key"
  echo "$secret" >"$dir/secret_key"
  MINIO_ROOT_USER=$user MINIO_ROOT_PASSWORD=$secret MINIO_BROWSER=off \
    MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off \
    nohup "$bin_dir/minio" server "$data" --address "127.0.0.1:$port" \
    --console-address "127.0.0.1:$cport" --quiet >"$dir/minio.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  # The watchdog: the server stops itself when its owner is gone or its time is up (and objects
  # kept in memory go with it, and DIR too when it was started as --temporary).
  local memory="" temporary=""
  [ -f "$dir/data_in_memory" ] && memory=$data
  [ -f "$dir/temporary" ] && temporary=$dir
  nohup bash -c '
    owner=$1 pid=$2 deadline=$(( $(date +%s) + $3 )) memory=$4 temporary=$5
    while kill -0 "$pid" 2>/dev/null; do
      if ! kill -0 "$owner" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
        kill "$pid" 2>/dev/null; sleep 5; kill -9 "$pid" 2>/dev/null
        [ -n "$memory" ] && rm -rf "$memory"
        [ -n "$temporary" ] && rm -rf "$temporary"
        exit 0
      fi
      sleep 1
    done' watchdog "$owner" "$pid" "$max_seconds" "$memory" "$temporary" >/dev/null 2>&1 </dev/null &
  echo $! >"$dir/watchdog.pid"
  local waited=0
  until curl -sf -o /dev/null "http://127.0.0.1:$port/minio/health/ready"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$dir/minio.log" >&2
      die "the server exited during start-up"
    fi
    if [ $waited -ge 600 ]; then stop "$dir"; die "the server was not ready within 60 s"; fi
    sleep 0.1
    waited=$((waited + 1))
  done
  echo "http://127.0.0.1:$port" >"$dir/endpoint"
}

restart() {
  local dir=$1
  [ -f "$dir/port" ] || die "no server was started from $dir"
  dir=$(cd "$dir" && pwd)
  local owner
  owner=$(cat "$dir/owner" 2>/dev/null || echo $PPID)
  stop "$dir"
  launch "$dir" "$owner" 7200
  cat "$dir/endpoint"
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

# Where the server of DIR keeps its objects.
data_dir() {
  if [ -f "$1/data_in_memory" ]; then cat "$1/data_in_memory"; else echo "$1/data"; fi
}

# Stops the server of DIR for good: objects kept in memory are removed.
remove() {
  local dir=$1
  stop "$dir"
  if [ -f "$dir/data_in_memory" ]; then
    rm -rf "$(cat "$dir/data_in_memory")"
    rm -f "$dir/data_in_memory"
  fi
}

status() {
  local dir=$1
  [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null
}

case ${1:-} in
  fetch) fetch ;;
  start) [ $# -ge 2 ] || die "usage: minio.sh start DIR [--owner PID] [--max-seconds N] [--bucket NAME] [--in-memory] [--temporary]"; shift; start "$@" ;;
  restart) [ $# -eq 2 ] || die "usage: minio.sh restart DIR"; restart "$2" ;;
  stop) [ $# -eq 2 ] || die "usage: minio.sh stop DIR"; stop "$2" ;;
  remove) [ $# -eq 2 ] || die "usage: minio.sh remove DIR"; remove "$2" ;;
  status) [ $# -eq 2 ] || die "usage: minio.sh status DIR"; status "$2" ;;
  *) die "usage: minio.sh fetch | start DIR [--owner PID] [--max-seconds N] [--bucket NAME] [--in-memory] | restart DIR | stop DIR | remove DIR | status DIR" ;;
esac
