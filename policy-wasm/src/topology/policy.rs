//! The four topology manager policies: [`PolicyName`], and [`Policy`], which
//! merges the providers' hints and decides admission (with the reason in
//! words, [`Policy::admit_rule`]).
//!
//! Mirrors upstream `pkg/kubelet/cm/topologymanager/policy.go` (the `Policy`
//! interface) and `policy_none.go`, `policy_best_effort.go`,
//! `policy_restricted.go`, `policy_single_numa_node.go` (`Merge`,
//! `canAdmitPodResult`, `filterSingleNumaHints`).

use super::{
    BitMask, HintMerger, NumaInfo, PolicyOptions, ProviderHints, Scope, TopologyError,
    TopologyHint, describe_hint, filter_providers_hints,
};

/// A topology manager policy name (`--topology-manager-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyName {
    /// `none`: no alignment, always admit.
    None,
    /// `best-effort`: merge, always admit.
    BestEffort,
    /// `restricted`: merge, admit only preferred hints.
    Restricted,
    /// `single-numa-node`: single-node (or don't-care) hints only, admit only preferred.
    SingleNumaNode,
}

impl PolicyName {
    /// Parses an upstream policy name.
    pub fn parse(name: &str) -> Result<PolicyName, TopologyError> {
        match name {
            "none" => Ok(PolicyName::None),
            "best-effort" => Ok(PolicyName::BestEffort),
            "restricted" => Ok(PolicyName::Restricted),
            "single-numa-node" => Ok(PolicyName::SingleNumaNode),
            _ => Err(TopologyError::UnknownPolicy(name.to_string())),
        }
    }

    /// The upstream name.
    pub const fn as_str(self) -> &'static str {
        match self {
            PolicyName::None => "none",
            PolicyName::BestEffort => "best-effort",
            PolicyName::Restricted => "restricted",
            PolicyName::SingleNumaNode => "single-numa-node",
        }
    }
}

/// A topology manager policy bound to the machine's NUMA layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    // `pub(super)`: `new_manager` builds the `none` policy without the
    // checks of `Policy::new`, as upstream's `NewManager` does.
    pub(super) name: PolicyName,
    pub(super) numa_info: NumaInfo,
    pub(super) options: PolicyOptions,
}

impl Policy {
    /// Builds a policy; except for `none`, the machine must not have more NUMA
    /// nodes than `max-allowable-numa-nodes`, and every id must fit a mask.
    pub fn new(
        name: PolicyName,
        numa_info: NumaInfo,
        options: PolicyOptions,
    ) -> Result<Policy, TopologyError> {
        if name != PolicyName::None {
            if numa_info.nodes.len() > options.max_allowable_numa_nodes {
                return Err(TopologyError::TooManyNumaNodes {
                    max: options.max_allowable_numa_nodes,
                });
            }
            BitMask::new(&numa_info.nodes).map_err(TopologyError::InvalidNumaNode)?;
        }
        Ok(Policy {
            name,
            numa_info,
            options,
        })
    }

    /// The policy name.
    pub fn name(&self) -> PolicyName {
        self.name
    }

    /// The NUMA layout.
    pub fn numa_info(&self) -> &NumaInfo {
        &self.numa_info
    }

    /// The parsed options.
    pub fn options(&self) -> &PolicyOptions {
        &self.options
    }

    /// Upstream `Merge`: the best hint and whether the pod may be admitted.
    pub fn merge(&self, providers_hints: &[ProviderHints]) -> (TopologyHint, bool) {
        let hint = match self.name {
            PolicyName::None => return (TopologyHint::default(), true),
            PolicyName::BestEffort | PolicyName::Restricted => {
                let filtered = filter_providers_hints(providers_hints);
                HintMerger::new(&self.numa_info, &filtered, self.name, &self.options).merge()
            }
            PolicyName::SingleNumaNode => {
                let filtered = filter_single_numa_hints(filter_providers_hints(providers_hints));
                let best =
                    HintMerger::new(&self.numa_info, &filtered, self.name, &self.options).merge();
                if best.numa_affinity == Some(self.numa_info.default_affinity_mask()) {
                    TopologyHint::any(best.preferred)
                } else {
                    best
                }
            }
        };
        (hint, self.can_admit(&hint))
    }

    /// Upstream `canAdmitPodResult`: none and best-effort always admit;
    /// restricted and single-numa-node need a preferred hint.
    pub fn can_admit(&self, hint: &TopologyHint) -> bool {
        match self.name {
            PolicyName::None | PolicyName::BestEffort => true,
            PolicyName::Restricted | PolicyName::SingleNumaNode => hint.preferred,
        }
    }
}

impl Policy {
    /// Why `can_admit` admitted or refused `hint`, the result of
    /// [`Policy::merge`] over `providers_hints`, in one line: the policy and
    /// scope, the merged hint, the fact that decided and the policy's rule.
    /// For a refusal it names the resources that left no admissible choice,
    /// so a reader can find the offending request without redoing the merge.
    pub fn admit_rule(
        &self,
        scope: Scope,
        providers_hints: &[ProviderHints],
        hint: &TopologyHint,
    ) -> String {
        let head = format!("{} ({} scope)", self.name.as_str(), scope.as_str());
        let merged = describe_hint(hint);
        match self.name {
            PolicyName::None => {
                format!("{head}: no NUMA alignment is asked for; the none policy admits every pod")
            }
            PolicyName::BestEffort => format!(
                "{head}: merged hint {merged}; best-effort admits every merged hint, preferred or not (it only picks the best one)"
            ),
            PolicyName::Restricted if hint.preferred => {
                format!("{head}: merged hint {merged}; restricted admits a preferred merged hint")
            }
            PolicyName::Restricted => {
                let lacking = resources_without(providers_hints, |h| h.preferred);
                let cause = if lacking.is_empty() {
                    "the resources' preferred hints share no NUMA node set".to_string()
                } else {
                    format!("{} no preferred hint", has_list(&lacking))
                };
                format!(
                    "{head}: merged hint {merged}: {cause}; restricted admits only a preferred merged hint"
                )
            }
            PolicyName::SingleNumaNode if hint.preferred => format!(
                "{head}: merged hint {merged}; single-numa-node admits a preferred hint on one NUMA node (or on none: no resource asked for alignment)"
            ),
            PolicyName::SingleNumaNode => {
                // The same filter `merge` applied (`filterSingleNumaHints`):
                // a resource left with nothing is why no preferred merge exists.
                let lacking = resources_without(providers_hints, |h| {
                    h.preferred && h.numa_affinity.is_none_or(|m| m.count() == 1)
                });
                let cause = if lacking.is_empty() {
                    "the resources' preferred single-NUMA-node hints share no NUMA node".to_string()
                } else {
                    format!(
                        "{} no preferred hint on a single NUMA node",
                        has_list(&lacking)
                    )
                };
                format!(
                    "{head}: merged hint {merged}: {cause}; single-numa-node admits only a preferred hint on one NUMA node"
                )
            }
        }
    }
}

/// The resources of the providers' answers (after `filterProvidersHints`'
/// defaults: a nil map or nil list is one preferred don't-care hint, an
/// empty list one non-preferred don't-care hint) none of whose hints `keep`
/// accepts, in provider then resource order.
fn resources_without(
    providers_hints: &[ProviderHints],
    keep: impl Fn(&TopologyHint) -> bool,
) -> Vec<String> {
    let mut lacking = Vec::new();
    for resources in providers_hints.iter().flatten() {
        for (name, hints) in resources {
            let accepted = match hints {
                None => keep(&TopologyHint::any(true)),
                Some(list) if list.is_empty() => keep(&TopologyHint::any(false)),
                Some(list) => list.iter().any(&keep),
            };
            if !accepted {
                lacking.push(name.clone());
            }
        }
    }
    lacking
}

/// `cpu has` / `cpu and memory have`.
fn has_list(names: &[String]) -> String {
    match names {
        [one] => format!("{one} has"),
        _ => format!("{} have", names.join(" and ")),
    }
}

/// Upstream `filterSingleNumaHints`: keep preferred hints that are don't-care or one node wide.
fn filter_single_numa_hints(all: Vec<Vec<TopologyHint>>) -> Vec<Vec<TopologyHint>> {
    all.into_iter()
        .map(|hints| {
            hints
                .into_iter()
                .filter(|h| h.preferred && h.numa_affinity.is_none_or(|m| m.count() == 1))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::collections::BTreeMap;

    use crate::topology::test_support::{four_node_policy, mask, one};
    use crate::topology::{OptionGates, merge_permutation, new_policy_options};

    fn two_node_policy(name: PolicyName) -> Policy {
        Policy::new(
            name,
            NumaInfo::new(vec![0, 1], BTreeMap::new()),
            PolicyOptions::default(),
        )
        .unwrap()
    }

    /// The rule line of a merge, with the merge's own result.
    fn rule_of(policy: &Policy, scope: Scope, providers: &[ProviderHints]) -> (bool, String) {
        let (hint, admit) = policy.merge(providers);
        (admit, policy.admit_rule(scope, providers, &hint))
    }

    /// The rule lines of `admit_rule` on inputs of upstream's merge tests
    /// (policy_single_numa_node_test.go, policy_test.go); the merged hints
    /// they name are upstream's expected ones.
    #[test]
    fn admit_rules_name_the_policy_the_hint_and_the_cause() {
        let pref = |bits: &[usize]| TopologyHint::new(mask(bits), true);
        let not = |bits: &[usize]| TopologyHint::new(mask(bits), false);
        let single = two_node_policy(PolicyName::SingleNumaNode);
        // "Single NUMA hint generation": resource1 only fits on both nodes,
        // upstream merges to {nil, false}.
        let providers = [Some(BTreeMap::from([
            ("resource1".to_string(), Some(vec![pref(&[0, 1])])),
            (
                "resource2".to_string(),
                Some(vec![pref(&[0]), pref(&[1]), not(&[0, 1])]),
            ),
        ]))];
        assert_eq!(
            rule_of(&single, Scope::Pod, &providers),
            (
                false,
                "single-numa-node (pod scope): merged hint any NUMA node, not preferred: resource1 has no preferred hint on a single NUMA node; single-numa-node admits only a preferred hint on one NUMA node".to_string()
            )
        );
        // "Two providers, 1 hint each, no common mask": both single-node, apart.
        let apart = [
            one("resource1", Some(vec![pref(&[0])])),
            one("resource2", Some(vec![pref(&[1])])),
        ];
        assert_eq!(
            rule_of(&single, Scope::Container, &apart),
            (
                false,
                "single-numa-node (container scope): merged hint any NUMA node, not preferred: the resources' preferred single-NUMA-node hints share no NUMA node; single-numa-node admits only a preferred hint on one NUMA node".to_string()
            )
        );
        // "One no-preference provider": admitted on {0}.
        let no_preference = [
            one(
                "resource1",
                Some(vec![pref(&[0]), pref(&[1]), not(&[0, 1])]),
            ),
            None,
        ];
        assert_eq!(
            rule_of(&single, Scope::Container, &no_preference),
            (
                true,
                "single-numa-node (container scope): merged hint [0] preferred; single-numa-node admits a preferred hint on one NUMA node (or on none: no resource asked for alignment)".to_string()
            )
        );
        // "Two providers, 1 hint each, same mask, 1 preferred, 1 not":
        // upstream merges to {0} not preferred under restricted and best-effort.
        let half = [
            one("resource1", Some(vec![pref(&[0])])),
            one("resource2", Some(vec![not(&[0])])),
        ];
        let restricted = two_node_policy(PolicyName::Restricted);
        assert_eq!(
            rule_of(&restricted, Scope::Container, &half),
            (
                false,
                "restricted (container scope): merged hint [0] not preferred: resource2 has no preferred hint; restricted admits only a preferred merged hint".to_string()
            )
        );
        let best_effort = two_node_policy(PolicyName::BestEffort);
        assert_eq!(
            rule_of(&best_effort, Scope::Pod, &half),
            (
                true,
                "best-effort (pod scope): merged hint [0] not preferred; best-effort admits every merged hint, preferred or not (it only picks the best one)".to_string()
            )
        );
        // No common mask under restricted: upstream falls back to the
        // default affinity {0,1}, not preferred.
        assert_eq!(
            rule_of(&restricted, Scope::Pod, &apart),
            (
                false,
                "restricted (pod scope): merged hint [0,1] not preferred: the resources' preferred hints share no NUMA node set; restricted admits only a preferred merged hint".to_string()
            )
        );
        // An empty list (no placement possible) and a nil one, both named.
        let empty = [one("cpu", Some(vec![])), one("memory", Some(vec![]))];
        let (admit, rule) = rule_of(&restricted, Scope::Pod, &empty);
        assert!(!admit);
        assert!(
            rule.contains(": cpu and memory have no preferred hint;"),
            "{rule}"
        );
        assert_eq!(
            rule_of(&restricted, Scope::Pod, &[one("cpu", None)]),
            (
                true,
                "restricted (pod scope): merged hint [0,1] preferred; restricted admits a preferred merged hint".to_string()
            )
        );
    }

    #[test]
    fn merge_edge_cases() {
        let best_effort = four_node_policy(PolicyName::BestEffort);
        // No providers: the single empty permutation gives the default mask, preferred.
        assert_eq!(
            best_effort.merge(&[]),
            (TopologyHint::new(mask(&[0, 1, 2, 3]), true), true)
        );
        // An empty list is unsatisfiable: default mask, not preferred, still admitted.
        assert_eq!(
            best_effort.merge(&[one("r", Some(vec![]))]),
            (TopologyHint::new(mask(&[0, 1, 2, 3]), false), true)
        );
        // Identical masks only: {0} and {0,1} both preferred merge to {0} not preferred.
        let merged = merge_permutation(
            mask(&[0, 1, 2, 3]),
            &[
                &TopologyHint::new(mask(&[0]), true),
                &TopologyHint::new(mask(&[0, 1]), true),
            ],
        );
        assert_eq!(merged, TopologyHint::new(mask(&[0]), false));
        let none = four_node_policy(PolicyName::None);
        assert_eq!(
            none.merge(&[one("r", Some(vec![]))]),
            (TopologyHint::default(), true)
        );
        let single = four_node_policy(PolicyName::SingleNumaNode);
        // Only a two-node hint: filtered away, the merge falls back to {nil, false}.
        let hints = one("r", Some(vec![TopologyHint::new(mask(&[0, 1]), true)]));
        assert_eq!(single.merge(&[hints]), (TopologyHint::any(false), false));
        assert_eq!(single.merge(&[None]), (TopologyHint::any(true), true));
    }

    // ---- Vectors: tests/vectors/k8s-managers/topology-manager-merge.json ----

    fn vectors() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/vectors/k8s-managers/topology-manager-merge.json"
        );
        let text = std::fs::read_to_string(path).unwrap_or_else(|err| {
            panic!(
                "topology vectors missing at {path}: {err}; tests/vectors is part of the repository"
            )
        });
        serde_json::from_str(&text).unwrap_or_else(|err| panic!("{path}: invalid JSON: {err}"))
    }

    fn json_mask(value: &Value) -> Option<BitMask> {
        let bits: Vec<usize> = value
            .as_array()?
            .iter()
            .map(|b| b.as_u64().expect("mask bit") as usize)
            .collect();
        Some(BitMask::new(&bits).expect("mask bits in range"))
    }

    fn json_hint(value: &Value) -> TopologyHint {
        TopologyHint {
            numa_affinity: json_mask(&value["mask"]),
            preferred: value["preferred"].as_bool().expect("preferred"),
        }
    }

    fn json_provider(value: &Value) -> ProviderHints {
        let map = value.as_object()?;
        Some(
            map.iter()
                .map(|(resource, hints)| {
                    (
                        resource.clone(),
                        hints
                            .as_array()
                            .map(|list| list.iter().map(json_hint).collect()),
                    )
                })
                .collect(),
        )
    }

    fn json_numa_info(value: &Value) -> NumaInfo {
        let nodes: Vec<usize> = value["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| n.as_u64().unwrap() as usize)
            .collect();
        let distances = value["distances"]
            .as_array()
            .expect("distances")
            .iter()
            .enumerate()
            .map(|(i, row)| {
                (
                    nodes[i],
                    row.as_array()
                        .unwrap()
                        .iter()
                        .map(|d| d.as_u64().unwrap())
                        .collect(),
                )
            })
            .collect();
        NumaInfo::new(nodes, distances)
    }

    #[test]
    fn topology_manager_merge_vectors() {
        let doc = vectors();
        let cases = doc["cases"].as_array().expect("cases");
        assert_eq!(cases.len(), 77, "unexpected number of topology vectors");
        let mut failures = Vec::new();
        for case in cases {
            let name = case["name"].as_str().unwrap_or("?");
            let input = &case["input"];
            let options: BTreeMap<String, String> = input["policy_options"]
                .as_object()
                .expect("policy_options")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("option value").to_string()))
                .collect();
            let options = new_policy_options(&options, OptionGates::default()).expect("options");
            let numa =
                json_numa_info(&doc["numa_infos"][input["numa_info"].as_str().expect("numa_info")]);
            let policy_name =
                PolicyName::parse(input["policy"].as_str().expect("policy")).expect("policy name");
            let policy = Policy::new(policy_name, numa, options).expect("policy");
            let providers: Vec<ProviderHints> = input["providers_hints"]
                .as_array()
                .expect("providers_hints")
                .iter()
                .map(json_provider)
                .collect();
            let (hint, admit) = policy.merge(&providers);
            let want_hint = json_hint(&case["expected"]["hint"]);
            let want_admit = case["expected"]["admit"].as_bool().expect("admit");
            if hint != want_hint || admit != want_admit {
                failures.push(format!(
                    "{name}: got {hint:?} admit={admit}, want {want_hint:?} admit={want_admit}"
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} vectors failed:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }
}
