#!/usr/bin/env bash
# Runs one `dapple` sub-command as a job of two servers on the network of scripts/netns.sh:
# brings the namespaces up (unless --keep-up finds them up), starts one launcher per server
# inside its namespace (`dapple SUB --nproc N --nnodes 2 --node-rank s --master-addr <s0's
# address> --master-port P ARGS...`), and takes the namespaces down again afterwards, also
# when the job fails. Server s runs global ranks s*N .. s*N+N-1: a plan's devices of those
# numbers.
#
#   scripts/two-server.sh [options] [--] SUBCOMMAND [dapple options...]
#     --per-server N   ranks per server (default 2)
#     --dapple PATH    the dapple binary (default: $DAPPLE, else build/tools/dapple/dapple)
#     --keep-up        use namespaces already up and leave them up (else up ... down)
#     --prefix, --subnet, --rate, --delay, --burst, --mtu   passed to scripts/netns.sh
#     --port P         rendezvous port inside the namespaces (default 29500)
#   e.g. scripts/two-server.sh --rate 1gbit train --model mlp --plan p.json --steps 10
#
# Each server's ranks get DAPPLE_HOST=<prefix>-s<s> (the host name `calibrate` reports) and
# GLOO_SOCKET_IFNAME=<prefix>-v<s> (gloo binds the server's veth address; ranks of one
# server reach each other through it, which the kernel routes over the loopback, unshaped).
# Standard output is server 0's (rank 0 prints results there); server 1's goes to stderr.
#
# Exit status: that of the first server to fail (its launcher relays its rank's code; the
# other server is stopped at once), 4 when namespaces are not permitted here, 2 for bad usage,
# else 0.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PER_SERVER=2
DAPPLE_BIN="${DAPPLE:-$HERE/../build/tools/dapple/dapple}"
KEEP_UP=""
PORT=29500
NETNS_ARGS=()
PREFIX="${DAPPLE_NETNS_PREFIX:-dapple}"
die2() { echo "two-server.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --per-server) PER_SERVER="${2:?--per-server needs a value}"; shift 2 ;;
    --dapple) DAPPLE_BIN="${2:?--dapple needs a value}"; shift 2 ;;
    --keep-up) KEEP_UP=1; shift ;;
    --port) PORT="${2:?--port needs a value}"; shift 2 ;;
    --prefix) PREFIX="${2:?--prefix needs a value}"; shift 2 ;;
    --subnet|--rate|--delay|--burst|--mtu) NETNS_ARGS+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) die2 "unknown option $1 (the sub-command comes first, then its options)" ;;
    *) break ;;
  esac
done
[[ $# -ge 1 ]] || die2 "missing the dapple sub-command (train, calibrate, ...)"
[[ -x "$DAPPLE_BIN" ]] || die2 "no dapple binary at $DAPPLE_BIN (build first, or pass --dapple)"
[[ "$PER_SERVER" =~ ^[1-9][0-9]*$ ]] || die2 "--per-server $PER_SERVER: a positive integer"
[[ "$PORT" =~ ^[1-9][0-9]*$ && "$PORT" -le 65535 ]] || die2 "--port $PORT: 1..65535"
SUB="$1"; shift
NETNS=("$HERE/netns.sh" --prefix "$PREFIX" "${NETNS_ARGS[@]}")

pids=()
# shellcheck disable=SC2317  # cleanup runs from the EXIT trap
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ -z "$KEEP_UP" ]]; then "${NETNS[@]}" down; fi
}
if [[ -z "$KEEP_UP" ]]; then
  "${NETNS[@]}" up >&2  # exit 4 (not permitted) passes through set -e
  trap cleanup EXIT
else
  if ! "${NETNS[@]}" status >/dev/null; then "${NETNS[@]}" up >&2; fi
  trap cleanup EXIT
fi
MASTER="$("${NETNS[@]}" addr s0)"

for s in 0 1; do
  cmd=("${NETNS[@]}" exec "s$s" env DAPPLE_HOST="$PREFIX-s$s" GLOO_SOCKET_IFNAME="$PREFIX-v$s"
       "$DAPPLE_BIN" "$SUB" --nproc "$PER_SERVER" --nnodes 2 --node-rank "$s"
       --master-addr "$MASTER" --master-port "$PORT" "$@")
  if [[ $s -eq 0 ]]; then "${cmd[@]}" & else "${cmd[@]}" >&2 & fi
  pids+=($!)
done
# The first server to fail stops the other (its launcher forwards SIGTERM to its ranks), so
# a failure on one side does not leave the other waiting out its timeout.
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
