//! `podpolicy nri`'s state under crashes: the plugin's engine (the same
//! code the binary runs, driven here in-process) is stopped at every step
//! boundary of a run of events, or the binary is killed with SIGKILL at
//! random moments under a stand-in runtime's events; after a restart and the
//! runtime's `Synchronize`, exactly the running containers hold CPUs, no CPU
//! is held twice, the plugin's record lists exactly the running containers,
//! the shared containers are on the shared pool, and no temporary or intent
//! file is left.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use podpolicy::nri::engine::{Engine, EngineOptions, NriState, STATE_FILE};
use podpolicy::nri::proto::api;
use podpolicy::runtime::{Cache, Limits, PolicyRuntime};
use podpolicy::state_dir;
use podpolicy::swap::PolicySlot;

use crate::node_faults::{
    assert_no_double_assignment, checkpoint_uids, cpu_assignments, leftovers,
};
use crate::util::{cache_dir, temp_dir, workspace};

const STATIC_NODE: &str = "fixtures/nodes/dual-socket-static.yaml";
const SYSFS: &str = "fixtures/sysfs/topoDualSocketHT";

/// One pod of the scenario: its sandbox (with its own spec as the
/// last-applied annotation) and its one container `app`.
pub(crate) struct Workload {
    pub(crate) sandbox: api::PodSandbox,
    pub(crate) container: api::Container,
}

pub(crate) fn workload(name: &str, cpus: Option<u32>) -> Workload {
    let uid = format!("uid-{name}");
    let (resources, parent, cri) = match cpus {
        Some(n) => (
            format!(
                r#"{{"requests":{{"cpu":"{n}","memory":"256Mi"}},"limits":{{"cpu":"{n}","memory":"256Mi"}}}}"#
            ),
            format!("/kubepods/pod{uid}"),
            cri_resources(u64::from(n) * 1024, i64::from(n) * 100_000, 256 << 20),
        ),
        None => (
            r#"{"requests":{"cpu":"100m","memory":"64Mi"}}"#.to_string(),
            format!("/kubepods/burstable/pod{uid}"),
            cri_resources(102, 0, 0),
        ),
    };
    let spec = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"default","uid":"{uid}"}},"spec":{{"containers":[{{"name":"app","image":"x","resources":{resources}}}]}}}}"#
    );
    let mut sandbox = api::PodSandbox::new();
    sandbox.id = format!("sb-{name}");
    sandbox.name = name.into();
    sandbox.namespace = "default".into();
    sandbox.uid = uid;
    sandbox.annotations.insert(
        "kubectl.kubernetes.io/last-applied-configuration".into(),
        spec,
    );
    let mut linux = api::LinuxPodSandbox::new();
    linux.cgroup_parent = parent;
    sandbox.linux = Some(linux).into();
    let mut container = api::Container::new();
    container.id = format!("c-{name}");
    container.pod_sandbox_id = sandbox.id.clone();
    container.name = "app".into();
    let mut cl = api::LinuxContainer::new();
    cl.resources = Some(cri).into();
    container.linux = Some(cl).into();
    Workload { sandbox, container }
}

/// The CRI resources the kubelet sends for a container (no CFS quota and
/// period when `quota` is 0, no memory limit when `memory` is 0).
pub(crate) fn cri_resources(shares: u64, quota: i64, memory: i64) -> api::LinuxResources {
    let mut r = api::LinuxResources::new();
    let mut cpu = api::LinuxCPU::new();
    cpu.shares = Some(api::OptionalUInt64 {
        value: shares,
        ..Default::default()
    })
    .into();
    if quota > 0 {
        cpu.quota = Some(api::OptionalInt64 {
            value: quota,
            ..Default::default()
        })
        .into();
        cpu.period = Some(api::OptionalUInt64 {
            value: 100_000,
            ..Default::default()
        })
        .into();
    }
    r.cpu = Some(cpu).into();
    if memory > 0 {
        let mut mem = api::LinuxMemory::new();
        mem.limit = Some(api::OptionalInt64 {
            value: memory,
            ..Default::default()
        })
        .into();
        r.memory = Some(mem).into();
    }
    r
}

struct Dirs {
    state: PathBuf,
    cgroups: PathBuf,
}

fn dirs(name: &str) -> Dirs {
    let dir = temp_dir(name);
    let d = Dirs {
        state: dir.join("state"),
        cgroups: dir.join("cgroup"),
    };
    std::fs::create_dir_all(&d.cgroups).unwrap();
    d
}

fn start(d: &Dirs) -> Engine {
    start_on(d, &workspace().join(STATIC_NODE))
}

fn start_on(d: &Dirs, node: &std::path::Path) -> Engine {
    // One loaded policy for every engine (each call still gets a fresh
    // instance); loading it is most of a debug-build start.
    static POLICY: std::sync::OnceLock<Arc<PolicyRuntime>> = std::sync::OnceLock::new();
    let policy = POLICY
        .get_or_init(|| {
            Arc::new(
                PolicyRuntime::embedded(&Cache::Dir(cache_dir()), Limits::default())
                    .expect("policy loads"),
            )
        })
        .clone();
    Engine::start(
        EngineOptions {
            node: podpolicy::node_input::read_node(node).unwrap(),
            state_dir: d.state.clone(),
            cgroup_root: d.cgroups.clone(),
            sysfs_root: workspace().join(SYSFS),
        },
        Arc::new(PolicySlot::from_arc(policy)),
    )
    .expect("the engine starts")
}

/// Pods `a` (2 CPUs), `b` (2 CPUs) and the Burstable `s` run.
fn prefix(engine: &mut Engine, w: [&Workload; 3]) {
    for x in w {
        engine
            .create_container(&x.sandbox, &x.container)
            .expect("created");
    }
}

/// The events under test: `c` (4 CPUs) is created, `b`'s container stops
/// and is removed, then its pod; `a`'s pod goes without a StopContainer.
/// With `recorded`, the engine answers on the commit's durable record and
/// finishes it after every answer, as `podpolicy nri` does.
fn events(engine: &mut Engine, c: &Workload, b: &Workload, a: &Workload, recorded: bool) {
    let finish = |engine: &mut Engine| {
        if recorded {
            engine.finish_recorded().unwrap();
        }
    };
    engine.create_container(&c.sandbox, &c.container).unwrap();
    finish(engine);
    engine
        .release_container(&b.sandbox, &b.container, false)
        .unwrap();
    finish(engine);
    engine
        .release_container(&b.sandbox, &b.container, true)
        .unwrap();
    finish(engine);
    engine.remove_pod_sandbox(&b.sandbox).unwrap();
    finish(engine);
    engine.remove_pod_sandbox(&a.sandbox).unwrap();
    finish(engine);
}

/// After a restart and the runtime's Synchronize of `live`: exactly the
/// live Guaranteed pods hold CPUs, once each; the record lists exactly the
/// live containers; every live container gets its values, the shared one
/// the whole shared pool; nothing is left half-written.
fn assert_recovered(d: &Dirs, live: &[&Workload], context: &str) {
    let mut engine = start(d);
    let pods: Vec<api::PodSandbox> = live.iter().map(|w| w.sandbox.clone()).collect();
    let containers: Vec<api::Container> = live.iter().map(|w| w.container.clone()).collect();
    let (updates, detail) = engine
        .synchronize(&pods, &containers, Instant::now() + Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{context}: synchronize: {e:#}"));
    assert_eq!(updates.len(), live.len(), "{context}: {detail}");
    let exclusive: BTreeSet<String> = live
        .iter()
        .filter(|w| w.sandbox.linux.cgroup_parent.starts_with("/kubepods/pod"))
        .map(|w| w.sandbox.uid.clone())
        .collect();
    assert_eq!(
        checkpoint_uids(&d.state),
        exclusive,
        "{context}: checkpoint"
    );
    assert_no_double_assignment(&d.state, context);
    let want: BTreeSet<String> = live.iter().map(|w| w.container.id.clone()).collect();
    assert_eq!(
        recorded_ids(&d.state),
        Some(want),
        "{context}: the plugin's record"
    );
    // The shared container's cpuset is the pool: every CPU no live
    // exclusive container holds, minus the reserved ones.
    let held: BTreeSet<u32> = cpu_assignments(&d.state)
        .into_iter()
        .filter(|((_, c), _)| c != "(pod)")
        .flat_map(|(_, cpus)| cpus)
        .collect();
    let pool = engine
        .manager_state()
        .map(|m| m.cpu.default_cpuset.clone())
        .unwrap();
    let pool = podpolicy::admit::parse_cpu_list(&pool).unwrap();
    assert!(
        pool.is_disjoint(&held),
        "{context}: pool {pool:?} held {held:?}"
    );
    for u in &updates {
        let cpus = &u.linux.resources.cpu.cpus;
        if u.container_id == "c-s" {
            assert_eq!(
                podpolicy::admit::parse_cpu_list(cpus).unwrap(),
                pool,
                "{context}: the shared container"
            );
        }
    }
    assert!(
        leftovers(&d.state).is_empty(),
        "{context}: {:?}",
        leftovers(&d.state)
    );
}

#[test]
fn nri_a_crash_at_every_step_boundary_then_synchronize_leaks_nothing() {
    crash_at_every_step_boundary(false);
}

/// The same with the answers given on the commit's durable intent record
/// and its files replaced after the answer (`podpolicy nri`'s mode): a
/// crash between the two is replayed by the restart.
#[test]
fn nri_answering_on_the_durable_record_a_crash_at_every_step_boundary_leaks_nothing() {
    crash_at_every_step_boundary(true);
}

fn crash_at_every_step_boundary(recorded: bool) {
    let mode = if recorded { "recorded" } else { "inline" };
    let [a, b, s, c] = ["a", "b", "s", "c"].map(|n| match n {
        "s" => workload(n, None),
        "c" => workload(n, Some(4)),
        _ => workload(n, Some(2)),
    });
    // The step boundaries the events pass.
    let d = dirs(&format!("nri-crash-trace-{mode}"));
    let mut engine = start(&d);
    engine.answer_on_durable_record(recorded);
    prefix(&mut engine, [&a, &b, &s]);
    engine.finish_recorded().unwrap();
    state_dir::trace_crash_points();
    events(&mut engine, &c, &b, &a, recorded);
    let points = state_dir::traced_crash_points();
    drop(engine);
    let distinct: BTreeSet<&String> = points.iter().collect();
    assert!(
        distinct.iter().any(|p| p.starts_with("nri:")) && distinct.len() >= 4,
        "too few step boundaries traced: {points:?}"
    );
    for point in distinct {
        // How many times the point is passed before the crash: every one.
        let passes = points.iter().filter(|p| *p == point).count();
        for nth in 1..=passes {
            // The runtime goes on without the plugin: `b` and `a` are gone
            // either way; a crash in `c`'s CreateContainer (the first pass
            // of each point) leaves `c` running without the plugin's values
            // or failed, a later one running.
            let outcomes: &[bool] = if nth == 1 { &[true, false] } else { &[true] };
            for &c_runs in outcomes {
                let context = format!("{point} (pass {nth}, c runs: {c_runs})");
                let d = dirs(&format!("nri-crash-{mode}"));
                let mut engine = start(&d);
                engine.answer_on_durable_record(recorded);
                prefix(&mut engine, [&a, &b, &s]);
                engine.finish_recorded().unwrap();
                state_dir::arm_crash_point_nth(Some(point), nth);
                let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    events(&mut engine, &c, &b, &a, recorded);
                }));
                state_dir::arm_crash_point(None);
                assert!(crashed.is_err(), "{context}: the events did not reach it");
                drop(engine);
                let live: Vec<&Workload> = if c_runs { vec![&s, &c] } else { vec![&s] };
                assert_recovered(&d, &live, &context);
            }
        }
    }
}

/// The plugin's record in the state directory `state`: the container ids
/// it lists (`None` when it was not written).
pub(crate) fn recorded_ids(state: &Path) -> Option<BTreeSet<String>> {
    let bytes = std::fs::read(state.join(STATE_FILE)).ok()?;
    let state: NriState = serde_json::from_slice(&bytes).unwrap();
    Some(
        state
            .pods
            .values()
            .flat_map(|p| p.containers.keys().cloned())
            .collect(),
    )
}

/// Without the resource managers the record holds only container names,
/// which the runtime's Synchronize gives again: a CreateContainer answer
/// does not wait for a commit, and after a crash that lost the record the
/// restarted plugin's Synchronize answers every running container and
/// writes the record listing exactly them; a removal writes what it forgot.
#[test]
fn nri_without_managers_a_create_does_not_commit_and_synchronize_rebuilds_the_record() {
    let d = dirs("nri-no-managers");
    let node = d.state.with_file_name("node.yaml");
    std::fs::write(
        &node,
        "name: plain\ncgroupVersion: v2\ncapacity: {cpu: \"4\", memory: 8Gi}\n",
    )
    .unwrap();
    let (g, s) = (workload("g", Some(2)), workload("s", None));
    let mut engine = start_on(&d, &node);
    assert!(engine.manager_state().is_none(), "no managers on this node");
    for w in [&g, &s] {
        let (adjust, updates, detail) = engine
            .create_container(&w.sandbox, &w.container)
            .expect("answered");
        assert!(adjust.linux.is_some() && updates.is_empty(), "{detail}");
    }
    assert_eq!(engine.state().pods.len(), 2, "both recorded in memory");
    assert_eq!(recorded_ids(&d.state), None, "a create commits nothing");
    drop(engine);

    let mut engine = start_on(&d, &node);
    let (updates, detail) = engine
        .synchronize(
            &[g.sandbox.clone(), s.sandbox.clone()],
            &[g.container.clone(), s.container.clone()],
            Instant::now() + Duration::from_secs(60),
        )
        .expect("synchronized");
    let answered: BTreeSet<&str> = updates.iter().map(|u| u.container_id.as_str()).collect();
    assert_eq!(answered, BTreeSet::from(["c-g", "c-s"]), "{detail}");
    assert_eq!(
        recorded_ids(&d.state),
        Some(BTreeSet::from(["c-g".to_string(), "c-s".to_string()])),
        "Synchronize writes the record of what runs"
    );

    engine
        .release_container(&s.sandbox, &s.container, true)
        .unwrap();
    engine.remove_pod_sandbox(&s.sandbox).unwrap();
    assert_eq!(
        recorded_ids(&d.state),
        Some(BTreeSet::from(["c-g".to_string()])),
        "a removal writes the record"
    );
}

/// With the static managers, a shared-pool container's create changes no
/// manager state and commits nothing (its record is given again by
/// Synchronize); a commit writes only the files that changed: removing
/// such a pod rewrites the record, not the checkpoints (they keep their
/// inode: not replaced), a Guaranteed create all three; the restarted
/// engine reads the state those commits left.
#[test]
fn nri_static_managers_a_shared_container_commits_only_the_record() {
    use std::os::unix::fs::MetadataExt as _;
    let d = dirs("nri-commit-subset");
    let inode = |name: &str| std::fs::metadata(d.state.join(name)).unwrap().ino();
    let files = ["cpu_manager_state", "memory_manager_state", STATE_FILE];
    let inodes = || files.map(inode);
    let [g, s, t] = [("g", Some(2)), ("s", None), ("t", None)].map(|(n, c)| workload(n, c));
    let mut engine = start(&d);
    engine
        .create_container(&g.sandbox, &g.container)
        .expect("answered");
    let after_g = inodes();
    assert_eq!(
        recorded_ids(&d.state),
        Some(BTreeSet::from(["c-g".to_string()]))
    );
    for w in [&s, &t] {
        let (adjust, _, detail) = engine
            .create_container(&w.sandbox, &w.container)
            .expect("answered");
        let cpus = adjust.linux.unwrap().resources.unwrap().cpu.unwrap().cpus;
        assert!(!cpus.is_empty(), "on the shared pool: {detail}");
    }
    assert_eq!(inodes(), after_g, "a shared-pool create commits nothing");
    assert_eq!(engine.state().pods.len(), 3, "recorded in memory");

    engine
        .release_container(&s.sandbox, &s.container, true)
        .unwrap();
    engine.remove_pod_sandbox(&s.sandbox).unwrap();
    let after_removal = inodes();
    assert_eq!(
        after_removal[..2],
        after_g[..2],
        "checkpoints not rewritten"
    );
    // The record is (its inode may be reused by the second replacement).
    assert_eq!(
        recorded_ids(&d.state),
        Some(BTreeSet::from(["c-g".to_string(), "c-t".to_string()]))
    );

    let state = engine.manager_state().cloned();
    drop(engine);
    let engine = start(&d);
    assert_eq!(engine.manager_state().cloned(), state, "the state survives");
    assert!(leftovers(&d.state).is_empty(), "{:?}", leftovers(&d.state));
}
