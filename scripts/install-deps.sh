#!/usr/bin/env bash
# Installs the Debian packages dapple needs, only those missing. Needs root (or sudo).
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config clang
  libtorch-dev libgloo-dev libopenblas-dev zlib1g-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  dataset-fashion-mnist bible-kjv
  python3 python3-torch python3-torchvision iproute2
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
