//! API-server defaulting of container and pod-level resources
//! (`SetDefaults_Pod` with KEP-2837) on the pod's resource lists, and the
//! RFC 6902 patch from the input's lists to the defaulted ones.
//!
//! Order, as upstream: every quantity is rounded up to milli precision;
//! container requests default to their limits; then, with PodLevelResources,
//! pod-level hugepage limits default to the containers' aggregate, pod-level
//! requests to the containers' aggregate (cpu, memory) or else to the pod
//! limit, and (PodLevelResourcesFixUpdateDefaulting) pod-level cpu/memory
//! limits to the sum of container limits when every container has one.
//!
//! Defaulting edits the lists as written, because its answer is a pod as
//! written: entries keep their order and text unless a default changes them,
//! and the patch names only what changed. The pod-level steps read the
//! containers' values parsed from those lists ([`parsed`]), as the kubelet
//! parses the defaulted pod the API server stored.

use std::collections::BTreeSet;
use std::fmt;

use crate::features::FeatureGates;
use crate::model::{Pod, Requirements, ResourceMap};
use crate::quantity::Quantity;
use crate::resources::{self, is_hugepages, is_supported_pod_level_resource};

/// A resource list as written: `(name, quantity)` entries in order.
pub type WrittenQuantities = Vec<(String, String)>;

/// `resources` of a container or of the pod as written; `None` lists are nil.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WrittenRequirements {
    /// `requests`.
    pub requests: Option<WrittenQuantities>,
    /// `limits`.
    pub limits: Option<WrittenQuantities>,
}

/// Every resource list defaulting reads or writes, as written. Owned, as
/// defaulting adds entries; [`crate::warnings::WrittenPod`] is the borrowed,
/// read-only view the warnings take (of pods that do not decode too, and
/// with the ephemeral containers, which defaulting leaves alone).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodResourceLists {
    /// Each of `spec.initContainers`' `resources`, when set.
    pub init_containers: Vec<Option<WrittenRequirements>>,
    /// Each of `spec.containers`' `resources`, when set.
    pub containers: Vec<Option<WrittenRequirements>>,
    /// `spec.overhead`, when set.
    pub overhead: Option<WrittenQuantities>,
    /// `spec.resources`, when set.
    pub resources: Option<WrittenRequirements>,
}

/// The RFC 6902 operations a defaulting patch uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchOp {
    /// `add`.
    Add,
    /// `replace`.
    Replace,
}

/// The value of a patch operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatchValue {
    /// One quantity.
    Quantity(String),
    /// A whole `ResourceList`.
    ResourceList(WrittenQuantities),
    /// A whole `ResourceRequirements`.
    Requirements(WrittenRequirements),
}

/// One RFC 6902 operation of a defaulting patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchOperation {
    /// `add` or `replace`.
    pub op: PatchOp,
    /// The JSON Pointer, e.g. `/spec/containers/0/resources/requests/cpu`.
    pub path: String,
    /// The value set there.
    pub value: PatchValue,
}

/// Whether a resource may be overcommitted (requests below limits): every
/// native resource except hugepages (upstream `IsOvercommitAllowed`).
pub fn is_overcommit_allowed(name: &str) -> bool {
    crate::resource_name::is_native_resource(name) && !is_hugepages(name)
}

/// Default `lists`, the resource lists of the pod `decoded` (the same pod,
/// parsed: every quantity of `lists` is valid), in place; [`diff_pod`] of
/// the lists before and after is the patch.
pub fn default_pod(lists: &mut PodResourceLists, decoded: &Pod, gates: &FeatureGates) {
    round_all_to_milli(lists);
    for c in lists
        .containers
        .iter_mut()
        .chain(lists.init_containers.iter_mut())
        .flatten()
    {
        default_container_requests(c);
    }
    if gates.pod_level_resources && lists.resources.is_some() {
        // The pod-level steps below read container resources only, which are
        // final from here on, so one parse serves all three.
        let containers = parsed(decoded.clone(), lists);
        default_hugepage_pod_limits(lists, &containers);
        default_pod_requests(lists, &containers);
        if gates.pod_level_resources_fix_update_defaulting {
            default_pod_limits(lists, &containers);
        }
    }
}

/// `pod` with its resource lists replaced by `lists` parsed: the pod the
/// kubelet reads once the API server stored the defaulted one. `lists` are
/// `pod`'s own after defaulting, so every entry parses and no name repeats
/// (each came from `pod`'s validated lists or is a canonical quantity).
pub fn parsed(mut pod: Pod, lists: &PodResourceLists) -> Pod {
    for (c, written) in pod
        .init_containers
        .iter_mut()
        .zip(&lists.init_containers)
        .chain(pod.containers.iter_mut().zip(&lists.containers))
    {
        c.resources = written.as_ref().map(parse_requirements).unwrap_or_default();
    }
    pod.resources = lists.resources.as_ref().map(parse_requirements);
    pod.overhead = lists.overhead.as_ref().map(|l| parse_list(l));
    pod
}

fn parse_list(list: &[(String, String)]) -> ResourceMap {
    list.iter()
        .filter_map(|(name, text)| Some((name.clone(), Quantity::parse(text).ok()?)))
        .collect()
}

fn parse_requirements(r: &WrittenRequirements) -> Requirements {
    Requirements {
        requests: r.requests.as_deref().map(parse_list),
        limits: r.limits.as_deref().map(parse_list),
    }
}

fn round_list(list: &mut [(String, String)]) {
    for (_, text) in list {
        if let Ok(q) = Quantity::parse(text) {
            let rounded = q.round_up_to_milli();
            if rounded.nanos() != q.nanos() {
                *text = rounded.to_canonical_string();
            }
        }
    }
}

fn round_requirements(r: &mut Option<WrittenRequirements>) {
    if let Some(r) = r {
        r.requests.iter_mut().for_each(|l| round_list(l));
        r.limits.iter_mut().for_each(|l| round_list(l));
    }
}

/// `SetDefaults_ResourceList`: values round up to milli precision.
fn round_all_to_milli(lists: &mut PodResourceLists) {
    for c in lists
        .containers
        .iter_mut()
        .chain(lists.init_containers.iter_mut())
    {
        round_requirements(c);
    }
    round_requirements(&mut lists.resources);
    lists.overhead.iter_mut().for_each(|l| round_list(l));
}

fn has(list: &[(String, String)], name: &str) -> bool {
    list.iter().any(|(entry, _)| entry == name)
}

/// Lists longer than this are searched through a set of their names.
const LONG_LIST: usize = 32;

/// The names of a written list that grows while it is searched: a scan of
/// the list while it is short (a pod's usual handful), a set of the names
/// once it is long, so that a pod of thousands of names is not scanned
/// once per name.
struct ListNames(Option<BTreeSet<String>>);

impl ListNames {
    /// For `list`, which may grow by up to `incoming` names.
    fn of(list: &[(String, String)], incoming: usize) -> ListNames {
        ListNames(
            (list.len() + incoming > LONG_LIST)
                .then(|| list.iter().map(|(name, _)| name.clone()).collect()),
        )
    }

    /// Whether `name` is in `list` (the list this was made of, as grown).
    fn contains(&self, list: &[(String, String)], name: &str) -> bool {
        match &self.0 {
            Some(names) => names.contains(name),
            None => has(list, name),
        }
    }

    /// `name` was pushed onto the list.
    fn pushed(&mut self, name: &str) {
        if let Some(names) = &mut self.0 {
            names.insert(name.to_string());
        }
    }
}

/// A container with limits gets requests for every limit it lacks a request for.
fn default_container_requests(resources: &mut WrittenRequirements) {
    let Some(limits) = resources.limits.as_ref() else {
        return;
    };
    let requests = resources.requests.get_or_insert_with(Vec::new);
    let mut present = ListNames::of(requests, limits.len());
    for limit in limits {
        if !present.contains(requests, &limit.0) {
            requests.push(limit.clone());
            present.pushed(&limit.0);
        }
    }
}

fn push_quantity(list: &mut WrittenQuantities, name: &str, q: &Quantity) {
    list.push((name.to_string(), q.to_canonical_string()));
}

/// `containers`: the pod parsed after container defaulting (see `default_pod`).
fn default_hugepage_pod_limits(lists: &mut PodResourceLists, containers: &Pod) {
    let resources = lists.resources.as_mut().expect("checked by caller");
    if resources.limits.as_ref().is_none_or(|l| l.is_empty())
        && resources.requests.as_ref().is_none_or(|l| l.is_empty())
    {
        return;
    }
    let aggregate =
        resources::aggregate_container_limits(containers, &resources::Options::default());
    let mut limits = resources.limits.clone().unwrap_or_default();
    let requests = resources.requests.clone().unwrap_or_default();
    let requested = ListNames::of(&requests, 0);
    let mut limited = ListNames::of(&limits, aggregate.len());
    for (name, q) in &aggregate {
        if is_supported_pod_level_resource(name)
            && is_hugepages(name)
            && !requested.contains(&requests, name)
            && !limited.contains(&limits, name)
        {
            push_quantity(&mut limits, name, q);
            limited.pushed(name);
        }
    }
    if !limits.is_empty() {
        resources.limits = Some(limits);
    }
}

fn default_pod_requests(lists: &mut PodResourceLists, containers: &Pod) {
    let resources = lists.resources.as_mut().expect("checked by caller");
    let Some(limits) = resources.limits.clone().filter(|l| !l.is_empty()) else {
        return;
    };
    let mut requests = resources.requests.clone().unwrap_or_default();
    let aggregate: ResourceMap =
        resources::aggregate_container_requests(containers, &resources::Options::default());
    let mut present = ListNames::of(&requests, aggregate.len() + limits.len());
    for (name, q) in &aggregate {
        if !present.contains(&requests, name)
            && is_supported_pod_level_resource(name)
            && is_overcommit_allowed(name)
        {
            push_quantity(&mut requests, name, q);
            present.pushed(name);
        }
    }
    for limit in &limits {
        if !present.contains(&requests, &limit.0) && is_supported_pod_level_resource(&limit.0) {
            requests.push(limit.clone());
            present.pushed(&limit.0);
        }
    }
    if !requests.is_empty() {
        resources.requests = Some(requests);
    }
}

fn all_containers_have_limit(pod: &Pod, name: &str) -> bool {
    pod.init_and_regular()
        .all(|c| c.resources.limits().contains_key(name))
}

/// Whether a pod-level list has a resource that may be set at pod level
/// (`IsPodLevelLimitsSet` / `IsPodLevelRequestsSet` on the current spec).
fn pod_level_set(list: Option<&WrittenQuantities>) -> bool {
    list.is_some_and(|l| {
        l.iter()
            .any(|(name, _)| is_supported_pod_level_resource(name))
    })
}

fn default_pod_limits(lists: &mut PodResourceLists, containers: &Pod) {
    let current = lists.resources.as_ref();
    if pod_level_set(current.and_then(|r| r.limits.as_ref()))
        || !pod_level_set(current.and_then(|r| r.requests.as_ref()))
    {
        return;
    }
    let aggregate =
        resources::aggregate_container_limits(containers, &resources::Options::default());
    let resources = lists.resources.get_or_insert_with(Default::default);
    let mut limits = resources.limits.clone().unwrap_or_default();
    let mut present = ListNames::of(&limits, aggregate.len());
    for (name, q) in &aggregate {
        if !present.contains(&limits, name)
            && is_supported_pod_level_resource(name)
            && is_overcommit_allowed(name)
            && all_containers_have_limit(containers, name)
        {
            push_quantity(&mut limits, name, q);
            present.pushed(name);
        }
    }
    if !limits.is_empty() {
        resources.limits = Some(limits);
    }
}

/// Escape a JSON Pointer token (RFC 6901): `~` -> `~0`, `/` -> `~1`.
pub fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn op(kind: PatchOp, path: String, value: PatchValue) -> PatchOperation {
    PatchOperation {
        op: kind,
        path,
        value,
    }
}

fn diff_list(
    base: &dyn fmt::Display,
    before: Option<&WrittenQuantities>,
    after: Option<&WrittenQuantities>,
    ops: &mut Vec<PatchOperation>,
) {
    match (before, after) {
        (_, None) => {}
        (None, Some(after)) => ops.push(op(
            PatchOp::Add,
            base.to_string(),
            PatchValue::ResourceList(after.clone()),
        )),
        // Paths are formatted only for the entries that become operations.
        (Some(before), Some(after)) => {
            // A long `before` is searched through a map of its entries (the
            // first of a name, as the scan finds it).
            let indexed = (before.len() > LONG_LIST).then(|| {
                let mut map = std::collections::BTreeMap::new();
                for (b, q) in before {
                    map.entry(b.as_str()).or_insert(q);
                }
                map
            });
            for (name, quantity) in after {
                let path = || format!("{base}/{}", pointer_token(name));
                let found = match &indexed {
                    Some(map) => map.get(name.as_str()).map(|q| (name, *q)),
                    None => before.iter().find(|(b, _)| b == name).map(|(b, q)| (b, q)),
                };
                match found {
                    None => ops.push(op(
                        PatchOp::Add,
                        path(),
                        PatchValue::Quantity(quantity.clone()),
                    )),
                    Some((_, b)) if b != quantity => ops.push(op(
                        PatchOp::Replace,
                        path(),
                        PatchValue::Quantity(quantity.clone()),
                    )),
                    Some(_) => {}
                }
            }
        }
    }
}

fn diff_requirements(
    base: &dyn fmt::Display,
    before: Option<&WrittenRequirements>,
    after: Option<&WrittenRequirements>,
    ops: &mut Vec<PatchOperation>,
) {
    match (before, after) {
        (_, None) => {}
        (None, Some(after)) => {
            if after.requests.is_some() || after.limits.is_some() {
                ops.push(op(
                    PatchOp::Add,
                    base.to_string(),
                    PatchValue::Requirements(after.clone()),
                ));
            }
        }
        (Some(before), Some(after)) => {
            diff_list(
                &format_args!("{base}/limits"),
                before.limits.as_ref(),
                after.limits.as_ref(),
                ops,
            );
            diff_list(
                &format_args!("{base}/requests"),
                before.requests.as_ref(),
                after.requests.as_ref(),
                ops,
            );
        }
    }
}

/// The RFC 6902 patch from `before` to `after` (resources only change).
pub fn diff_pod(before: &PodResourceLists, after: &PodResourceLists) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    for (field, b_list, a_list) in [
        (
            "initContainers",
            &before.init_containers,
            &after.init_containers,
        ),
        ("containers", &before.containers, &after.containers),
    ] {
        for (i, (b, a)) in b_list.iter().zip(a_list.iter()).enumerate() {
            diff_requirements(
                &format_args!("/spec/{field}/{i}/resources"),
                b.as_ref(),
                a.as_ref(),
                &mut ops,
            );
        }
    }
    diff_list(
        &"/spec/overhead",
        before.overhead.as_ref(),
        after.overhead.as_ref(),
        &mut ops,
    );
    diff_requirements(
        &"/spec/resources",
        before.resources.as_ref(),
        after.resources.as_ref(),
        &mut ops,
    );
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(names: impl IntoIterator<Item = usize>, value: &str) -> WrittenQuantities {
        names
            .into_iter()
            .map(|i| (format!("example.com/r{i:04}"), value.to_string()))
            .collect()
    }

    /// Below and above [`LONG_LIST`], defaulting gives what a scan per
    /// name gives: the requests as written, then every limit without a
    /// request in the limits' order, a name repeated in the limits once.
    #[test]
    fn long_lists_default_as_short_ones_do() {
        for n in [6, 40, 400] {
            let limits: WrittenQuantities = entries((0..n).rev().chain([1, 2]), "2");
            let requests = entries((0..n).filter(|i| i % 3 == 0), "1");
            let mut expected = requests.clone();
            for limit in &limits {
                if !expected.iter().any(|(name, _)| *name == limit.0) {
                    expected.push(limit.clone());
                }
            }
            let mut written = WrittenRequirements {
                requests: Some(requests),
                limits: Some(limits),
            };
            default_container_requests(&mut written);
            assert_eq!(written.requests, Some(expected), "{n} names");
        }
    }

    /// Below and above [`LONG_LIST`], the patch of a list is an `add` per
    /// new name and a `replace` per changed quantity, in the new list's
    /// order, compared with the first entry of a name in the old list.
    #[test]
    fn long_lists_patch_as_short_ones_do() {
        for n in [6, 40, 400] {
            let mut before = entries((0..n).rev(), "1");
            before.push(("example.com/r0000".to_string(), "9".to_string()));
            let mut after = entries(0..n, "1");
            after[1].1 = "2".to_string();
            after.extend(entries(n..n + 3, "1"));
            let mut ops = Vec::new();
            diff_list(&"/spec/x", Some(&before), Some(&after), &mut ops);
            let described: Vec<String> = ops
                .iter()
                .map(|o| format!("{:?} {} {:?}", o.op, o.path, o.value))
                .collect();
            let mut expected = vec![format!(
                "{:?} /spec/x/example.com~1r0001 {:?}",
                PatchOp::Replace,
                PatchValue::Quantity("2".to_string())
            )];
            for i in n..n + 3 {
                expected.push(format!(
                    "{:?} /spec/x/example.com~1r{i:04} {:?}",
                    PatchOp::Add,
                    PatchValue::Quantity("1".to_string())
                ));
            }
            assert_eq!(described, expected, "{n} names");
        }
    }
}
