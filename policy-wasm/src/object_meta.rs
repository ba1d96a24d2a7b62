//! API-server validation of a pod's identity and shape that the node relies
//! on: `metadata.name` is an RFC 1123 subdomain (upstream `ValidatePodName`,
//! `NameIsDNSSubdomain`), `metadata.namespace` an RFC 1123 label
//! (`ValidateNamespaceName`), `spec.nodeName`, when set, an RFC 1123
//! subdomain (`ValidatePodSpec`'s `ValidateNodeName`), and `spec.containers`
//! is not empty (`validateContainers`). Names become cgroup and checkpoint
//! keys on the node, so a name such as `web/evil` must never reach them.
//!
//! An empty name or namespace is not reported here: hosts give pods read
//! from files the namespace `default`, and admission reviews may carry
//! `generateName` only; the API server fills both before it stores a pod.

use crate::field_error::{FieldError, FieldErrorType};

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const LABEL_FORMAT: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_FORMAT: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && alnum(&bytes[0])
        && alnum(&bytes[bytes.len() - 1])
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

fn invalid(field: &str, value: &str, message: &str) -> FieldError {
    FieldError::invalid(field, message, value)
}

/// Upstream `IsDNS1123Label`'s findings for `value` at `field`.
fn dns1123_label(field: &str, value: &str, errors: &mut Vec<FieldError>) {
    if value.len() > DNS1123_LABEL_MAX {
        errors.push(invalid(field, value, "must be no more than 63 characters"));
    }
    if !is_label(value) {
        errors.push(invalid(field, value, LABEL_FORMAT));
    }
}

/// Upstream `IsDNS1123Subdomain`: what is wrong with `value` as an RFC
/// 1123 subdomain, in upstream's words (also the prefix check of a
/// qualified resource name, `resource_name`).
pub(crate) fn dns1123_subdomain_messages(value: &str) -> Vec<&'static str> {
    let mut messages = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        messages.push("must be no more than 253 characters");
    }
    if !value.split('.').all(is_label) {
        messages.push(SUBDOMAIN_FORMAT);
    }
    messages
}

/// Upstream `IsDNS1123Subdomain`'s findings for `value` at `field`.
fn dns1123_subdomain(field: &str, value: &str, errors: &mut Vec<FieldError>) {
    for message in dns1123_subdomain_messages(value) {
        errors.push(invalid(field, value, message));
    }
}

/// The pod's name, namespace, node and number of (regular) containers, as
/// the API server checks them on create.
pub fn validate_object_meta(
    name: &str,
    namespace: &str,
    node_name: Option<&str>,
    containers: usize,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if !name.is_empty() {
        dns1123_subdomain("metadata.name", name, &mut errors);
    }
    if !namespace.is_empty() {
        dns1123_label("metadata.namespace", namespace, &mut errors);
    }
    // `if len(spec.NodeName) > 0`: an empty node name is an unbound pod.
    if let Some(node_name) = node_name.filter(|n| !n.is_empty()) {
        dns1123_subdomain("spec.nodeName", node_name, &mut errors);
    }
    if containers == 0 {
        errors.push(FieldError::new(
            "spec.containers",
            FieldErrorType::Required,
            "Required value",
            None,
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_pod_names_its_node_as_an_rfc_1123_subdomain() {
        let check = |node: Option<&str>| validate_object_meta("web", "default", node, 1);
        for good in [
            None,
            Some(""),
            Some("node-1"),
            Some("ip-10-0-0-1.ec2.internal"),
        ] {
            assert!(check(good).is_empty(), "{good:?}: {:?}", check(good));
        }
        for bad in [
            "Node-1",
            "node_1",
            "node/1",
            "-node",
            &"n".repeat(254) as &str,
        ] {
            let errors = check(Some(bad));
            assert!(!errors.is_empty(), "{bad}");
            assert!(
                errors.iter().all(|e| e.field == "spec.nodeName"),
                "{errors:?}"
            );
        }
    }

    #[test]
    fn names_as_the_api_server_checks_them() {
        for good in ["web", "a", "web-1", "web.example", "0abc", &"a".repeat(253)] {
            let mut errors = Vec::new();
            dns1123_subdomain("metadata.name", good, &mut errors);
            assert!(errors.is_empty(), "{good}: {errors:?}");
        }
        for bad in [
            "web/evil",
            "Web",
            "-web",
            "web-",
            "a..b",
            ".a",
            "a_b",
            "ü",
            &"a".repeat(254),
        ] {
            let mut errors = Vec::new();
            dns1123_subdomain("metadata.name", bad, &mut errors);
            assert!(!errors.is_empty(), "{bad}");
            assert_eq!(errors[0].field, "metadata.name");
        }
        for (bad, n) in [
            ("web.ns", 1),
            ("a/b", 1),
            (&"a".repeat(64) as &str, 1),
            ("", 1),
        ] {
            let mut errors = Vec::new();
            dns1123_label("metadata.namespace", bad, &mut errors);
            assert_eq!(errors.len(), n, "{bad}: {errors:?}");
        }
    }
}
