#!/bin/busybox sh
# /init of the VM test (busybox, PID 1): mounts cgroup2, runs `podpolicy
# apply` of /test/pod.yaml on /test/node.yaml, and checks what the kernel
# does with the values: read-back, oom_score_adj, memory.high throttling,
# a pod-level OOM kill, and a second apply that changes nothing.
# Results go to ttyS1 (PASS/FAIL lines and a summary), noise to the console.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup

R=/dev/ttyS1
if [ ! -c $R ] || ! ( : > $R ) 2>/dev/null; then R=/dev/console; fi
log() { echo "$*" > /dev/console; [ "$R" != /dev/console ] && echo "$*" > $R; }
PASSES=0
FAILS=0
pass() { log "PASS $*"; PASSES=$((PASSES + 1)); }
fail() { log "FAIL $*"; FAILS=$((FAILS + 1)); }
check() { # file expected
    v=$(cat "$1" 2>&1)
    if [ "$v" = "$2" ]; then pass "$1 = $v"; else fail "$1 = '$v' (want '$2')"; fi
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }
finish() {
    log "=== VM-TEST END passed=$PASSES failed=$FAILS uptime=$(uptime_s)s"
    sync
    poweroff -f
}

log "=== VM-TEST START kernel=$(uname -r) uptime=$(uptime_s)s nproc=$(nproc)"
log "cgroup.controllers = $(cat /sys/fs/cgroup/cgroup.controllers)"

CG=/sys/fs/cgroup
# TCG is slow: a generous wall-clock limit per policy call. run.sh puts the
# component, compiled for this CPU model, in the cache; without it the first
# run compiles it here (minutes under TCG).
PP="/bin/podpolicy --cache-dir /var/cache/podpolicy --timeout-ms 60000"
n_cached=$(ls /var/cache/podpolicy 2> /dev/null | wc -l)
UID_=$(awk '$1 == "uid:" { print $2 }' /test/pod.yaml)
POD=$CG/kubepods/burstable/pod$UID_

# --- 1. apply onto a fresh cgroup2 tree
t0=$(uptime_s)
$PP apply --node /test/node.yaml /test/pod.yaml > /tmp/apply1.txt 2>&1
rc=$?
t1=$(uptime_s)
n=$(grep -cE '^  (write|mkdir) ' /tmp/apply1.txt)
if [ "$(ls /var/cache/podpolicy | wc -l)" = "$n_cached" ]; then
    log "component: precompiled by run.sh"
else
    log "component: compiled in the guest (run.sh found no matching precompiled one)"
fi
if [ $rc = 0 ]; then pass "apply exit 0 ($n changes, ${t0}s -> ${t1}s)"; else
    fail "apply exit $rc"
    while read -r l; do log "  apply: $l"; done < /tmp/apply1.txt
    finish
fi

# --- 2. every file reads back as `explain -o json` computed it
while read -r dir file value; do
    check "$CG/$dir/$file" "$value"
done < /test/expected.txt
check "$CG/cgroup.subtree_control" "cpu memory hugetlb"

# --- 3. oom_score_adj through --pid, and a second apply that changes nothing else
sleep 600 &
APP_PID=$!
echo $APP_PID > $POD/app/cgroup.procs
$PP apply --node /test/node.yaml /test/pod.yaml --pid app=$APP_PID > /tmp/apply2.txt 2>&1
rc=$?
all=$(grep -cE '^  (write|mkdir) ' /tmp/apply2.txt)
oom=$(grep -cE "^  write  /proc/$APP_PID/oom_score_adj " /tmp/apply2.txt)
if [ $rc = 0 ] && [ "$all" = 1 ] && [ "$oom" = 1 ]; then
    pass "second apply wrote only /proc/$APP_PID/oom_score_adj"
else
    fail "second apply: exit $rc, $all changes, $oom oom_score_adj writes"
    while read -r l; do log "  apply: $l"; done < /tmp/apply2.txt
fi
check /proc/$APP_PID/oom_score_adj "$(awk '$1 == "app" { print $2 }' /test/oom.txt)"
check /proc/$APP_PID/cgroup "0::/kubepods/burstable/pod$UID_/app"

# --- 4. memory.high: a little over it, under memory.max: `high` events, no kill
C=$POD/high
hi=$(cat $C/memory.high)
mx=$(cat $C/memory.max)
alloc=$(((hi + (mx - hi) / 2) / 1048576))
t0=$(uptime_s)
sh -c "echo \$\$ > $C/cgroup.procs; exec dd if=/dev/zero of=/dev/null bs=${alloc}M count=1" > /tmp/high.out 2>&1
rc=$?
t1=$(uptime_s)
events=$(awk '$1 == "high" { print $2 }' $C/memory.events)
kills=$(awk '$1 == "oom_kill" { print $2 }' $C/memory.events)
if [ $rc = 0 ] && [ "${events:-0}" -ge 1 ] && [ "${kills:-1}" = 0 ]; then
    pass "${alloc}M over memory.high=$hi: high events=$events, survived (${t0}s -> ${t1}s)"
else
    fail "memory.high: exit $rc, high events=$events, oom_kill=$kills ($(tr '\n' ' ' < /tmp/high.out))"
fi

# --- 5. pod-level OOM: holder keeps tmpfs pages charged to the pod, the hog
# (no limit of its own) pushes the pod past its memory.max.
mkdir -p /hold
mount -t tmpfs -o size=64m tmpfs /hold
sh -c "echo \$\$ > $POD/holder/cgroup.procs; exec dd if=/dev/zero of=/hold/f bs=1M count=24" > /dev/null 2>&1
# Like a runtime, give the hog its container's oom_score_adj: with 0 the
# kernel would rightly pick the app's sleep (973) first.
hog_adj=$(awk '$1 == "hog" { print $2 }' /test/oom.txt)
sh -c "echo \$\$ > $POD/hog/cgroup.procs; echo $hog_adj > /proc/self/oom_score_adj; exec dd if=/dev/zero of=/dev/null bs=200M count=1" > /tmp/hog.out 2>&1
rc=$?
pod_oom=$(awk '$1 == "oom" { print $2 }' $POD/memory.events.local)
pod_kill=$(awk '$1 == "oom_kill" { print $2 }' $POD/memory.events)
hog_oom=$(awk '$1 == "oom" { print $2 }' $POD/hog/memory.events.local)
hog_kill=$(awk '$1 == "oom_kill" { print $2 }' $POD/hog/memory.events.local)
log "pod memory.events.local: $(tr '\n' ' ' < $POD/memory.events.local)"
log "hog memory.events.local: $(tr '\n' ' ' < $POD/hog/memory.events.local)"
if [ $rc = 137 ] && [ "${pod_oom:-0}" -ge 1 ] && [ "${pod_kill:-0}" -ge 1 ] \
    && [ "${hog_oom:-1}" = 0 ] && [ "${hog_kill:-0}" -ge 1 ]; then
    pass "hog OOM-killed at the pod level (pod oom=$pod_oom oom_kill=$pod_kill; hog's own oom=$hog_oom)"
else
    fail "pod-level OOM: exit $rc, pod oom=$pod_oom oom_kill=$pod_kill, hog oom=$hog_oom oom_kill=$hog_kill"
fi
app_kill=$(awk '$1 == "oom_kill" { print $2 }' $POD/app/memory.events.local)
if kill -0 $APP_PID 2> /dev/null && [ "${app_kill:-1}" = 0 ]; then
    pass "the app container's process survived the hog's OOM kill"
else
    fail "the app container lost its process (oom_kill=$app_kill)"
fi
dmesg | grep -E 'oom-kill:' | head -1 | while read -r l; do log "dmesg: $l"; done

# --- 6. in-place resize applied live (KEP-1287): the `high` container's
# limits go up while a process runs in it; every pod and container file
# reads back as the policy computed for the resized pod, and no container
# limit is above the pod's at the end.
sleep 600 &
HIGH_PID=$!
echo $HIGH_PID > $POD/high/cgroup.procs
$PP resize /test/pod.yaml /test/pod-resized.yaml --node /test/node.yaml \
    --apply --cgroup-root $CG > /tmp/resize.txt 2>&1
rc=$?
if [ $rc = 0 ]; then pass "resize --apply exit 0 ($(grep -c . /tmp/resize.txt) lines of plan)"; else
    fail "resize --apply exit $rc"
    while read -r l; do log "  resize: $l"; done < /tmp/resize.txt
fi
while read -r dir file value; do
    check "$CG/$dir/$file" "$value"
done < /test/expected-resized.txt
pod_max=$(cat $POD/memory.max)
over=0
for c in $POD/*/; do
    v=$(cat ${c}memory.max)
    [ "$v" != max ] && [ "$pod_max" != max ] && [ "$v" -gt "$pod_max" ] && over=1
done
if [ $over = 0 ]; then pass "no container memory.max above the pod's ($pod_max)"; else fail "a container memory.max is above the pod's $pod_max"; fi
if kill -0 $HIGH_PID 2> /dev/null; then pass "the resized container's process kept running"; else fail "the resized container's process died"; fi
kill $HIGH_PID $APP_PID 2> /dev/null

# --- 7. the agent: a manifest appears -> cgroups; it goes -> cgroups removed.
mkdir -p /tmp/pods /tmp/agent-state
cp /test/agent-pod.yaml /tmp/pods/
AUID=$(awk '$1 == "uid:" { print $2 }' /test/agent-pod.yaml)
APOD=$CG/kubepods/burstable/pod$AUID
AGENT="$PP agent --once --pods-dir /tmp/pods --node /test/node.yaml --state-dir /tmp/agent-state --cgroup-root $CG"
$AGENT > /tmp/agent1.txt 2>&1
rc=$?
if [ $rc = 0 ] && [ -d $APOD/web ]; then pass "agent created $APOD/web"; else
    fail "agent: exit $rc, $APOD/web missing"
    while read -r l; do log "  agent: $l"; done < /tmp/agent1.txt
fi
check $APOD/web/memory.max 33554432
rm /tmp/pods/agent-pod.yaml
$AGENT > /tmp/agent2.txt 2>&1
rc=$?
# The agent's manifests are static pods: named <name>-<node> as the kubelet names them.
if [ $rc = 0 ] && [ ! -e $APOD ] && grep -q '"default/agent-pod-vm-node"' /tmp/agent2.txt; then
    pass "agent removed $APOD after its manifest went"
else
    fail "agent removal: exit $rc, $(ls -d $APOD 2>&1)"
    while read -r l; do log "  agent: $l"; done < /tmp/agent2.txt
fi
finish
