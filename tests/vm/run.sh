#!/usr/bin/env bash
# Real-kernel test of `podpolicy apply`, `resize --apply` and `agent` (`just vm-test`).
#
# Boots a stock Debian kernel under qemu with TCG (KVM on these machines is
# PVM and cannot boot a stock kernel) with a busybox initramfs holding the
# podpolicy binary, its shared libraries and tests/vm/{pod,node}.yaml. The
# guest (tests/vm/init.sh) mounts cgroup2, runs `podpolicy apply`, checks the
# files against `explain -o json` (computed here), oom_score_adj, memory.high
# throttling and a pod-level OOM kill, applies a resize plan live, lets the
# agent create and remove a pod's cgroups, and prints PASS/FAIL lines.
#
# Installs with apt-get what is missing (qemu-system-x86 from
# bookworm-backports, busybox-static, jq); the kernel and qemu-user .debs are
# downloaded, not installed, and what they give is cached under target/vm/.
# Exits non-zero on any FAIL, on a guest that does not finish within
# VM_TIMEOUT seconds (default 180), or on a setup error.
# Environment: VM_TIMEOUT, VM_KERNEL_DEB (a linux-image-*-amd64 .deb to use),
# VM_PODPOLICY (a podpolicy binary to test instead of the debug build).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WS=$(cd "$HERE/../.." && pwd)
W=$WS/target/vm
TIMEOUT=${VM_TIMEOUT:-180}
mkdir -p "$W"
cd "$W"
t_start=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "vm-test: $*" >&2; }

# --- 1. host packages. A private sources list adds bookworm-backports: its
# qemu-system-x86 10 keeps a preinstalled backports qemu-utils 10, which
# bookworm's qemu 7.2 would make apt remove. Lists live in target/vm/apt.
# The mirrors are the ones this system's own apt sources use (deb822
# `.sources` files and one-line `sources.list`), so no package host is named
# here and /etc/apt is only read.
mkdir -p apt/lists/partial
apt_uri_for_suite() { # SUITE -> the first URI whose entry lists that suite
    {
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] && awk -v want="$1" '
                /^[[:space:]]*$/ { if (uri != "" && hit) { print uri; exit } uri = ""; hit = 0; next }
                /^URIs:/ { uri = $2 }
                /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == want) hit = 1 }
                /^Enabled:[[:space:]]*no/ { uri = "" }
                END { if (uri != "" && hit) print uri }' "$f" || true
        done
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -f "$f" ] && awk -v want="$1" '
                $1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                              if ($(i + 1) == want) print $i }' "$f" || true
        done
    } | sed -n 1p
    return 0
}
debian_mirror=$(apt_uri_for_suite bookworm)
security_mirror=$(apt_uri_for_suite bookworm-security)
if [ -z "$debian_mirror" ]; then
    echo "vm-test: no Debian bookworm mirror in /etc/apt/sources.list{,.d/*}" >&2
    exit 1
fi
{
    echo "deb $debian_mirror bookworm main"
    [ -n "$security_mirror" ] && echo "deb $security_mirror bookworm-security main"
    echo "deb $debian_mirror bookworm-backports main"
} > apt/sources.list
APT=(-o Dir::Etc::sourcelist="$W/apt/sources.list" -o Dir::Etc::sourceparts=-
     -o Dir::State::lists="$W/apt/lists" -o APT::Sandbox::User=root)
apt_updated=
apt_update() {
    if [ -z "$apt_updated" ]; then
        apt-get "${APT[@]}" update -qq
        apt_updated=1
    fi
}
missing=()
command -v qemu-system-x86_64 > /dev/null || missing+=(qemu-system-x86)
dpkg -s busybox-static > /dev/null 2>&1 || missing+=(busybox-static)
command -v jq > /dev/null || missing+=(jq)
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    apt_update
    DEBIAN_FRONTEND=noninteractive apt-get "${APT[@]}" install -y -qq \
        --no-install-recommends -t bookworm-backports "${missing[@]}" > /dev/null
fi
t_packages=$(elapsed "$t_start")

# --- 2. kernel: a cached .deb, else the current linux-image-amd64 dependency.
t0=$(date +%s.%N)
deb=${VM_KERNEL_DEB:-}
if [ -z "$deb" ]; then
    deb=$(ls -1 "$W"/linux-image-*-amd64_*.deb 2> /dev/null | sort -V | tail -1 || true)
fi
if [ -z "$deb" ]; then
    apt_update
    pkg=$(apt-cache "${APT[@]}" depends linux-image-amd64 |
        awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
    [ -n "$pkg" ] || { say "cannot resolve the linux-image-amd64 dependency"; exit 2; }
    say "downloading $pkg"
    apt-get "${APT[@]}" download -qq "$pkg"
    deb=$(ls -1 "$W"/"$pkg"_*.deb | tail -1)
fi
kver=$(basename "$deb" | sed -E 's/^linux-image-([^_]+)_.*/\1/')
vmlinuz=$W/vmlinuz-$kver
if [ ! -s "$vmlinuz" ]; then
    rm -rf kpkg && mkdir kpkg
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C kpkg --wildcards './boot/vmlinuz-*'
    mv kpkg/boot/vmlinuz-* "$vmlinuz.tmp" && mv "$vmlinuz.tmp" "$vmlinuz"
    rm -rf kpkg
fi
t_kernel=$(elapsed "$t0")

# --- 3. podpolicy, and what the guest compares with.
t0=$(date +%s.%N)
PP=${VM_PODPOLICY:-}
if [ -z "$PP" ]; then
    (cd "$WS" && cargo build --locked -q -p podpolicy)
    PP=$WS/target/debug/podpolicy
fi
t_build=$(elapsed "$t0")
t0=$(date +%s.%N)
"$PP" explain -o json --node "$HERE/node.yaml" "$HERE/pod.yaml" > explain.json
uid=$(awk '$1 == "uid:" { print $2 }' "$HERE/pod.yaml")
# One line per file: <cgroup dir below the root> <file> <value>. cpuset files
# are left to the issue that brings them.
jq -r --arg uid "$uid" '
    def tier: if . == "Guaranteed" then "kubepods"
              elif . == "Burstable" then "kubepods/burstable"
              else "kubepods/besteffort" end;
    def node_dir: if . == "kubepods" then "kubepods" else "kubepods/" + . end;
    (.pods[0] | (.qosClass | tier) + "/pod" + $uid) as $pod
    | (.pods[0].podCgroup | to_entries[] | "\($pod) \(.key) \(.value)"),
      (.pods[0].containers[] | .name as $c | .cgroup | to_entries[]
        | "\($pod)/\($c) \(.key) \(.value)"),
      (.node.cgroups | to_entries[] | (.key | node_dir) as $d
        | .value | to_entries[] | "\($d) \(.key) \(.value)")
    | select(test(" cpuset\\.") | not)' explain.json > expected.txt
jq -r '.pods[0].containers[] | "\(.name) \(.oomScoreAdj)"' explain.json > oom.txt
# After the live resize: the pod's own files (container and pod cgroups).
"$PP" explain -o json --node "$HERE/node.yaml" "$HERE/pod-resized.yaml" > explain-resized.json
jq -r --arg uid "$uid" '
    .pods[0] | "kubepods/burstable/pod" + $uid as $pod
    | (.podCgroup | to_entries[] | "\($pod) \(.key) \(.value)"),
      (.containers[] | .name as $c | .cgroup | to_entries[]
        | "\($pod)/\($c) \(.key) \(.value)")
    | select(test(" cpuset\\.") | not)' explain-resized.json > expected-resized.txt
[ -s expected.txt ] && [ -s oom.txt ] || { say "explain gave no values"; exit 2; }

# --- 4. initramfs tree: busybox, podpolicy + its libraries, the test files.
# Uncompressed: the kernel copies it faster than TCG could gunzip it.
rm -rf rootfs && mkdir -p rootfs/{bin,sbin,proc,sys,dev,tmp,test}
cp /bin/busybox rootfs/bin/busybox
install -m 755 "$HERE/init.sh" rootfs/init
if command -v strip > /dev/null; then strip -o rootfs/bin/podpolicy "$PP"; else cp "$PP" rootfs/bin/; fi
for lib in $(ldd "$PP" | grep -oE '/[^ ]+'); do
    mkdir -p "rootfs$(dirname "$lib")"
    cp -L "$lib" "rootfs$lib"
done
cp "$HERE/pod.yaml" "$HERE/pod-resized.yaml" "$HERE/agent-pod.yaml" "$HERE/node.yaml" \
    expected.txt expected-resized.txt oom.txt rootfs/test/
t_initramfs=$(elapsed "$t0")

# --- 5. the component compiled for the guest's CPU. Compiling it in the guest
# takes minutes of TCG. podpolicy caches compiled code under the module
# digest and the engine's compatibility hash (which covers the CPU features
# it detects), so qemu-user running the same binary on the same CPU model
# (`-cpu max`) compiles an artifact the guest accepts. It is kept in
# target/vm/cache until the component changes. Failing that, the guest compiles.
t0=$(date +%s.%N)
CPU=max
digest=$("$PP" policy info -o json | jq -r .digest)
mkdir -p cache rootfs/var/cache/podpolicy
find cache -name '*.cwasm' ! -name "$digest-*" -delete
if ! ls cache/"$digest"-*.cwasm > /dev/null 2>&1; then
    QEMU_USER=$W/qemu-user/usr/bin/qemu-x86_64
    if [ ! -x "$QEMU_USER" ]; then
        apt_update
        rm -f qemu-user_*.deb
        apt-get "${APT[@]}" download -qq qemu-user/bookworm-backports 2> /dev/null || true
        if ls qemu-user_*.deb > /dev/null 2>&1; then
            mkdir -p qemu-user
            dpkg-deb --fsys-tarfile qemu-user_*.deb | tar -x -C qemu-user ./usr/bin/qemu-x86_64
            rm -f qemu-user_*.deb
        fi
    fi
    if [ -x "$QEMU_USER" ]; then
        say "compiling the component for the guest CPU under qemu-user"
        timeout 900 "$QEMU_USER" -cpu $CPU rootfs/bin/podpolicy --cache-dir "$W/cache" \
            --timeout-ms 600000 policy info > /dev/null ||
            say "qemu-user compile failed; the guest compiles the component itself"
    else
        say "no qemu-user; the guest compiles the component itself"
    fi
fi
cp cache/"$digest"-*.cwasm rootfs/var/cache/podpolicy/ 2> /dev/null || true
t_precompile=$(elapsed "$t0")
(cd rootfs && find . | /bin/busybox cpio -o -H newc 2> /dev/null > ../initramfs.cpio)

# --- 6. boot: console -> console.txt, results (guest ttyS1) -> results.txt.
t0=$(date +%s.%N)
rm -f console.txt results.txt
qemu_rc=0
timeout "$TIMEOUT" qemu-system-x86_64 -accel tcg -cpu $CPU -m 512M -smp 2 -nographic -no-reboot \
    -kernel "$vmlinuz" -initrd initramfs.cpio \
    -append 'console=ttyS0 panic=-1 quiet' \
    -serial mon:stdio -serial file:results.txt < /dev/null > console.txt 2>&1 || qemu_rc=$?
t_boot=$(elapsed "$t0")

cat results.txt 2> /dev/null || true
echo "vm-test timing: packages=${t_packages}s kernel=${t_kernel}s build=${t_build}s" \
    "initramfs=${t_initramfs}s precompile=${t_precompile}s boot+tests=${t_boot}s" \
    "total=$(elapsed "$t_start")s" \
    "(kernel $kver, guest timeout ${TIMEOUT}s)"
if [ "$qemu_rc" = 124 ]; then
    say "FAIL: the guest did not finish within ${TIMEOUT}s; console tail:"
    tail -n 30 console.txt >&2
    exit 1
fi
if ! grep -qE '^=== VM-TEST END passed=[1-9][0-9]* failed=0 ' results.txt 2> /dev/null; then
    say "FAIL: see target/vm/results.txt and target/vm/console.txt; console tail:"
    tail -n 30 console.txt >&2
    exit 1
fi
say "PASS"
