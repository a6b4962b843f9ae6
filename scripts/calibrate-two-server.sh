#!/usr/bin/env bash
# `dapple calibrate` on the two-server network of scripts/netns.sh: brings the namespaces up
# (unless --keep-up finds them up), starts --per-server ranks inside each with rank 0's
# server address as MASTER_ADDR, and takes the namespaces down again afterwards.
#
#   scripts/calibrate-two-server.sh [options] [-- extra `dapple calibrate` options]
#     -o FILE          cluster JSON to write (default two-server.json)
#     --per-server N   ranks per server (default 2: measures the intra-server link too)
#     --dapple PATH    the dapple binary (default: $DAPPLE, else build/tools/dapple/dapple)
#     --keep-up        use namespaces already up and leave them up (else up ... down)
#     --prefix, --subnet, --rate, --delay, --burst, --mtu   passed to scripts/netns.sh
#     --port P         rendezvous port inside the namespaces (default 29500)
#
# Exit status: that of the first rank group to fail (2: a peer unreachable or a link too
# slow to measure), 4 when namespaces are not permitted here, else 0.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="two-server.json"
PER_SERVER=2
DAPPLE_BIN="${DAPPLE:-$HERE/../build/tools/dapple/dapple}"
KEEP_UP=""
PORT=29500
NETNS_ARGS=()
PREFIX="${DAPPLE_NETNS_PREFIX:-dapple}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o|--output) OUT="$2"; shift 2 ;;
    --per-server) PER_SERVER="$2"; shift 2 ;;
    --dapple) DAPPLE_BIN="$2"; shift 2 ;;
    --keep-up) KEEP_UP=1; shift ;;
    --port) PORT="$2"; shift 2 ;;
    --prefix) PREFIX="$2"; shift 2 ;;
    --subnet|--rate|--delay|--burst|--mtu) NETNS_ARGS+=("$1" "$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "calibrate-two-server.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
NETNS=("$HERE/netns.sh" --prefix "$PREFIX" "${NETNS_ARGS[@]}")
[[ -x "$DAPPLE_BIN" ]] || { echo "calibrate-two-server.sh: no dapple binary at $DAPPLE_BIN (build first, or pass --dapple)" >&2; exit 2; }
[[ "$PER_SERVER" =~ ^[1-9][0-9]*$ ]] || { echo "calibrate-two-server.sh: --per-server $PER_SERVER: a positive integer" >&2; exit 2; }

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ -z "$KEEP_UP" ]]; then "${NETNS[@]}" down; fi
}
if [[ -z "$KEEP_UP" ]]; then
  "${NETNS[@]}" up
  trap cleanup EXIT
elif ! "${NETNS[@]}" status >/dev/null; then
  "${NETNS[@]}" up
fi
MASTER="$("${NETNS[@]}" addr s0)"

# One launcher per server; gloo binds the server's veth address, so ranks of one server
# reach each other through that address, which the kernel routes over the loopback.
[[ -z "$KEEP_UP" ]] || trap cleanup EXIT
for s in 0 1; do
  "${NETNS[@]}" exec "s$s" env DAPPLE_HOST="$PREFIX-s$s" GLOO_SOCKET_IFNAME="$PREFIX-v$s" \
    "$DAPPLE_BIN" calibrate -o "$OUT" --nproc "$PER_SERVER" --nnodes 2 --node-rank "$s" \
    --master-addr "$MASTER" --master-port "$PORT" "$@" &
  pids+=($!)
done
# The first group to fail stops the other (its launcher forwards SIGTERM to its ranks), so a
# failure on one side does not leave the other waiting out its timeout.
declare -A running=([${pids[0]}]=1 [${pids[1]}]=1)
rc=0
while [[ ${#running[@]} -gt 0 ]]; do
  code=0
  wait -n -p done_pid "${!running[@]}" || code=$?
  unset "running[$done_pid]"
  if [[ $code -ne 0 && $rc -eq 0 ]]; then
    rc=$code
    for p in "${!running[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  fi
done
pids=()
exit "$rc"
