//! Admission scopes: [`Scope`], the container scope (one merge per
//! container) and the pod scope (one merge per pod, with the KEP-5526
//! pod-level allocation path).
//!
//! Mirrors upstream `pkg/kubelet/cm/topologymanager/scope.go`,
//! `scope_container.go` and `scope_pod.go`.

use super::{AdmitError, Policy, ProviderHints, TopologyError, TopologyHint};

/// A topology manager scope (`--topology-manager-scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The `none` policy's scope: no hints, every container allocated unaligned.
    None,
    /// `container`: one merge per container (the default).
    Container,
    /// `pod`: one merge for the whole pod.
    Pod,
}

impl Scope {
    /// The name used in the kubelet's configuration (`none` for the `none`
    /// policy, which has no scope of its own).
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::None => "none",
            Scope::Container => "container",
            Scope::Pod => "pod",
        }
    }

    /// Parses `container` or `pod`.
    pub fn parse(name: &str) -> Result<Scope, TopologyError> {
        match name {
            "container" => Ok(Scope::Container),
            "pod" => Ok(Scope::Pod),
            _ => Err(TopologyError::UnknownScope(name.to_string())),
        }
    }
}

/// Container scope, one container: merge the providers' container hints
/// (`GetTopologyHints`) and admit or reject. The kubelet then stores the hint
/// and calls every provider's `Allocate` before asking about the next container,
/// so a caller whose providers' answers depend on earlier allocations calls
/// this once per container, in `init_containers ++ containers` order.
pub fn container_scope_affinity(
    policy: &Policy,
    providers_hints: &[ProviderHints],
) -> Result<TopologyHint, AdmitError> {
    match policy.merge(providers_hints) {
        (hint, true) => Ok(hint),
        (_, false) => Err(AdmitError::TopologyAffinity),
    }
}

/// Container scope, whole pod: [`container_scope_affinity`] for each
/// `(container name, providers' hints)` in order; the first rejection rejects
/// the pod. Returns the hint to store per container.
pub fn container_scope_admit(
    policy: &Policy,
    containers: &[(String, Vec<ProviderHints>)],
) -> Result<Vec<(String, TopologyHint)>, AdmitError> {
    containers
        .iter()
        .map(|(name, hints)| {
            container_scope_affinity(policy, hints).map(|hint| (name.clone(), hint))
        })
        .collect()
}

/// How pod scope hands the admitted pod to the providers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodAllocation {
    /// KEP-5526: one `AllocatePod` per provider.
    PerPod,
    /// Legacy: `Allocate` per container, in `init_containers ++ containers` order.
    PerContainer,
}

/// Pod scope's branch: the pod-level path needs `PodLevelResourceManagers` and
/// `IsPodLevelResourcesSet(pod)` (the pod's `spec.resources` has a cpu, memory
/// or hugepages request or limit).
pub fn pod_scope_allocation(
    pod_level_resource_managers: bool,
    pod_level_resources_set: bool,
) -> PodAllocation {
    if pod_level_resource_managers && pod_level_resources_set {
        PodAllocation::PerPod
    } else {
        PodAllocation::PerContainer
    }
}

/// The outcome of a pod-scope admission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodScopeAdmission {
    /// The merged pod hint.
    pub hint: TopologyHint,
    /// The same hint, stored for every container in `init_containers ++ containers` order.
    pub container_hints: Vec<(String, TopologyHint)>,
    /// Which provider calls follow.
    pub allocation: PodAllocation,
}

/// Pod scope: one merge over the providers' pod hints (`GetPodTopologyHints`),
/// the same hint for every container, and the allocation path. A rejection on
/// the pod-level path is [`AdmitError::PodLevelTopologyAffinity`].
pub fn pod_scope_admit(
    policy: &Policy,
    container_names: &[String],
    providers_pod_hints: &[ProviderHints],
    allocation: PodAllocation,
) -> Result<PodScopeAdmission, AdmitError> {
    let (hint, admit) = policy.merge(providers_pod_hints);
    if !admit {
        return Err(match allocation {
            PodAllocation::PerPod => AdmitError::PodLevelTopologyAffinity,
            PodAllocation::PerContainer => AdmitError::TopologyAffinity,
        });
    }
    let container_hints = container_names
        .iter()
        .map(|name| (name.clone(), hint))
        .collect();
    Ok(PodScopeAdmission {
        hint,
        container_hints,
        allocation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::PolicyName;
    use crate::topology::test_support::{four_node_policy, mask, one};

    #[test]
    fn scopes() {
        let restricted = four_node_policy(PolicyName::Restricted);
        let good = one("cpu", Some(vec![TopologyHint::new(mask(&[1]), true)]));
        let bad = one("cpu", Some(vec![TopologyHint::new(mask(&[1]), false)]));
        let names = vec!["init".to_string(), "app".to_string()];
        let admitted = pod_scope_admit(
            &restricted,
            &names,
            std::slice::from_ref(&good),
            pod_scope_allocation(true, true),
        )
        .unwrap();
        assert_eq!(admitted.allocation, PodAllocation::PerPod);
        assert_eq!(admitted.container_hints.len(), 2);
        assert!(
            admitted
                .container_hints
                .iter()
                .all(|(_, h)| *h == TopologyHint::new(mask(&[1]), true))
        );
        assert_eq!(
            pod_scope_allocation(false, true),
            PodAllocation::PerContainer
        );
        assert_eq!(
            pod_scope_allocation(true, false),
            PodAllocation::PerContainer
        );
        let err = pod_scope_admit(
            &restricted,
            &names,
            std::slice::from_ref(&bad),
            PodAllocation::PerPod,
        )
        .unwrap_err();
        assert_eq!(err, AdmitError::PodLevelTopologyAffinity);
        assert_eq!(err.reason(), "TopologyAffinityError");
        let err = pod_scope_admit(
            &restricted,
            &names,
            std::slice::from_ref(&bad),
            PodAllocation::PerContainer,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Resources cannot be allocated with Topology locality"
        );
        let containers = vec![
            ("init".to_string(), vec![good.clone()]),
            ("app".to_string(), vec![bad]),
        ];
        assert_eq!(
            container_scope_admit(&restricted, &containers),
            Err(AdmitError::TopologyAffinity)
        );
        let containers = vec![
            ("init".to_string(), vec![good]),
            ("app".to_string(), vec![None]),
        ];
        let hints = container_scope_admit(&restricted, &containers).unwrap();
        assert_eq!(hints[0].1, TopologyHint::new(mask(&[1]), true));
        assert_eq!(hints[1].1, TopologyHint::new(mask(&[0, 1, 2, 3]), true));
    }
}
