#!/usr/bin/env bash
# `podpolicy topology -o svg` viewed in a real browser: Debian's Chromium,
# headless, renders the SVG of the dual-socket HT fixture (two dry-run pods)
# and of the 256-CPU server to PNG; check.py (Python stdlib only) decodes
# the PNGs and checks they are not blank and show the fills of the reserved
# CPUs and of the first pod, and that the DOM the browser built has the
# expected labels. Chromium is installed with apt-get when missing (CI runs
# as root); nothing is installed by the cargo tests.
#
# PODPOLICY: the binary to run (default: target/debug/podpolicy).
set -euo pipefail
cd "$(dirname "$0")/../.."
PODPOLICY="${PODPOLICY:-$PWD/target/debug/podpolicy}"

if ! command -v chromium >/dev/null 2>&1; then
  echo "browser: installing chromium (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export PODPOLICY_CACHE_DIR="$out/cache"

render() { # name, then the topology arguments
  local name="$1"; shift
  "$PODPOLICY" topology "$@" -o svg > "$out/$name.svg"
  # A fresh profile per run; no sandbox (root in CI), no GPU.
  local flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars
    --user-data-dir="$out/profile" --window-size=1000,1600)
  chromium "${flags[@]}" --screenshot="$out/$name.png" "file://$out/$name.svg" >/dev/null 2>&1
  chromium "${flags[@]}" --dump-dom "file://$out/$name.svg" > "$out/$name.dom" 2>/dev/null
}

render dual --node fixtures/nodes/dual-socket-static.yaml \
  fixtures/topology/guaranteed-4cpu.yaml fixtures/pods/kep5526-pod-scope-mixed.yaml
render big --node fixtures/nodes/server-256-static.yaml fixtures/topology/guaranteed-4cpu.yaml

python3 tests/browser/check.py "$out/dual.png" "$out/dual.dom" \
  "socket 0" "socket 1" "NUMA 0" "NUMA 1" "L3 0" \
  "reserved 0" "default/db (dry run); postgres exclusive 2,4,8,10" \
  "CPU 3: default/pod-scope-mixed pod shared pool"
python3 tests/browser/check.py "$out/big.png" "$out/big.dom" \
  "NUMA 3" "L3 15" "reserved 0,128" "postgres exclusive 1-2,129-130"
echo "browser: the topology SVGs render in Chromium with their labels"
