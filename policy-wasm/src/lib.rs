//! podpolicy's policy: the node-side pod resource rules of Kubernetes as pure
//! functions over plain data.
//!
//! The crate builds natively (unit tests, fuzzing, benches) and, through the
//! thin [`guest`] shim, as a WebAssembly component that imports nothing. Its
//! public functions take and return the WIT records generated in [`wit`], so
//! the native build and the component answer the same question the same way.
//!
//! Modules mirror the Kubernetes concepts:
//! - [`quantity`]: the exact Kubernetes quantity grammar and arithmetic.
//! - [`features`]: feature gates and their Kubernetes 1.36 defaults.
//! - [`model`]: decoding WIT pods into parsed, path-annotated pods.
//! - [`node`]: node settings, their kubelet defaults and their validation.
//! - [`resources`]: effective pod requests and limits (`PodRequests`, `PodLimits`).
//! - [`qos`]: the pod QoS class.
//! - [`oom`]: per-container `oom_score_adj`.
//! - [`memory_qos`]: Memory QoS (KEP-2570) memory.min / memory.low / memory.high.
//! - [`cgroup`]: pod and container cgroup values (`ResourceConfigForPod`, CRI resources, v2 files).
//! - [`cpuset`]: CPU sets in the Kubernetes/Linux list format (`"0-3,8"`).
//! - [`cpu_topology`]: the node's CPU topology (cores, sockets, NUMA nodes, uncore caches).
//! - [`cpu_manager`]: the static CPU manager policy, CPU assignment and KEP-5526 pod-level CPUs.
//! - [`defaults`], [`validation`]: API-server defaulting and validation of resources.
//! - [`topology`]: the Topology Manager: NUMA masks, hint merging, policies and scopes.
//! - [`memory_manager`]: the static Memory Manager: NUMA machine state, hints and allocation.
//! - [`resize`]: in-place resize (KEP-1287): validation, fit check, ordered cgroup plan.
//! - [`managers`]: the KEP-5526 resource managers through the WIT: topology,
//!   state and configuration decoding, `admit` / `release`, manager operations.
//! - [`evaluate`]: the whole node-side evaluation of one pod.
//!
//! Nothing here does I/O, reads a clock or draws random numbers.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod wit {
    //! Types and the `Guest` trait generated from `wit/policy.wit`.
    #![allow(unsafe_code, missing_docs, clippy::all)]
    wit_bindgen::generate!({
        path: "../wit",
        world: "pod-policy",
        additional_derives: [PartialEq],
    });
}

pub mod cgroup;
pub mod cpu_manager;
pub mod cpu_topology;
pub mod cpuset;
pub mod defaults;
pub mod evaluate;
pub mod features;
pub mod managers;
pub mod memory_manager;
pub mod memory_qos;
pub mod model;
pub mod node;
pub mod node_cgroups;
pub mod object_meta;
pub mod oom;
pub mod placement;
pub mod qos;
pub mod quantity;
pub mod resize;
pub mod resources;
pub mod topology;
pub mod validation;
pub mod warnings;
pub mod why;

// The export glue wit-bindgen generates is unsafe by nature; it stays in the shim.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod guest;

/// The policy implementation version.
pub const POLICY_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The WIT package version this crate implements (`podpolicy:policy@...`).
pub const WIT_VERSION: &str = "0.6.0";
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
