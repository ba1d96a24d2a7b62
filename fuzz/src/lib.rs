//! Shared code of podpolicy's fuzz targets.
//!
//! - [`Case`]: one fuzz input, a pod, node settings, `effective-resources`
//!   options and `container-memory-high` arguments, in the host's WIT types
//!   ([`podpolicy::bindings`]). It implements [`Arbitrary`] with a
//!   structure-aware codec: every field is read through one small
//!   [`Stream`] function that also writes it, so [`Case::to_bytes`] is the
//!   exact inverse of decoding. That is what lets the seed corpora come from
//!   the real fixtures ([`seeds`]), and every libFuzzer mutation still
//!   decodes to a pod: bytes choose among known resource names, enum values
//!   and quantity spellings, or spell raw text.
//! - [`to_native`]: the same values in `policy-wasm`'s own (wit-bindgen) types.
//! - [`render`]: one canonical text for results of either side. Both binding
//!   generators print WIT records, enums and variants with the same `Debug`
//!   (WIT field names, `Enum::Case`), so the `Debug` text is the comparison.
//!
//! The codec never fails: running out of bytes reads zeros, which end lists
//! and leave options empty.

use std::fmt::Debug;

use arbitrary::{Arbitrary, Unstructured};
use podpolicy::bindings as host;

pub use policy_wasm::wit as native;

pub mod alloc;
pub mod checks;
mod convert;
pub mod seeds;
pub mod sequence;
pub use convert::{ToNative, to_native};

/// The codec's result type.
pub type Result<T> = arbitrary::Result<T>;

/// One direction of the codec: a [`Reader`] overwrites `v`, a [`Writer`] emits it.
pub trait Stream {
    /// Read one byte into `v`, or write `v`.
    fn byte(&mut self, v: &mut u8) -> Result<()>;
}

/// Decodes bytes from libFuzzer (zeros once they run out).
pub struct Reader<'a, 'b> {
    u: &'b mut Unstructured<'a>,
}

impl Stream for Reader<'_, '_> {
    fn byte(&mut self, v: &mut u8) -> Result<()> {
        *v = u8::arbitrary(self.u)?;
        Ok(())
    }
}

/// Encodes a value into the bytes that decode back to it.
#[derive(Default)]
pub struct Writer {
    /// The encoding so far.
    pub bytes: Vec<u8>,
}

impl Stream for Writer {
    fn byte(&mut self, v: &mut u8) -> Result<()> {
        self.bytes.push(*v);
        Ok(())
    }
}

/// A tag at or above this spells raw text instead of a known value.
const RAW: u8 = 0xF0;
/// The longest raw text.
const MAX_TEXT: usize = 64;

fn flag<S: Stream>(s: &mut S, v: &mut bool) -> Result<()> {
    let mut b = u8::from(*v);
    s.byte(&mut b)?;
    *v = b & 1 == 1;
    Ok(())
}

fn raw<S: Stream, const N: usize>(s: &mut S, bytes: &mut [u8; N]) -> Result<()> {
    for b in bytes.iter_mut() {
        s.byte(b)?;
    }
    Ok(())
}

fn text<S: Stream>(s: &mut S, v: &mut String) -> Result<()> {
    let mut end = v.len().min(MAX_TEXT);
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    let mut bytes = v.as_bytes()[..end].to_vec();
    let mut len = end as u8;
    s.byte(&mut len)?;
    bytes.resize(usize::from(len) % (MAX_TEXT + 1), 0);
    for b in bytes.iter_mut() {
        s.byte(b)?;
    }
    *v = String::from_utf8_lossy(&bytes).into_owned();
    Ok(())
}

/// One of `known`, or raw text.
fn choice<S: Stream>(s: &mut S, v: &mut String, known: &[&str]) -> Result<()> {
    let mut tag = known.iter().position(|k| k == v).map_or(RAW, |i| i as u8);
    s.byte(&mut tag)?;
    if tag >= RAW {
        text(s, v)
    } else {
        *v = known[usize::from(tag) % known.len()].to_string();
        Ok(())
    }
}

/// One of `all` (enums).
fn variant<S: Stream, T: Copy + PartialEq>(s: &mut S, v: &mut T, all: &[T]) -> Result<()> {
    let mut tag = all.iter().position(|k| k == v).unwrap_or(0) as u8;
    s.byte(&mut tag)?;
    *v = all[usize::from(tag) % all.len()];
    Ok(())
}

/// One of `table`, or any 64-bit value.
fn number<S: Stream>(s: &mut S, v: &mut u64, table: &[u64]) -> Result<()> {
    let mut tag = table.iter().position(|k| k == v).map_or(RAW, |i| i as u8);
    s.byte(&mut tag)?;
    if tag >= RAW {
        let mut bytes = v.to_le_bytes();
        raw(s, &mut bytes)?;
        *v = u64::from_le_bytes(bytes);
    } else {
        *v = table[usize::from(tag) % table.len()];
    }
    Ok(())
}

/// One of `table`, or any bit pattern (NaN, infinities, negatives).
fn float<S: Stream>(s: &mut S, v: &mut f64, table: &[f64]) -> Result<()> {
    let mut tag = table
        .iter()
        .position(|k| k.to_bits() == v.to_bits())
        .map_or(RAW, |i| i as u8);
    s.byte(&mut tag)?;
    if tag >= RAW {
        let mut bytes = v.to_bits().to_le_bytes();
        raw(s, &mut bytes)?;
        *v = f64::from_bits(u64::from_le_bytes(bytes));
    } else {
        *v = table[usize::from(tag) % table.len()];
    }
    Ok(())
}

fn int<S: Stream>(s: &mut S, v: &mut i32, table: &[i32]) -> Result<()> {
    let mut wide = *v as u32 as u64;
    let table: Vec<u64> = table.iter().map(|t| *t as u32 as u64).collect();
    number(s, &mut wide, &table)?;
    *v = wide as u32 as i32;
    Ok(())
}

fn opt<S: Stream, T>(
    s: &mut S,
    v: &mut Option<T>,
    new: impl Fn() -> T,
    f: impl Fn(&mut S, &mut T) -> Result<()>,
) -> Result<()> {
    let mut present = v.is_some();
    flag(s, &mut present)?;
    if present {
        let mut value = v.take().unwrap_or_else(new);
        f(s, &mut value)?;
        *v = Some(value);
    } else {
        *v = None;
    }
    Ok(())
}

fn list<S: Stream, T>(
    s: &mut S,
    v: &mut Vec<T>,
    max: usize,
    new: impl Fn() -> T,
    f: impl Fn(&mut S, &mut T) -> Result<()>,
) -> Result<()> {
    let mut len = v.len().min(max) as u8;
    s.byte(&mut len)?;
    let len = usize::from(len) % (max + 1);
    v.truncate(len);
    while v.len() < len {
        v.push(new());
    }
    for item in v.iter_mut() {
        f(s, item)?;
    }
    Ok(())
}

/// Quantity suffixes for structured quantities.
const SUFFIXES: [&str; 16] = [
    "", "m", "k", "Ki", "Mi", "Gi", "M", "G", "n", "u", "T", "Ti", "P", "Pi", "E", "Ei",
];

/// A quantity: raw text (what the writer emits) or, for tags >= 0x80, a
/// structured spelling: sign, digits, fraction, suffix or exponent.
fn quantity<S: Stream>(s: &mut S, v: &mut String) -> Result<()> {
    let mut tag = 0;
    s.byte(&mut tag)?;
    if tag < 0x80 {
        return text(s, v);
    }
    let mut b = [0u8; 16];
    raw(s, &mut b)?;
    let digits = u32::from(b[0] % 20);
    let mantissa = u64::from_le_bytes(b[1..9].try_into().expect("8 bytes")) % 10u64.pow(digits);
    let fraction_digits = usize::from(b[9] % 10);
    let fraction = u32::from_le_bytes(b[10..14].try_into().expect("4 bytes"));
    let sign = ["", "-", "+", ""][usize::from(tag & 3)];
    let mut out = format!("{sign}{mantissa}");
    if fraction_digits > 0 {
        let fraction = format!("{fraction:010}");
        out.push('.');
        out.push_str(&fraction[..fraction_digits]);
    }
    if b[14] < 0xE0 {
        out.push_str(SUFFIXES[usize::from(b[14]) % SUFFIXES.len()]);
    } else {
        out.push_str(&format!("e{}", b[15] as i8));
    }
    *v = out;
    Ok(())
}

/// Resource names the policy treats specially, and a few it must reject.
pub const RESOURCE_NAMES: &[&str] = &[
    "cpu",
    "memory",
    "hugepages-2Mi",
    "hugepages-1Gi",
    "ephemeral-storage",
    "example.com/gpu",
    "nvidia.com/gpu",
    "hugepages-",
    "hugepages-64Ki",
    "pods",
    "kubernetes.io/batteries",
    "hugepages-0",
    "hugepages-3Mi",
];

fn resource_list<S: Stream>(s: &mut S, v: &mut Vec<host::ResourceQuantity>) -> Result<()> {
    list(
        s,
        v,
        6,
        || host::ResourceQuantity {
            name: String::new(),
            quantity: String::new(),
        },
        |s, e| {
            choice(s, &mut e.name, RESOURCE_NAMES)?;
            quantity(s, &mut e.quantity)
        },
    )
}

fn empty_requirements() -> host::ResourceRequirements {
    host::ResourceRequirements {
        requests: None,
        limits: None,
    }
}

fn requirements<S: Stream>(s: &mut S, v: &mut host::ResourceRequirements) -> Result<()> {
    opt(s, &mut v.requests, Vec::new, resource_list)?;
    opt(s, &mut v.limits, Vec::new, resource_list)
}

const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];

fn empty_container() -> host::Container {
    host::Container {
        name: String::new(),
        resources: None,
        restart_policy: None,
        resize_policy: Vec::new(),
    }
}

fn container<S: Stream>(s: &mut S, v: &mut host::Container) -> Result<()> {
    choice(s, &mut v.name, &["app", "sidecar", "init", "ide", "shell"])?;
    opt(s, &mut v.resources, empty_requirements, requirements)?;
    opt(s, &mut v.restart_policy, String::new, |s, p| {
        choice(s, p, RESTART_POLICIES)
    })?;
    list(
        s,
        &mut v.resize_policy,
        3,
        || host::ContainerResizePolicy {
            resource_name: String::new(),
            restart_policy: String::new(),
        },
        |s, p| {
            choice(s, &mut p.resource_name, &["cpu", "memory"])?;
            choice(
                s,
                &mut p.restart_policy,
                &["NotRequired", "RestartContainer", "NoRestart"],
            )
        },
    )
}

fn container_status<S: Stream>(s: &mut S, v: &mut host::ContainerStatus) -> Result<()> {
    choice(s, &mut v.name, &["app", "sidecar", "init", "ide", "shell"])?;
    opt(s, &mut v.allocated_resources, Vec::new, resource_list)?;
    opt(s, &mut v.resources, empty_requirements, requirements)
}

fn empty_container_status() -> host::ContainerStatus {
    host::ContainerStatus {
        name: String::new(),
        allocated_resources: None,
        resources: None,
    }
}

fn empty_pod() -> host::Pod {
    host::Pod {
        name: String::new(),
        namespace: String::new(),
        uid: String::new(),
        annotations: Vec::new(),
        spec: host::PodSpec {
            containers: Vec::new(),
            init_containers: Vec::new(),
            ephemeral_containers: Vec::new(),
            resources: None,
            overhead: None,
            priority: None,
            priority_class_name: None,
            os_name: None,
            restart_policy: None,
            node_name: None,
        },
        status: host::PodStatus {
            qos_class: None,
            resources: None,
            allocated_resources: None,
            container_statuses: Vec::new(),
            init_container_statuses: Vec::new(),
            conditions: Vec::new(),
            node_allocatable_claim_statuses: Vec::new(),
        },
    }
}

fn pod<S: Stream>(s: &mut S, v: &mut host::Pod) -> Result<()> {
    text(s, &mut v.name)?;
    text(s, &mut v.namespace)?;
    text(s, &mut v.uid)?;
    list(
        s,
        &mut v.annotations,
        3,
        || (String::new(), String::new()),
        |s, (key, value)| {
            choice(
                s,
                key,
                &["kubernetes.io/config.source", "kubernetes.io/config.mirror"],
            )?;
            choice(s, value, &["api", "file", "http"])
        },
    )?;
    let spec = &mut v.spec;
    list(s, &mut spec.containers, 10, empty_container, container)?;
    list(s, &mut spec.init_containers, 6, empty_container, container)?;
    list(
        s,
        &mut spec.ephemeral_containers,
        2,
        empty_container,
        container,
    )?;
    opt(s, &mut spec.resources, empty_requirements, requirements)?;
    opt(s, &mut spec.overhead, Vec::new, resource_list)?;
    opt(
        s,
        &mut spec.priority,
        || 0,
        |s, p| int(s, p, &[0, 1000, 2_000_000_000, 2_000_001_000, -1, i32::MAX]),
    )?;
    opt(s, &mut spec.priority_class_name, String::new, |s, c| {
        choice(
            s,
            c,
            &["system-node-critical", "system-cluster-critical", "high"],
        )
    })?;
    opt(s, &mut spec.os_name, String::new, |s, c| {
        choice(s, c, &["linux", "windows"])
    })?;
    opt(s, &mut spec.restart_policy, String::new, |s, c| {
        choice(s, c, RESTART_POLICIES)
    })?;
    opt(s, &mut spec.node_name, String::new, |s, c| {
        choice(s, c, &["node-1", "other-node", ""])
    })?;

    let status = &mut v.status;
    opt(s, &mut status.qos_class, String::new, |s, c| {
        choice(s, c, &["Guaranteed", "Burstable", "BestEffort"])
    })?;
    opt(s, &mut status.resources, empty_requirements, requirements)?;
    opt(s, &mut status.allocated_resources, Vec::new, resource_list)?;
    list(
        s,
        &mut status.container_statuses,
        6,
        empty_container_status,
        container_status,
    )?;
    list(
        s,
        &mut status.init_container_statuses,
        4,
        empty_container_status,
        container_status,
    )?;
    list(
        s,
        &mut status.conditions,
        3,
        || host::PodCondition {
            condition_type: String::new(),
            status: String::new(),
            reason: None,
        },
        |s, c| {
            choice(
                s,
                &mut c.condition_type,
                &["PodResizePending", "PodResizeInProgress", "Ready"],
            )?;
            choice(s, &mut c.status, &["True", "False", "Unknown"])?;
            opt(s, &mut c.reason, String::new, |s, r| {
                choice(s, r, &["Infeasible", "Deferred"])
            })
        },
    )?;
    list(
        s,
        &mut status.node_allocatable_claim_statuses,
        2,
        || host::NodeAllocatableClaimStatus {
            claim_name: String::new(),
            containers: Vec::new(),
            mapping: Vec::new(),
            overhead: Vec::new(),
        },
        |s, c| {
            choice(s, &mut c.claim_name, &["claim-0", "claim-1"])?;
            list(s, &mut c.containers, 3, String::new, |s, name| {
                choice(s, name, &["app", "sidecar", "init", "ide", "shell"])
            })?;
            resource_list(s, &mut c.mapping)?;
            list(
                s,
                &mut c.overhead,
                2,
                || host::ClaimOverhead {
                    name: String::new(),
                    per_pod: None,
                    per_container: None,
                },
                |s, o| {
                    choice(s, &mut o.name, RESOURCE_NAMES)?;
                    opt(s, &mut o.per_pod, String::new, quantity)?;
                    opt(s, &mut o.per_container, String::new, quantity)
                },
            )
        },
    )
}

fn policy_options<S: Stream>(
    s: &mut S,
    v: &mut Vec<host::PolicyOption>,
    names: &[&str],
) -> Result<()> {
    list(
        s,
        v,
        3,
        || host::PolicyOption {
            name: String::new(),
            value: String::new(),
        },
        |s, o| {
            choice(s, &mut o.name, names)?;
            choice(s, &mut o.value, &["true", "false", "1"])
        },
    )
}

fn node<S: Stream>(s: &mut S, v: &mut host::NodeSettings) -> Result<()> {
    use host::{CgroupDriver, CgroupVersion, CpuWeightCurve, MemoryReservationPolicy as Policy};
    text(s, &mut v.name)?;
    resource_list(s, &mut v.capacity)?;
    opt(s, &mut v.allocatable, Vec::new, resource_list)?;
    resource_list(s, &mut v.kube_reserved)?;
    resource_list(s, &mut v.system_reserved)?;
    variant(
        s,
        &mut v.cgroup_version,
        &[CgroupVersion::V2, CgroupVersion::V1],
    )?;
    variant(
        s,
        &mut v.cgroup_driver,
        &[CgroupDriver::Cgroupfs, CgroupDriver::Systemd],
    )?;
    opt(s, &mut v.cgroups_per_qos, || true, flag)?;
    opt(s, &mut v.enforce_node_allocatable, Vec::new, |s, l| {
        list(s, l, 3, String::new, |s, e| {
            choice(s, e, &["pods", "kube-reserved", "system-reserved", "none"])
        })
    })?;
    opt(s, &mut v.cpu_cfs_quota, || true, flag)?;
    opt(
        s,
        &mut v.cpu_cfs_quota_period_us,
        || 0,
        |s, p| {
            number(
                s,
                p,
                &[100_000, 50_000, 1_000, 1_000_000, 999, 0, 2_000_000],
            )
        },
    )?;
    opt(
        s,
        &mut v.memory_throttling_factor,
        || 0.0,
        |s, f| {
            float(
                s,
                f,
                &[
                    0.9,
                    0.5,
                    1.0,
                    0.1,
                    0.0,
                    -1.0,
                    1.5,
                    f64::NAN,
                    f64::INFINITY,
                    0.75,
                ],
            )
        },
    )?;
    opt(
        s,
        &mut v.memory_reservation_policy,
        || Policy::None,
        |s, p| {
            variant(
                s,
                p,
                &[
                    Policy::None,
                    Policy::HardReservation,
                    Policy::TieredReservation,
                ],
            )
        },
    )?;
    opt(
        s,
        &mut v.page_size_bytes,
        || 0,
        |s, p| number(s, p, &[4096, 65_536, 16_384, 0, 3, 1 << 30]),
    )?;
    opt(
        s,
        &mut v.cpu_weight_curve,
        || CpuWeightCurve::Linear,
        |s, c| variant(s, c, &[CpuWeightCurve::Linear, CpuWeightCurve::Logarithmic]),
    )?;
    opt(s, &mut v.single_process_oom_kill, || false, flag)?;
    opt(
        s,
        &mut v.cpu_manager_policy,
        || host::CpuManagerPolicy::None,
        |s, p| {
            variant(
                s,
                p,
                &[host::CpuManagerPolicy::None, host::CpuManagerPolicy::Static],
            )
        },
    )?;
    policy_options(
        s,
        &mut v.cpu_manager_policy_options,
        &[
            "full-pcpus-only",
            "distribute-cpus-across-numa",
            "align-by-socket",
            "strict-cpu-reservation",
        ],
    )?;
    opt(s, &mut v.reserved_system_cpus, String::new, |s, c| {
        choice(s, c, &["0", "0,1", "0-3"])
    })?;
    opt(
        s,
        &mut v.memory_manager_policy,
        || host::MemoryManagerPolicy::None,
        |s, p| {
            variant(
                s,
                p,
                &[
                    host::MemoryManagerPolicy::None,
                    host::MemoryManagerPolicy::Static,
                ],
            )
        },
    )?;
    list(
        s,
        &mut v.reserved_memory,
        2,
        || host::NumaReservedMemory {
            numa_node: 0,
            limits: Vec::new(),
        },
        |s, r| {
            let mut id = r.numa_node as u64;
            number(s, &mut id, &[0, 1, 2, 3])?;
            r.numa_node = id as u32;
            resource_list(s, &mut r.limits)
        },
    )?;
    {
        use host::TopologyManagerPolicy as P;
        opt(
            s,
            &mut v.topology_manager_policy,
            || P::None,
            |s, p| {
                variant(
                    s,
                    p,
                    &[P::None, P::BestEffort, P::Restricted, P::SingleNumaNode],
                )
            },
        )?;
    }
    opt(
        s,
        &mut v.topology_manager_scope,
        || host::TopologyManagerScope::Container,
        |s, p| {
            variant(
                s,
                p,
                &[
                    host::TopologyManagerScope::Container,
                    host::TopologyManagerScope::Pod,
                ],
            )
        },
    )?;
    policy_options(
        s,
        &mut v.topology_manager_policy_options,
        &["prefer-closest-numa-nodes", "max-allowable-numa-nodes"],
    )?;
    let gates: Vec<&str> = policy_wasm::features::KNOWN_GATES
        .iter()
        .map(|g| g.name)
        .collect();
    list(
        s,
        &mut v.feature_gates,
        6,
        || host::FeatureGate {
            name: String::new(),
            enabled: false,
        },
        |s, g| {
            choice(s, &mut g.name, &gates)?;
            flag(s, &mut g.enabled)
        },
    )?;
    opt(s, &mut v.kernel_version, String::new, |s, k| {
        choice(s, k, &["6.8.0-45-generic", "5.4.0", "5.9", "x"])
    })?;
    // `evictionHard`: signal and threshold (a quantity or a percentage).
    opt(s, &mut v.eviction_hard, Vec::new, |s, thresholds| {
        list(
            s,
            thresholds,
            5,
            || (String::new(), String::new()),
            |s, (signal, threshold)| {
                choice(
                    s,
                    signal,
                    &[
                        "memory.available",
                        "nodefs.available",
                        "imagefs.available",
                        "nodefs.inodesFree",
                    ],
                )?;
                choice(s, threshold, &["100Mi", "1Gi", "10%", "15%", "5%", "0"])
            },
        )
    })
}

/// One fuzz input.
#[derive(Clone, Debug)]
pub struct Case {
    /// The pod.
    pub pod: host::Pod,
    /// The node.
    pub node: host::NodeSettings,
    /// Options for `effective-resources`.
    pub options: host::PodResourcesOptions,
    /// `container-memory-high` request and limit bytes.
    pub memory_high: (Option<u64>, Option<u64>),
    /// `container-memory-high` QoS class.
    pub memory_high_qos: host::QosClass,
    /// `resize-plan`: the desired pod (`None`: the pod itself) ...
    pub resize_desired: Option<host::Pod>,
    /// ... with these container entries set: (container index, limits?, entry).
    pub resize_changes: Vec<(u8, bool, host::ResourceQuantity)>,
    /// `resize-plan`: the summed requests of the node's other pods.
    pub resize_others: Vec<host::ResourceQuantity>,
}

const BYTES: &[u64] = &[
    0,
    1,
    4096,
    64 << 20,
    1 << 30,
    16 << 30,
    u64::MAX,
    i64::MAX as u64,
];

fn case<S: Stream>(s: &mut S, v: &mut Case) -> Result<()> {
    pod(s, &mut v.pod)?;
    node(s, &mut v.node)?;
    let o = &mut v.options;
    for f in [
        &mut o.exclude_overhead,
        &mut o.use_status_resources,
        &mut o.in_place_pod_level_resources_vertical_scaling_enabled,
        &mut o.skip_pod_level_resources,
        &mut o.skip_container_level_resources,
    ] {
        flag(s, f)?;
    }
    opt(
        s,
        &mut o.non_missing_container_requests,
        Vec::new,
        resource_list,
    )?;
    opt(s, &mut v.memory_high.0, || 0, |s, b| number(s, b, BYTES))?;
    opt(s, &mut v.memory_high.1, || 0, |s, b| number(s, b, BYTES))?;
    use host::QosClass as Q;
    variant(
        s,
        &mut v.memory_high_qos,
        &[Q::Burstable, Q::BestEffort, Q::Guaranteed],
    )?;
    opt(s, &mut v.resize_desired, empty_pod, pod)?;
    list(
        s,
        &mut v.resize_changes,
        4,
        || {
            let entry = host::ResourceQuantity {
                name: String::new(),
                quantity: String::new(),
            };
            (0, false, entry)
        },
        |s, (index, limits, entry)| {
            s.byte(index)?;
            flag(s, limits)?;
            choice(s, &mut entry.name, RESOURCE_NAMES)?;
            quantity(s, &mut entry.quantity)
        },
    )?;
    resource_list(s, &mut v.resize_others)
}

impl Case {
    /// A case around a pod and a node, with default options.
    pub fn new(pod: host::Pod, node: host::NodeSettings) -> Case {
        Case {
            pod,
            node,
            options: host::PodResourcesOptions {
                exclude_overhead: false,
                use_status_resources: false,
                in_place_pod_level_resources_vertical_scaling_enabled: false,
                non_missing_container_requests: None,
                skip_pod_level_resources: false,
                skip_container_level_resources: false,
            },
            memory_high: (None, None),
            memory_high_qos: host::QosClass::Burstable,
            resize_desired: None,
            resize_changes: Vec::new(),
            resize_others: Vec::new(),
        }
    }

    /// The desired pod of `resize-plan`: `resize_desired` (or the pod) with
    /// `resize_changes` applied to its containers (init containers first).
    pub fn desired_pod(&self) -> host::Pod {
        let mut desired = self
            .resize_desired
            .clone()
            .unwrap_or_else(|| self.pod.clone());
        for (index, limits, entry) in &self.resize_changes {
            let spec = &mut desired.spec;
            let count = spec.init_containers.len() + spec.containers.len();
            if count == 0 {
                break;
            }
            let index = usize::from(*index) % count;
            let container = match index.checked_sub(spec.init_containers.len()) {
                None => &mut spec.init_containers[index],
                Some(i) => &mut spec.containers[i],
            };
            let resources = container.resources.get_or_insert_with(empty_requirements);
            let list = if *limits {
                &mut resources.limits
            } else {
                &mut resources.requests
            };
            let list = list.get_or_insert_with(Vec::new);
            match list.iter_mut().find(|e| e.name == entry.name) {
                Some(existing) => existing.quantity = entry.quantity.clone(),
                None => list.push(entry.clone()),
            }
        }
        desired
    }

    /// The bytes that decode to this case (long texts and lists are cut to
    /// the codec's bounds first).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut value = self.clone();
        let mut writer = Writer::default();
        case(&mut writer, &mut value).expect("writing cannot fail");
        writer.bytes
    }

    /// Decode bytes (never fails; missing bytes read as zeros).
    pub fn from_bytes(bytes: &[u8]) -> Case {
        let mut u = Unstructured::new(bytes);
        Case::arbitrary(&mut u).expect("decoding cannot fail")
    }
}

impl<'a> Arbitrary<'a> for Case {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Case> {
        let mut value = Case::new(empty_pod(), podpolicy::empty_node());
        case(&mut Reader { u }, &mut value)?;
        Ok(value)
    }
}

/// The input of the `differential` target: a pod case for the pod exports,
/// then a manager case for `admit`, `release` and `manager-operation`.
#[derive(Clone, Debug)]
pub struct DiffCase {
    /// The pod exports' input.
    pub case: Case,
    /// The managers' input.
    pub managers: alloc::AllocCase,
}

impl DiffCase {
    /// The bytes that decode to this input.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut value = self.clone();
        let mut writer = Writer::default();
        case(&mut writer, &mut value.case).expect("writing cannot fail");
        alloc::alloc_case(&mut writer, &mut value.managers).expect("writing cannot fail");
        writer.bytes
    }

    /// Decode bytes (never fails).
    pub fn from_bytes(bytes: &[u8]) -> DiffCase {
        let mut u = Unstructured::new(bytes);
        DiffCase::arbitrary(&mut u).expect("decoding cannot fail")
    }
}

impl<'a> Arbitrary<'a> for DiffCase {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<DiffCase> {
        let mut value = DiffCase {
            case: Case::new(empty_pod(), podpolicy::empty_node()),
            managers: alloc::AllocCase::default(),
        };
        let mut reader = Reader { u };
        case(&mut reader, &mut value.case)?;
        alloc::alloc_case(&mut reader, &mut value.managers)?;
        Ok(value)
    }
}

/// The canonical text of a result, the same for both binding generators.
pub fn render<T: Debug>(value: &T) -> String {
    format!("{value:?}")
}

/// Whether a component failure is only a spent budget (fuel or deadline),
/// which is not a finding: the native side has no budget.
pub fn is_budget_exhausted(error: &str) -> bool {
    error.contains("ran out of fuel") || error.contains("exceeded its time budget")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips() {
        let mut pod = empty_pod();
        pod.name = "p".into();
        pod.spec.containers.push(host::Container {
            name: "app".into(),
            resources: Some(host::ResourceRequirements {
                requests: Some(vec![host::ResourceQuantity {
                    name: "cpu".into(),
                    quantity: "500m".into(),
                }]),
                limits: None,
            }),
            restart_policy: Some("Whatever".into()),
            resize_policy: Vec::new(),
        });
        let mut node = podpolicy::empty_node();
        node.memory_throttling_factor = Some(0.33);
        node.cpu_cfs_quota_period_us = Some(123_456);
        let case = Case::new(pod, node);
        let again = Case::from_bytes(&case.to_bytes());
        assert_eq!(render(&again), render(&case));
    }

    #[test]
    fn fixtures_survive_the_codec() {
        let cases = seeds::cases();
        assert!(cases.len() >= 30, "{}", cases.len());
        for (name, case) in cases {
            let again = Case::from_bytes(&case.to_bytes());
            assert_eq!(render(&again), render(&case), "{name}");
        }
        assert!(seeds::quantities().contains("1024Mi"));
    }

    #[test]
    fn any_bytes_decode() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        for len in 0..2000 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            // Raw text may grow once (invalid UTF-8 becomes U+FFFD) and is cut
            // again, so the encoding is a fixed point from the second round on.
            let case = Case::from_bytes(&Case::from_bytes(&bytes).to_bytes());
            let again = Case::from_bytes(&case.to_bytes());
            assert_eq!(render(&again), render(&case), "{len}");
        }
    }
}
