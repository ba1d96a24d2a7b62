//! A configured topology manager ([`Manager`]) and its construction from the
//! kubelet's settings ([`new_manager`]).
//!
//! Mirrors upstream `pkg/kubelet/cm/topologymanager/topology_manager.go`
//! (`NewManager`).

use std::collections::BTreeMap;

use super::{
    NumaInfo, NumaNode, OptionGates, Policy, PolicyName, PolicyOptions, Scope, TopologyError,
    new_policy_options,
};

/// A configured topology manager: its policy and scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manager {
    /// The merge policy.
    pub policy: Policy,
    /// Where hints are asked for.
    pub scope: Scope,
}

/// Upstream `NewManager`, in its order of checks: `none` short-circuits (options
/// and scope are not even parsed); then options, NUMA discovery, the node limit,
/// the policy name, and the scope name.
pub fn new_manager(
    policy_name: &str,
    scope_name: &str,
    options: &BTreeMap<String, String>,
    gates: OptionGates,
    topology: &[NumaNode],
) -> Result<Manager, TopologyError> {
    if policy_name == PolicyName::None.as_str() {
        let numa_info = NumaInfo::new(topology.iter().map(|n| n.id).collect(), BTreeMap::new());
        let policy = Policy {
            name: PolicyName::None,
            numa_info,
            options: PolicyOptions::default(),
        };
        return Ok(Manager {
            policy,
            scope: Scope::None,
        });
    }
    let options = new_policy_options(options, gates)?;
    let numa_info = NumaInfo::discover(topology, &options)?;
    if numa_info.nodes.len() > options.max_allowable_numa_nodes {
        return Err(TopologyError::TooManyNumaNodes {
            max: options.max_allowable_numa_nodes,
        });
    }
    let name = PolicyName::parse(policy_name)?;
    let policy = Policy::new(name, numa_info, options)?;
    let scope = Scope::parse(scope_name)?;
    Ok(Manager { policy, scope })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::MAX_ALLOWABLE_NUMA_NODES;
    use crate::topology::test_support::opts;

    fn topology(n: usize) -> Vec<NumaNode> {
        (0..n)
            .map(|id| NumaNode {
                id,
                distances: Some(vec![10; n]),
            })
            .collect()
    }

    #[test]
    fn manager_construction() {
        let gates = OptionGates::default();
        let none = new_manager(
            "none",
            "bogus",
            &opts(&[("bogus", "x")]),
            gates,
            &topology(12),
        )
        .unwrap();
        assert_eq!(
            (none.policy.name(), none.scope),
            (PolicyName::None, Scope::None)
        );
        let m = new_manager("restricted", "pod", &opts(&[]), gates, &topology(2)).unwrap();
        assert_eq!(
            (m.policy.name(), m.scope),
            (PolicyName::Restricted, Scope::Pod)
        );
        let err =
            new_manager("best-effort", "container", &opts(&[]), gates, &topology(9)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unsupported on machines with more than 8 NUMA Nodes"
        );
        assert!(
            new_manager(
                "best-effort",
                "container",
                &opts(&[(MAX_ALLOWABLE_NUMA_NODES, "9")]),
                gates,
                &topology(9)
            )
            .is_ok()
        );
        let err = new_manager("bogus", "container", &opts(&[]), gates, &topology(2)).unwrap_err();
        assert_eq!(err.to_string(), "unknown policy: \"bogus\"");
        let err = new_manager("best-effort", "node", &opts(&[]), gates, &topology(2)).unwrap_err();
        assert_eq!(err.to_string(), "unknown scope: \"node\"");
        // Options are checked before the policy name.
        let err = new_manager(
            "bogus",
            "container",
            &opts(&[("x", "y")]),
            gates,
            &topology(2),
        )
        .unwrap_err();
        assert_eq!(err, TopologyError::UnknownOption("x".into()));
        let bad_id = NumaInfo::new(vec![0, 64], BTreeMap::new());
        assert_eq!(
            Policy::new(PolicyName::BestEffort, bad_id, PolicyOptions::default())
                .unwrap_err()
                .to_string(),
            "cannot discover NUMA topology: bit number must be in range 0-63"
        );
    }
}
