//! The topology manager's policy options (`--topology-manager-policy-options`):
//! their names, maturity gates and parsing into [`PolicyOptions`].
//!
//! Mirrors upstream `pkg/kubelet/cm/topologymanager/policy_options.go`, with
//! Go's `strconv.ParseBool` / `strconv.Atoi` rules for the values.

use std::collections::BTreeMap;
use std::fmt;

use super::TopologyError;
use crate::features::FeatureGates;

/// Upstream `defaultMaxAllowableNUMANodes`: the NUMA node limit unless raised.
pub const DEFAULT_MAX_ALLOWABLE_NUMA_NODES: usize = 8;
/// The policy option `prefer-closest-numa-nodes` (GA).
pub const PREFER_CLOSEST_NUMA_NODES: &str = "prefer-closest-numa-nodes";
/// The policy option `max-allowable-numa-nodes` (GA).
pub const MAX_ALLOWABLE_NUMA_NODES: &str = "max-allowable-numa-nodes";

/// Which option gates are on: `TopologyManagerPolicyAlphaOptions` and
/// `TopologyManagerPolicyBetaOptions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionGates {
    /// `TopologyManagerPolicyAlphaOptions` (default off).
    pub alpha_options: bool,
    /// `TopologyManagerPolicyBetaOptions` (default on).
    pub beta_options: bool,
}

impl Default for OptionGates {
    fn default() -> OptionGates {
        OptionGates {
            alpha_options: false,
            beta_options: true,
        }
    }
}

impl From<&FeatureGates> for OptionGates {
    fn from(gates: &FeatureGates) -> OptionGates {
        OptionGates {
            alpha_options: gates.topology_manager_policy_alpha_options,
            beta_options: gates.topology_manager_policy_beta_options,
        }
    }
}

/// The maturity of a policy option, which decides the gate it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionMaturity {
    /// Needs `TopologyManagerPolicyAlphaOptions`.
    Alpha,
    /// Needs `TopologyManagerPolicyBetaOptions`.
    Beta,
    /// Always available.
    Stable,
}

/// Every known option and its maturity in Kubernetes 1.36: both options are
/// GA, so the alpha and beta sets are empty upstream.
pub const POLICY_OPTIONS: &[(&str, OptionMaturity)] = &[
    (PREFER_CLOSEST_NUMA_NODES, OptionMaturity::Stable),
    (MAX_ALLOWABLE_NUMA_NODES, OptionMaturity::Stable),
];

/// The parsed topology manager policy options (upstream `PolicyOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyOptions {
    /// `prefer-closest-numa-nodes`.
    pub prefer_closest_numa: bool,
    /// `max-allowable-numa-nodes` (at least [`DEFAULT_MAX_ALLOWABLE_NUMA_NODES`]).
    pub max_allowable_numa_nodes: usize,
}

impl Default for PolicyOptions {
    fn default() -> PolicyOptions {
        PolicyOptions {
            prefer_closest_numa: false,
            max_allowable_numa_nodes: DEFAULT_MAX_ALLOWABLE_NUMA_NODES,
        }
    }
}

/// Upstream `CheckPolicyOptionAvailable`: the option is known and its maturity gate is on.
pub fn check_policy_option_available(
    option: &str,
    gates: OptionGates,
) -> Result<(), TopologyError> {
    check_option_in(POLICY_OPTIONS, option, gates)
}

fn check_option_in(
    table: &[(&str, OptionMaturity)],
    option: &str,
    gates: OptionGates,
) -> Result<(), TopologyError> {
    let Some(&(_, maturity)) = table.iter().find(|(name, _)| *name == option) else {
        return Err(TopologyError::UnknownOption(option.to_string()));
    };
    match maturity {
        OptionMaturity::Alpha if !gates.alpha_options => {
            Err(TopologyError::AlphaOptionNotEnabled(option.to_string()))
        }
        OptionMaturity::Beta if !gates.beta_options => {
            Err(TopologyError::BetaOptionNotEnabled(option.to_string()))
        }
        _ => Ok(()),
    }
}

/// Upstream `NewPolicyOptions`. Options are checked in name order (Go's map
/// order is random, so which of several bad options is reported may differ).
pub fn new_policy_options(
    options: &BTreeMap<String, String>,
    gates: OptionGates,
) -> Result<PolicyOptions, TopologyError> {
    let mut parsed = PolicyOptions::default();
    for (name, value) in options {
        check_policy_option_available(name, gates)?;
        match name.as_str() {
            PREFER_CLOSEST_NUMA_NODES => {
                parsed.prefer_closest_numa =
                    parse_go_bool(value).ok_or_else(|| TopologyError::BadOptionValue {
                        option: name.clone(),
                        value: value.clone(),
                    })?;
            }
            MAX_ALLOWABLE_NUMA_NODES => {
                let number = parse_go_int(value).map_err(|reason| TopologyError::NotAnInteger {
                    option: name.clone(),
                    value: value.clone(),
                    reason,
                })?;
                if number < DEFAULT_MAX_ALLOWABLE_NUMA_NODES as i64 {
                    return Err(TopologyError::MaxAllowableTooLow {
                        option: name.clone(),
                    });
                }
                // On 32-bit targets a huge limit saturates; it is only an upper bound.
                parsed.max_allowable_numa_nodes = usize::try_from(number).unwrap_or(usize::MAX);
            }
            _ => return Err(TopologyError::UnknownOption(name.clone())),
        }
    }
    Ok(parsed)
}

/// Go `strconv.ParseBool`.
fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Why Go `strconv.Atoi` rejected a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtoiError {
    /// `invalid syntax`.
    InvalidSyntax,
    /// `value out of range`.
    OutOfRange,
}

impl fmt::Display for AtoiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AtoiError::InvalidSyntax => "invalid syntax",
            AtoiError::OutOfRange => "value out of range",
        })
    }
}

/// Go `strconv.Atoi` on a 64-bit platform: optional sign, decimal digits only.
fn parse_go_int(value: &str) -> Result<i64, AtoiError> {
    let (negative, digits) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AtoiError::InvalidSyntax);
    }
    let mut magnitude: i128 = 0;
    for b in digits.bytes() {
        magnitude = magnitude * 10 + i128::from(b - b'0');
        if magnitude > i128::from(i64::MAX) + 1 {
            return Err(AtoiError::OutOfRange);
        }
    }
    let signed = if negative { -magnitude } else { magnitude };
    i64::try_from(signed).map_err(|_| AtoiError::OutOfRange)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::test_support::opts;

    #[test]
    fn policy_options_parse() {
        let gates = OptionGates::default();
        assert_eq!(
            new_policy_options(&opts(&[]), gates),
            Ok(PolicyOptions::default())
        );
        let parsed = new_policy_options(
            &opts(&[
                (PREFER_CLOSEST_NUMA_NODES, "True"),
                (MAX_ALLOWABLE_NUMA_NODES, "16"),
            ]),
            gates,
        );
        assert_eq!(
            parsed,
            Ok(PolicyOptions {
                prefer_closest_numa: true,
                max_allowable_numa_nodes: 16
            })
        );
        // GA options need no gate.
        let off = OptionGates {
            alpha_options: false,
            beta_options: false,
        };
        assert!(new_policy_options(&opts(&[(PREFER_CLOSEST_NUMA_NODES, "1")]), off).is_ok());

        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("bogus", "x")],
                "unknown Topology Manager Policy option: \"bogus\"",
            ),
            (
                &[(PREFER_CLOSEST_NUMA_NODES, "yes")],
                "bad value for option \"prefer-closest-numa-nodes\": strconv.ParseBool: parsing \"yes\": invalid syntax",
            ),
            (
                &[(MAX_ALLOWABLE_NUMA_NODES, "8x")],
                "unable to convert policy option to integer \"max-allowable-numa-nodes\": strconv.Atoi: parsing \"8x\": invalid syntax",
            ),
            (
                &[(MAX_ALLOWABLE_NUMA_NODES, "99999999999999999999")],
                "unable to convert policy option to integer \"max-allowable-numa-nodes\": strconv.Atoi: parsing \"99999999999999999999\": value out of range",
            ),
            (
                &[(MAX_ALLOWABLE_NUMA_NODES, "7")],
                "the minimum value of \"max-allowable-numa-nodes\" should not be less than 8",
            ),
            (
                &[(MAX_ALLOWABLE_NUMA_NODES, "-9")],
                "the minimum value of \"max-allowable-numa-nodes\" should not be less than 8",
            ),
        ];
        for (input, want) in cases {
            let err = new_policy_options(&opts(input), gates).expect_err(want);
            assert_eq!(err.to_string(), *want);
        }
        assert_eq!(
            new_policy_options(&opts(&[(MAX_ALLOWABLE_NUMA_NODES, "+8")]), gates)
                .map(|o| o.max_allowable_numa_nodes),
            Ok(8)
        );
    }

    #[test]
    fn option_maturity_gates() {
        let table = [
            ("a", OptionMaturity::Alpha),
            ("b", OptionMaturity::Beta),
            ("s", OptionMaturity::Stable),
        ];
        let none = OptionGates {
            alpha_options: false,
            beta_options: false,
        };
        let all = OptionGates {
            alpha_options: true,
            beta_options: true,
        };
        assert_eq!(
            check_option_in(&table, "a", none).unwrap_err().to_string(),
            "Topology Manager Policy Alpha-level Options not enabled, but option \"a\" provided"
        );
        assert_eq!(
            check_option_in(&table, "b", none).unwrap_err().to_string(),
            "Topology Manager Policy Beta-level Options not enabled, but option \"b\" provided"
        );
        assert!(check_option_in(&table, "s", none).is_ok());
        assert!(
            check_option_in(&table, "a", all).is_ok() && check_option_in(&table, "b", all).is_ok()
        );
        assert_eq!(
            check_option_in(&table, "z", all),
            Err(TopologyError::UnknownOption("z".into()))
        );
    }
}
