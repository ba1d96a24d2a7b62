//! Resource names as the API server judges them: apimachinery's
//! `IsQualifiedName` and the core API helpers `IsStandardResourceName`,
//! `IsStandardContainerResourceName`, `IsNativeResource`,
//! `IsExtendedResourceName` and `IsIntegerResourceName`
//! (`pkg/apis/core/helper/helpers.go`). `validation` builds upstream's
//! `validateResourceName` and `validateContainerResourceName` from them.

use crate::object_meta::dns1123_subdomain_messages;
use crate::resources::is_hugepages;

/// `RegexError(qualifiedNameErrMsg, qualifiedNameFmt, "MyName", "my.name", "123-abc")`:
/// the name part must match `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
const QUALIFIED_NAME_REGEX_ERROR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `qualifiedNameMaxLength`.
const QUALIFIED_NAME_MAX: usize = 63;

/// `core.ResourceDefaultNamespacePrefix`: names under it are native.
const DEFAULT_NAMESPACE_PREFIX: &str = "kubernetes.io/";

/// `core.DefaultResourceRequestsPrefix`: the quota form of a request.
const REQUESTS_PREFIX: &str = "requests.";

/// `integerResources`: the object counts of resource quotas, never
/// fractional; all of them are standard resources too.
const INTEGER_RESOURCES: &[&str] = &[
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

/// `standardResources` of the core helpers besides the object counts
/// ([`INTEGER_RESOURCES`]; hugepages are added by `IsQuotaHugePageResourceName`).
const STANDARD_AMOUNT_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "storage",
    "requests.storage",
];

/// `standardContainerResources` (hugepages are added by `IsHugePageResourceName`).
const STANDARD_CONTAINER_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage"];

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, the name part of a qualified name.
fn matches_qualified_name_part(name: &str) -> bool {
    let bytes = name.as_bytes();
    let end = |b: &u8| b.is_ascii_alphanumeric();
    !bytes.is_empty()
        && end(&bytes[0])
        && end(&bytes[bytes.len() - 1])
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// apimachinery `IsQualifiedName`: every problem with `value` as a name
/// with an optional DNS subdomain prefix (`example.com/name`), in
/// upstream's words and order; empty when it is one.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let mut parts = value.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => {
            errors.push(format!(
                "a qualified name {QUALIFIED_NAME_REGEX_ERROR} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return errors;
        }
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errors.push("prefix part must be non-empty".to_string());
        } else {
            errors.extend(
                dns1123_subdomain_messages(prefix)
                    .into_iter()
                    .map(|m| format!("prefix part {m}")),
            );
        }
    }
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errors.push(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    if !matches_qualified_name_part(name) {
        errors.push(format!("name part {QUALIFIED_NAME_REGEX_ERROR}"));
    }
    errors
}

/// Whether `name` has no domain prefix (`cpu`, not `example.com/gpu`):
/// upstream's `len(strings.Split(name, "/")) == 1`.
pub fn is_unqualified(name: &str) -> bool {
    !name.contains('/')
}

/// `IsStandardResourceName`: a standard resource or a (quota) hugepages name.
pub fn is_standard_resource_name(name: &str) -> bool {
    STANDARD_AMOUNT_RESOURCES.contains(&name)
        || INTEGER_RESOURCES.contains(&name)
        || is_hugepages(name)
        || name.starts_with("requests.hugepages-")
}

/// `IsStandardContainerResourceName`: cpu, memory, ephemeral-storage or hugepages.
pub fn is_standard_container_resource_name(name: &str) -> bool {
    STANDARD_CONTAINER_RESOURCES.contains(&name) || is_hugepages(name)
}

/// `IsNativeResource`: no domain prefix, or the `kubernetes.io/` one.
pub fn is_native_resource(name: &str) -> bool {
    is_unqualified(name) || name.contains(DEFAULT_NAMESPACE_PREFIX)
}

/// `IsExtendedResourceName`: a domain-prefixed name outside
/// `kubernetes.io/`, not a quota request name, whose quota form
/// (`requests.<name>`) is still a qualified name.
pub fn is_extended_resource_name(name: &str) -> bool {
    if is_native_resource(name) || name.starts_with(REQUESTS_PREFIX) {
        return false;
    }
    qualified_name_errors(&format!("{REQUESTS_PREFIX}{name}")).is_empty()
}

/// `IsIntegerResourceName`: object counts and extended resources take
/// whole numbers only.
pub fn is_integer_resource_name(name: &str) -> bool {
    INTEGER_RESOURCES.contains(&name) || is_extended_resource_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_as_apimachinery_judges_them() {
        for good in [
            "cpu",
            "example.com/gpu",
            "kubernetes.io/foo",
            "A.b_c-1",
            &"a".repeat(63),
        ] {
            assert!(qualified_name_errors(good).is_empty(), "{good}");
        }
        // (value, how many messages, the first one's start)
        for (bad, count, first) in [
            ("", 2, "name part must be non-empty"),
            (".", 1, "name part must consist of"),
            ("my.favorite.app.co/_12345", 1, "name part must consist of"),
            ("/cpu", 1, "prefix part must be non-empty"),
            (
                "Example.com/gpu",
                1,
                "prefix part a lowercase RFC 1123 subdomain",
            ),
            ("a/b/c", 1, "a qualified name must consist of"),
            (
                &format!("kubernetes.io/{}", "a".repeat(64)),
                1,
                "name part must be no more than 63 characters",
            ),
        ] {
            let errors = qualified_name_errors(bad);
            assert_eq!(errors.len(), count, "{bad}: {errors:?}");
            assert!(errors[0].starts_with(first), "{bad}: {errors:?}");
        }
    }

    #[test]
    fn resource_kinds_as_the_core_helpers_sort_them() {
        assert!(is_standard_resource_name("pods"));
        assert!(is_standard_resource_name("hugepages-2Mi"));
        assert!(is_standard_resource_name("requests.hugepages-1Gi"));
        assert!(!is_standard_resource_name("disk"));
        assert!(is_standard_container_resource_name("ephemeral-storage"));
        assert!(!is_standard_container_resource_name("pods"));
        assert!(is_native_resource("kubernetes.io/foo"));
        assert!(!is_native_resource("example.com/foo"));
        assert!(is_extended_resource_name("example.com/foo"));
        assert!(!is_extended_resource_name("kubernetes.io/foo"));
        assert!(!is_extended_resource_name("requests.foo/bar"));
        assert!(!is_extended_resource_name("example.com/_foo"));
        assert!(is_integer_resource_name("example.com/foo"));
        assert!(is_integer_resource_name("pods"));
        assert!(!is_integer_resource_name("cpu"));
    }
}
