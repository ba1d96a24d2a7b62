"""The CRI side of tests/nri/run.sh: pods sent to containerd as the kubelet
sends them, and the container cgroup v1 files read back and checked.

usage: cri_flow.py --socket SOCK --state FLOW.json [--node NODE.yaml]
                   [--explain-dir DIR] [--runtime-oom N] STEP ...
  run POD.yaml --tag TAG [--last-applied] [--uid-suffix S] [--timed]
      RunPodSandbox, CreateContainer and StartContainer for every container
  check TAG --expect cri|explain [--resized] [--wait SECONDS]
      read the cgroup files back and compare them with the CRI's values or
      with `podpolicy explain -o json` (DIR/explain-<pods|resize>-<name>.json)
  resize TAG NEW.yaml     UpdateContainerResources with NEW's values
  drift TAG               write other cpu.shares / memory.limit_in_bytes by hand
  remove --tag-prefix P   StopPodSandbox + RemovePodSandbox of the tagged pods
  cleanup                 stop and remove every pod sandbox (no checks)

Run from the directory holding the stubs generated from the CRI's api.proto
(api_pb2.py, api_pb2_grpc.py). Checks print `ok   <what>` or `FAIL <what>`;
the exit status is 0 unless a step could not run at all.

The kubelet's conversions (pkg/kubelet/kuberuntime, pkg/kubelet/qos):
  cpu.shares = max(2, request milli-CPU * 1024 / 1000), from the limit when
  there is no request; cfs quota = limit milli-CPU * 100000 / 1000 (at least
  1000) with period 100000, only with a limit; memory limit in bytes; the
  QoS class picks cgroup_parent /kubepods[/burstable|/besteffort]/pod<uid>;
  oom_score_adj -997 (Guaranteed), 1000 (BestEffort), else 1000 - 1000 *
  memory request / memory capacity held within [3, 999]; the sandbox gets the
  pod's summed requests and limits (pod-level ones when spec.resources is set)
  in LinuxPodSandboxConfig.resources, always.
"""

import argparse
import json
import os
import re
import sys
import time

import grpc
import yaml

import api_pb2 as cri
import api_pb2_grpc as cri_grpc

CGROUP = "/sys/fs/cgroup"
PERIOD = 100000
MIN_QUOTA = 1000
MIN_SHARES = 2
PAGE = os.sysconf("SC_PAGE_SIZE")
# memory.limit_in_bytes of a v1 cgroup without a limit.
V1_UNLIMITED = (2**63 - 1) // PAGE * PAGE
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# The runtime's plugin_request_timeout (run.sh's containerd config).
PLUGIN_TIMEOUT_S = 2.0


# --- quantities and the kubelet's conversions ---

SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "": 1}


def milli_cpu(q):
    q = str(q)
    if q.endswith("m"):
        return int(q[:-1])
    return int(round(float(q) * 1000))


def mem_bytes(q):
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(q))
    if not m or m.group(2) not in SUFFIX:
        raise ValueError("unsupported memory quantity %r" % q)
    return int(float(m.group(1)) * SUFFIX[m.group(2)])


def container_values(container):
    """requests/limits of one container, with requests defaulted to limits."""
    res = container.get("resources") or {}
    limits = dict(res.get("limits") or {})
    requests = dict(res.get("requests") or {})
    for name, value in limits.items():
        requests.setdefault(name, value)
    return requests, limits


def qos_class(pod):
    containers = pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
    any_set = False
    guaranteed = True
    for c in containers:
        requests, limits = container_values(c)
        if requests or limits:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in limits or r not in requests or requests[r] != limits[r]:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def cgroup_parent(qos, uid):
    tier = {"Guaranteed": "", "Burstable": "/burstable", "BestEffort": "/besteffort"}[qos]
    return "/kubepods%s/pod%s" % (tier, uid)


def linux_resources(cpu_request, cpu_limit, memory_limit):
    """The kubelet's calculateLinuxResources, as a dict of CRI fields."""
    out = {}
    if cpu_request is None and cpu_limit:
        out["cpu_shares"] = max(MIN_SHARES, cpu_limit * 1024 // 1000)
    else:
        out["cpu_shares"] = max(MIN_SHARES, (cpu_request or 0) * 1024 // 1000)
    if cpu_limit:
        out["cpu_quota"] = max(MIN_QUOTA, cpu_limit * PERIOD // 1000)
        out["cpu_period"] = PERIOD
    if memory_limit:
        out["memory_limit_in_bytes"] = memory_limit
    return out


def oom_score_adj(qos, memory_request, memory_capacity):
    if qos == "Guaranteed":
        return -997
    if qos == "BestEffort":
        return 1000
    adj = 1000 - (1000 * memory_request) // memory_capacity
    if adj < 3:
        return 3
    if adj == 1000:
        return 999
    return adj


def sandbox_resources(pod):
    """The kubelet's calculateSandboxResources: pod-level values when the pod
    has spec.resources, else the containers' sums (limits of those that have
    one)."""
    pod_level = pod["spec"].get("resources")
    if pod_level:
        requests = dict(pod_level.get("requests") or {})
        limits = dict(pod_level.get("limits") or {})
        for name, value in limits.items():
            requests.setdefault(name, value)
        cpu_req = milli_cpu(requests["cpu"]) if "cpu" in requests else None
        cpu_lim = milli_cpu(limits["cpu"]) if "cpu" in limits else 0
        mem_lim = mem_bytes(limits["memory"]) if "memory" in limits else 0
        return linux_resources(cpu_req, cpu_lim, mem_lim)
    cpu_req, cpu_lim, mem_lim = None, 0, 0
    for c in pod["spec"]["containers"]:
        requests, limits = container_values(c)
        if "cpu" in requests:
            cpu_req = (cpu_req or 0) + milli_cpu(requests["cpu"])
        cpu_lim += milli_cpu(limits["cpu"]) if "cpu" in limits else 0
        mem_lim += mem_bytes(limits["memory"]) if "memory" in limits else 0
    return linux_resources(cpu_req, cpu_lim, mem_lim)


def container_resources(pod, container, memory_capacity):
    requests, limits = container_values(container)
    qos = qos_class(pod)
    out = linux_resources(
        milli_cpu(requests["cpu"]) if "cpu" in requests else None,
        milli_cpu(limits["cpu"]) if "cpu" in limits else 0,
        mem_bytes(limits["memory"]) if "memory" in limits else 0,
    )
    out["oom_score_adj"] = oom_score_adj(
        qos, mem_bytes(requests["memory"]) if "memory" in requests else 0, memory_capacity)
    return out


# --- reading back ---

def read(path):
    with open(path) as f:
        return f.read().strip()


def cgroup_paths(pid):
    """controller -> path below its hierarchy, from /proc/<pid>/cgroup."""
    paths = {}
    for line in read("/proc/%d/cgroup" % pid).splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            if c:
                paths[c] = path
    return paths


def weight_of(shares):
    """cgroup v1 shares -> v2 weight (runc's and the kubelet's linear map)."""
    return 1 + ((shares - 2) * 9999) // 262142


class Flow:
    def __init__(self, args):
        self.args = args
        self.rt = cri_grpc.RuntimeServiceStub(grpc.insecure_channel("unix://" + args.socket))
        self.state = {}
        if os.path.exists(args.state):
            with open(args.state) as f:
                self.state = json.load(f)
        self.memory_capacity = None
        if args.node:
            with open(args.node) as f:
                node = yaml.safe_load(f)
            self.memory_capacity = mem_bytes(node["capacity"]["memory"])
        self.failed = 0

    def save(self):
        tmp = self.args.state + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=1, sort_keys=True)
        os.replace(tmp, self.args.state)

    def report(self, good, what):
        print("%-4s %s" % ("ok" if good else "FAIL", what), flush=True)
        if not good:
            self.failed += 1

    # --- run ---

    def run(self, path, tag, last_applied, uid_suffix, timed):
        with open(path) as f:
            pod = yaml.safe_load(f)
        meta = pod["metadata"]
        if uid_suffix:
            meta["name"] = "%s-%s" % (meta["name"], uid_suffix)
            meta["uid"] = meta["uid"][: -len(uid_suffix)] + uid_suffix
        qos = qos_class(pod)
        parent = cgroup_parent(qos, meta["uid"])
        annotations = dict(meta.get("annotations") or {})
        if last_applied:
            applied = json.loads(json.dumps(pod))
            applied["metadata"].pop("uid", None)
            annotations[LAST_APPLIED] = json.dumps(applied, separators=(",", ":"), sort_keys=True) + "\n"
        labels = {
            "io.kubernetes.pod.name": meta["name"],
            "io.kubernetes.pod.namespace": meta.get("namespace", "default"),
            "io.kubernetes.pod.uid": meta["uid"],
        }
        labels.update(meta.get("labels") or {})
        namespaces = cri.NamespaceOption(network=cri.NODE, pid=cri.CONTAINER, ipc=cri.POD)
        log_dir = os.path.join(os.path.dirname(os.path.abspath(self.args.state)), "logs", "pods", meta["uid"])
        os.makedirs(log_dir, exist_ok=True)
        sandbox = cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name=meta["name"], uid=meta["uid"],
                                            namespace=meta.get("namespace", "default"), attempt=0),
            log_directory=log_dir,
            labels=labels,
            annotations=annotations,
            linux=cri.LinuxPodSandboxConfig(
                cgroup_parent=parent,
                security_context=cri.LinuxSandboxSecurityContext(namespace_options=namespaces),
                resources=cri.LinuxContainerResources(**sandbox_resources(pod)),
            ),
        )
        entry = {"pod": path, "name": meta["name"], "uid": meta["uid"], "qos": qos, "parent": parent,
                 "containers": {}}
        t = time.monotonic()
        try:
            entry["sandbox"] = self.rt.RunPodSandbox(cri.RunPodSandboxRequest(config=sandbox)).pod_sandbox_id
        except grpc.RpcError as e:
            self.report(False, "%s: RunPodSandbox: %s %s" % (tag, e.code(), e.details()))
            return
        self.state[tag] = entry
        self.save()
        took = {"RunPodSandbox": time.monotonic() - t}
        for c in pod["spec"]["containers"]:
            values = container_resources(pod, c, self.memory_capacity)
            config = cri.ContainerConfig(
                metadata=cri.ContainerMetadata(name=c["name"], attempt=0),
                image=cri.ImageSpec(image=c["image"]),
                log_path="%s/0.log" % c["name"],
                labels=dict(labels, **{"io.kubernetes.container.name": c["name"]}),
                linux=cri.LinuxContainerConfig(
                    resources=cri.LinuxContainerResources(**values),
                    security_context=cri.LinuxContainerSecurityContext(namespace_options=namespaces),
                ),
            )
            t = time.monotonic()
            try:
                cid = self.rt.CreateContainer(cri.CreateContainerRequest(
                    pod_sandbox_id=entry["sandbox"], config=config, sandbox_config=sandbox)).container_id
            except grpc.RpcError as e:
                self.report(False, "%s/%s: CreateContainer: %s %s" % (tag, c["name"], e.code(), e.details()))
                continue
            create = time.monotonic() - t
            took["CreateContainer " + c["name"]] = create
            entry["containers"][c["name"]] = {"id": cid, "cri": values}
            self.save()
            if timed:
                self.report(create < PLUGIN_TIMEOUT_S,
                            "%s/%s: CreateContainer answered in %.2fs (the runtime's plugin timeout is %.0fs)"
                            % (tag, c["name"], create, PLUGIN_TIMEOUT_S))
            t = time.monotonic()
            try:
                self.rt.StartContainer(cri.StartContainerRequest(container_id=cid))
            except grpc.RpcError as e:
                self.report(False, "%s/%s: StartContainer: %s %s" % (tag, c["name"], e.code(), e.details()))
                continue
            took["StartContainer " + c["name"]] = time.monotonic() - t
            status = self.rt.ContainerStatus(cri.ContainerStatusRequest(container_id=cid)).status
            self.report(status.state == cri.CONTAINER_RUNNING,
                        "%s/%s: started (%s, cgroup parent %s)"
                        % (tag, c["name"], cri.ContainerState.Name(status.state), parent))
        print("     %s: %s (%s%s)" % (tag, ", ".join("%s %.2fs" % kv for kv in took.items()), qos,
                                      ", last-applied annotation" if last_applied else ""), flush=True)

    # --- check ---

    def expected(self, tag, entry, name, expect, resized):
        """file -> (value, how) for one container; cpu.shares is checked
        through its v2 weight when explain is the reference."""
        runtime_oom = self.args.runtime_oom
        want = {"cpuset.cpus": (read(CGROUP + "/cpuset/cpuset.cpus"), "the root cpuset: no manager pins it")}
        if expect == "cri":
            v = entry["containers"][name]["cri"]
            want["cpu.shares"] = (v["cpu_shares"], "CRI")
            want["cpu.cfs_quota_us"] = (v.get("cpu_quota", -1), "CRI")
            want["cpu.cfs_period_us"] = (v.get("cpu_period", PERIOD), "CRI")
            want["memory.limit_in_bytes"] = (v.get("memory_limit_in_bytes", V1_UNLIMITED), "CRI")
            oom = v["oom_score_adj"]
        else:
            report = self.explain_report(entry, resized)
            pod = report["pods"][0]
            if pod.get("errors"):
                raise RuntimeError("explain refused %s: %s" % (entry["pod"], pod["errors"]))
            c = [c for c in pod["containers"] if c["name"] == name][0]
            files = c["cgroup"]
            quota, period = files["cpu.max"].split()
            want["cpu.shares"] = (int(files["cpu.weight"]), "explain cpu.weight")
            want["cpu.cfs_quota_us"] = (-1 if quota == "max" else int(quota), "explain cpu.max")
            want["cpu.cfs_period_us"] = (int(period), "explain cpu.max")
            mem = files["memory.max"]
            want["memory.limit_in_bytes"] = (V1_UNLIMITED if mem == "max" else int(mem), "explain memory.max")
            if "cpuset.cpus" in files:
                want["cpuset.cpus"] = (files["cpuset.cpus"], "explain cpuset.cpus")
            oom = c["oomScoreAdj"]
        how = "CRI" if expect == "cri" else "explain"
        if runtime_oom is not None and oom < runtime_oom:
            want["oom_score_adj"] = (runtime_oom, "%s %d, raised to containerd's own %d by restrict_oom_score_adj"
                                     % (how, oom, runtime_oom))
        else:
            want["oom_score_adj"] = (oom, how)
        return want

    def explain_report(self, entry, resized):
        stem = os.path.splitext(os.path.basename(entry["pod"]))[0]
        path = os.path.join(self.args.explain_dir, "explain-%s-%s.json" % ("resize" if resized else "pods", stem))
        with open(path) as f:
            return json.load(f)

    def observe(self, entry, name):
        """The container's files; LookupError when it has no process."""
        cid = entry["containers"][name]["id"]
        status = self.rt.ContainerStatus(cri.ContainerStatusRequest(container_id=cid, verbose=True))
        pid = json.loads(status.info["info"]).get("pid", 0)
        if status.status.state != cri.CONTAINER_RUNNING or not pid:
            raise LookupError("not running (%s: %s)" % (cri.ContainerState.Name(status.status.state),
                                                         status.status.message or status.status.reason))
        paths = cgroup_paths(pid)
        got = {"paths": {c: paths.get(c) for c in ("cpu", "memory", "cpuset")}}
        for controller, file in (("cpu", "cpu.shares"), ("cpu", "cpu.cfs_quota_us"), ("cpu", "cpu.cfs_period_us"),
                                 ("memory", "memory.limit_in_bytes"), ("cpuset", "cpuset.cpus")):
            value = read("%s/%s%s/%s" % (CGROUP, controller, paths[controller], file))
            got[file] = value if file == "cpuset.cpus" else int(value)
        got["oom_score_adj"] = int(read("/proc/%d/oom_score_adj" % pid))
        return got

    def compare(self, want, got, expect):
        """(file, good, text) per file."""
        out = []
        for file, (value, how) in want.items():
            have = got[file]
            if file == "cpu.shares" and expect == "explain":
                good = weight_of(have) == value
                text = "%s = %d (v2 weight %d; %s %d)" % (file, have, weight_of(have), how, value)
            else:
                good = have == value
                text = "%s = %s (%s%s)" % (file, have, how, "" if good else ", want %s" % value)
            out.append((file, good, text))
        return out

    def check(self, tag, expect, resized, wait):
        entry = self.state.get(tag)
        if not entry or not entry["containers"]:
            self.report(False, "%s: no such pod or no containers to check" % tag)
            return
        deadline = time.monotonic() + wait
        while True:
            results = []
            for name in entry["containers"]:
                want = self.expected(tag, entry, name, expect, resized)
                try:
                    got = self.observe(entry, name)
                except LookupError as e:
                    results.append((name, {"paths": {}, "error": str(e)}, [("", False, "read back: %s" % e)]))
                    continue
                results.append((name, got, self.compare(want, got, expect)))
            pod_results = self.check_pod(entry, expect) if not resized else []
            settled = all(g for _, _, r in results for _, g, _ in r) and all(g for g, _ in pod_results)
            if settled or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        label = "%s (%s%s)" % (tag, "runtime defaults" if expect == "cri" else "explain",
                               ", resized" if resized else "")
        for name, got, rows in results:
            cid = entry["containers"][name]["id"]
            path = entry["parent"] + "/" + cid
            self.report(got["paths"] and all(p == path for p in got["paths"].values()),
                        "%s/%s: container cgroup %s in cpu, memory and cpuset" % (label, name, path))
            for _, good, text in rows:
                self.report(good, "%s/%s: %s" % (label, name, text))
        for good, text in pod_results:
            self.report(good, "%s: pod cgroup %s" % (label, text))

    def check_pod(self, entry, expect):
        """The pod cgroup (cgroup_parent): containerd writes nothing there,
        so it holds what runc created it with."""
        parent = entry["parent"]
        got = {
            "cpu.shares": int(read("%s/cpu%s/cpu.shares" % (CGROUP, parent))),
            "cpu.cfs_quota_us": int(read("%s/cpu%s/cpu.cfs_quota_us" % (CGROUP, parent))),
            "memory.limit_in_bytes": int(read("%s/memory%s/memory.limit_in_bytes" % (CGROUP, parent))),
        }
        # This host is cgroup v1: the plugin writes pod cgroups on cgroup v2
        # only (its one writer, cgroupfs, refuses a v1 mount; README, "Limits
        # of this version"), so with or without it the pod cgroup keeps
        # runc's values. Checked, so that a change of that shows here.
        why = "runc's default" if expect == "cri" else "runc's default: no pod cgroup writes on cgroup v1"
        want = {"cpu.shares": (1024, why), "cpu.cfs_quota_us": (-1, why),
                "memory.limit_in_bytes": (V1_UNLIMITED, why)}
        return [(good, text) for _, good, text in self.compare(want, got, "cri")]

    # --- resize, drift, remove ---

    def resize(self, tag, path):
        entry = self.state[tag]
        with open(path) as f:
            pod = yaml.safe_load(f)
        for c in pod["spec"]["containers"]:
            if c["name"] not in entry["containers"]:
                continue
            values = container_resources(pod, c, self.memory_capacity)
            t = time.monotonic()
            try:
                self.rt.UpdateContainerResources(cri.UpdateContainerResourcesRequest(
                    container_id=entry["containers"][c["name"]]["id"],
                    linux=cri.LinuxContainerResources(**values)))
            except grpc.RpcError as e:
                self.report(False, "%s/%s: UpdateContainerResources: %s %s" % (tag, c["name"], e.code(), e.details()))
                continue
            self.report(True, "%s/%s: UpdateContainerResources %s (%.2fs)" % (
                tag, c["name"], " ".join("%s=%s" % kv for kv in sorted(values.items())), time.monotonic() - t))
            entry["containers"][c["name"]]["cri"] = values
        entry["resized"] = path
        self.save()

    def drift(self, tag):
        entry = self.state[tag]
        for name, c in entry["containers"].items():
            try:
                got = self.observe(entry, name)
            except LookupError as e:
                self.report(False, "%s/%s: no drift written: %s" % (tag, name, e))
                continue
            paths = got["paths"]
            shares = got["cpu.shares"] + 1000
            memory = got["memory.limit_in_bytes"]
            # Lower a finite limit (memsw must stay >= it), set an absent one.
            memory = memory - 16 * 2**20 if memory != V1_UNLIMITED else 2**30
            for controller, file, value in (("cpu", "cpu.shares", shares),
                                            ("memory", "memory.limit_in_bytes", memory)):
                p = "%s/%s%s/%s" % (CGROUP, controller, paths[controller], file)
                with open(p, "w") as f:
                    f.write(str(value))
            now = self.observe(entry, name)
            self.report(now["cpu.shares"] == shares and now["memory.limit_in_bytes"] == memory,
                        "%s/%s: drift written by hand: cpu.shares %d -> %d, memory.limit_in_bytes %d -> %d"
                        % (tag, name, got["cpu.shares"], now["cpu.shares"], got["memory.limit_in_bytes"],
                           now["memory.limit_in_bytes"]))

    def remove(self, prefix):
        tags = [t for t in self.state if t.startswith(prefix)]
        t = time.monotonic()
        cgroups = []
        for tag in tags:
            entry = self.state[tag]
            cgroups += ["%s/cpu%s/%s" % (CGROUP, entry["parent"], c["id"]) for c in entry["containers"].values()]
            try:
                self.rt.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=entry["sandbox"]))
                self.rt.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=entry["sandbox"]))
            except grpc.RpcError as e:
                self.report(False, "%s: Stop/RemovePodSandbox: %s %s" % (tag, e.code(), e.details()))
                continue
            del self.state[tag]
        self.save()
        took = time.monotonic() - t
        ids = {self.state_sandbox(t) for t in tags}
        left = [s.id for s in self.rt.ListPodSandbox(cri.ListPodSandboxRequest()).items]
        containers = self.rt.ListContainers(cri.ListContainersRequest()).containers
        if prefix == "":
            self.report(not left and not containers,
                        "remove all: %d pods stopped and removed (%.2fs); the runtime lists %d pods, %d containers"
                        % (len(tags), took, len(left), len(containers)))
        else:
            self.report(not (ids & set(left)), "remove %s*: %d pods stopped and removed (%.2fs)"
                        % (prefix, len(tags), took))
        stale = [c for c in cgroups if os.path.exists(c)]
        self.report(not stale, "remove %s*: container cgroups gone (%d)%s"
                    % (prefix, len(cgroups), "; left: " + " ".join(stale) if stale else ""))

    def state_sandbox(self, tag):
        return self.state.get(tag, {}).get("sandbox")

    def cleanup(self):
        for s in self.rt.ListPodSandbox(cri.ListPodSandboxRequest()).items:
            try:
                self.rt.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=s.id))
                self.rt.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=s.id))
                print("removed pod", s.id[:12])
            except grpc.RpcError as e:
                print("could not remove pod %s: %s %s" % (s.id[:12], e.code(), e.details()))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--socket", required=True)
    p.add_argument("--state", required=True)
    p.add_argument("--node")
    p.add_argument("--explain-dir", default=".")
    p.add_argument("--runtime-oom", type=int)
    steps = p.add_subparsers(dest="step", required=True)
    s = steps.add_parser("run")
    s.add_argument("pod")
    s.add_argument("--tag", required=True)
    s.add_argument("--last-applied", action="store_true")
    s.add_argument("--uid-suffix", default="")
    s.add_argument("--timed", action="store_true")
    s = steps.add_parser("check")
    s.add_argument("tag")
    s.add_argument("--expect", choices=("cri", "explain"), required=True)
    s.add_argument("--resized", action="store_true")
    s.add_argument("--wait", type=float, default=0)
    s = steps.add_parser("resize")
    s.add_argument("tag")
    s.add_argument("pod")
    s = steps.add_parser("drift")
    s.add_argument("tag")
    s = steps.add_parser("remove")
    s.add_argument("--tag-prefix", required=True)
    steps.add_parser("cleanup")
    args = p.parse_args()
    flow = Flow(args)
    if args.step == "run":
        flow.run(args.pod, args.tag, args.last_applied, args.uid_suffix, args.timed)
    elif args.step == "check":
        flow.check(args.tag, args.expect, args.resized, args.wait)
    elif args.step == "resize":
        flow.resize(args.tag, args.pod)
    elif args.step == "drift":
        flow.drift(args.tag)
    elif args.step == "remove":
        flow.remove(args.tag_prefix)
    else:
        flow.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
