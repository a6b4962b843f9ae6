#!/usr/bin/env bash
# A two-server network on one machine: two Linux network namespaces joined by a
# veth pair whose link is shaped with tc in both directions. Needs root and iproute2.
#
#   scripts/netns.sh [options] up            create <prefix>-s0 and <prefix>-s1 (10.77.0.1, .2)
#   scripts/netns.sh [options] down          remove everything `up` made, and only that
#   scripts/netns.sh [options] exec S CMD..  run CMD inside server S (s0, s1, 0, 1 or the full name)
#   scripts/netns.sh [options] status        print the namespaces, addresses and qdiscs
#   scripts/netns.sh [options] addr S        print the address of server S
#
# Options (each also an environment variable):
#   --prefix P    DAPPLE_NETNS_PREFIX  names: P-s0, P-s1 (namespaces), P-v0, P-v1 (veth ends)
#                                      default "dapple"
#   --subnet N    DAPPLE_NETNS_SUBNET  the first three octets of the /30, default 10.77.0
#   --rate R      DAPPLE_NETNS_RATE    tbf rate per direction (tc units: 1gbit, 200mbit,
#                                      500kbit, or "none" for an unshaped link), default 1gbit
#   --delay D     DAPPLE_NETNS_DELAY   netem delay per direction, default 200us ("0" for none).
#                                      Kernels without sch_netem: tbf only, with a warning.
#   --burst B     DAPPLE_NETNS_BURST   tbf bucket in bytes, default max(1 ms of rate, 16 KiB)
#   --mtu M       DAPPLE_NETNS_MTU     veth MTU, default 1500
#
# Exit codes: 0 done, 1 failure (a failing `up` removes what it made), 2 bad usage, 4 not
# permitted here (not root, or namespaces/veth not allowed): tests skip on 4 and print the
# message. The script itself sends no traffic; the namespaces reach only their loopback and
# the two addresses made here (no route, no gateway, nothing joined to the host's network).
set -euo pipefail

PREFIX="${DAPPLE_NETNS_PREFIX:-dapple}"
SUBNET="${DAPPLE_NETNS_SUBNET:-10.77.0}"
RATE="${DAPPLE_NETNS_RATE:-1gbit}"
DELAY="${DAPPLE_NETNS_DELAY:-200us}"
BURST="${DAPPLE_NETNS_BURST:-}"
MTU="${DAPPLE_NETNS_MTU:-1500}"
STATE_DIR="${DAPPLE_NETNS_STATE_DIR:-/run/dapple-netns}"
NETEM_WARNED=""

die() { echo "netns.sh: $*" >&2; exit 1; }
usage() { echo "netns.sh: $*" >&2; echo "usage: $0 [--prefix P] [--subnet A.B.C] [--rate R] [--delay D] [--burst B] [--mtu M] up|down|status|addr S|exec S CMD..." >&2; exit 2; }
not_permitted() { echo "netns.sh: not permitted here: $*" >&2; exit 4; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --prefix) PREFIX="${2:?--prefix needs a value}"; shift 2 ;;
    --subnet) SUBNET="${2:?--subnet needs a value}"; shift 2 ;;
    --rate) RATE="${2:?--rate needs a value}"; shift 2 ;;
    --delay) DELAY="${2:?--delay needs a value}"; shift 2 ;;
    --burst) BURST="${2:?--burst needs a value}"; shift 2 ;;
    --mtu) MTU="${2:?--mtu needs a value}"; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) usage "unknown option $1" ;;
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || usage "missing command"
CMD="$1"; shift

# Names: at most 15 characters for interfaces, and nothing a shell or tc would misread.
[[ "$PREFIX" =~ ^[a-z][a-z0-9_]{0,11}$ ]] || usage "--prefix $PREFIX: use 1-12 of [a-z0-9_], starting with a letter"
[[ "$SUBNET" =~ ^(10|172|192)\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || usage "--subnet $SUBNET: give three octets of a private range (10.x.y, 172.x.y, 192.168.y)"
[[ "$MTU" =~ ^[0-9]+$ && "$MTU" -ge 576 && "$MTU" -le 65535 ]] || usage "--mtu $MTU: 576..65535"
NS=("$PREFIX-s0" "$PREFIX-s1")
VETH=("$PREFIX-v0" "$PREFIX-v1")
ADDR=("$SUBNET.1" "$SUBNET.2")
STATE="$STATE_DIR/$PREFIX"

# Bytes per second of a tc rate ("1gbit", "250mbit", "800kbit", "1000000bit", "10mbps").
rate_bytes() {
  local r="$1" n u
  [[ "$r" =~ ^([0-9]+)([a-zA-Z]*)$ ]] || return 1
  n="${BASH_REMATCH[1]}"; u="${BASH_REMATCH[2],,}"
  case "$u" in
    bit|"") echo $((n / 8)) ;;
    kbit) echo $((n * 1000 / 8)) ;;
    mbit) echo $((n * 1000000 / 8)) ;;
    gbit) echo $((n * 1000000000 / 8)) ;;
    bps) echo "$n" ;;
    kbps) echo $((n * 1000)) ;;
    mbps) echo $((n * 1000000)) ;;
    gbps) echo $((n * 1000000000)) ;;
    *) return 1 ;;
  esac
}

server_index() {
  case "$1" in
    s0|0|"${NS[0]}") echo 0 ;;
    s1|1|"${NS[1]}") echo 1 ;;
    *) usage "unknown server $1 (s0, s1, 0, 1, ${NS[0]}, ${NS[1]})" ;;
  esac
}

ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

# down: removes what the state file lists (a namespace takes its veth end with it), then
# the state file. Idempotent: nothing listed or nothing left is not an error.
do_down() {
  if [[ ! -f "$STATE" ]]; then
    return 0
  fi
  local kind name
  while read -r kind name; do
    case "$kind" in
      netns) if ns_exists "$name"; then ip netns del "$name" || echo "netns.sh: warning: could not remove namespace $name" >&2; fi ;;
    esac
  done < <(tac "$STATE")
  rm -f "$STATE"
}

shape() {  # shape <ns> <dev>: tbf at RATE, then netem DELAY under it where the kernel has it
  local ns="$1" dev="$2" bytes burst parent="root"
  if [[ "$RATE" != "none" ]]; then
    bytes="$(rate_bytes "$RATE")" || usage "--rate $RATE: use tc units such as 1gbit, 200mbit, 800kbit"
    [[ "$bytes" -gt 0 ]] || usage "--rate $RATE: must be positive"
    burst="${BURST:-$(( bytes / 1000 > 16384 ? bytes / 1000 : 16384 ))}"
    [[ "$burst" =~ ^[0-9]+$ && "$burst" -gt "$MTU" ]] || usage "--burst $burst: bytes, more than the MTU $MTU"
    # latency 50ms: how long a packet may wait in the bucket's queue before it is dropped
    # (shorter queues drop packets of a single TCP flow and measure well below the rate).
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: tbf rate "$RATE" burst "$burst" latency 50ms
    parent="parent 1:1"
  fi
  if [[ "$DELAY" != "0" && "$DELAY" != "none" ]]; then
    local err
    # shellcheck disable=SC2086
    if ! err="$(ip netns exec "$ns" tc qdisc add dev "$dev" $parent handle 10: netem delay "$DELAY" limit 10000 2>&1)"; then
      [[ -z "$NETEM_WARNED" ]] || return 0
      NETEM_WARNED=1
      echo "netns.sh: warning: netem delay $DELAY not available on this kernel (${err//$'\n'/ }); the link is shaped by tbf only" >&2
    fi
  fi
}

do_up() {
  [[ "$(id -u)" -eq 0 ]] || not_permitted "needs root (network namespaces, veth and tc); run as root"
  command -v ip >/dev/null && command -v tc >/dev/null || not_permitted "iproute2 (ip, tc) is not installed"
  if [[ -f "$STATE" ]]; then
    die "$PREFIX is already up (state $STATE); run '$0 --prefix $PREFIX down' first"
  fi
  for n in "${NS[@]}"; do
    if ns_exists "$n"; then die "namespace $n exists but was not made by this script; choose another --prefix"; fi
  done
  mkdir -p "$STATE_DIR" || not_permitted "cannot create $STATE_DIR"
  : > "$STATE"
  trap 'rc=$?; if [[ $rc -ne 0 ]]; then echo "netns.sh: up failed, removing what it made" >&2; do_down; fi' EXIT
  local err
  # Each object is recorded before it exists, so a failure halfway still removes it.
  echo "netns ${NS[0]}" >> "$STATE"
  if ! err="$(ip netns add "${NS[0]}" 2>&1)"; then
    do_down; trap - EXIT
    not_permitted "cannot create network namespaces: $err"
  fi
  echo "netns ${NS[1]}" >> "$STATE"
  ip netns add "${NS[1]}"
  # Both ends are created directly inside their namespaces: nothing appears in the host's.
  if ! err="$(ip link add name "${VETH[0]}" netns "${NS[0]}" mtu "$MTU" type veth peer name "${VETH[1]}" netns "${NS[1]}" mtu "$MTU" 2>&1)"; then
    do_down; trap - EXIT
    not_permitted "cannot create a veth pair: $err"
  fi
  for i in 0 1; do
    ip -n "${NS[$i]}" link set lo up
    ip -n "${NS[$i]}" addr add "${ADDR[$i]}/30" dev "${VETH[$i]}"
    ip -n "${NS[$i]}" link set "${VETH[$i]}" up
    shape "${NS[$i]}" "${VETH[$i]}"
  done
  # A veth end reports carrier a moment after both are up; wait (bounded) so that the
  # first connection does not race it.
  local tries=0
  while ip -n "${NS[0]}" link show "${VETH[0]}" | grep -q NO-CARRIER ||
        ip -n "${NS[1]}" link show "${VETH[1]}" | grep -q NO-CARRIER; do
    tries=$((tries + 1))
    [[ $tries -le 50 ]] || die "the veth pair has no carrier after 5 s"
    sleep 0.1
  done
  if [[ -n "${DAPPLE_NETNS_FAIL_AFTER_UP:-}" ]]; then  # for the cleanup test
    die "failing on purpose (DAPPLE_NETNS_FAIL_AFTER_UP)"
  fi
  trap - EXIT
  echo "netns.sh: up: ${NS[0]} ${ADDR[0]} <-> ${NS[1]} ${ADDR[1]}, rate $RATE, delay $DELAY"
}

do_status() {
  if [[ ! -f "$STATE" ]]; then
    echo "$PREFIX: down"
    return 3
  fi
  echo "$PREFIX: up (state $STATE)"
  for i in 0 1; do
    if ns_exists "${NS[$i]}"; then
      echo "${NS[$i]}:"
      ip -n "${NS[$i]}" -brief addr show | sed 's/^/  /'
      ip netns exec "${NS[$i]}" tc qdisc show dev "${VETH[$i]}" | sed 's/^/  /'
    else
      echo "${NS[$i]}: missing"
    fi
  done
}

case "$CMD" in
  up) [[ $# -eq 0 ]] || usage "up takes no arguments"; do_up ;;
  down) [[ $# -eq 0 ]] || usage "down takes no arguments"; do_down ;;
  status) do_status ;;
  addr) [[ $# -eq 1 ]] || usage "addr takes a server"; echo "${ADDR[$(server_index "$1")]}" ;;
  exec)
    [[ $# -ge 2 ]] || usage "exec takes a server and a command"
    i="$(server_index "$1")"; shift
    ns_exists "${NS[$i]}" || die "${NS[$i]} is not up; run '$0 --prefix $PREFIX up' first"
    exec ip netns exec "${NS[$i]}" "$@" ;;
  *) usage "unknown command $CMD" ;;
esac
