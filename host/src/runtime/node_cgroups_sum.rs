//! The node-level cgroups over pods handed on one at a time: a
//! `node-cgroups-sum` resource opened on a [`PreparedPolicy`]'s node, so
//! that a streaming `explain` keeps no pod once it is printed. The sums the
//! node-level cgroups need of the pods live in the component; the host
//! only holds the handle.

use anyhow::{Result, bail};
use wasmtime::component::ResourceAny;

use super::PreparedPolicy;
use crate::bindings::{NodeCgroups, Pod};

/// A `node-cgroups-sum` in the warm instance of the [`PreparedPolicy`]
/// that opened it. It lives as long as that instance: a call that fails in
/// the sandbox replaces the instance, and the sum's pods are gone with it
/// (its methods then fail rather than answer for fewer pods).
pub struct NodeCgroupsSum {
    handle: ResourceAny,
    /// [`PreparedPolicy::prepared_count`] when it was opened.
    instance: u64,
}

impl PreparedPolicy {
    /// A new sum of no pods on the prepared node.
    pub fn node_cgroups_sum(&mut self) -> Result<NodeCgroupsSum> {
        let handle = self.call(|p, s, node| p.call_prepared_node_cgroups_sum(s, node))?;
        Ok(NodeCgroupsSum {
            handle,
            instance: self.prepared_count,
        })
    }

    /// `add-pod`: count `pod` in `sum`; the inner `Err` is the pod's field
    /// errors (the sum is then unchanged).
    pub fn add_to_sum(
        &mut self,
        sum: &NodeCgroupsSum,
        pod: &Pod,
    ) -> Result<crate::PolicyResult<()>> {
        self.check_sum(sum)?;
        self.call(|p, s, _| p.call_sum_add_pod(s, sum.handle, pod))
    }

    /// `node-level-cgroups` over the pods added to `sum`.
    pub fn sum_node_cgroups(&mut self, sum: &NodeCgroupsSum) -> Result<NodeCgroups> {
        self.check_sum(sum)?;
        self.call(|p, s, _| p.call_sum_node_cgroups(s, sum.handle))
    }

    /// Drop `sum` in the component (its instance may be gone already).
    pub fn close_sum(&mut self, sum: NodeCgroupsSum) -> Result<()> {
        if let Some(warm) = self.warm.as_mut()
            && sum.instance == self.prepared_count
        {
            sum.handle
                .resource_drop(&mut warm.store)
                .map_err(|e| super::describe_failure(e, "dropping a node-cgroups sum"))?;
        }
        Ok(())
    }

    fn check_sum(&self, sum: &NodeCgroupsSum) -> Result<()> {
        if self.warm.is_none() || sum.instance != self.prepared_count {
            bail!(
                "the policy instance holding the node-level sums was replaced after a failed call; its pods are gone"
            );
        }
        Ok(())
    }
}
