//! Static policy options (`pkg/kubelet/cm/cpumanager/policy_options.go`).
//!
//! Options are checked in two stages, as upstream. [`StaticPolicyOptions::parse`]
//! (`NewStaticPolicyOptions`) rejects unknown names, options above the
//! maturity the `CPUManagerPolicyAlphaOptions`/`CPUManagerPolicyBetaOptions`
//! gates allow, values `strconv.ParseBool` would not accept, and the pairs
//! that cannot be combined. [`StaticPolicyOptions::validate`]
//! (`ValidateStaticPolicyOptions`) then checks them against the machine and
//! the topology manager policy.
//!
//! Maturity in Kubernetes 1.36 (see [`OPTION_MATURITY`]): `full-pcpus-only`,
//! `distribute-cpus-across-numa` and `prefer-align-cpus-by-uncorecache` are
//! stable, `strict-cpu-reservation` beta, `align-by-socket` and
//! `distribute-cpus-across-cores` alpha.

use crate::cpu_manager::CpuManagerError;
use crate::cpu_manager::cpu_assignment::CpuSortingStrategy;
use crate::cpu_topology::CpuTopology;
use crate::features::FeatureGates;

/// `full-pcpus-only`: allocate whole physical cores only.
pub const FULL_PCPUS_ONLY_OPTION: &str = "full-pcpus-only";
/// `distribute-cpus-across-numa`: spread multi-NUMA allocations evenly.
pub const DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION: &str = "distribute-cpus-across-numa";
/// `align-by-socket`: treat the socket, not the NUMA node, as the alignment boundary.
pub const ALIGN_BY_SOCKET_OPTION: &str = "align-by-socket";
/// `distribute-cpus-across-cores`: spread CPUs over physical cores.
pub const DISTRIBUTE_CPUS_ACROSS_CORES_OPTION: &str = "distribute-cpus-across-cores";
/// `strict-cpu-reservation`: keep the reserved CPUs out of the shared pool.
pub const STRICT_CPU_RESERVATION_OPTION: &str = "strict-cpu-reservation";
/// `prefer-align-cpus-by-uncorecache`: pack allocations into uncore (L3) caches.
pub const PREFER_ALIGN_BY_UNCORE_CACHE_OPTION: &str = "prefer-align-cpus-by-uncorecache";

/// How mature an option is, which decides the gate it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionMaturity {
    /// Needs `CPUManagerPolicyAlphaOptions`.
    Alpha,
    /// Needs `CPUManagerPolicyBetaOptions`.
    Beta,
    /// Always available.
    Stable,
}

/// Every known option with its Kubernetes 1.36 maturity.
pub const OPTION_MATURITY: &[(&str, OptionMaturity)] = &[
    (FULL_PCPUS_ONLY_OPTION, OptionMaturity::Stable),
    (DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION, OptionMaturity::Stable),
    (ALIGN_BY_SOCKET_OPTION, OptionMaturity::Alpha),
    (DISTRIBUTE_CPUS_ACROSS_CORES_OPTION, OptionMaturity::Alpha),
    (STRICT_CPU_RESERVATION_OPTION, OptionMaturity::Beta),
    (PREFER_ALIGN_BY_UNCORE_CACHE_OPTION, OptionMaturity::Stable),
];

/// The topology manager policy name that excludes `align-by-socket`.
pub const TOPOLOGY_MANAGER_POLICY_SINGLE_NUMA_NODE: &str = "single-numa-node";

/// The parsed static policy options (upstream `StaticPolicyOptions`); all off by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StaticPolicyOptions {
    /// `full-pcpus-only`.
    pub full_physical_cpus_only: bool,
    /// `distribute-cpus-across-numa`.
    pub distribute_cpus_across_numa: bool,
    /// `align-by-socket`.
    pub align_by_socket: bool,
    /// `distribute-cpus-across-cores`.
    pub distribute_cpus_across_cores: bool,
    /// `strict-cpu-reservation`.
    pub strict_cpu_reservation: bool,
    /// `prefer-align-cpus-by-uncorecache`.
    pub prefer_align_by_uncore_cache: bool,
}

/// `CheckPolicyOptionAvailable`: is `name` known and allowed by the gates?
pub fn check_policy_option_available(
    name: &str,
    gates: &FeatureGates,
) -> Result<(), CpuManagerError> {
    let Some((_, maturity)) = OPTION_MATURITY.iter().find(|(known, _)| *known == name) else {
        return Err(CpuManagerError::UnknownOption {
            name: name.to_string(),
        });
    };
    let allowed = match maturity {
        OptionMaturity::Alpha => gates.cpu_manager_policy_alpha_options,
        OptionMaturity::Beta => gates.cpu_manager_policy_beta_options,
        OptionMaturity::Stable => true,
    };
    if allowed {
        Ok(())
    } else {
        Err(CpuManagerError::OptionNotAvailable {
            name: name.to_string(),
            maturity: *maturity,
        })
    }
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl StaticPolicyOptions {
    /// `NewStaticPolicyOptions`: parse `name=value` pairs, checked in the order given.
    pub fn parse<'a>(
        options: impl IntoIterator<Item = (&'a str, &'a str)>,
        gates: &FeatureGates,
    ) -> Result<StaticPolicyOptions, CpuManagerError> {
        let mut opts = StaticPolicyOptions::default();
        for (name, value) in options {
            check_policy_option_available(name, gates)?;
            let parsed = parse_go_bool(value).ok_or_else(|| CpuManagerError::BadOptionValue {
                name: name.to_string(),
                value: value.to_string(),
            })?;
            let slot = match name {
                FULL_PCPUS_ONLY_OPTION => &mut opts.full_physical_cpus_only,
                DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION => &mut opts.distribute_cpus_across_numa,
                ALIGN_BY_SOCKET_OPTION => &mut opts.align_by_socket,
                DISTRIBUTE_CPUS_ACROSS_CORES_OPTION => &mut opts.distribute_cpus_across_cores,
                STRICT_CPU_RESERVATION_OPTION => &mut opts.strict_cpu_reservation,
                PREFER_ALIGN_BY_UNCORE_CACHE_OPTION => &mut opts.prefer_align_by_uncore_cache,
                _ => {
                    return Err(CpuManagerError::UnknownOption {
                        name: name.to_string(),
                    });
                }
            };
            *slot = parsed;
        }
        opts.check_combinations()?;
        Ok(opts)
    }

    /// The pairs upstream refuses to combine, in upstream's order.
    pub fn check_combinations(&self) -> Result<(), CpuManagerError> {
        let pairs = [
            (
                self.full_physical_cpus_only,
                FULL_PCPUS_ONLY_OPTION,
                self.distribute_cpus_across_cores,
                DISTRIBUTE_CPUS_ACROSS_CORES_OPTION,
            ),
            (
                self.distribute_cpus_across_numa,
                DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION,
                self.distribute_cpus_across_cores,
                DISTRIBUTE_CPUS_ACROSS_CORES_OPTION,
            ),
            (
                self.prefer_align_by_uncore_cache,
                PREFER_ALIGN_BY_UNCORE_CACHE_OPTION,
                self.distribute_cpus_across_cores,
                DISTRIBUTE_CPUS_ACROSS_CORES_OPTION,
            ),
            (
                self.prefer_align_by_uncore_cache,
                PREFER_ALIGN_BY_UNCORE_CACHE_OPTION,
                self.distribute_cpus_across_numa,
                DISTRIBUTE_CPUS_ACROSS_NUMA_OPTION,
            ),
        ];
        for (first_on, first, second_on, second) in pairs {
            if first_on && second_on {
                return Err(CpuManagerError::ConflictingOptions { first, second });
            }
        }
        Ok(())
    }

    /// `ValidateStaticPolicyOptions`: check the options against the machine and the topology manager policy name.
    pub fn validate(
        &self,
        topology: &CpuTopology,
        topology_manager_policy: &str,
    ) -> Result<(), CpuManagerError> {
        if self.align_by_socket {
            if topology_manager_policy == TOPOLOGY_MANAGER_POLICY_SINGLE_NUMA_NODE {
                return Err(CpuManagerError::AlignBySocketWithSingleNumaNode);
            }
            if topology.num_sockets() > topology.num_numa_nodes() {
                return Err(CpuManagerError::AlignBySocketUnsupportedHardware);
            }
        }
        Ok(())
    }

    /// The CPU sorting strategy these options select (spread with distribute-cpus-across-cores).
    pub fn cpu_sorting_strategy(&self) -> CpuSortingStrategy {
        if self.distribute_cpus_across_cores {
            CpuSortingStrategy::Spread
        } else {
            CpuSortingStrategy::Packed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(alpha: bool, beta: bool) -> FeatureGates {
        FeatureGates {
            cpu_manager_policy_alpha_options: alpha,
            cpu_manager_policy_beta_options: beta,
            ..FeatureGates::default()
        }
    }

    #[track_caller]
    fn check_err(options: &[(&str, &str)], gates: &FeatureGates, expected: &str) {
        let err = StaticPolicyOptions::parse(options.iter().copied(), gates)
            .expect_err("options must be rejected");
        assert_eq!(err.to_string(), expected);
    }

    #[test]
    fn cpu_policy_options_parse_and_gate() {
        let defaults = FeatureGates::default();
        let opts = StaticPolicyOptions::parse(
            [("full-pcpus-only", "true"), ("strict-cpu-reservation", "1")],
            &defaults,
        )
        .expect("stable and beta options are available by default");
        assert!(opts.full_physical_cpus_only && opts.strict_cpu_reservation);
        check_err(
            &[("bogus", "true")],
            &defaults,
            "unknown CPU Manager Policy option: \"bogus\"",
        );
        check_err(
            &[("align-by-socket", "true")],
            &defaults,
            "CPU Manager Policy Alpha-level Options not enabled, but option \"align-by-socket\" provided",
        );
        check_err(
            &[("strict-cpu-reservation", "true")],
            &gates(false, false),
            "CPU Manager Policy Beta-level Options not enabled, but option \"strict-cpu-reservation\" provided",
        );
        check_err(
            &[("full-pcpus-only", "yes")],
            &defaults,
            "bad value for option \"full-pcpus-only\": strconv.ParseBool: parsing \"yes\": invalid syntax",
        );
        let alpha = gates(true, true);
        check_err(
            &[
                ("full-pcpus-only", "true"),
                ("distribute-cpus-across-cores", "true"),
            ],
            &alpha,
            "static policy options full-pcpus-only and distribute-cpus-across-cores can not be used at the same time",
        );
        check_err(
            &[
                ("prefer-align-cpus-by-uncorecache", "true"),
                ("distribute-cpus-across-numa", "true"),
            ],
            &alpha,
            "static policy options prefer-align-cpus-by-uncorecache and distribute-cpus-across-numa can not be used at the same time",
        );
        let spread =
            StaticPolicyOptions::parse([("distribute-cpus-across-cores", "true")], &alpha).unwrap();
        assert_eq!(spread.cpu_sorting_strategy(), CpuSortingStrategy::Spread);
        let off = StaticPolicyOptions::parse([("align-by-socket", "false")], &alpha).unwrap();
        assert_eq!(off, StaticPolicyOptions::default());
    }
}
