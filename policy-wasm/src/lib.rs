//! podpolicy's policy: the node-side pod resource rules of Kubernetes as pure
//! functions over plain data.
//!
//! The crate builds natively (unit tests, fuzzing, benches) and, through the
//! thin [`guest`] shim, as a WebAssembly component that imports nothing.
//! The core modules work on their own types; [`boundary`] decodes the WIT
//! records generated in [`wit`] into them and encodes the answers, and its
//! exports (re-exported in [`evaluate`]) are what the guest and native
//! callers run, so both answer the same question the same way.
//!
//! Modules mirror the Kubernetes concepts:
//! - [`quantity`]: the exact Kubernetes quantity grammar and arithmetic.
//! - [`features`]: feature gates and their Kubernetes 1.36 defaults.
//! - [`field_error`]: a bad input field with its path, as every module reports it.
//! - [`model`]: the parsed, path-annotated pod.
//! - [`node`]: node settings, their kubelet defaults and their validation.
//! - [`resources`]: effective pod requests and limits (`PodRequests`, `PodLimits`).
//! - [`qos`]: the pod QoS class.
//! - [`oom`]: per-container `oom_score_adj`.
//! - [`memory_qos`]: Memory QoS (KEP-2570) memory.min / memory.low / memory.high.
//! - [`cgroup`]: pod and container cgroup values (`ResourceConfigForPod`, CRI resources, v2 files).
//! - [`cgroup_file`]: a cgroup v2 file and its value, as the core computes them.
//! - [`placement`]: the cgroup files an admission implies (cpusets, `cpu.max`).
//! - [`cpuset`]: CPU sets in the Kubernetes/Linux list format (`"0-3,8"`).
//! - [`cpu_topology`]: the node's CPU topology (cores, sockets, NUMA nodes, uncore caches).
//! - [`cpu_manager`]: the static CPU manager policy, CPU assignment and KEP-5526 pod-level CPUs.
//! - [`defaults`], [`validation`]: API-server defaulting and validation of resources.
//! - [`topology`]: the Topology Manager: NUMA masks, hint merging, policies and scopes.
//! - [`memory_manager`]: the static Memory Manager: NUMA machine state, hints and allocation.
//! - [`resize`]: in-place resize (KEP-1287): validation, fit check, ordered cgroup plan.
//! - [`managers`]: the KEP-5526 resource managers over their own types:
//!   machine, state and configuration, admission and release, manager operations.
//! - [`boundary`]: the edge: WIT records decoded into the core's types
//!   (with field paths), the answers encoded, and the exports.
//! - [`evaluate`]: the whole node-side evaluation of one pod.
//! - [`prepared`]: a node decoded once (and its managers built) for many pods.
//!
//! Nothing here does I/O, reads a clock or draws random numbers.
#![deny(unsafe_code)]
#![warn(missing_docs)]

/// Re-export every contract type under its own name from the module
/// bindings generate for the interfaces (`<base>::common`, `<base>::pod`,
/// ...), so code reads `Pod` whichever interface defines it. Used here for
/// wit-bindgen's guest types and by the host for wasmtime's: one list of
/// which interface holds which type.
#[macro_export]
macro_rules! contract_types {
    ($($interfaces:tt)*) => {
        pub use $($interfaces)*::common::*;
        pub use $($interfaces)*::evaluate::{
            ContainerEvaluation, ContainerKind, HugepageLimit, NodeCgroup, NodeCgroupValues,
            EvaluationWarning, NodeCgroups, PendingResize, PodEvaluation, ResizeState, ResourceConfig,
            ResourcesChange, ValueReason,
        };
        pub use $($interfaces)*::managers::{
            Admission, ContainerAssignment, ContainerCpuset, ContainerFiles, ContainerMemory,
            CpuIsolation, CpuManagerState, Cpuset, HugepagePool, ManagerError, ManagerErrorKind,
            ManagerState, MemoryBlock, MemoryManagerState, MemoryTable, NodeTopology, NumaMemoryState,
            NumaNodeInfo, PlacementFiles, PodAssignment, PodCpuEntries, PodCpuset, PodMemory,
            PodMemoryEntries, ProviderAnswer, ProviderHints, ResourceHints, ResourceManager,
            SmtAlignmentError, TopologyCpu, TopologyDecision, TopologyHint,
        };
        pub use $($interfaces)*::node::{
            CgroupDriver, CgroupVersion, CpuManagerPolicy, CpuWeightCurve, FeatureGate,
            MemoryManagerPolicy, MemoryReservationPolicy, NodeSettings, NumaReservedMemory, PolicyInfo,
            PolicyOption, TopologyManagerPolicy, TopologyManagerScope,
        };
        pub use $($interfaces)*::pod::{
            ClaimOverhead, Container, ContainerResizePolicy, ContainerStatus, DefaultedPod,
            EffectiveResources, NodeAllocatableClaimStatus, PatchOp, PatchOperation, PatchValue, Pod,
            PodCondition, PodResourcesOptions, PodSpec, PodStatus, PodWarning,
        };
        pub use $($interfaces)*::resize::{
            ResizeDecision, ResizeDirection, ResizePlan, ResizeResource, ResizeStep, ResizeStepKind,
        };
        pub use $($interfaces)*::testing::{
            AllocateCpusRequest, Allocation, ContainerRequest, CpuSortingStrategy, CpusAllocation,
            HintsRequest, ManagerRequest, ManagerResponse, MergedHint, PodRequest, PodRequestedRequest,
            RemoveRequest, RequestedResource, TakeAlgorithm, TakeCpusRequest,
        };
    };
}

/// The text of the contract's resize states and evaluation warnings, for
/// whichever bindings hold `resize-state` and `evaluation-warning` (invoke
/// it where they are in scope): `Display` gives what the core's own types
/// print ([`resize::ResizeState`], [`memory_qos::KernelWarning`]), so a
/// host prints the policy's answer from its data with the policy's words.
#[macro_export]
macro_rules! evaluation_text {
    () => {
        impl ResizeState {
            /// The core's state for this one.
            pub const fn core(self) -> $crate::resize::ResizeState {
                match self {
                    ResizeState::Deferred => $crate::resize::ResizeState::Deferred,
                    ResizeState::Infeasible => $crate::resize::ResizeState::Infeasible,
                    ResizeState::Pending => $crate::resize::ResizeState::Pending,
                    ResizeState::InProgress => $crate::resize::ResizeState::InProgress,
                }
            }
        }

        impl ::core::fmt::Display for ResizeState {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.core().as_str())
            }
        }

        impl ::core::fmt::Display for EvaluationWarning {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                match self {
                    EvaluationWarning::MemoryQosKernelTooOld(version) => {
                        $crate::memory_qos::KernelWarning::write_too_old(f, version)
                    }
                    EvaluationWarning::KernelVersionUnreadable(version) => {
                        $crate::memory_qos::KernelWarning::write_unreadable(f, version)
                    }
                }
            }
        }
    };
}

/// The text of cgroup files, for whichever bindings hold the contract's
/// `cgroup-file-name`, `cgroup-value` and `cgroup-file` (invoke it where
/// they are in scope): `Display` gives the file name (`cpu.max`,
/// `hugetlb.2MB.max`) and the value as written (`max 100000`, `0-3`), and
/// `CgroupFile::parse` reads them back. One formatter for the guest's and
/// the host's types, so the names never cross the boundary as text.
#[macro_export]
macro_rules! cgroup_file_text {
    () => {
        impl CgroupFileName {
            /// The file for a name as the kernel spells it, if the policy sets it.
            pub fn parse(name: &str) -> ::core::option::Option<Self> {
                ::core::option::Option::Some(match name {
                    "cpu.weight" => CgroupFileName::CpuWeight,
                    "cpu.max" => CgroupFileName::CpuMax,
                    "memory.min" => CgroupFileName::MemoryMin,
                    "memory.low" => CgroupFileName::MemoryLow,
                    "memory.high" => CgroupFileName::MemoryHigh,
                    "memory.max" => CgroupFileName::MemoryMax,
                    "memory.oom.group" => CgroupFileName::MemoryOomGroup,
                    "cpuset.cpus" => CgroupFileName::CpusetCpus,
                    "cpuset.mems" => CgroupFileName::CpusetMems,
                    _ => {
                        let size = name.strip_prefix("hugetlb.")?;
                        let (size, rsvd) = match size.strip_suffix(".rsvd.max") {
                            ::core::option::Option::Some(size) => (size, true),
                            ::core::option::Option::None => (size.strip_suffix(".max")?, false),
                        };
                        let bytes = $crate::hugetlb_page_size(size)?;
                        if rsvd {
                            CgroupFileName::HugetlbRsvdMax(bytes)
                        } else {
                            CgroupFileName::HugetlbMax(bytes)
                        }
                    }
                })
            }
        }

        impl ::core::fmt::Display for CgroupFileName {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(match self {
                    CgroupFileName::CpuWeight => "cpu.weight",
                    CgroupFileName::CpuMax => "cpu.max",
                    CgroupFileName::MemoryMin => "memory.min",
                    CgroupFileName::MemoryLow => "memory.low",
                    CgroupFileName::MemoryHigh => "memory.high",
                    CgroupFileName::MemoryMax => "memory.max",
                    CgroupFileName::MemoryOomGroup => "memory.oom.group",
                    CgroupFileName::CpusetCpus => "cpuset.cpus",
                    CgroupFileName::CpusetMems => "cpuset.mems",
                    CgroupFileName::HugetlbMax(size) => {
                        return write!(f, "hugetlb.{}.max", $crate::HugetlbSize(*size));
                    }
                    CgroupFileName::HugetlbRsvdMax(size) => {
                        return write!(f, "hugetlb.{}.rsvd.max", $crate::HugetlbSize(*size));
                    }
                })
            }
        }

        impl ::core::fmt::Display for CgroupValue {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                match self {
                    CgroupValue::Number(n) => write!(f, "{n}"),
                    CgroupValue::Max => f.write_str("max"),
                    CgroupValue::CpuMax(CpuMaxValue {
                        quota: ::core::option::Option::Some(q),
                        period,
                    }) => {
                        write!(f, "{q} {period}")
                    }
                    CgroupValue::CpuMax(CpuMaxValue {
                        quota: ::core::option::Option::None,
                        period,
                    }) => {
                        write!(f, "max {period}")
                    }
                    CgroupValue::IdList(list) => f.write_str(list),
                }
            }
        }

        impl CgroupValue {
            /// A value of `file` read from its text (`None` when the text
            /// is not of that file's grammar).
            pub fn parse(file: &CgroupFileName, text: &str) -> ::core::option::Option<Self> {
                let number = |text: &str| {
                    if text == "max" {
                        ::core::option::Option::Some(CgroupValue::Max)
                    } else if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
                        text.parse().ok().map(CgroupValue::Number)
                    } else {
                        ::core::option::Option::None
                    }
                };
                match file {
                    CgroupFileName::CpuMax => {
                        let (quota, period) = text.split_once(' ')?;
                        let digits =
                            |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
                        if !digits(period) || (quota != "max" && !digits(quota)) {
                            return ::core::option::Option::None;
                        }
                        ::core::option::Option::Some(CgroupValue::CpuMax(CpuMaxValue {
                            quota: if quota == "max" {
                                ::core::option::Option::None
                            } else {
                                ::core::option::Option::Some(quota.parse().ok()?)
                            },
                            period: period.parse().ok()?,
                        }))
                    }
                    CgroupFileName::CpusetCpus | CgroupFileName::CpusetMems => {
                        ::core::option::Option::Some(CgroupValue::IdList(text.into()))
                    }
                    _ => number(text),
                }
            }
        }

        impl CgroupFile {
            /// A file from its name and value text, as a cgroup directory
            /// holds it (`None` for a file the policy never sets or a value
            /// outside that file's grammar).
            pub fn parse(name: &str, value: &str) -> ::core::option::Option<Self> {
                let file = CgroupFileName::parse(name)?;
                let value = CgroupValue::parse(&file, value)?;
                ::core::option::Option::Some(CgroupFile { file, value })
            }
        }
    };
}

/// A hugetlb page size as the kernel spells it in cgroup v2 file names:
/// `2MB`, `1GB`, `64KB` (upstream `HugePageUnitSizeFromByteSize`).
#[derive(Clone, Copy, Debug)]
pub struct HugetlbSize(pub u64);

impl std::fmt::Display for HugetlbSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
        let mut value = self.0;
        let mut unit = 0;
        while value >= 1024 && value.is_multiple_of(1024) && unit < UNITS.len() - 1 {
            value /= 1024;
            unit += 1;
        }
        write!(f, "{value}{}", UNITS[unit])
    }
}

/// The page size in bytes of a [`HugetlbSize`] spelling (`2MB`), if it is one.
pub fn hugetlb_page_size(name: &str) -> Option<u64> {
    const UNITS: [(&str, u32); 5] = [("TB", 4), ("GB", 3), ("MB", 2), ("KB", 1), ("B", 0)];
    let (digits, power) = UNITS
        .iter()
        .find_map(|(unit, power)| name.strip_suffix(unit).map(|d| (d, *power)))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let bytes = digits
        .parse::<u64>()
        .ok()?
        .checked_mul(1u64.checked_shl(10 * power)?)?;
    // Only the canonical spelling names a file (`2048KB` is `2MB`).
    (HugetlbSize(bytes).to_string() == name).then_some(bytes)
}

pub mod wit {
    //! Types and `Guest` traits generated from `wit/policy.wit` (world
    //! `pod-policy-conformance`: the product interfaces plus `testing`).
    //! Every type is re-exported here under its own name, so the policy
    //! reads `wit::Pod` whichever interface defines it.
    #![allow(unsafe_code, missing_docs, clippy::all)]
    wit_bindgen::generate!({
        path: "../wit",
        world: "pod-policy-conformance",
        additional_derives: [PartialEq],
    });
    crate::contract_types!(self::exports::podpolicy::policy);
    crate::cgroup_file_text!();
    crate::evaluation_text!();
}

pub mod boundary;
pub mod cgroup;
pub mod cgroup_file;
pub mod cpu_manager;
pub mod cpu_topology;
pub mod cpuset;
pub mod defaults;
pub mod evaluate;
pub mod features;
pub mod field_error;
pub mod managers;
pub mod memory_manager;
pub mod memory_qos;
pub mod model;
pub mod node;
pub mod node_cgroups;
pub mod object_meta;
pub mod oom;
pub mod placement;
pub mod prepared;
pub mod qos;
pub mod quantity;
pub mod resize;
pub mod resource_map;
pub mod resource_name;
pub mod resources;
pub mod topology;
pub mod validation;
pub mod warnings;
pub mod why;

// The component's allocator (a bump arena per call); built natively for its tests.
#[cfg(any(target_arch = "wasm32", test))]
#[allow(unsafe_code)]
mod call_arena;

// The component's `memcmp` (compiler-builtins' is a byte loop); built
// natively for its tests.
#[cfg(any(target_arch = "wasm32", test))]
#[allow(unsafe_code)]
mod byte_compare;

// The export glue wit-bindgen generates is unsafe by nature; it stays in the shim.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod guest;

/// The policy implementation version.
pub const POLICY_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The WIT package version this crate implements (`podpolicy:policy@...`):
/// read from `wit/policy.wit` at compile time, the one place it is written
/// (the host's `runtime::WIT_VERSION` is this constant).
pub const WIT_VERSION: &str = wit_package_version(include_str!("../../wit/policy.wit"));

/// The `<version>` of the first `package podpolicy:policy@<version>;` line
/// of a WIT text (a compile error when there is none).
const fn wit_package_version(wit: &str) -> &str {
    let bytes = wit.as_bytes();
    let needle = b"package podpolicy:policy@";
    let mut i = 0;
    while i + needle.len() <= bytes.len() {
        let mut j = 0;
        while j < needle.len() && bytes[i + j] == needle[j] {
            j += 1;
        }
        if j == needle.len() {
            let start = i + j;
            let mut end = start;
            while end < bytes.len() && bytes[end] != b';' {
                end += 1;
            }
            let (_, rest) = bytes.split_at(start);
            let (version, _) = rest.split_at(end - start);
            match core::str::from_utf8(version) {
                Ok(v) if !v.is_empty() => return v,
                _ => panic!("wit/policy.wit: the package version is empty or not UTF-8"),
            }
        }
        i += 1;
    }
    panic!("wit/policy.wit declares no `package podpolicy:policy@<version>;`")
}
/// The Kubernetes release whose semantics and defaults this policy follows.
pub const KUBERNETES_VERSION: &str = "1.36";

/// Build the `policy-info` record.
pub fn policy_info() -> wit::PolicyInfo {
    wit::PolicyInfo {
        policy_version: POLICY_VERSION.to_string(),
        wit_version: WIT_VERSION.to_string(),
        kubernetes_version: KUBERNETES_VERSION.to_string(),
        feature_gates: features::KNOWN_GATES
            .iter()
            .map(|g| wit::FeatureGate {
                name: g.name.to_string(),
                enabled: g.default,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_version_is_the_wit_package_version() {
        assert_eq!(
            wit_package_version("// a comment\npackage podpolicy:policy@1.2.3;\nworld w {}\n"),
            "1.2.3"
        );
        let wit = include_str!("../../wit/policy.wit");
        assert!(wit.contains(&format!("\npackage podpolicy:policy@{WIT_VERSION};\n")));
        assert_eq!(policy_info().wit_version, WIT_VERSION);
    }
}
