//! End-to-end tests of podpolicy: one binary, one module per area.
//!
//! - `admit_why`: `admit --why`: hints, merged hint, the policy rule and the check behind a rejection.
//! - `agent`: the node agent: reconcile, removal, managers, restart, hot swap
//!   (under load too), hostile modules (`hostile_policy` builds them from WAT), metrics.
//! - `apply`: `podpolicy apply` into temporary cgroup roots, both drivers, failures, order.
//! - `component`: the embedded component itself (imports, exports, versions).
//! - `hostile`: modules that must be refused or contained.
//! - `cli`: the `podpolicy` binary as a user runs it, bad inputs included.
//! - `cli_docs`: shell completions, the man page and `version`.
//! - `conformance`: the conformance vectors (tests/vectors) through the component.
//! - `fixtures`: `explain -o json` of every pod in fixtures/pods against its golden file.
//! - `fuzz_regressions`: findings of the fuzz targets, replayed through the component.
//! - `kubelet_parity`: values upstream Kubernetes' own tests assert (resize
//!   restarts and validation, pending resizes, Memory QoS tiers, node-level
//!   cgroups, hugepages, ephemeral containers, static-manager placement).
//! - `managers`: KEP-5526 admission and release through the component on a
//!   fixture machine: the KEP's examples and tables, errors, properties.
//! - `memory_qos`: KEP-2570 tables, factor validation, node-level sums.
//! - `nri_faults`: the NRI plugin's state under crashes at every step boundary and
//!   SIGKILL at random moments, recovered by `Synchronize`.
//! - `nri_protocol`: `podpolicy nri` against a stand-in runtime (not containerd) over
//!   NRI's multiplexed ttrpc: registration, events, fail-open, reconnection.
//! - `node_inputs`: node files, Kubernetes Nodes and KubeletConfigurations, the node-file schema.
//! - `node_state`: manager checkpoints, restart, release, cpuset writes.
//! - `outputs`: every JSON output's apiVersion/kind and schema (schemas/output), tables.
//! - `pod_inputs`: pods and workloads from files and directories, strict fields, static pod uids.
//! - `policy_diff`: `policy diff` of two versions (the embedded one, a variant, a
//!   component that answers differently), table and JSON, exit codes.
//! - `review`: `podpolicy review` of AdmissionReview files offline (create, resize, denials, malformed).
//! - `policy_dir`: the policy directory against links, FIFOs, huge and half-written
//!   candidates, stray request files; vetting off the polling thread.
//! - `properties`: proptest invariants over generated pods and nodes (memory order, ranges, defaulting).
//! - `resize`: KEP-1287 plans, rejections, the usage guard, failure injection.
//! - `sysfs`: topology discovery over fixtures/sysfs and broken trees.
//! - `topology`: `podpolicy topology` text / SVG / JSON on the dual-socket HT and
//!   256-CPU fixtures, dry-run placements, the state left untouched.
//! - `webhook`: the admission webhook over HTTPS on loopback, and the deploy/ manifests.

mod admit_why;
mod agent;
mod apply;
mod cli;
mod cli_docs;
mod component;
mod conformance;
mod explain_why;
mod fixtures;
mod fuzz_regressions;
mod hostile;
mod hostile_policy;
mod kubelet_parity;
mod managers;
mod memory_qos;
mod node_faults;
mod node_inputs;
mod node_state;
mod nri_faults;
mod nri_protocol;
mod outputs;
mod pod_inputs;
mod policy_diff;
mod policy_dir;
mod prepared;
mod properties;
mod resize;
mod review;
mod sysfs;
mod topology;
mod util;
mod webhook;
