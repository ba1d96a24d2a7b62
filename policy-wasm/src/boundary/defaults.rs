//! The `default-pod` export and the defaulted pod that validation and
//! admission read: the WIT pod's resource lists handed to
//! [`crate::defaults`] as written, and its answer written back.

use crate::defaults::{
    self, PatchOp, PatchOperation, PatchValue, PodResourceLists, WrittenQuantities,
    WrittenRequirements,
};
use crate::features::FeatureGates;
use crate::model::Pod;
use crate::wit;

use super::Result;
use super::pod::decode_pod;

fn owned_list(list: &[wit::ResourceQuantity]) -> WrittenQuantities {
    list.iter()
        .map(|entry| (entry.name.clone(), entry.quantity.clone()))
        .collect()
}

fn owned_requirements(r: &wit::ResourceRequirements) -> WrittenRequirements {
    WrittenRequirements {
        requests: r.requests.as_deref().map(owned_list),
        limits: r.limits.as_deref().map(owned_list),
    }
}

/// The resource lists defaulting reads, as `pod` writes them.
fn resource_lists(pod: &wit::Pod) -> PodResourceLists {
    let containers = |list: &[wit::Container]| {
        list.iter()
            .map(|c| c.resources.as_ref().map(owned_requirements))
            .collect()
    };
    PodResourceLists {
        init_containers: containers(&pod.spec.init_containers),
        containers: containers(&pod.spec.containers),
        overhead: pod.spec.overhead.as_deref().map(owned_list),
        resources: pod.spec.resources.as_ref().map(owned_requirements),
    }
}

fn encode_list(list: WrittenQuantities) -> Vec<wit::ResourceQuantity> {
    list.into_iter()
        .map(|(name, quantity)| wit::ResourceQuantity { name, quantity })
        .collect()
}

fn encode_requirements(r: WrittenRequirements) -> wit::ResourceRequirements {
    wit::ResourceRequirements {
        requests: r.requests.map(encode_list),
        limits: r.limits.map(encode_list),
    }
}

impl From<PatchOperation> for wit::PatchOperation {
    fn from(operation: PatchOperation) -> Self {
        wit::PatchOperation {
            op: match operation.op {
                PatchOp::Add => wit::PatchOp::Add,
                PatchOp::Replace => wit::PatchOp::Replace,
            },
            path: operation.path,
            value: match operation.value {
                PatchValue::Quantity(q) => wit::PatchValue::Quantity(q),
                PatchValue::ResourceList(l) => wit::PatchValue::ResourceList(encode_list(l)),
                PatchValue::Requirements(r) => {
                    wit::PatchValue::Requirements(encode_requirements(r))
                }
            },
        }
    }
}

/// `pod` with its resource lists replaced by `lists` (defaulting changes
/// nothing else, and keeps every list's length).
fn with_lists(pod: &wit::Pod, lists: PodResourceLists) -> wit::Pod {
    let mut out = pod.clone();
    for (c, written) in out
        .spec
        .init_containers
        .iter_mut()
        .zip(lists.init_containers)
        .chain(out.spec.containers.iter_mut().zip(lists.containers))
    {
        c.resources = written.map(encode_requirements);
    }
    out.spec.overhead = lists.overhead.map(encode_list);
    out.spec.resources = lists.resources.map(encode_requirements);
    out
}

/// Export `default-pod` (with the node's feature gates): the defaulted pod
/// and its patch, or every bad quantity of `pod`.
pub fn default_pod(pod: &wit::Pod, gates: &FeatureGates) -> Result<wit::DefaultedPod> {
    let decoded = decode_pod(pod)?;
    let input = resource_lists(pod);
    let mut lists = input.clone();
    defaults::default_pod(&mut lists, &decoded, gates);
    let patch = defaults::diff_pod(&input, &lists);
    Ok(wit::DefaultedPod {
        pod: with_lists(pod, lists),
        patch: patch.into_iter().map(Into::into).collect(),
    })
}

/// `pod` after the API server's defaulting, parsed: what validation and
/// the managers read. The errors are `pod`'s bad quantities.
pub fn defaulted_pod(pod: &wit::Pod, gates: &FeatureGates) -> Result<Pod> {
    Ok(defaulted_decoded_pod(pod, decode_pod(pod)?, gates))
}

/// [`defaulted_pod`] of `pod`, which decodes to `decoded`.
pub fn defaulted_decoded_pod(pod: &wit::Pod, decoded: Pod, gates: &FeatureGates) -> Pod {
    let mut lists = resource_lists(pod);
    defaults::default_pod(&mut lists, &decoded, gates);
    defaults::parsed(decoded, &lists)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{container, list, pod};
    use super::*;

    fn requirements(
        requests: Option<&[(&str, &str)]>,
        limits: Option<&[(&str, &str)]>,
    ) -> Option<wit::ResourceRequirements> {
        Some(wit::ResourceRequirements {
            requests: requests.map(list),
            limits: limits.map(list),
        })
    }

    /// Pods that exercise every defaulting step: sub-milli values rounded
    /// (binary and decimal), container requests from limits, pod-level
    /// hugepage limits, requests and limits from the containers, overhead.
    fn pods() -> Vec<wit::Pod> {
        let mut sidecar = container(
            "sidecar",
            requirements(None, Some(&[("cpu", "0.5"), ("memory", "0.5000001Ki")])),
        );
        sidecar.restart_policy = Some("Always".into());
        let mut with_init = pod(
            "a",
            requirements(Some(&[("memory", "1Gi")]), None),
            vec![
                container(
                    "app",
                    requirements(
                        Some(&[("cpu", "100.0001m")]),
                        Some(&[("cpu", "1"), ("memory", "511.9999999")]),
                    ),
                ),
                container("bare", None),
            ],
        );
        with_init.spec.init_containers = vec![sidecar];
        with_init.spec.overhead = Some(list(&[("cpu", "10.00001m")]));
        vec![
            with_init,
            pod(
                "b",
                requirements(None, Some(&[("cpu", "2"), ("hugepages-2Mi", "4Mi")])),
                vec![container(
                    "app",
                    requirements(None, Some(&[("hugepages-2Mi", "2Mi"), ("cpu", "1")])),
                )],
            ),
            pod(
                "c",
                requirements(Some(&[("cpu", "1"), ("memory", "1Gi")]), Some(&[])),
                vec![container(
                    "app",
                    requirements(Some(&[("cpu", "0.5")]), Some(&[("cpu", "1")])),
                )],
            ),
        ]
    }

    /// The pod validation and admission read (the input's own decode with
    /// the defaulted lists parsed) is the defaulted pod the export returns,
    /// decoded: what the API server stores is what the kubelet reads.
    #[test]
    fn defaulted_pod_is_the_exported_pod_decoded() {
        let gates = FeatureGates::default();
        for pod in pods() {
            let exported = default_pod(&pod, &gates).expect("valid pod");
            assert!(
                !exported.patch.is_empty(),
                "{}: defaulting changed it",
                pod.uid
            );
            assert_eq!(
                defaulted_pod(&pod, &gates).expect("valid pod"),
                decode_pod(&exported.pod).expect("the defaulted pod decodes"),
                "{}",
                pod.uid
            );
        }
    }

    #[test]
    fn rounds_defaults_and_patches_only_what_changed() {
        let gates = FeatureGates::default();
        let exported = default_pod(&pods()[0], &gates).expect("valid pod");
        let app = exported.pod.spec.containers[0].resources.as_ref().unwrap();
        assert_eq!(
            app.requests,
            Some(list(&[("cpu", "101m"), ("memory", "512")])),
            "rounded up to milli, then the memory limit copied"
        );
        assert_eq!(exported.pod.spec.containers[1].resources, None);
        let paths: Vec<&str> = exported.patch.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/spec/initContainers/0/resources/limits/memory",
                "/spec/initContainers/0/resources/requests",
                "/spec/containers/0/resources/limits/memory",
                "/spec/containers/0/resources/requests/cpu",
                "/spec/containers/0/resources/requests/memory",
                "/spec/overhead/cpu",
            ]
        );
        let ops: Vec<wit::PatchOp> = exported.patch.iter().map(|p| p.op).collect();
        use wit::PatchOp::{Add, Replace};
        assert_eq!(ops, [Replace, Add, Replace, Replace, Add, Replace]);
    }

    #[test]
    fn a_bad_quantity_is_reported_with_its_path() {
        let bad = pod(
            "bad",
            None,
            vec![container("app", requirements(None, Some(&[("cpu", "x")])))],
        );
        let errors = default_pod(&bad, &FeatureGates::default()).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "spec.containers[0].resources.limits[cpu]");
        assert!(defaulted_pod(&bad, &FeatureGates::default()).is_err());
    }
}
