//! End-to-end tests of podpolicy: one binary, one module per area.
//!
//! - `component`: the embedded component itself (imports, exports, versions).
//! - `hostile`: modules that must be refused or contained.
//! - `cli`: the `podpolicy` binary as a user runs it, bad inputs included.
//! - `conformance`: the shared vectors through the component.
//! - `fixtures`: `explain -o json` of every pod in fixtures/pods against its golden file.
//! - `managers`: KEP-5526 admission and release through the component on a
//!   fixture machine: the KEP's examples and tables, errors, properties.
//! - `memory_qos`: KEP-2570 tables, factor validation, node-level sums.
//! - `resize`: KEP-1287 plans, rejections, the usage guard, failure injection.
//! - `sysfs`: topology discovery over fixtures/sysfs and broken trees.

mod cli;
mod component;
mod conformance;
mod fixtures;
mod hostile;
mod managers;
mod memory_qos;
mod resize;
mod sysfs;
mod util;
