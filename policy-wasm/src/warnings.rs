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

/// A resource list as the pod writes it: `(name, quantity)` entries in
/// order, unparsed (warnings also look at pods validation would reject).
pub type WrittenList<'a> = Vec<(&'a str, &'a str)>;

/// A container's `resources` as written.
#[derive(Clone, Debug, Default)]
pub struct WrittenResources<'a> {
    /// `limits`, when set.
    pub limits: Option<WrittenList<'a>>,
    /// `requests`, when set.
    pub requests: Option<WrittenList<'a>>,
}

/// The resource lists of a pod as written, the input of the warnings.
#[derive(Clone, Debug, Default)]
pub struct WrittenPod<'a> {
    /// `spec.overhead`, when set.
    pub overhead: Option<WrittenList<'a>>,
    /// Each of `spec.initContainers`' `resources`, when set.
    pub init_containers: Vec<Option<WrittenResources<'a>>>,
    /// Each of `spec.containers`' `resources`, when set.
    pub containers: Vec<Option<WrittenResources<'a>>>,
    /// Each of `spec.ephemeralContainers`' `resources`, when set.
    pub ephemeral_containers: Vec<Option<WrittenResources<'a>>>,
}

/// A warning the API server returns with an accepted pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodWarning {
    /// The field path, e.g. `spec.containers[0].resources.limits[memory]`.
    pub field: String,
    /// What is wrong with its value.
    pub message: String,
}

/// The byte-valued resources upstream checks for fractions.
const BYTE_RESOURCES: [&str; 2] = ["memory", "ephemeral-storage"];

/// `fractional byte value "<canonical>" is invalid, must be an integer` at
/// `<path>[<name>]` when `name` in `list` is set to a value with a fractional byte.
fn check(list: Option<&WrittenList<'_>>, path: &str, warnings: &mut Vec<PodWarning>) {
    for name in BYTE_RESOURCES {
        // Upstream reads the map, so with a duplicate name the last one counts;
        // a value that does not parse is `validate-pod`'s to report.
        let Some(q) = list
            .and_then(|l| l.iter().rev().find(|(entry, _)| *entry == name))
            .and_then(|(_, quantity)| Quantity::parse(quantity).ok())
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
pub fn pod_warnings(pod: &WrittenPod<'_>) -> Vec<PodWarning> {
    let mut warnings = Vec::new();
    check(pod.overhead.as_ref(), "spec.overhead", &mut warnings);
    let lists = [
        ("spec.initContainers", &pod.init_containers),
        ("spec.containers", &pod.containers),
        ("spec.ephemeralContainers", &pod.ephemeral_containers),
    ];
    for (field, containers) in lists {
        for (i, r) in containers.iter().enumerate() {
            let Some(r) = r else { continue };
            let base = format!("{field}[{i}].resources");
            check(r.limits.as_ref(), &format!("{base}.limits"), &mut warnings);
            check(
                r.requests.as_ref(),
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

    fn list<'a>(entries: &[(&'a str, &'a str)]) -> Option<WrittenList<'a>> {
        Some(entries.to_vec())
    }

    fn container<'a>(
        limits: &[(&'a str, &'a str)],
        requests: &[(&'a str, &'a str)],
    ) -> Option<WrittenResources<'a>> {
        Some(WrittenResources {
            limits: list(limits),
            requests: list(requests),
        })
    }

    fn pod<'a>(
        containers: Vec<Option<WrittenResources<'a>>>,
        overhead: &[(&'a str, &'a str)],
    ) -> WrittenPod<'a> {
        WrittenPod {
            overhead: (!overhead.is_empty()).then(|| list(overhead)).flatten(),
            containers,
            ..WrittenPod::default()
        }
    }

    #[test]
    fn fractional_bytes_are_flagged_in_upstream_order() {
        let p = pod(
            vec![
                container(&[("memory", "1Gi"), ("cpu", "1.5")], &[("memory", "1.5")]),
                container(&[("ephemeral-storage", "100m")], &[]),
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
        let p = pod(vec![container(&[("memory", "1n")], &[])], &[]);
        assert_eq!(pod_warnings(&p).len(), 1);
    }
}
