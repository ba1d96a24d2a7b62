//! The static policy as a topology manager hint provider
//! (`GetTopologyHints`, `GetPodTopologyHints`, `generateCPUTopologyHints`).
//!
//! For every combination of the machine's NUMA nodes (in upstream
//! `IterateBitMasks` order) that holds enough available plus reusable CPUs,
//! a hint; preferred are the narrowest combinations whose *total* CPUs could
//! hold the request, whatever is free now (with `align-by-socket`, also
//! those spanning the fewest sockets that could). A request of 0 CPUs is
//! "no preference" (`None`, a nil map). An allocation that already exists is
//! regenerated from its own CPUs; one of the wrong size gives an empty list
//! (unsatisfiable). With KEP-5526 pod scope and pod-level resources, a pod
//! whose partition `validatePodScopeResources` refuses gets an empty list,
//! and a pod that already holds its pod-level set (re-admission) gets the
//! hints of that set.

use std::collections::BTreeMap;

use crate::cpu_manager::pod::PodSpec;
use crate::cpu_manager::policy_static::StaticPolicy;
use crate::cpu_manager::state::CpuManagerState;
use crate::cpuset::CpuSet;
use crate::features::FeatureGates;
use crate::topology::{BitMask, TopologyHint, iterate_bit_masks};

/// The resource name the CPU manager gives hints for.
pub const CPU: &str = "cpu";

/// A provider answer: `None` is a nil map.
pub type CpuHints = Option<BTreeMap<String, Vec<TopologyHint>>>;

fn cpu_hints(hints: Vec<TopologyHint>) -> CpuHints {
    Some(BTreeMap::from([(CPU.to_string(), hints)]))
}

impl StaticPolicy {
    /// Whether the pod's pod-level resources keep the CPU manager away
    /// (pod-level resources without both KEP-5526 gates).
    fn skips_pod_level(pod: &PodSpec, gates: &FeatureGates) -> bool {
        pod.is_pod_level_resources_set()
            && !(gates.pod_level_resources && gates.pod_level_resource_managers)
    }

    /// `GetTopologyHints` (container scope) for `container_name`; `None` for
    /// no preference (shared-pool containers, unknown containers, pod-level
    /// resources without the gates).
    pub fn get_topology_hints(
        &self,
        state: &CpuManagerState,
        pod: &PodSpec,
        container_name: &str,
        gates: &FeatureGates,
    ) -> CpuHints {
        let container = pod.container(container_name)?;
        let requested = self.guaranteed_cpus(pod, container, gates);
        if requested == 0 || Self::skips_pod_level(pod, gates) {
            return None;
        }
        if let Some(allocated) = state.cpuset(&pod.uid, container_name) {
            if allocated.len() != requested {
                return cpu_hints(Vec::new());
            }
            return cpu_hints(self.generate_cpu_topology_hints(
                allocated,
                &CpuSet::new(),
                requested,
            ));
        }
        let available = self.available_cpus(state);
        let reusable = state
            .cpus_to_reuse
            .get(&pod.uid)
            .cloned()
            .unwrap_or_default();
        cpu_hints(self.generate_cpu_topology_hints(&available, &reusable, requested))
    }

    /// `GetPodTopologyHints` (pod scope): hints for the whole pod, sized by
    /// `podGuaranteedCPUs` (the pod-level request on the KEP-5526 path).
    pub fn get_pod_topology_hints(
        &self,
        state: &CpuManagerState,
        pod: &PodSpec,
        gates: &FeatureGates,
    ) -> CpuHints {
        let requested = self.pod_guaranteed_cpus(pod, gates);
        if requested == 0 || Self::skips_pod_level(pod, gates) {
            return None;
        }
        if pod.is_pod_level_resources_set() {
            // KEP-5526: the pod is placed as one unit.
            if self.validate_pod_scope_resources(pod, gates).is_err() {
                return cpu_hints(Vec::new());
            }
            if let Some(pod_cpus) = state.pod_cpuset(&pod.uid) {
                if pod_cpus.len() != requested {
                    return cpu_hints(Vec::new());
                }
                return cpu_hints(self.generate_cpu_topology_hints(
                    pod_cpus,
                    &CpuSet::new(),
                    requested,
                ));
            }
            let available = self.available_cpus(state);
            return cpu_hints(self.generate_cpu_topology_hints(
                &available,
                &CpuSet::new(),
                requested,
            ));
        }
        let mut assigned = CpuSet::new();
        for container in pod.all_containers() {
            if let Some(allocated) = state.cpuset(&pod.uid, &container.name) {
                if allocated.len() != self.guaranteed_cpus(pod, container, gates) {
                    return cpu_hints(Vec::new());
                }
                assigned = assigned.union(allocated);
            }
        }
        if assigned.len() == requested {
            return cpu_hints(self.generate_cpu_topology_hints(
                &assigned,
                &CpuSet::new(),
                requested,
            ));
        }
        let available = self.available_cpus(state);
        let reusable = state
            .cpus_to_reuse
            .get(&pod.uid)
            .cloned()
            .unwrap_or_default()
            .union(&assigned);
        cpu_hints(self.generate_cpu_topology_hints(&available, &reusable, requested))
    }

    /// `generateCPUTopologyHints`: one hint per NUMA combination that can hold
    /// `request` CPUs from `available` plus all of `reusable` (every reusable
    /// CPU must be inside the combination).
    pub fn generate_cpu_topology_hints(
        &self,
        available: &CpuSet,
        reusable: &CpuSet,
        request: usize,
    ) -> Vec<TopologyHint> {
        let topology = self.topology();
        let numa_ids = topology.numa_node_ids();
        let numa_nodes: Vec<usize> = numa_ids.iter().map(|&id| id as usize).collect();
        // Per NUMA node id (at most 63 in a CPU topology): all CPUs, available
        // CPUs; and where the reusable CPUs are.
        let mut total = [0usize; 64];
        for &id in numa_ids {
            total[id as usize] = topology.numa_node_cpus(id).len();
        }
        let mut free = [0usize; 64];
        for cpu in available.iter() {
            if let Some(node) = topology.cpu_numa_node_id(cpu) {
                free[node as usize] += 1;
            }
        }
        // A reusable CPU the topology does not know fits no mask.
        let reusable_nodes: Option<Vec<usize>> = reusable
            .iter()
            .map(|cpu| topology.cpu_numa_node_id(cpu).map(|id| id as usize))
            .collect();
        let sum = |counts: &[usize; 64], mask: BitMask| -> usize {
            let mut bits = mask.raw();
            let mut sum = 0usize;
            while bits != 0 {
                sum += counts[bits.trailing_zeros() as usize];
                bits &= bits - 1;
            }
            sum
        };
        let mut min_affinity_size = numa_nodes.len();
        let mut hints: Vec<TopologyHint> = Vec::new();
        // CPU topologies only hold NUMA ids up to 63, which every mask can hold.
        let _ = iterate_bit_masks(&numa_nodes, |mask| {
            if sum(&total, mask) >= request && mask.count() < min_affinity_size {
                min_affinity_size = mask.count();
            }
            let Some(reusable_nodes) = &reusable_nodes else {
                return;
            };
            if !reusable_nodes.iter().all(|&node| mask.is_set(node)) {
                return;
            }
            if reusable_nodes.len() + sum(&free, mask) >= request {
                hints.push(TopologyHint::new(mask, false));
            }
        });
        for hint in &mut hints {
            let Some(mask) = hint.numa_affinity else {
                continue;
            };
            hint.preferred = (self.options().align_by_socket
                && self.is_hint_socket_aligned(mask, min_affinity_size))
                || mask.count() == min_affinity_size;
        }
        hints
    }

    /// `isHintSocketAligned`: the mask spans exactly the fewest sockets that
    /// `min_affinity_size` NUMA nodes need.
    fn is_hint_socket_aligned(&self, mask: BitMask, min_affinity_size: usize) -> bool {
        let per_socket = self.topology().numa_nodes_per_socket();
        if per_socket == 0 {
            return false;
        }
        let min_sockets = min_affinity_size.div_ceil(per_socket);
        let bits = crate::cpu_topology::mask_bits(mask.raw());
        self.topology().details().sockets_in_numa_nodes(&bits).len() == min_sockets
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu_manager::pod::{ContainerKind, ContainerSpec, PodLevelResources};
    use crate::cpu_manager::policy_options::StaticPolicyOptions;
    use crate::cpu_topology::{CpuInfo, CpuTopology};

    /// topoDualSocketHT: cpu n on core n % 6, socket and NUMA node n % 2.
    fn policy() -> StaticPolicy {
        let topology = CpuTopology::new((0..12).map(|cpu| {
            (
                cpu,
                CpuInfo {
                    core_id: cpu % 6,
                    socket_id: cpu % 2,
                    numa_node_id: cpu % 2,
                    uncore_cache_id: None,
                },
            )
        }))
        .unwrap();
        StaticPolicy::new(
            topology,
            1,
            &CpuSet::new(),
            StaticPolicyOptions::default(),
            "none",
        )
        .unwrap()
    }

    fn container(name: &str, kind: ContainerKind, cpus: Option<i64>) -> ContainerSpec {
        ContainerSpec {
            name: name.into(),
            kind,
            cpu_request_millis: cpus,
            cpu_limit_millis: cpus,
            memory_request_bytes: cpus.map(|_| 1 << 30),
            memory_limit_bytes: cpus.map(|_| 1 << 30),
        }
    }

    fn mask(bits: &[usize]) -> BitMask {
        BitMask::new(bits).unwrap()
    }

    fn started(policy: &StaticPolicy, gates: &FeatureGates) -> CpuManagerState {
        policy.start(&CpuManagerState::default(), gates).unwrap()
    }

    #[test]
    fn container_hints_prefer_one_numa_node() {
        let gates = FeatureGates::default();
        let p = policy();
        let state = started(&p, &gates);
        let pod = PodSpec {
            uid: "p".into(),
            containers: vec![container("c", ContainerKind::Regular, Some(4000))],
            ..PodSpec::default()
        };
        let hints = p.get_topology_hints(&state, &pod, "c", &gates).unwrap();
        assert_eq!(
            hints[CPU],
            vec![
                TopologyHint::new(mask(&[0]), true),
                TopologyHint::new(mask(&[1]), true),
                TopologyHint::new(mask(&[0, 1]), false),
            ]
        );
        // 6 CPUs: node 0 has only 5 available (cpu 0 is reserved), but its
        // 6 CPUs count for the preference.
        let pod = PodSpec {
            containers: vec![container("c", ContainerKind::Regular, Some(6000))],
            ..pod
        };
        let hints = p.get_topology_hints(&state, &pod, "c", &gates).unwrap();
        assert_eq!(
            hints[CPU],
            vec![
                TopologyHint::new(mask(&[1]), true),
                TopologyHint::new(mask(&[0, 1]), false),
            ]
        );
        // Regenerated from an existing allocation; a wrong size is unsatisfiable.
        let next = p.allocate(&state, &pod, "c", Some(0b10), &gates).unwrap();
        let hints = p.get_topology_hints(&next, &pod, "c", &gates).unwrap();
        assert_eq!(
            hints[CPU],
            vec![
                TopologyHint::new(mask(&[1]), true),
                TopologyHint::new(mask(&[0, 1]), false),
            ]
        );
        let mut smaller = pod.clone();
        smaller.containers[0].cpu_request_millis = Some(2000);
        smaller.containers[0].cpu_limit_millis = Some(2000);
        assert_eq!(
            p.get_topology_hints(&next, &smaller, "c", &gates).unwrap()[CPU],
            vec![]
        );
        // Shared containers have no preference.
        let shared = PodSpec {
            uid: "s".into(),
            containers: vec![container("c", ContainerKind::Regular, None)],
            ..PodSpec::default()
        };
        assert_eq!(p.get_topology_hints(&state, &shared, "c", &gates), None);
    }

    #[test]
    fn pod_hints_kep5526() {
        let gates = FeatureGates {
            pod_level_resource_managers: true,
            ..FeatureGates::default()
        };
        let p = policy();
        let state = started(&p, &gates);
        let mut pod = PodSpec {
            uid: "p".into(),
            pod_level: PodLevelResources {
                cpu_request_millis: Some(5000),
                cpu_limit_millis: Some(5000),
                memory_request_bytes: Some(5 << 30),
                memory_limit_bytes: Some(5 << 30),
            },
            containers: vec![
                container("a", ContainerKind::Regular, Some(3000)),
                container("b", ContainerKind::Regular, None),
            ],
            ..PodSpec::default()
        };
        let hints = p.get_pod_topology_hints(&state, &pod, &gates).unwrap();
        assert_eq!(hints[CPU][0], TopologyHint::new(mask(&[0]), true));
        // 3 + 2 exclusive of 5 with a shared container: unsatisfiable.
        pod.containers
            .push(container("c", ContainerKind::Regular, Some(2000)));
        assert_eq!(
            p.get_pod_topology_hints(&state, &pod, &gates).unwrap()[CPU],
            vec![]
        );
        pod.containers.pop();
        // Re-admission regenerates from the pod-level set.
        let next = p.allocate_pod(&state, &pod, Some(0b10), &gates).unwrap();
        assert_eq!(
            p.get_pod_topology_hints(&next, &pod, &gates).unwrap()[CPU][0],
            TopologyHint::new(mask(&[1]), true)
        );
        // Gate off: pod-level pods get no hints.
        let off = FeatureGates::default();
        assert_eq!(p.get_pod_topology_hints(&state, &pod, &off), None);
        assert_eq!(p.get_topology_hints(&state, &pod, "a", &off), None);
    }

    #[test]
    fn pod_hints_legacy_sum_and_reuse() {
        let gates = FeatureGates::default();
        let p = policy();
        let state = started(&p, &gates);
        let pod = PodSpec {
            uid: "p".into(),
            init_containers: vec![container("init", ContainerKind::Init, Some(2000))],
            containers: vec![
                container("a", ContainerKind::Regular, Some(2000)),
                container("b", ContainerKind::Regular, Some(2000)),
            ],
            ..PodSpec::default()
        };
        let hints = p.get_pod_topology_hints(&state, &pod, &gates).unwrap();
        assert_eq!(hints[CPU][0], TopologyHint::new(mask(&[0]), true));
        let next = p
            .allocate_container_scope(&state, &pod, Some(0b01), &gates)
            .unwrap();
        // Fully allocated: regenerated from the union of the containers' CPUs.
        assert_eq!(
            p.get_pod_topology_hints(&next, &pod, &gates).unwrap()[CPU][0],
            TopologyHint::new(mask(&[0]), true)
        );
    }
}
