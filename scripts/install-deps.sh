#!/usr/bin/env bash
# Installs the Debian packages that Kiln's C++ build and tests need, only the missing ones.
set -euo pipefail

packages=(
  build-essential cmake ninja-build python3-venv
  libdnnl-dev       # oneDNN: matmul, convolution
  ocl-icd-opencl-dev  # only Recommended by libdnnl-dev, but its CMake config requires OpenCL
  libhwy-dev        # Google Highway: SIMD with runtime dispatch
  libfftw3-dev      # FFTs for the FftOpRunner
  libgloo-dev       # Gloo: the collectives of kiln/distributed.h
  libopenmpi-dev openmpi-bin  # MPI: kiln/distributed.h's other backend, and mpirun for its tests
  googletest libgtest-dev libbenchmark-dev
  graphviz          # optional: SVG dumps of the IR
)
# Headless Chromium loads the IR dump pages in a test (tests/cpp/jit/dump_test.cc). It is large:
# asked for only when no chromium is on PATH.
if ! command -v chromium >/dev/null 2>&1; then
  packages+=(chromium)
fi

missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
