//! The API server's warnings about a pod's resources (upstream
//! `pkg/api/pod/warnings.go`, `GetWarningsForPod`, the resource part).
//!
//! Warnings do not reject a pod; the API server returns them to the client
//! (kubectl prints them). Memory and ephemeral-storage are byte counts, so a
//! value with a fractional byte (`1.5`, `100m`) is flagged wherever it is
//! set: `spec.overhead` first, then every container in upstream's visiting
//! order (init, regular, ephemeral), limits before requests. The rest of
//! upstream's list (ports, env, volumes, affinity, annotations) is about
//! fields this policy does not model.

use crate::quantity::Quantity;
use crate::wit::{self, PodWarning, ResourceQuantity};

/// The byte-valued resources upstream checks for fractions.
const BYTE_RESOURCES: [&str; 2] = ["memory", "ephemeral-storage"];

/// `fractional byte value "<canonical>" is invalid, must be an integer` at
/// `<path>[<name>]` when `name` in `list` is set to a value with a fractional byte.
fn check(list: Option<&[ResourceQuantity]>, path: &str, warnings: &mut Vec<PodWarning>) {
    for name in BYTE_RESOURCES {
        // Upstream reads the map, so with a duplicate name the last one counts;
        // a value that does not parse is `validate-pod`'s to report.
        let Some(q) = list
            .and_then(|l| l.iter().rev().find(|e| e.name == name))
            .and_then(|e| Quantity::parse(&e.quantity).ok())
        else {
            continue;
        };
        // Upstream: `MilliValue() % 1000 != 0` (MilliValue rounds up).
        if q.milli_value() % 1000 != 0 {
            warnings.push(PodWarning {
                field: format!("{path}[{name}]"),
                message: format!(
                    "fractional byte value \"{}\" is invalid, must be an integer",
                    q.to_canonical_string()
                ),
            });
        }
    }
}

/// Every resource warning for `pod`, in upstream's order.
pub fn pod_warnings(pod: &wit::Pod) -> Vec<PodWarning> {
    let mut warnings = Vec::new();
    let spec = &pod.spec;
    check(spec.overhead.as_deref(), "spec.overhead", &mut warnings);
    let lists = [
        ("spec.initContainers", &spec.init_containers),
        ("spec.containers", &spec.containers),
        ("spec.ephemeralContainers", &spec.ephemeral_containers),
    ];
    for (field, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            let Some(r) = &c.resources else { continue };
            let base = format!("{field}[{i}].resources");
            check(
                r.limits.as_deref(),
                &format!("{base}.limits"),
                &mut warnings,
            );
            check(
                r.requests.as_deref(),
                &format!("{base}.requests"),
                &mut warnings,
            );
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(&str, &str)]) -> Option<Vec<ResourceQuantity>> {
        Some(
            entries
                .iter()
                .map(|(name, quantity)| ResourceQuantity {
                    name: name.to_string(),
                    quantity: quantity.to_string(),
                })
                .collect(),
        )
    }

    fn container(name: &str, limits: &[(&str, &str)], requests: &[(&str, &str)]) -> wit::Container {
        wit::Container {
            name: name.into(),
            restart_policy: None,
            resources: Some(wit::ResourceRequirements {
                limits: list(limits),
                requests: list(requests),
            }),
            resize_policy: Vec::new(),
        }
    }

    fn pod(containers: Vec<wit::Container>, overhead: &[(&str, &str)]) -> wit::Pod {
        let mut pod = crate::boundary::pod::bare_pod("p", containers);
        pod.spec.overhead = (!overhead.is_empty()).then(|| list(overhead)).flatten();
        pod
    }

    #[test]
    fn fractional_bytes_are_flagged_in_upstream_order() {
        let p = pod(
            vec![
                container(
                    "a",
                    &[("memory", "1Gi"), ("cpu", "1.5")],
                    &[("memory", "1.5")],
                ),
                container("b", &[("ephemeral-storage", "100m")], &[]),
            ],
            &[("memory", "10.5")],
        );
        let shown: Vec<String> = pod_warnings(&p)
            .iter()
            .map(|w| format!("{}: {}", w.field, w.message))
            .collect();
        assert_eq!(
            shown,
            vec![
                "spec.overhead[memory]: fractional byte value \"10500m\" is invalid, must be an integer",
                "spec.containers[0].resources.requests[memory]: fractional byte value \"1500m\" is invalid, must be an integer",
                "spec.containers[1].resources.limits[ephemeral-storage]: fractional byte value \"100m\" is invalid, must be an integer",
            ]
        );
    }

    #[test]
    fn whole_bytes_cpu_fractions_and_unparsable_values_give_no_warning() {
        let p = pod(
            vec![container(
                "a",
                &[("memory", "128Mi"), ("cpu", "250m")],
                &[("memory", "1e3"), ("ephemeral-storage", "not-a-quantity")],
            )],
            &[],
        );
        assert!(pod_warnings(&p).is_empty());
    }

    #[test]
    fn sub_milli_fractions_round_up_like_milli_value() {
        // 1n bytes: MilliValue rounds up to 1m, which is fractional.
        let p = pod(vec![container("a", &[("memory", "1n")], &[])], &[]);
        assert_eq!(pod_warnings(&p).len(), 1);
    }
}
