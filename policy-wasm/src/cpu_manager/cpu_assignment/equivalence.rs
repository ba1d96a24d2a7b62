//! The optimised assignment against the test-only [`super::reference`]
//! (the code before free CPUs were counted per unit) on generated
//! topologies, free CPU sets and every request size: same CPUs, same
//! errors, same orders. `CPU_EQUIVALENCE_ROUNDS` raises the number of
//! generated topologies (default 8) for a longer run.

use super::reference;
use super::*;
use crate::cpu_manager::properties::Rng;
use crate::cpu_topology::{CpuInfo, CpuTopology, CpuTopologyError};

/// A machine of one of several shapes: regular ones numbered like Linux
/// (threads of a core `num_cores` apart) or core by core, NUMA nodes per
/// socket or spanning sockets, uncore caches per group of cores, per
/// socket or missing, offline CPUs, and arbitrary ids.
fn topology(rng: &mut Rng) -> Vec<(u32, CpuInfo)> {
    let shape = rng.below(6);
    if shape == 5 {
        // Arbitrary: random cores, each in one random socket and NUMA node,
        // every CPU with a random uncore cache (a core may span caches).
        let cores = 1 + rng.below(24) as u32;
        let mut cpus = Vec::new();
        let mut next_id = 0u32;
        for core in 0..cores {
            let socket = rng.below(4) as u32 * 3;
            let numa = rng.below(5) as u32;
            for _ in 0..1 + rng.below(3) {
                next_id += 1 + rng.below(3) as u32;
                let uncore = match rng.below(3) {
                    0 => None,
                    _ => Some(rng.below(4) as u32 * 7),
                };
                cpus.push((
                    next_id,
                    CpuInfo {
                        core_id: core * 5 + 1,
                        socket_id: socket,
                        numa_node_id: numa,
                        uncore_cache_id: uncore,
                    },
                ));
            }
        }
        // Sometimes a core spanning two NUMA nodes (an error to report).
        if rng.chance(20) {
            let i = rng.below(cpus.len() as u64) as usize;
            cpus[i].1.numa_node_id = 5;
        }
        // Any input order.
        for i in (1..cpus.len()).rev() {
            cpus.swap(i, rng.below(i as u64 + 1) as usize);
        }
        return cpus;
    }
    let sockets = 1 + rng.below(4) as u32;
    let threads = [1, 2, 2, 4][rng.below(4) as usize];
    let cores_per_socket = 1 + rng.below(12) as u32;
    // NUMA nodes per socket (1, 2, 4) or one NUMA node spanning all sockets.
    let numa_per_socket = [1, 2, 4, 0][rng.below(4) as usize];
    let uncore_cores = 1 + rng.below(6) as u32;
    let uncore_kind = rng.below(3);
    let linux_numbering = rng.chance(50);
    let offline = rng.below(3) == 0;
    let num_cores = sockets * cores_per_socket;
    let mut cpus = Vec::new();
    for core in 0..num_cores {
        let socket = core / cores_per_socket;
        let local = core % cores_per_socket;
        let numa = if numa_per_socket == 0 {
            0
        } else {
            socket * numa_per_socket + (local * numa_per_socket / cores_per_socket)
        };
        for thread in 0..threads {
            let id = if linux_numbering {
                core + thread * num_cores
            } else {
                core * threads + thread
            };
            if offline && rng.chance(15) {
                continue;
            }
            let uncore = match uncore_kind {
                0 => None,
                1 => Some(socket),
                _ => Some(100 + core / uncore_cores),
            };
            cpus.push((
                id,
                CpuInfo {
                    // Kubelet style: a core is named by its lowest CPU.
                    core_id: if linux_numbering {
                        core
                    } else {
                        core * threads
                    },
                    socket_id: socket,
                    numa_node_id: numa,
                    uncore_cache_id: uncore,
                },
            ));
        }
    }
    cpus
}

/// The topology facts the old `CpuTopology::new` derived, computed naively.
fn check_topology(cpus: &[(u32, CpuInfo)], case: &str) -> Option<CpuTopology> {
    let built = CpuTopology::new(cpus.iter().copied());
    let mut sorted = cpus.to_vec();
    sorted.sort_by_key(|(cpu, _)| *cpu);
    if sorted.is_empty() {
        assert_eq!(built, Err(CpuTopologyError::NoCpus), "{case}");
        return None;
    }
    // The old rule: per core, the lowest CPU whose (socket, NUMA) differs from
    // the core's lowest CPU; the core of the lowest such CPU.
    let mut spanning: Option<(u32, u32)> = None;
    for &(_, info) in &sorted {
        let core_cpus: Vec<&(u32, CpuInfo)> = sorted
            .iter()
            .filter(|(_, i)| i.core_id == info.core_id)
            .collect();
        let first = (core_cpus[0].1.socket_id, core_cpus[0].1.numa_node_id);
        if let Some(&&(cpu, _)) = core_cpus
            .iter()
            .find(|(_, i)| (i.socket_id, i.numa_node_id) != first)
            && spanning.is_none_or(|(lowest, _)| cpu < lowest)
        {
            spanning = Some((cpu, info.core_id));
        }
    }
    if let Some((_, core_id)) = spanning {
        assert_eq!(
            built,
            Err(CpuTopologyError::CoreSpansUnits { core_id }),
            "{case}"
        );
        return None;
    }
    let topo = built.unwrap_or_else(|err| panic!("{case}: {err}"));
    let details = topo.details();
    assert_eq!(
        (
            topo.num_cores(),
            topo.num_sockets(),
            topo.num_numa_nodes(),
            topo.num_uncore_caches()
        ),
        (
            details.cores().len(),
            details.sockets().len(),
            details.numa_nodes().len(),
            details.uncore_caches().len()
        ),
        "{case}"
    );
    for id in 0..300 {
        assert_eq!(
            topo.core_cpus(id),
            details.cpus_in_cores(&[id]).as_slice(),
            "{case}"
        );
        assert_eq!(
            topo.socket_cpus(id),
            details.cpus_in_sockets(&[id]).as_slice(),
            "{case}"
        );
        assert_eq!(
            topo.numa_node_cpus(id),
            details.cpus_in_numa_nodes(&[id]).as_slice(),
            "{case}"
        );
        assert_eq!(
            topo.uncore_cache_cpus(id),
            details.cpus_in_uncore_caches(&[id]).as_slice(),
            "{case}"
        );
        assert_eq!(topo.info(id), details.get(id), "{case}");
    }
    for mask in [0u64, 1, 0b101, 0b11_0110, u64::MAX] {
        assert_eq!(
            topo.cpus_in_numa_mask(mask),
            details.cpus_in_numa_nodes(&crate::cpu_topology::mask_bits(mask)),
            "{case}"
        );
    }
    Some(topo)
}

/// A random subset of the machine's CPUs (sometimes with unknown CPUs).
fn free_set(rng: &mut Rng, topo: &CpuTopology) -> CpuSet {
    let density = rng.below(101);
    let mut ids: Vec<u32> = topo
        .cpus()
        .iter()
        .filter(|_| rng.below(100) < density)
        .collect();
    if rng.chance(10) {
        ids.push(5000 + rng.below(10) as u32);
    }
    CpuSet::from_vec(ids)
}

#[track_caller]
fn same_accumulators(topo: &CpuTopology, available: &CpuSet, n: usize, case: &str) {
    for strategy in [CpuSortingStrategy::Packed, CpuSortingStrategy::Spread] {
        let new = CpuAccumulator::new(topo, available, n, strategy);
        let old = reference::CpuAccumulator::new(topo, available, n, strategy);
        let case = format!("{case} {strategy:?}");
        assert_eq!(
            new.sort_available_numa_nodes(),
            old.sort_available_numa_nodes(),
            "{case}"
        );
        assert_eq!(
            new.sort_available_sockets(),
            old.sort_available_sockets(),
            "{case}"
        );
        assert_eq!(
            new.sort_available_cores(),
            old.sort_available_cores(),
            "{case}"
        );
        assert_eq!(new.free_cpus(), old.free_cpus(), "{case}");
        assert_eq!(new.free_numa_nodes(), old.free_numa_nodes(), "{case}");
        assert_eq!(new.free_sockets(), old.free_sockets(), "{case}");
        assert_eq!(new.free_cores(), old.free_cores(), "{case}");
        assert_eq!(new.is_failed(), old.is_failed(), "{case}");
        assert_eq!(new.is_satisfied(), old.is_satisfied(), "{case}");
    }
}

/// Runs `rounds` topologies; returns the number of compared calls.
fn compare(rounds: usize, seed: u64) -> usize {
    let mut rng = Rng(seed);
    let mut compared = 0;
    for round in 0..rounds {
        let cpus = topology(&mut rng);
        let case = format!("seed {seed:#x} round {round}");
        let Some(topo) = check_topology(&cpus, &case) else {
            continue;
        };
        for set in 0..4 {
            let available = free_set(&mut rng, &topo);
            let known = available.iter().filter(|&c| topo.info(c).is_some()).count();
            same_accumulators(&topo, &available, known / 2, &format!("{case} set {set}"));
            // Take sequences: the accumulator's lists after every step.
            let mut new = CpuAccumulator::new(&topo, &available, known, CpuSortingStrategy::Packed);
            let mut old = reference::CpuAccumulator::new(
                &topo,
                &available,
                known,
                CpuSortingStrategy::Packed,
            );
            for _ in 0..3 {
                let step = free_set(&mut rng, &topo);
                new.take(&step);
                old.take(&step);
                assert_eq!(new.needed(), old.needed(), "{case}");
                assert_eq!(
                    new.sort_available_cores(),
                    old.sort_available_cores(),
                    "{case}"
                );
                assert_eq!(new.free_cpus(), old.free_cpus(), "{case}");
                assert_eq!(new.free_sockets(), old.free_sockets(), "{case}");
                assert_eq!(new.is_failed(), old.is_failed(), "{case}");
                compared += 1;
            }
            for n in 0..=known + 1 {
                for strategy in [CpuSortingStrategy::Packed, CpuSortingStrategy::Spread] {
                    for uncore in [false, true] {
                        let got =
                            take_by_topology_numa_packed(&topo, &available, n, strategy, uncore);
                        let want = reference::take_by_topology_numa_packed(
                            &topo, &available, n, strategy, uncore,
                        );
                        assert_eq!(
                            got, want,
                            "{case} set {set} packed n={n} {strategy:?} {uncore}"
                        );
                        compared += 1;
                    }
                    for group in [1, 2, 4] {
                        let got = take_by_topology_numa_distributed(
                            &topo, &available, n, group, strategy,
                        );
                        let want = reference::take_by_topology_numa_distributed(
                            &topo, &available, n, group, strategy,
                        );
                        assert_eq!(
                            got, want,
                            "{case} set {set} distributed n={n} group {group}"
                        );
                        compared += 1;
                    }
                }
            }
        }
    }
    compared
}

#[test]
fn cpu_assignment_matches_the_reference() {
    let rounds = std::env::var("CPU_EQUIVALENCE_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let compared = compare(rounds, 0x9e37_79b9_7f4a_7c15);
    eprintln!("compared {compared} calls");
    assert!(compared > 0);
}
