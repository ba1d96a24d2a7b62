//! Decoding helpers every part of the managers shares: field errors with
//! their paths (built as `k8s.io/apimachinery/pkg/util/validation/field`'s
//! `field.Invalid` and `field.Duplicate` build them), cpusets, NUMA ids and
//! masks, and byte quantities.
//!
//! Everything the managers read comes through the WIT as text or plain
//! numbers. Each decoder takes the field path of what it decodes and pushes
//! an error there instead of failing, so one call reports every bad field.

use crate::cpu_topology::MAX_NUMA_NODE_ID;
use crate::cpuset::CpuSet;
use crate::model::truncate;
use crate::quantity::Quantity;
use crate::topology::BitMask;
use crate::wit::{ErrorReason, FieldError};

pub(super) fn field_error(
    field: impl Into<String>,
    reason: ErrorReason,
    message: impl Into<String>,
    bad_value: Option<String>,
) -> FieldError {
    FieldError {
        field: field.into(),
        reason,
        message: message.into(),
        bad_value,
    }
}

pub(super) fn invalid(
    field: impl Into<String>,
    message: impl Into<String>,
    bad: &str,
) -> FieldError {
    field_error(field, ErrorReason::Invalid, message, Some(truncate(bad)))
}

pub(super) fn duplicate(field: impl Into<String>, bad: &str) -> FieldError {
    field_error(
        field,
        ErrorReason::Duplicate,
        "appears more than once",
        Some(truncate(bad)),
    )
}

pub(super) fn parse_cpuset(text: &str, field: &str, errors: &mut Vec<FieldError>) -> CpuSet {
    CpuSet::parse(text).unwrap_or_else(|err| {
        errors.push(invalid(field, err.to_string(), text));
        CpuSet::new()
    })
}

/// NUMA node ids of a mask or a block; every id must fit a mask (0..=63).
pub(super) fn numa_ids(ids: &[u32], field: &str, errors: &mut Vec<FieldError>) -> Vec<usize> {
    let mut out = Vec::with_capacity(ids.len());
    for (i, &id) in ids.iter().enumerate() {
        if id > MAX_NUMA_NODE_ID {
            errors.push(invalid(
                format!("{field}[{i}]"),
                format!("NUMA node ids must be at most {MAX_NUMA_NODE_ID}"),
                &id.to_string(),
            ));
        } else {
            out.push(id as usize);
        }
    }
    out
}

pub(super) fn decode_mask(ids: &[u32], field: &str, errors: &mut Vec<FieldError>) -> BitMask {
    let bits = numa_ids(ids, field, errors);
    // Every id was checked above.
    BitMask::new(&bits).unwrap_or_default()
}

pub(super) fn non_negative_bytes(q: &Quantity) -> u64 {
    u64::try_from(q.value().max(0)).unwrap_or(0)
}
