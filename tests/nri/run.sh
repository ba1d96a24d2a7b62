#!/usr/bin/env bash
# Real-runtime test of `podpolicy nri` (`just nri-test`): a real containerd
# with NRI, driven through the CRI as the kubelet would, on this cgroup v1
# host.
#
# Downloads containerd 2.1.9 (Debian sid; NRI v0.8.0 built in) and runc 1.1.5
# (bookworm) with a private apt state, extracts them with dpkg-deb (nothing is
# installed, /etc/apt is only read), starts containerd with a private root,
# state and NRI socket, imports a busybox image built here, and runs
# tests/nri/cri_flow.py through these phases:
#   0. no plugin: every pod of tests/nri/pods/ gets the values the CRI asked
#      for (the runtime's defaults), and nothing else;
#   1. `podpolicy nri` connected: the container cgroup files read back as
#      `podpolicy explain -o json` computes them for the same pod and node;
#      a resize (UpdateContainerResources) reads back as explain of the
#      resized manifest (pods/resize/);
#   2. the plugin killed (-9), a drift written by hand into two containers'
#      cgroups, the plugin restarted: its Synchronize repairs the drift;
#   3. hostile policies (a trap, an endless loop; built from WAT by the e2e
#      test `hostile_policy::export_for_nri_test`): a new container is created
#      with the runtime's defaults within the runtime's timeout, starts, and
#      the plugin stays up;
#   4. everything stopped and removed through the CRI.
# One line per check (`ok` / `FAIL`), a total, exit 1 on any failure (2 on a
# setup error). A trap stops the plugin and containerd, waits for the shims,
# and removes runc's state, the cgroups runc created, /run/containerd/s and
# the scratch directory.
#
# Needs root, and the Debian mirrors this system's apt sources name (once:
# the .debs and a Python venv with grpcio are cached in target/nri-cache).
# Environment:
#   PODPOLICY   the binary to test (default: `cargo build` of the workspace)
#   NRI_HOSTILE a directory with trap.wasm and loop.wasm (default: written by
#               the e2e test above through cargo)
#   NRI_CACHE   cache directory (default: target/nri-cache)
#   NRI_KEEP=1  keep the scratch directory (logs) after the run
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ in tests/nri
WS=$(cd "$HERE/../.." && pwd)
CACHE=${NRI_CACHE:-$WS/target/nri-cache}
t_start=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "nri-test: $*" >&2; }
die() { say "$*"; exit 2; }

[ "$(id -u)" = 0 ] || die "needs root (containerd, runc, cgroups)"
[ -d /sys/fs/cgroup/cpu ] && [ -d /sys/fs/cgroup/memory ] ||
    die "this script reads cgroup v1 files; /sys/fs/cgroup has no v1 cpu and memory hierarchies"
for hier in /sys/fs/cgroup/*/; do
    [ -e "$hier/kubepods" ] && die "$hier/kubepods exists: a kubelet or an earlier run owns it; not touching it"
done
mkdir -p "$CACHE"
run_containerd_existed=
[ -e /run/containerd/s ] && run_containerd_existed=1
S=$(mktemp -d /tmp/podpolicy-nri.XXXXXX)
cd "$S"
mkdir -p x etc root state run logs img cri hostile nri/plugins nri/conf.d

# --- cleanup: stops what this run started, removes what runc left.
cleanup() {
    local rc=$?
    set +e
    if [ -s run/plugin.pid ]; then
        { kill -9 "$(cat run/plugin.pid)"; wait "$(cat run/plugin.pid)"; } 2> /dev/null
    fi
    if [ -s run/containerd.pid ]; then
        local pid
        pid=$(cat run/containerd.pid)
        if kill -0 "$pid" 2> /dev/null; then
            [ -n "${PY:-}" ] && [ -f cri/api_pb2_grpc.py ] && PYTHONPATH="$S/cri" "$PY" "$HERE/cri_flow.py" --socket "$S/run/containerd.sock" --state "$S/flow.json" cleanup > logs/cleanup.txt 2>&1
            kill -TERM "$pid"
            for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.05; done
            kill -9 "$pid" 2> /dev/null
        fi
    fi
    # The shims (one per pod, started from x/…/usr/bin) and the containers
    # below them exit on their own once their pods are gone.
    for _ in $(seq 50); do pgrep -f "^$S/x/containerd/usr/bin/containerd-shim" > /dev/null || break; sleep 0.1; done
    local shim
    for shim in $(pgrep -f "^$S/x/containerd/usr/bin/containerd-shim"); do
        say "killing left-over shim $shim"
        kill -9 "$shim"
    done
    # Container processes a killed shim left: the kubepods tree is this
    # run's (the script refuses to start beside one).
    local procs
    procs=$(find /sys/fs/cgroup/cpu/kubepods -name cgroup.procs -exec cat {} + 2> /dev/null | sort -u)
    if [ -n "$procs" ]; then
        say "killing left-over container processes" $procs
        kill -9 $procs
        sleep 0.2
    fi
    # Mounts below the scratch dir (rootfs overlays, shm) of a failed run.
    mount | awk -v s="$S" 'index($3, s) == 1 { print $3 }' | sort -r | while read -r m; do umount -l "$m"; done
    # runc removes container cgroups; the pod cgroups (cgroup_parent) and the
    # QoS tiers are the kubelet's to remove, so here they are this script's.
    local hier
    for hier in /sys/fs/cgroup/*/; do
        [ -d "$hier/kubepods" ] && find "$hier/kubepods" -depth -type d -exec rmdir {} \; 2> /dev/null
    done
    # Shim sockets: a shim killed above leaves its socket. The directory is
    # removed whole only when this run created it.
    if [ -z "$run_containerd_existed" ]; then
        rm -rf /run/containerd/s
        rmdir /run/containerd 2> /dev/null
    else
        rmdir /run/containerd/s 2> /dev/null
    fi
    if [ "${NRI_KEEP:-}" = 1 ]; then
        say "kept $S"
    else
        rm -rf "$S" 2> /dev/null || say "could not remove all of $S"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 1. packages: the .debs (cached), downloaded with a private apt state.
# The mirror is the one this system's own Debian source names.
t0=$(date +%s.%N)
PKGS=(containerd/sid runc/bookworm busybox-static/bookworm golang-k8s-cri-api-dev/sid)
have_debs() {
    local p
    for p in "${PKGS[@]}"; do
        ls "$CACHE/debs/${p%/*}"_*.deb > /dev/null 2>&1 || return 1
    done
}
if ! have_debs; then
    mirror=$( {
        awk '$1 == "URIs:" { print $2 }' /etc/apt/sources.list.d/*.sources 2> /dev/null || true
        awk '$1 == "deb" && $2 !~ /^\[/ { print $2 }' /etc/apt/sources.list 2> /dev/null || true
    } | grep -v -- '-security' | sed -n 1p)
    [ -n "$mirror" ] || die "no Debian mirror in /etc/apt/sources.list{,.d/*.sources}"
    A=$CACHE/apt
    mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/preferences.d" "$CACHE/debs"
    printf 'deb %s bookworm main\ndeb %s sid main\n' "$mirror" "$mirror" > "$A/sources.list"
    : > "$A/status"
    APT=(-o Dir::State="$A" -o Dir::State::Lists="$A/lists" -o Dir::State::status="$A/status"
         -o Dir::Cache="$A/cache" -o Dir::Etc::SourceList="$A/sources.list" -o Dir::Etc::SourceParts=-
         -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts="$A/preferences.d"
         -o APT::Sandbox::User=root)
    say "downloading ${PKGS[*]} from $mirror"
    apt-get "${APT[@]}" update -qq
    (cd "$CACHE/debs" && apt-get "${APT[@]}" download -qq "${PKGS[@]}")
    have_debs || die "apt-get download did not give every package"
fi
for p in "${PKGS[@]}"; do
    p=${p%/*}
    mkdir -p "x/$p"
    dpkg-deb -x "$(ls -1 "$CACHE/debs/${p}"_*.deb | sort -V | tail -1)" "x/$p"
done
BIN=$S/x/containerd/usr/bin
RUNC=$S/x/runc/usr/sbin/runc
CRI_PROTO=$S/x/golang-k8s-cri-api-dev/usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto
[ -x "$BIN/containerd" ] && [ -x "$RUNC" ] && [ -f "$CRI_PROTO" ] || die "the packages lack containerd, runc or the CRI proto"
containerd_version=$("$BIN/containerd" --version | awk '{ print $3 }')
runc_version=$("$RUNC" --version | awk 'NR == 1 { print $3 }')
t_packages=$(elapsed "$t0")

# --- 2. the CRI client's Python: grpcio + grpcio-tools + PyYAML, from this
# system when it has them, else from a venv cached beside the .debs.
t0=$(date +%s.%N)
if python3 -c 'import grpc, grpc_tools, yaml' 2> /dev/null; then
    PY=$(command -v python3)
else
    V=$CACHE/venv
    if ! "$V/bin/python" -c 'import grpc, grpc_tools, yaml' 2> /dev/null; then
        say "installing grpcio, grpcio-tools and PyYAML into $V"
        rm -rf "$V"
        python3 -m venv "$V"
        "$V/bin/pip" install -q --disable-pip-version-check grpcio grpcio-tools pyyaml
    fi
    PY=$V/bin/python
fi
cp "$CRI_PROTO" cri/api.proto
(cd cri && "$PY" -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. api.proto)
t_python=$(elapsed "$t0")

# --- 3. podpolicy, the hostile policies, the node file.
t0=$(date +%s.%N)
PP=${PODPOLICY:-}
if [ -z "$PP" ]; then
    (cd "$WS" && cargo build --locked -q -p podpolicy)
    PP=${CARGO_TARGET_DIR:-$WS/target}/debug/podpolicy
fi
[ -x "$PP" ] || die "no podpolicy binary at $PP"
"$PP" nri --help > /dev/null 2>&1 ||
    say "$PP has no \`nri\` subcommand: every check that needs the plugin will fail"
if [ -n "${NRI_HOSTILE:-}" ]; then
    cp "$NRI_HOSTILE"/trap.wasm "$NRI_HOSTILE"/loop.wasm hostile/
else
    (cd "$WS" && PODPOLICY_HOSTILE_OUT="$S/hostile" cargo test --locked -q -p podpolicy --test e2e \
        hostile_policy::export_for_nri_test -- --ignored --exact > "$S/logs/hostile-export.txt" 2>&1) ||
        { cat logs/hostile-export.txt >&2; die "writing the hostile policies failed"; }
fi
[ -s hostile/trap.wasm ] && [ -s hostile/loop.wasm ] || die "no hostile policies in $S/hostile"
# This host as a cgroup v1 node: what the plugin is told and what explain
# computes with (capacity from the kernel, the cgroupfs driver).
mem_kib=$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo)
cat > node.yaml <<EOF
# This host as podpolicy sees it in tests/nri/run.sh.
name: nri-test-host
cgroupVersion: v1
capacity:
  cpu: "$(nproc)"
  memory: ${mem_kib}Ki
kubeletConfig:
  cgroupDriver: cgroupfs
EOF
# What explain computes for every pod, before and after the resize.
for f in "$HERE"/pods/*.yaml "$HERE"/pods/resize/*.yaml; do
    out=explain-$(basename "$(dirname "$f")")-$(basename "$f" .yaml).json
    "$PP" explain -o json --node node.yaml "$f" > "$out" || die "explain failed for $f"
done
t_podpolicy=$(elapsed "$t0")

# --- 4. the image and the containerd config.
t0=$(date +%s.%N)
"$PY" "$HERE/mkimage.py" "$S/x/busybox-static/bin/busybox" localhost/busybox:nri img/busybox.tar > logs/image.txt
# restrict_oom_score_adj: the process has no CAP_SYS_RESOURCE here, and runc
# fails (`can't get final child's PID from pipe`) when asked to lower
# oom_score_adj below containerd's own.
cat > etc/config.toml <<EOF
version = 3
root = "$S/root"
state = "$S/state"

[grpc]
  address = "$S/run/containerd.sock"
[ttrpc]
  address = "$S/run/containerd.sock.ttrpc"

[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = "$S/run/nri.sock"
  plugin_path = "$S/nri/plugins"
  plugin_config_path = "$S/nri/conf.d"
  plugin_registration_timeout = "5s"
  plugin_request_timeout = "2s"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "localhost/busybox:nri"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$RUNC"
        Root = "$S/runc-root"
        SystemdCgroup = false
EOF

# --- 5. containerd (shims from PATH), the image in the CRI's namespace.
PATH="$BIN:$PATH" "$BIN/containerd" --config "$S/etc/config.toml" > logs/containerd.log 2>&1 &
echo $! > run/containerd.pid
CTR=("$BIN/ctr" -a "$S/run/containerd.sock")
for _ in $(seq 200); do "${CTR[@]}" version > /dev/null 2>&1 && break; sleep 0.05; done
"${CTR[@]}" version > /dev/null 2>&1 || { tail -n 20 logs/containerd.log >&2; die "containerd did not start"; }
"${CTR[@]}" -n k8s.io images import img/busybox.tar > logs/import.txt 2>&1 ||
    { cat logs/import.txt >&2; die "image import failed"; }
t_runtime=$(elapsed "$t0")

# --- 6. the phases. cri_flow.py prints the check lines; results.txt has them all.
t_flow0=$(date +%s.%N)
FLOW=("$PY" "$HERE/cri_flow.py" --socket "$S/run/containerd.sock" --state "$S/flow.json"
      --node "$S/node.yaml" --explain-dir "$S" --runtime-oom "$(cat "/proc/$(cat run/containerd.pid)/oom_score_adj")")
# The pods sent with kubectl's last-applied-configuration annotation; the
# others reach the plugin as CRI values only.
LAST_APPLIED=(burstable)
last_applied() { # POD.yaml -> the run option
    local p
    for p in "${LAST_APPLIED[@]}"; do
        [ "$(basename "$1" .yaml)" = "$p" ] && echo --last-applied
    done
    return 0
}
: > results.txt
check() { # a check line of this script's own
    printf '%-4s %s\n' "$1" "$2" | tee -a results.txt
}
flow() {
    local rc=0
    (cd "$S/cri" && PYTHONPATH="$S/cri" "${FLOW[@]}" "$@") 2>> logs/flow-stderr.txt | tee -a results.txt || rc=$?
    [ "$rc" = 0 ] || check FAIL "cri_flow.py $1 exited $rc (logs/flow-stderr.txt)"
}
plugin_idx=0
plugin_start() { # [extra args...]: starts `podpolicy nri`, waits until containerd has registered it
    local log=logs/plugin-$plugin_idx.log since
    since=$(wc -l < logs/containerd.log)
    "$PP" nri --socket "$S/run/nri.sock" --node "$S/node.yaml" --state-dir "$S/plugin-state" \
        --metrics-addr off --plugin-name podpolicy --plugin-idx 50 "$@" > "$log" 2>&1 &
    echo $! > run/plugin.pid
    plugin_idx=$((plugin_idx + 1))
    for _ in $(seq 100); do
        tail -n +"$((since + 1))" logs/containerd.log | grep -q 'registered as \\\?"50-podpolicy' && break
        kill -0 "$(cat run/plugin.pid)" 2> /dev/null || break
        sleep 0.05
    done
    if tail -n +"$((since + 1))" logs/containerd.log | grep -q 'registered as \\\?"50-podpolicy'; then
        check ok "plugin: \`podpolicy nri $*\` registered with containerd"
    else
        check FAIL "plugin: \`podpolicy nri $*\` did not register within 5s ($log: $(grep -m 1 . "$log" 2> /dev/null))"
    fi
}
# containerd log lines written while a plugin was being killed ("FROM TO",
# line numbers): a message containerd was sending as the plugin died fails
# with a broken pipe, an expected error the phase 1-3 check leaves out.
: > run/kill-windows
plugin_kill() { # kills the plugin, waits until containerd has seen its connection close
    local from
    if [ -s run/plugin.pid ]; then
        from=$(($(wc -l < logs/containerd.log) + 1))
        { kill -9 "$(cat run/plugin.pid)"; wait "$(cat run/plugin.pid)"; } 2> /dev/null || true
        : > run/plugin.pid
        for _ in $(seq 100); do
            tail -n +"$from" logs/containerd.log | grep -q 'connection to plugin \\\?"50-podpolicy\\\?" closed' && break
            sleep 0.05
        done
        # A send already under way when the connection closed logs its
        # failure just after; give it a moment inside the window.
        sleep 0.2
        echo "$from $(wc -l < logs/containerd.log)" >> run/kill-windows
    fi
}
plugin_alive() { # WHAT
    if [ -s run/plugin.pid ] && kill -0 "$(cat run/plugin.pid)" 2> /dev/null; then
        check ok "plugin: still running $1"
    else
        check FAIL "plugin: exited $1 ($(grep -m 1 . "logs/plugin-$((plugin_idx - 1)).log" 2> /dev/null))"
    fi
}

echo "--- phase 0: no plugin connected: the runtime's own values" | tee -a results.txt
for f in "$HERE"/pods/*.yaml; do
    flow run "$f" --tag "plain-$(basename "$f" .yaml)" $(last_applied "$f")
    flow check "plain-$(basename "$f" .yaml)" --expect cri
done
flow remove --tag-prefix plain-

echo "--- phase 1: podpolicy nri: the values explain computes" | tee -a results.txt
plugin_start
for f in "$HERE"/pods/*.yaml; do
    flow run "$f" --tag "$(basename "$f" .yaml)" $(last_applied "$f")
    flow check "$(basename "$f" .yaml)" --expect explain
done
for f in "$HERE"/pods/resize/*.yaml; do
    flow resize "$(basename "$f" .yaml)" "$f"
    flow check "$(basename "$f" .yaml)" --expect explain --resized
done

echo "--- phase 2: plugin killed, drift by hand, plugin restarted: Synchronize repairs" | tee -a results.txt
plugin_kill
flow drift burstable
flow drift guaranteed
plugin_start
flow check burstable --expect explain --wait 5
flow check guaranteed --expect explain --resized --wait 5

echo "--- phase 3: hostile policies: runtime defaults, the container starts" | tee -a results.txt
for h in trap loop; do
    plugin_kill
    plugin_start --policy "$S/hostile/$h.wasm"
    flow run "$HERE/pods/burstable.yaml" --tag "hostile-$h" --uid-suffix "$h" --timed --last-applied
    flow check "hostile-$h" --expect cri
    plugin_alive "after a CreateContainer under the $h policy"
done
# The hostile plugins' Synchronize saw the phase 1 pods: they keep their values.
flow check burstable --expect explain

# The scratch directory's name ($S, /tmp/podpolicy-nri.*) is taken out of
# the lines first: it is in every socket path containerd logs, so without
# that a shim's broken pipe as its pod stops ("failed sending message on
# channel ... run/containerd.sock.ttrpc") read as an NRI error.
# While a plugin was connected, containerd reported no failed NRI call (it
# logs one before dropping a plugin that errs or overruns its 2 s request
# timeout). Lines logged while a kill was under way are left out (see
# plugin_kill); an error there that is not a failed send counts all the same.
nri_errors=$(awk 'FILENAME == ARGV[1] { n++; from[n] = $1; to[n] = $2; next }
    { for (i = 1; i <= n; i++) if (FNR >= from[i] && FNR <= to[i] && /failed sending message on channel/) next; print }' \
    run/kill-windows logs/containerd.log |
    sed "s|$S|\$S|g" |
    grep 'level=error' | grep -i -e nri -e '50-podpolicy' | sed 's/.* msg=//' || true)
if [ -z "$nri_errors" ]; then
    check ok "containerd logged no NRI plugin error in phases 1-3"
else
    check FAIL "containerd logged NRI plugin errors: $(echo "$nri_errors" | head -n 3 | tr '\n' ' ')"
fi

echo "--- phase 4: stop and remove everything" | tee -a results.txt
plugin_kill
flow remove --tag-prefix ''
t_flow=$(elapsed "$t_flow0")

# The plugin's answer time per event, from its own log lines (the time from
# the request reaching the plugin to its answer; debug or release as built).
echo "nri-test plugin answer times (ms, from logs/plugin-*.log; $PP):"
python3 - logs/plugin-*.log <<'PY'
import re, sys
times = {}
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        m = re.search(r'NRI event event="([a-z_]+)".* elapsed_ms=([0-9.]+)', line)
        if m:
            times.setdefault(m.group(1), []).append(float(m.group(2)))
for event, ts in sorted(times.items()):
    ts.sort()
    at = lambda q: ts[min(len(ts) - 1, int(len(ts) * q))]
    print(f"  {event:20} n={len(ts):4}  p50={at(0.5):8.2f}  p99={at(0.99):8.2f}  max={ts[-1]:8.2f}")
PY

passed=$(grep -c '^ok ' results.txt || true)
failed=$(grep -c '^FAIL ' results.txt || true)
echo "nri-test timing: packages=${t_packages}s python=${t_python}s podpolicy=${t_podpolicy}s" \
    "runtime=${t_runtime}s flow=${t_flow}s total=$(elapsed "$t_start")s" \
    "(containerd $containerd_version, runc $runc_version)"
echo "=== NRI-TEST END passed=$passed failed=$failed"
if [ "$failed" != 0 ] || [ "$passed" = 0 ]; then
    say "FAIL (logs: $S/logs with NRI_KEEP=1)"
    exit 1
fi
say "PASS"
