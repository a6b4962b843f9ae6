#!/usr/bin/env bash
# Installs what dapple needs, only what is missing: Debian's packages (needs root or sudo), then
# the virtual environment .venv with PyPI's torch (requirements.txt), whose libtorch dapple
# builds against. pip keeps its downloads in its cache (~/.cache/pip), so a second machine set-up
# downloads nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
# libgloo-dev: Gloo's headers only, which c10d's ProcessGroupGloo.hpp includes and the torch
# wheel does not ship (Note [Gloo's headers] in runtime/comm/communicator.cc); its library is
# never linked.
packages=(
  build-essential cmake ninja-build ccache pkg-config clang
  libgloo-dev zlib1g-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  dataset-fashion-mnist bible-kjv
  python3 iproute2
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all Debian packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# The Python environment: made once, then brought to requirements.txt whenever it changes.
venv=.venv
stamp="$venv/requirements.installed"
if [ ! -x "$venv/bin/python" ]; then
  echo "install-deps: making $venv"
  python3 -m venv "$venv"
fi
if ! cmp -s requirements.txt "$stamp"; then
  echo "install-deps: pip install -r requirements.txt into $venv (torch 2.11 and its CUDA libraries: about 3 GB the first time)"
  "$venv/bin/pip" install -q --disable-pip-version-check -r requirements.txt
  cp requirements.txt "$stamp"
else
  echo "install-deps: $venv matches requirements.txt"
fi
