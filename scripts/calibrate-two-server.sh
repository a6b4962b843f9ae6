#!/usr/bin/env bash
# `dapple calibrate` on the two-server network of scripts/netns.sh: a thin wrapper of
# scripts/two-server.sh (namespaces up, one launcher per server, namespaces down).
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
ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -o|--output) OUT="${2:?$1 needs a value}"; shift 2 ;;
    --keep-up) ARGS+=("$1"); shift ;;
    --per-server|--dapple|--port|--prefix|--subnet|--rate|--delay|--burst|--mtu)
      ARGS+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --) shift; break ;;
    *) echo "calibrate-two-server.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
exec "$HERE/two-server.sh" "${ARGS[@]}" -- calibrate -o "$OUT" "$@"
