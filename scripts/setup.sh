#!/usr/bin/env bash
# Installs everything mlaref needs to build and test, from Debian 12 packages only.
# Safe to run again: apt-get skips what is already installed.
set -euo pipefail
pkgs=(
  build-essential   # gcc 12 with OpenMP (libgomp)
  cmake             # 3.25: presets with hidden building blocks, workflows
  pkg-config
  libmpfr-dev       # the oracle and the exhaustive checks of formats and pmath
  libgmp-dev
  libcriterion-dev  # test framework, run through CTest
  libjansson-dev    # JSON (safetensors headers, reports): a well-kept library, not our own parser
  liblzma-dev       # xz: ref/sfu decodes the H200 exp2 table compiled into the library
  libssl-dev        # SHA-256 (OpenSSL's EVP) for digests and recipe hashes
  hipcc             # the GPU exact kernel compiled for AMD (gfx940, clang 15) in CI: test gpu_compile_hip
  libamdhip64-dev   #   the HIP runtime's headers and library
  rocm-device-libs  #   the AMD device libraries hipcc links
  clang-15          # scripts/fuzz.sh: libFuzzer with ASan and UBSan (CTest only replays the corpora,
  libclang-common-15-dev #   with gcc); clang 15's runtime libraries, libFuzzer among them
  libomp-15-dev     #   clang 15's OpenMP (omp.h), for the fuzz targets that reach the parallel code
  gnuplot-nox       # mlaref report: the plots (SVG terminal)
  python3-jsonschema # the report test validates summary.json against reports/summary.schema.json
  python3-numpy     # the Python package (python/mlaref) and its tests (label python)
  python3-torch     #   torch tensors in and out (CPU torch)
  python3-pytest    #   tests/python
  chromium          # tests/report_browser.sh: the report's page in a real browser, headless
  slurmctld         # tests/slurm.sh: a single-node Slurm runs a sharded report (label slurm)
  slurmd            #   its node daemon (slurm-client: sbatch, squeue, scancel)
  munge             #   Slurm's authentication
  python3-yaml      # tests/ci_examples.sh: the CI examples (examples/ci) parse
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup: all packages present (${pkgs[*]})"
