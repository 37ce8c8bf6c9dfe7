#!/usr/bin/env bash
# The metrics agents needle's tests run for real (crates/cli/tests/cli_agents.rs): Debian's
# Prometheus (scrapes needle's /metrics, remote_writes to it) and collectd (write_graphite into
# a Graphite tcp: source). Installed with apt-get only when missing; a no-op otherwise.
#
#   scripts/agents/install.sh     install prometheus and collectd-core if missing
#
# The tests start each agent themselves, on free loopback ports, with configs of their own. The
# packages' own services are not wanted: they are kept from starting during the install (a
# policy-rc.d that says no, for the install only, when the machine has none), and stopped if
# one started anyway: the install leaves no daemon running (Debian's Prometheus would listen on
# :9090 and write under /var/lib/prometheus), and does not fail on a service that cannot start
# (the packages' postinst scripts exit 1 when their service's start fails, in a container say).
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit 1; }

# what the tests run, and the package that brings it
declare -A wanted=(
  [/usr/bin/prometheus]=prometheus
  [/usr/sbin/collectd]=collectd-core
  [/usr/lib/collectd/write_graphite.so]=collectd-core
)
missing=()
for path in "${!wanted[@]}"; do
  if [ ! -e "$path" ]; then
    case " ${missing[*]-} " in *" ${wanted[$path]} "*) ;; *) missing+=("${wanted[$path]}") ;; esac
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  prometheus=$(/usr/bin/prometheus --version 2>&1 | head -1 | awk '{print $3}')
  collectd=$(/usr/sbin/collectd -h 2>&1 | grep -m1 -oE 'collectd [0-9]+(\.[0-9]+)*' || true)
  echo "prometheus $prometheus and ${collectd:-collectd} are installed"
  exit 0
fi

command -v apt-get >/dev/null || die "apt-get is needed to install ${missing[*]} (Debian's packages)"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "not root and no sudo: install ${missing[*]} as root"
  sudo=(sudo)
fi
as_root() { "${sudo[@]}" "$@"; }
export DEBIAN_FRONTEND=noninteractive

policy=/usr/sbin/policy-rc.d
ours=""
log=$(mktemp)
if [ ! -e "$policy" ]; then
  # 101: "action forbidden by policy", which invoke-rc.d and deb-systemd-invoke obey
  as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
  ours=1
fi
cleanup() {
  if [ -n "$ours" ]; then as_root rm -f "$policy"; fi
  ours=""
  rm -f "$log"
}
trap cleanup EXIT

echo "installing ${missing[*]} from Debian (apt-get)"
install=(apt-get install -y --no-install-recommends "${missing[@]}")
if ! as_root env DEBIAN_FRONTEND=noninteractive "${install[@]}" >"$log" 2>&1; then
  as_root apt-get update -q >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive "${install[@]}" >"$log" 2>&1 || {
    cat "$log" >&2
    die "apt-get install ${missing[*]} failed"
  }
fi
cleanup

# a service that started all the same (a machine whose policy-rc.d allows it) is stopped
for package in "${missing[@]}"; do
  service=${package%-core}
  if [ -d /run/systemd/system ]; then
    as_root systemctl stop "$service" >/dev/null 2>&1 || true
  elif [ -x "/etc/init.d/$service" ]; then
    as_root "/etc/init.d/$service" stop >/dev/null 2>&1 || true
  fi
done

for path in "${!wanted[@]}"; do
  [ -e "$path" ] || die "$path is still missing after installing ${missing[*]}"
done
echo "installed ${missing[*]}"
