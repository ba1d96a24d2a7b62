//! The conformance runner: vector files of the shape described in
//! `shared/vectors/README.md`, every case run through the component's
//! public interface and compared with its `expected`.
//!
//! Each upstream function a case names maps to one adapter that builds the
//! WIT inputs, calls the component and compares. Quantities compare
//! numerically (as `Quantity.Cmp`). A case is skipped only when it tests an
//! upstream internal the interface does not expose, and the reason is
//! printed; a function no adapter knows fails, naming itself.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use policy_wasm::cpuset::CpuSet;
use policy_wasm::quantity::Quantity;
use serde_json::{Map, Value};

use crate::bindings::{
    self as wit, FeatureGate, NodeSettings, PodResourcesOptions, QosClass, ResourceAmount,
};
use crate::pod_input::pod_from_json;
use crate::runtime::PolicyRuntime;
use crate::{ManagerOutcome, empty_node, format_field_errors};

/// The result of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The component's answer equals `expected`.
    Pass,
    /// It does not (or the call failed); the text says how.
    Fail(String),
    /// Not run: an upstream internal, with the reason.
    Skip(String),
}

/// One case's name and outcome.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The case's `name`.
    pub name: String,
    /// What happened.
    pub outcome: Outcome,
}

/// All cases of one file.
#[derive(Clone, Debug)]
pub struct FileReport {
    /// The file.
    pub path: String,
    /// Per case, in file order.
    pub cases: Vec<CaseResult>,
}

/// Pass/fail/skip counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Passed cases.
    pub passed: usize,
    /// Failed cases.
    pub failed: usize,
    /// Skipped cases.
    pub skipped: usize,
}

impl Totals {
    /// Add one outcome.
    pub fn count(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Pass => self.passed += 1,
            Outcome::Fail(_) => self.failed += 1,
            Outcome::Skip(_) => self.skipped += 1,
        }
    }
    /// Add another total.
    pub fn add(&mut self, other: Totals) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.skipped += other.skipped;
    }
}

impl std::fmt::Display for Totals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

impl FileReport {
    /// Counts for this file.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        self.cases.iter().for_each(|c| t.count(&c.outcome));
        t
    }

    /// Human-readable report: failures and skips by name, then the counts.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "== {}", self.path);
        for case in &self.cases {
            match &case.outcome {
                Outcome::Pass => {}
                Outcome::Fail(why) => {
                    let _ = writeln!(out, "FAIL {}: {}", case.name, why.replace('\n', "\n     "));
                }
                Outcome::Skip(why) => {
                    let _ = writeln!(out, "SKIP {}: {}", case.name, why);
                }
            }
        }
        let _ = writeln!(out, "{}: {}", file_label(&self.path), self.totals());
        out
    }
}

fn file_label(path: &str) -> String {
    Path::new(path).file_name().map_or_else(
        || path.to_string(),
        |n| n.to_string_lossy().replace(' ', "_"),
    )
}

/// Run every case of one vector file.
pub fn run_file(policy: &PolicyRuntime, path: &Path) -> Result<FileReport> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let file: Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let Some(cases) = file.get("cases").and_then(Value::as_array) else {
        bail!("{}: no `cases` array; not a vector file", path.display());
    };
    let cases = cases
        .iter()
        .enumerate()
        .map(|(i, case)| CaseResult {
            name: case
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| format!("case #{i}"), str::to_string),
            outcome: run_case(policy, &file, case),
        })
        .collect();
    Ok(FileReport {
        path: path.display().to_string(),
        cases,
    })
}

/// The function a case names (`function`, `operation` or `policy`).
pub fn case_function(case: &Value) -> String {
    let input = &case["input"];
    ["function", "operation", "policy"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .unwrap_or("")
        .to_string()
}

/// Run one case.
pub fn run_case(policy: &PolicyRuntime, file: &Value, case: &Value) -> Outcome {
    let function = case_function(case);
    let name = case["name"].as_str().unwrap_or_default();
    let input = &case["input"];
    let expected = &case["expected"];
    let result = match function.as_str() {
        "best-effort" | "restricted" | "single-numa-node" | "none" => {
            merge_case(policy, file, input, expected)
        }
        "takeByTopologyNUMAPacked" | "takeByTopologyNUMADistributed" => {
            take_case(policy, file, &function, input, expected)
        }
        "Start" | "NewStaticPolicy+Start" => cpu_start_case(policy, file, name, input, expected),
        "Allocate" => cpu_allocate_case(policy, file, name, input, expected),
        "allocateCPUs" => allocate_cpus_case(policy, file, name, input, expected),
        "RemoveContainer" => cpu_remove_case(policy, file, name, input, expected),
        f if f.starts_with("Allocate all (init then app)") => {
            cpu_sequence_case(policy, file, name, input, expected)
        }
        "AllocatePod" | "AllocateContainerScope" => {
            pod_allocation_case(policy, file, &function, name, input, expected)
        }
        "GetTopologyHints" => memory_hints_case(policy, input, expected),
        "getPodRequestedResources" => memory_requested_case(policy, input, expected),
        "PodRequests"
        | "PodLimits"
        | "PodRequests+PodLimits"
        | "AggregateContainerRequests+AggregateContainerLimits" => {
            effective_case(policy, &function, input, expected)
        }
        "IsPodLevelResourcesSet" | "IsPodLevelLimitsSet" => {
            predicate_case(policy, &function, input, expected)
        }
        "IsSupportedPodLevelResource" => supported_resource_case(policy, input, expected),
        "GetContainerOOMScoreAdjust" => oom_case(policy, input, expected),
        "ResourceConfigForPod" => resource_config_case(policy, input, expected),
        "HugePageLimits" => hugepage_case(policy, input, expected),
        "ComputePodQOS" | "GetPodQOS" => qos_case(policy, &function, input, expected),
        "DefaultPodResources" => defaulting_case(policy, input, expected),
        "ValidatePodResources" => validation_case(policy, input, expected),
        "ValidateMemoryThrottlingFactor" => factor_case(policy, input, expected),
        "ContainerMemoryHigh" => memory_high_case(policy, input, expected),
        "PodMemoryMin" => pod_memory_min_case(policy, input, expected),
        "ResizePlan" => resize_case(policy, input, expected),
        "MilliCPUToQuota"
        | "MilliCPUToShares"
        | "SharesToMilliCPU"
        | "QuotaToMilliCPU"
        | "CPUSharesEqualAfterV2RoundTrip"
        | "CpuSharesToCpuWeight"
        | "CpuWeightToCpuShares" => {
            return Outcome::Skip(format!(
                "`{function}` is a pure unit conversion; the interface exposes its results through pod-resource-config and evaluate"
            ));
        }
        "CPURequestsFromConfig" | "CPULimitsFromConfig" | "MemoryLimitsFromConfig" => {
            return Outcome::Skip(format!(
                "`{function}` reads a kubelet ResourceConfig back into a quantity, a kubelet internal conversion the interface does not expose"
            ));
        }
        f if f.starts_with("cpuAccumulator.") => {
            return Outcome::Skip(format!(
                "`{f}` tests upstream's internal CPU accumulator (optional guidance, not a contract)"
            ));
        }
        "" => Err("the case names no function (input.function/operation/policy)".to_string()),
        other => Err(format!(
            "policy {} implements no function for `{other}` yet",
            policy.info().policy_version
        )),
    };
    match result {
        Ok(()) => Outcome::Pass,
        Err(why) => Outcome::Fail(why),
    }
}

type CaseResultText = std::result::Result<(), String>;

fn gates(input: &Value) -> Vec<FeatureGate> {
    let gates = input
        .get("featureGates")
        .or_else(|| input.get("feature_gates"));
    gates
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(name, v)| {
                    v.as_bool().map(|enabled| FeatureGate {
                        name: name.clone(),
                        enabled,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

fn node_with_gates(input: &Value) -> NodeSettings {
    NodeSettings {
        feature_gates: gates(input),
        ..empty_node()
    }
}

fn pod(value: &Value) -> std::result::Result<wit::Pod, String> {
    pod_from_json(value).map_err(|e| format!("the case's pod does not parse: {e:#}"))
}

fn call<T>(result: Result<crate::PolicyResult<T>>) -> std::result::Result<T, String> {
    match result {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(errors)) => Err(format!(
            "the policy returned errors:\n{}",
            format_field_errors(&errors)
        )),
        Err(e) => Err(format!("calling the component failed: {e:#}")),
    }
}

fn parse_q(text: &str) -> std::result::Result<Quantity, String> {
    Quantity::parse(text).map_err(|e| format!("expected quantity `{text}`: {e}"))
}

fn quantity_of(value: &Value) -> std::result::Result<Quantity, String> {
    match value {
        Value::String(s) => parse_q(s),
        Value::Number(n) => parse_q(&n.to_string()),
        other => Err(format!("expected a quantity, found {other}")),
    }
}

/// Compare a map of quantity strings with computed amounts: same keys, equal values.
fn compare_amounts(what: &str, expected: &Value, actual: &[ResourceAmount]) -> CaseResultText {
    let empty = Map::new();
    let expected = match expected {
        Value::Null => &empty,
        Value::Object(m) => m,
        other => return Err(format!("{what}: expected is not a map: {other}")),
    };
    let mut problems = Vec::new();
    for (name, want) in expected {
        let want = quantity_of(want)?;
        match actual.iter().find(|a| &a.name == name) {
            None => problems.push(format!("{name}: expected {want}, missing")),
            Some(got) => {
                let got_q = parse_q(&got.quantity)?;
                if got_q != want {
                    problems.push(format!("{name}: expected {want}, got {got_q}"));
                }
            }
        }
    }
    for got in actual {
        if !expected.contains_key(&got.name) {
            problems.push(format!("{}: not expected, got {}", got.name, got.quantity));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{what}: {}", problems.join("; ")))
    }
}

fn options(input: &Value) -> PodResourcesOptions {
    let o = &input["options"];
    let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
    PodResourcesOptions {
        exclude_overhead: flag("excludeOverhead"),
        use_status_resources: flag("useStatusResources"),
        in_place_pod_level_resources_vertical_scaling_enabled: flag(
            "inPlacePodLevelResourcesVerticalScalingEnabled",
        ),
        non_missing_container_requests: o
            .get("nonMissingContainerRequests")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(name, q)| wit::ResourceQuantity {
                        name: name.clone(),
                        quantity: q.as_str().map_or_else(|| q.to_string(), str::to_string),
                    })
                    .collect()
            }),
        skip_pod_level_resources: flag("skipPodLevelResources"),
        skip_container_level_resources: flag("skipContainerLevelResources"),
    }
}

fn effective_case(
    policy: &PolicyRuntime,
    function: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let pod = pod(&input["pod"])?;
    let eff = call(policy.effective_resources(&pod, &options(input), &node_with_gates(input)))?;
    let aggregate = function.starts_with("Aggregate");
    if let Some(want) = expected.get("requests") {
        let got = if aggregate {
            &eff.aggregate_container_requests
        } else {
            &eff.requests
        };
        compare_amounts("requests", want, got)?;
    }
    if let Some(want) = expected.get("limits") {
        let got = if aggregate {
            &eff.aggregate_container_limits
        } else {
            &eff.limits
        };
        compare_amounts("limits", want, got)?;
    }
    Ok(())
}

fn expect_bool(expected: &Value, key: &str) -> std::result::Result<bool, String> {
    expected
        .get(key)
        .and_then(Value::as_bool)
        .ok_or_else(|| format!("expected.{key} is not a boolean"))
}

fn predicate_case(
    policy: &PolicyRuntime,
    function: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let pod = pod(&input["pod"])?;
    let eff = call(policy.effective_resources(&pod, &options(input), &node_with_gates(input)))?;
    let got = if function == "IsPodLevelResourcesSet" {
        eff.pod_level_resources_set
    } else {
        eff.pod_level_limits_set
    };
    let want = expect_bool(expected, "result")?;
    if got == want {
        Ok(())
    } else {
        Err(format!("expected {want}, got {got}"))
    }
}

/// Whether a resource is allowed at pod level, asked through validation:
/// a pod-level limit of that name is either accepted or rejected as NotSupported.
fn supported_resource_case(
    policy: &PolicyRuntime,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let name = input["resourceName"]
        .as_str()
        .ok_or("input.resourceName is not a string")?;
    let pod = pod(&serde_json::json!({
        "spec": {"resources": {"limits": {name: "1Gi"}}, "containers": [{"name": "c"}]}
    }))?;
    let errors = policy
        .validate_pod(&pod, &empty_node())
        .map_err(|e| format!("calling the component failed: {e:#}"))?;
    let rejected = errors
        .iter()
        .any(|e| e.reason == wit::ErrorReason::NotSupported && e.field.contains(name));
    let want = expect_bool(expected, "result")?;
    if rejected != want {
        Ok(())
    } else {
        Err(format!(
            "expected supported={want}; errors: {}",
            format_field_errors(&errors)
        ))
    }
}

fn oom_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    let pod = pod(&input["pod"])?;
    let capacity = input["memoryCapacity"]
        .as_u64()
        .ok_or("input.memoryCapacity is not a number")?;
    let node = NodeSettings {
        capacity: vec![wit::ResourceQuantity {
            name: "memory".into(),
            quantity: capacity.to_string(),
        }],
        ..node_with_gates(input)
    };
    let name = input["containerName"]
        .as_str()
        .ok_or("input.containerName is not a string")?;
    let scores = call(policy.oom_score_adjust(&pod, &node))?;
    let (_, got) = scores
        .iter()
        .find(|(n, _)| n == name)
        .ok_or_else(|| format!("no score for container `{name}`"))?;
    let low = expected["oomScoreAdjMin"]
        .as_i64()
        .or(expected["oomScoreAdj"].as_i64())
        .ok_or("no expected score")?;
    let high = expected["oomScoreAdjMax"]
        .as_i64()
        .or(expected["oomScoreAdj"].as_i64())
        .ok_or("no expected score")?;
    let got = i64::from(*got);
    if (low..=high).contains(&got) {
        Ok(())
    } else {
        Err(format!("expected {low}..={high}, got {got}"))
    }
}

fn reservation_policy(
    input: &Value,
) -> std::result::Result<Option<wit::MemoryReservationPolicy>, String> {
    Ok(
        match input.get("memoryReservationPolicy").and_then(Value::as_str) {
            None => None,
            Some("None") => Some(wit::MemoryReservationPolicy::None),
            Some("HardReservation") => Some(wit::MemoryReservationPolicy::HardReservation),
            Some("TieredReservation") => Some(wit::MemoryReservationPolicy::TieredReservation),
            Some(other) => return Err(format!("unknown memoryReservationPolicy `{other}`")),
        },
    )
}

fn resource_config_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    let pod = pod(&input["pod"])?;
    let mut node = node_with_gates(input);
    node.cpu_cfs_quota = input.get("enforceCPULimits").and_then(Value::as_bool);
    // Without CustomCPUCFSQuotaPeriod the kubelet forces the 100ms period
    // (and its config validation rejects another), so the Go argument only
    // reaches the node settings when the gate is on.
    let custom_period = node
        .feature_gates
        .iter()
        .any(|g| g.name == "CustomCPUCFSQuotaPeriod" && g.enabled);
    node.cpu_cfs_quota_period_us = input
        .get("cpuPeriod")
        .and_then(Value::as_u64)
        .filter(|p| *p != 0 && custom_period);
    if input.get("enforceMemoryQoS").and_then(Value::as_bool) == Some(true) {
        node.feature_gates.push(FeatureGate {
            name: "MemoryQoS".into(),
            enabled: true,
        });
    }
    node.memory_reservation_policy = reservation_policy(input)?;
    let rc = call(policy.pod_resource_config(&pod, &node))?;
    let mut problems = Vec::new();
    let mut check = |key: &str, got: Option<i128>| {
        if let Some(want) = expected.get(key) {
            let want = want
                .as_i64()
                .map(i128::from)
                .or_else(|| want.as_u64().map(i128::from));
            if want != got {
                problems.push(format!("{key}: expected {want:?}, got {got:?}"));
            }
        }
    };
    check("cpuShares", rc.cpu_shares.map(i128::from));
    check("cpuQuota", rc.cpu_quota.map(i128::from));
    check("cpuPeriod", rc.cpu_period.map(i128::from));
    check("memory", rc.memory_limit.map(i128::from));
    if let Some(want) = expected.get("hugePageLimit") {
        compare_hugepages(want, rc.hugepage_limits.as_deref().unwrap_or_default())
            .unwrap_or_else(|p| problems.push(p));
    }
    if let Some(want) = expected.get("unified").and_then(Value::as_object) {
        let got: Map<String, Value> = rc
            .unified
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let want: Map<String, Value> = want
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    Value::String(v.as_str().map_or_else(|| v.to_string(), str::to_string)),
                )
            })
            .collect();
        if got != want {
            problems.push(format!("unified: expected {want:?}, got {got:?}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// hugePageLimit is compared only when either side is non-empty (as the Go test does).
fn compare_hugepages(want: &Value, got: &[wit::HugepageLimit]) -> CaseResultText {
    let want: Vec<(u64, u64)> = match want {
        Value::Null => Vec::new(),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                Ok((
                    k.parse::<u64>()
                        .map_err(|_| format!("bad page size key {k}"))?,
                    v.as_u64().ok_or("bad limit")?,
                ))
            })
            .collect::<std::result::Result<_, String>>()?,
        other => return Err(format!("hugePageLimit: unexpected {other}")),
    };
    let mut want = want;
    want.sort_unstable();
    let mut got: Vec<(u64, u64)> = got
        .iter()
        .map(|h| (h.page_size_bytes, h.limit_bytes))
        .collect();
    got.sort_unstable();
    if want == got {
        Ok(())
    } else {
        Err(format!("hugePageLimit: expected {want:?}, got {got:?}"))
    }
}

fn hugepage_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    let pod = pod(&serde_json::json!({
        "spec": {"containers": [{"name": "c", "resources": {"requests": input["resourceList"].clone()}}]}
    }))?;
    let node = NodeSettings {
        cpu_cfs_quota: Some(false),
        ..empty_node()
    };
    let rc = call(policy.pod_resource_config(&pod, &node))?;
    compare_hugepages(
        &expected["hugePageLimitBytesByPageSizeBytes"],
        rc.hugepage_limits.as_deref().unwrap_or_default(),
    )
}

fn qos_case(
    policy: &PolicyRuntime,
    function: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let mut pod = pod(&input["pod"])?;
    if function == "ComputePodQOS" {
        pod.status.qos_class = None;
    }
    let got = call(policy.qos_class(&pod, &node_with_gates(input)))?;
    let got = match got {
        QosClass::Guaranteed => "Guaranteed",
        QosClass::Burstable => "Burstable",
        QosClass::BestEffort => "BestEffort",
    };
    let want = expected["qosClass"]
        .as_str()
        .ok_or("expected.qosClass is not a string")?;
    if got == want {
        Ok(())
    } else {
        Err(format!("expected {want}, got {got}"))
    }
}

fn requirements_map(
    r: &Option<wit::ResourceRequirements>,
) -> (Vec<ResourceAmount>, Vec<ResourceAmount>) {
    let amounts = |l: &Option<wit::ResourceList>| {
        l.iter()
            .flatten()
            .map(|q| ResourceAmount {
                name: q.name.clone(),
                quantity: q.quantity.clone(),
                milli_value: 0,
                value: 0,
            })
            .collect()
    };
    match r {
        Some(r) => (amounts(&r.requests), amounts(&r.limits)),
        None => (Vec::new(), Vec::new()),
    }
}

fn compare_requirements(
    what: &str,
    expected: &Value,
    got: &Option<wit::ResourceRequirements>,
) -> CaseResultText {
    let (requests, limits) = requirements_map(got);
    match expected {
        Value::Null => {
            if requests.is_empty() && limits.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{what}: expected no resources, got requests {requests:?} limits {limits:?}"
                ))
            }
        }
        Value::Object(m) if m.is_empty() => {
            if requests.is_empty() && limits.is_empty() {
                Ok(())
            } else {
                Err(format!("{what}: expected no resources, got some"))
            }
        }
        Value::Object(m) => {
            if let Some(want) = m.get("requests") {
                compare_amounts(&format!("{what}.requests"), want, &requests)?;
            }
            if let Some(want) = m.get("limits") {
                compare_amounts(&format!("{what}.limits"), want, &limits)?;
            }
            Ok(())
        }
        other => Err(format!("{what}: unexpected {other}")),
    }
}

fn defaulting_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    let pod = pod(&input["pod"])?;
    let defaulted = call(policy.default_pod(&pod, &node_with_gates(input)))?;
    let want = &expected["pod"];
    if let Some(resources) = want.get("resources") {
        compare_requirements("spec.resources", resources, &defaulted.pod.spec.resources)?;
    }
    for key in ["containers", "initContainers"] {
        let Some(map) = want.get(key).and_then(Value::as_object) else {
            continue;
        };
        let list = if key == "containers" {
            &defaulted.pod.spec.containers
        } else {
            &defaulted.pod.spec.init_containers
        };
        for (name, resources) in map {
            let c = list
                .iter()
                .find(|c| &c.name == name)
                .ok_or_else(|| format!("no {key} entry `{name}`"))?;
            compare_requirements(&format!("{key}[{name}]"), resources, &c.resources)?;
        }
    }
    Ok(())
}

fn validation_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    let pod = pod(&input["pod"])?;
    let errors = policy
        .validate_pod(&pod, &node_with_gates(input))
        .map_err(|e| format!("calling the component failed: {e:#}"))?;
    let want_valid = expect_bool(expected, "valid")?;
    if errors.is_empty() != want_valid {
        return Err(format!(
            "expected valid={want_valid}; errors:\n{}",
            format_field_errors(&errors)
        ));
    }
    let Some(want_errors) = expected.get("errors").and_then(Value::as_array) else {
        return Ok(());
    };
    let mut used = vec![false; errors.len()];
    for want in want_errors {
        let field = want["field"].as_str().unwrap_or_default();
        let reason = want["reason"].as_str().unwrap_or_default();
        let found = errors.iter().enumerate().position(|(i, e)| {
            !used[i] && crate::reason_name(e.reason) == reason && e.field.starts_with(field)
        });
        match found {
            Some(i) => used[i] = true,
            None => {
                return Err(format!(
                    "expected a {reason} error at {field}; got:\n{}",
                    format_field_errors(&errors)
                ));
            }
        }
    }
    Ok(())
}

fn factor_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    let factor = input["factor"]
        .as_f64()
        .ok_or("input.factor is not a number")?;
    let node = NodeSettings {
        memory_throttling_factor: Some(factor),
        ..empty_node()
    };
    let errors = policy
        .validate_node(&node)
        .map_err(|e| format!("calling the component failed: {e:#}"))?;
    let valid = !errors.iter().any(|e| e.field == "memoryThrottlingFactor");
    let want = expect_bool(expected, "valid")?;
    if valid == want {
        Ok(())
    } else {
        Err(format!("expected valid={want}, got {valid}"))
    }
}

fn qos_from_name(name: &str) -> std::result::Result<QosClass, String> {
    match name {
        "Guaranteed" => Ok(QosClass::Guaranteed),
        "Burstable" => Ok(QosClass::Burstable),
        "BestEffort" => Ok(QosClass::BestEffort),
        other => Err(format!("unknown QoS class `{other}`")),
    }
}

/// `ContainerMemoryHigh`: node allocatable, factor and page size go into the
/// node settings; the container's request/limit and the pod's class are the arguments.
fn memory_high_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    let allocatable = input["nodeAllocatableBytes"]
        .as_u64()
        .ok_or("input.nodeAllocatableBytes is not a number")?;
    let node = NodeSettings {
        allocatable: Some(vec![wit::ResourceQuantity {
            name: "memory".into(),
            quantity: allocatable.to_string(),
        }]),
        memory_throttling_factor: input["memoryThrottlingFactor"].as_f64(),
        page_size_bytes: input["pageSizeBytes"].as_u64(),
        ..empty_node()
    };
    let qos = qos_from_name(input["qosClass"].as_str().unwrap_or_default())?;
    let got = call(policy.container_memory_high(
        input["requestBytes"].as_u64(),
        input["limitBytes"].as_u64(),
        qos,
        &node,
    ))?;
    let want = expected["memoryHigh"].as_u64();
    if got == want {
        Ok(())
    } else {
        Err(format!("expected memoryHigh {want:?}, got {got:?}"))
    }
}

/// `PodMemoryMin`: the pod's and each container's memory.min / memory.low
/// from `evaluate` on a cgroup v2 node with the given reservation policy
/// (the node's memory capacity, needed by evaluate, does not affect them).
fn pod_memory_min_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    let pod = pod(&input["pod"])?;
    let node = NodeSettings {
        capacity: vec![wit::ResourceQuantity {
            name: "memory".into(),
            quantity: "1Ti".into(),
        }],
        memory_reservation_policy: reservation_policy(input)?,
        ..node_with_gates(input)
    };
    let eval = call(policy.evaluate(&pod, &node))?;
    let unified_value = |unified: &[(String, String)], key: &str| -> Option<u64> {
        unified
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.parse().ok())
    };
    let check =
        |what: String, want: &Value, unified: &[(String, String)], problems: &mut Vec<String>| {
            for key in ["memory.min", "memory.low"] {
                if let Some(want) = want.get(key) {
                    let got = unified_value(unified, key);
                    if got != want.as_u64() {
                        problems.push(format!(
                            "{what} {key}: expected {:?}, got {got:?}",
                            want.as_u64()
                        ));
                    }
                }
            }
        };
    let mut problems = Vec::new();
    check(
        "pod".into(),
        &expected["pod"],
        &eval.pod_resources.unified,
        &mut problems,
    );
    if let Some(containers) = expected["containers"].as_object() {
        for (name, want) in containers {
            match eval.containers.iter().find(|c| &c.name == name) {
                Some(c) => check(
                    format!("container {name}"),
                    want,
                    &c.resources.unified,
                    &mut problems,
                ),
                None => problems.push(format!("no container `{name}` in the evaluation")),
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn quantity_list(value: &Value) -> Vec<wit::ResourceQuantity> {
    value
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(name, q)| wit::ResourceQuantity {
                    name: name.clone(),
                    quantity: q.as_str().map_or_else(|| q.to_string(), str::to_string),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The plan's cgroup write targets in order, `pod:<res>` and
/// `container:<name>:<res>`, each once (first write).
pub fn resize_targets(plan: &wit::ResizePlan) -> Vec<String> {
    let mut targets: Vec<String> = Vec::new();
    for step in &plan.steps {
        let target = match (step.kind, &step.container) {
            (wit::ResizeStepKind::WritePod, _) => format!("pod:{}", step.resource_name),
            (wit::ResizeStepKind::WriteContainer, Some(c)) => {
                format!("container:{c}:{}", step.resource_name)
            }
            _ => continue,
        };
        if !targets.contains(&target) {
            targets.push(target);
        }
    }
    targets
}

fn resize_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    let current = pod(&input["pod"])?;
    let desired = pod(&input["desired"])?;
    let node = NodeSettings {
        allocatable: Some(quantity_list(&input["node"]["allocatable"])),
        ..node_with_gates(input)
    };
    let others = quantity_list(&input["node"]["allocated"]);
    let plan = call(policy.resize_plan(&current, &desired, &others, &node))?;
    let decision = match plan.decision {
        wit::ResizeDecision::Accepted => "Accepted",
        wit::ResizeDecision::Deferred => "Deferred",
        wit::ResizeDecision::Infeasible => "Infeasible",
        wit::ResizeDecision::Invalid => "Invalid",
    };
    let want = expected["decision"]
        .as_str()
        .ok_or("expected.decision is not a string")?;
    if decision != want {
        return Err(format!(
            "expected {want}, got {decision} ({})",
            plan.message
        ));
    }
    let targets = resize_targets(&plan);
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    if let Some(order) = expected.get("order") {
        let order = strings(order);
        if targets != order {
            return Err(format!("expected order {order:?}, got {targets:?}"));
        }
    }
    if let Some(want_targets) = expected.get("targets") {
        let mut want_sorted = strings(want_targets);
        want_sorted.sort();
        let mut got_sorted = targets.clone();
        got_sorted.sort();
        if want_sorted != got_sorted {
            return Err(format!("expected targets {want_sorted:?}, got {targets:?}"));
        }
    }
    for pair in expected
        .get("before")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let pair = strings(pair);
        let [a, b] = pair.as_slice() else {
            return Err(format!("bad before pair {pair:?}"));
        };
        let position = |t: &String| targets.iter().position(|x| x == t);
        match (position(a), position(b)) {
            (Some(i), Some(j)) if i < j => {}
            _ => return Err(format!("expected {a} before {b}, got {targets:?}")),
        }
    }
    Ok(())
}

// ----------------------------------------------------------------------
// Resource managers (k8s-managers/*.json, kep-derived/kep5526-allocation.json)
// ----------------------------------------------------------------------

/// A conversion or check that may fail with a message.
type Checked<T> = std::result::Result<T, String>;

fn cpus(text: &str) -> Checked<CpuSet> {
    CpuSet::parse(text).map_err(|e| format!("cpuset `{text}`: {e}"))
}

/// A vector cpuset: a string, or `null` for the empty set.
fn vector_cpus(value: &Value) -> Checked<CpuSet> {
    match value {
        Value::Null => Ok(CpuSet::new()),
        Value::String(text) => cpus(text),
        other => Err(format!("not a cpuset: {other}")),
    }
}

fn as_u32(value: &Value, what: &str) -> Checked<u32> {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("{what} is not a small number: {value}"))
}

/// NUMA node ids of a mask (`[0, 2]`), a hint (`{"mask": [...]}`), or `null`.
fn vector_mask(value: &Value) -> Checked<Option<Vec<u32>>> {
    let bits = match value {
        Value::Null => return Ok(None),
        Value::Array(bits) => bits,
        Value::Object(hint) => match &hint["mask"] {
            Value::Null => return Ok(None),
            Value::Array(bits) => bits,
            other => return Err(format!("not a NUMA mask: {other}")),
        },
        other => return Err(format!("not a NUMA affinity: {other}")),
    };
    bits.iter()
        .map(|b| as_u32(b, "NUMA node"))
        .collect::<Checked<Vec<u32>>>()
        .map(Some)
}

/// A vector hint (`{"mask": [..] | null, "preferred": bool}`); `null` is the
/// fake topology manager's empty hint.
fn vector_hint(value: &Value) -> Checked<wit::TopologyHint> {
    Ok(wit::TopologyHint {
        numa_affinity: vector_mask(value)?,
        preferred: value
            .get("preferred")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// The file's topology `name` (cpu -> core/socket/numa[/uncore]); its NUMA
/// nodes are the ones the CPUs name (no memory, no distances).
fn vector_topology(file: &Value, name: &str) -> Checked<wit::NodeTopology> {
    let topology = file["topologies"]
        .get(name)
        .ok_or_else(|| format!("the file has no topology `{name}`"))?;
    let cpus = topology["cpus"]
        .as_array()
        .ok_or_else(|| format!("topology `{name}` has no cpus"))?
        .iter()
        .map(|cpu| {
            Ok(wit::TopologyCpu {
                id: as_u32(&cpu["cpu"], "cpu")?,
                core_id: as_u32(&cpu["core"], "core")?,
                socket_id: as_u32(&cpu["socket"], "socket")?,
                numa_node: as_u32(&cpu["numa"], "numa")?,
                uncore_cache_id: match cpu.get("uncore") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(as_u32(v, "uncore")?),
                },
            })
        })
        .collect::<Checked<Vec<_>>>()?;
    let numa: BTreeSet<u32> = cpus.iter().map(|c| c.numa_node).collect();
    Ok(wit::NodeTopology {
        cpus,
        numa_nodes: numa
            .into_iter()
            .map(|id| wit::NumaNodeInfo {
                id,
                memory_bytes: 0,
                hugepages: Vec::new(),
                distances: Vec::new(),
            })
            .collect(),
    })
}

/// `notes`: the memory vectors' machine (upstream's test machine info is
/// irrelevant to them): two NUMA nodes of 10Gi with four 1Gi huge pages,
/// 1Gi of memory reserved on each.
fn memory_test_machine() -> (wit::NodeTopology, Vec<wit::NumaReservedMemory>) {
    let gib: u64 = 1 << 30;
    let topology = wit::NodeTopology {
        cpus: Vec::new(),
        numa_nodes: (0..2)
            .map(|id| wit::NumaNodeInfo {
                id,
                memory_bytes: 10 * gib,
                hugepages: vec![wit::HugepagePool {
                    page_size_bytes: gib,
                    pages: 4,
                }],
                distances: vec![10, 20],
            })
            .collect(),
    };
    let reserved = (0..2)
        .map(|numa_node| wit::NumaReservedMemory {
            numa_node,
            limits: vec![wit::ResourceQuantity {
                name: "memory".into(),
                quantity: "1Gi".into(),
            }],
        })
        .collect();
    (topology, reserved)
}

fn quantity_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `{"cpu": .., "memory": ..}` from `<prefix>cpu_<kind>` style fields.
fn vector_resources(value: &Value, kind: &str) -> Map<String, Value> {
    let mut map = Map::new();
    for resource in ["cpu", "memory"] {
        if let Some(q) = quantity_text(&value[format!("{resource}_{kind}")]) {
            map.insert(resource.to_string(), Value::String(q));
        }
    }
    map
}

fn vector_container(value: &Value) -> Value {
    let mut container = Map::new();
    container.insert("name".into(), value["name"].clone());
    let mut resources = Map::new();
    if let Some(requests) = value.get("requests").filter(|v| v.is_object()) {
        // Memory vectors: explicit requests (and limits) maps.
        resources.insert("requests".into(), requests.clone());
        if let Some(limits) = value.get("limits").filter(|v| v.is_object()) {
            resources.insert("limits".into(), limits.clone());
        }
    } else {
        for kind in ["request", "limit"] {
            let map = vector_resources(value, kind);
            if !map.is_empty() {
                resources.insert(format!("{kind}s"), Value::Object(map));
            }
        }
    }
    if !resources.is_empty() {
        container.insert("resources".into(), Value::Object(resources));
    }
    if let Some(policy) = value.get("restart_policy").filter(|v| v.is_string()) {
        container.insert("restartPolicy".into(), policy.clone());
    }
    Value::Object(container)
}

/// A vector pod (`uid`, `pod_level_resources`, `init_containers`,
/// `containers` with `cpu_request`, ... or `requests` maps) as a WIT pod.
fn vector_pod(value: &Value, uid: &str) -> Checked<wit::Pod> {
    let list = |key: &str| -> Value {
        Value::Array(
            value
                .get(key)
                .and_then(Value::as_array)
                .map(|cs| cs.iter().map(vector_container).collect())
                .unwrap_or_default(),
        )
    };
    let mut spec = Map::new();
    spec.insert("containers".into(), list("containers"));
    spec.insert("initContainers".into(), list("init_containers"));
    let plr = &value["pod_level_resources"];
    if plr.is_object() {
        let mut resources = Map::new();
        for kind in ["request", "limit"] {
            let map = vector_resources(plr, kind);
            if !map.is_empty() {
                resources.insert(format!("{kind}s"), Value::Object(map));
            }
        }
        spec.insert("resources".into(), Value::Object(resources));
    }
    pod(&serde_json::json!({
        "metadata": {"name": uid, "uid": uid},
        "spec": Value::Object(spec),
    }))
}

/// The static-policy node of a CPU vector: `num_reserved_cpus` reserved
/// through `systemReserved[cpu]`, `reserved_cpus` as `reservedSystemCPUs`,
/// `options`, `feature_gates` (and the alpha-options gate its case name records).
fn static_cpu_node(input: &Value, case_name: &str) -> Checked<NodeSettings> {
    let mut node = node_with_gates(input);
    if case_name.contains("CPUManagerPolicyAlphaOptions enabled") {
        node.feature_gates.push(FeatureGate {
            name: "CPUManagerPolicyAlphaOptions".into(),
            enabled: true,
        });
    }
    node.cpu_manager_policy = Some("static".into());
    node.cpu_manager_policy_options = input["options"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(name, value)| wit::PolicyOption {
                    name: name.clone(),
                    value: quantity_text(value)
                        .unwrap_or_else(|| value.to_string().trim_matches('"').to_string()),
                })
                .collect()
        })
        .unwrap_or_default();
    let reserved = input["num_reserved_cpus"].as_u64().unwrap_or(0);
    if reserved > 0 {
        node.system_reserved = vec![wit::ResourceQuantity {
            name: "cpu".into(),
            quantity: reserved.to_string(),
        }];
    }
    node.reserved_system_cpus = input["reserved_cpus"].as_str().map(str::to_string);
    Ok(node)
}

/// A vector CPU state (`default_cpuset`, `assignments`) as a manager state.
fn vector_cpu_state(value: &Value) -> Checked<wit::ManagerState> {
    let mut state = crate::empty_manager_state();
    state.cpu.policy_name = "static".into();
    state.cpu.default_cpuset = value["default_cpuset"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Some(pods) = value["assignments"].as_object() {
        for (uid, containers) in pods {
            let containers = containers
                .as_object()
                .ok_or_else(|| format!("assignments[{uid}] is not a map"))?;
            state.cpu.entries.push(wit::PodCpuEntries {
                pod_uid: uid.clone(),
                containers: containers
                    .iter()
                    .map(|(name, cpus)| wit::ContainerCpuset {
                        container: name.clone(),
                        cpuset: cpus.as_str().unwrap_or_default().to_string(),
                    })
                    .collect(),
            });
        }
    }
    Ok(state)
}

/// `entries` as pod -> container -> CPUs.
fn cpu_entries(state: &wit::ManagerState) -> Checked<BTreeMap<String, BTreeMap<String, CpuSet>>> {
    let mut out = BTreeMap::new();
    for pod in &state.cpu.entries {
        let mut containers = BTreeMap::new();
        for c in &pod.containers {
            containers.insert(c.container.clone(), cpus(&c.cpuset)?);
        }
        out.insert(pod.pod_uid.clone(), containers);
    }
    Ok(out)
}

fn vector_entries(value: &Value) -> Checked<BTreeMap<String, BTreeMap<String, CpuSet>>> {
    let mut out = BTreeMap::new();
    for (uid, containers) in value.as_object().into_iter().flatten() {
        let mut map = BTreeMap::new();
        for (name, set) in containers.as_object().into_iter().flatten() {
            map.insert(name.clone(), vector_cpus(set)?);
        }
        out.insert(uid.clone(), map);
    }
    Ok(out)
}

fn operation(
    policy: &PolicyRuntime,
    request: &wit::ManagerRequest,
    topology: &wit::NodeTopology,
    node: &NodeSettings,
) -> Checked<ManagerOutcome<wit::ManagerResponse>> {
    call(policy.manager_operation(request, topology, node))
}

fn unexpected_response(response: &wit::ManagerResponse) -> String {
    format!("unexpected response {response:?}")
}

fn check_eq<T: PartialEq + std::fmt::Debug>(
    problems: &mut Vec<String>,
    what: &str,
    got: T,
    want: T,
) {
    if got != want {
        problems.push(format!("{what}: expected {want:?}, got {got:?}"));
    }
}

fn finish(problems: Vec<String>) -> CaseResultText {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// The expected error text of a case, when it expects one.
fn expected_error(expected: &Value, key: &str) -> Option<String> {
    expected
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Topology manager `Merge` (`input.policy`), per the file's `notes`.
fn merge_case(
    policy: &PolicyRuntime,
    file: &Value,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let info_name = input["numa_info"]
        .as_str()
        .ok_or("input.numa_info is not a string")?;
    let info = &file["numa_infos"][info_name];
    let nodes = info["nodes"].as_array().ok_or("numa info without nodes")?;
    let rows = info["distances"]
        .as_array()
        .ok_or("numa info without distances")?;
    let topology = wit::NodeTopology {
        cpus: Vec::new(),
        numa_nodes: nodes
            .iter()
            .zip(rows)
            .map(|(id, row)| {
                Ok(wit::NumaNodeInfo {
                    id: as_u32(id, "NUMA node")?,
                    memory_bytes: 0,
                    hugepages: Vec::new(),
                    distances: row
                        .as_array()
                        .ok_or("distance row is not a list")?
                        .iter()
                        .map(|d| as_u32(d, "distance"))
                        .collect::<Checked<Vec<u32>>>()?,
                })
            })
            .collect::<Checked<Vec<_>>>()?,
    };
    let mut node = node_with_gates(input);
    node.topology_manager_policy = input["policy"].as_str().map(str::to_string);
    node.topology_manager_policy_options = input["policy_options"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(name, value)| wit::PolicyOption {
                    name: name.clone(),
                    value: value.as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    let providers = input["providers_hints"]
        .as_array()
        .ok_or("input.providers_hints is not a list")?
        .iter()
        .map(|provider| -> Checked<wit::ProviderHints> {
            let Some(map) = provider.as_object() else {
                return Ok(None);
            };
            map.iter()
                .map(|(resource, hints)| {
                    Ok(wit::ResourceHints {
                        resource_name: resource.clone(),
                        hints: match hints.as_array() {
                            None => None,
                            Some(list) => {
                                Some(list.iter().map(vector_hint).collect::<Checked<Vec<_>>>()?)
                            }
                        },
                    })
                })
                .collect::<Checked<Vec<_>>>()
                .map(Some)
        })
        .collect::<Checked<Vec<_>>>()?;
    let request = wit::ManagerRequest::TopologyMerge(providers);
    let merged = match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Merged(merged)) => merged,
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => return Err(format!("the merge failed: {}", e.message)),
    };
    let mut problems = Vec::new();
    let want = vector_hint(&expected["hint"])?;
    check_eq(&mut problems, "hint", merged.hint, want);
    if let Some(admit) = expected.get("admit").and_then(Value::as_bool) {
        check_eq(&mut problems, "admit", merged.admit, admit);
    }
    finish(problems)
}

/// `takeByTopologyNUMAPacked` / `takeByTopologyNUMADistributed`.
fn take_case(
    policy: &PolicyRuntime,
    file: &Value,
    function: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let topology = vector_topology(file, input["topology"].as_str().unwrap_or_default())?;
    let request = wit::ManagerRequest::TakeCpus(wit::TakeCpusRequest {
        algorithm: if function == "takeByTopologyNUMAPacked" {
            wit::TakeAlgorithm::NumaPacked
        } else {
            wit::TakeAlgorithm::NumaDistributed
        },
        available: input["available"].as_str().unwrap_or_default().to_string(),
        num_cpus: as_u32(&input["num_cpus"], "num_cpus")?,
        cpu_group_size: input
            .get("cpu_group_size")
            .and_then(Value::as_u64)
            .map_or(Ok(1), |_| {
                as_u32(&input["cpu_group_size"], "cpu_group_size")
            })?,
        sorting: match input.get("sorting").and_then(Value::as_str) {
            Some("spread") => wit::CpuSortingStrategy::Spread,
            _ => wit::CpuSortingStrategy::Packed,
        },
        prefer_align_by_uncore_cache: input["prefer_align_by_uncore_cache"]
            .as_bool()
            .unwrap_or(false),
    });
    let got = operation(policy, &request, &topology, &empty_node())?;
    match (got, expected_error(expected, "error")) {
        (Ok(wit::ManagerResponse::Cpus(got)), None) => {
            let want = vector_cpus(&expected["cpuset"])?;
            let got = cpus(&got)?;
            if got == want {
                Ok(())
            } else {
                Err(format!("expected {want}, got {got}"))
            }
        }
        (Err(e), Some(want)) if e.message == want => Ok(()),
        (Err(e), want) => Err(format!("expected {want:?}, got error {:?}", e.message)),
        (Ok(other), want) => Err(format!("expected error {want:?}, got {other:?}")),
    }
}

/// Static CPU policy `Start` / `NewStaticPolicy+Start`.
fn cpu_start_case(
    policy: &PolicyRuntime,
    file: &Value,
    case_name: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let topology = vector_topology(file, input["topology"].as_str().unwrap_or_default())?;
    let node = static_cpu_node(input, case_name)?;
    let state = vector_cpu_state(&input["state"])?;
    let got = operation(policy, &wit::ManagerRequest::Start(state), &topology, &node)?;
    let want_new_policy = expected_error(expected, "new_policy_error");
    let want_start = expected_error(expected, "error");
    match got {
        Ok(wit::ManagerResponse::State(state)) => {
            if want_new_policy.is_some() || want_start.is_some() {
                return Err(format!(
                    "expected an error ({want_new_policy:?} / {want_start:?}), the state started"
                ));
            }
            match expected.get("default_cpuset") {
                Some(want) => {
                    let want = vector_cpus(want)?;
                    let got = cpus(&state.cpu.default_cpuset)?;
                    if got == want {
                        Ok(())
                    } else {
                        Err(format!("default cpuset: expected {want}, got {got}"))
                    }
                }
                None => Ok(()),
            }
        }
        Ok(other) => Err(unexpected_response(&other)),
        Err(e) => {
            let want = if e.function == "NewStaticPolicy" {
                want_new_policy
            } else {
                want_start
            };
            match want {
                Some(want) if want == e.message => Ok(()),
                want => Err(format!(
                    "{} failed with {:?}, expected {want:?}",
                    e.function, e.message
                )),
            }
        }
    }
}

/// Static CPU policy `Allocate(pod, container)` with the case's hint.
fn cpu_allocate_case(
    policy: &PolicyRuntime,
    file: &Value,
    case_name: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let topology = vector_topology(file, input["topology"].as_str().unwrap_or_default())?;
    let node = static_cpu_node(input, case_name)?;
    let uid = input["pod"]["uid"]
        .as_str()
        .ok_or("input.pod.uid is not a string")?;
    let container = input["container"]
        .as_str()
        .ok_or("input.container is not a string")?;
    let request = wit::ManagerRequest::Allocate(wit::ContainerRequest {
        manager: wit::ResourceManager::Cpu,
        state: vector_cpu_state(&input["state"])?,
        pod: vector_pod(&input["pod"], uid)?,
        container: container.to_string(),
        hint: vector_hint(&input["topology_hint"])?,
    });
    let want_error = expected_error(expected, "error");
    let want_allocated = expect_bool(expected, "allocated")?;
    let mut problems = Vec::new();
    match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Allocated(allocation)) => {
            check_eq(&mut problems, "error", None, want_error);
            let entries = cpu_entries(&allocation.state)?;
            let got = entries.get(uid).and_then(|c| c.get(container)).cloned();
            check_eq(&mut problems, "allocated", got.is_some(), want_allocated);
            if let Some(want) = expected.get("cpuset") {
                check_eq(
                    &mut problems,
                    "cpuset",
                    got.unwrap_or_default(),
                    vector_cpus(want)?,
                );
            }
        }
        Ok(other) => problems.push(unexpected_response(&other)),
        Err(e) => {
            check_eq(&mut problems, "error", Some(e.message), want_error);
            check_eq(&mut problems, "allocated", false, want_allocated);
        }
    }
    finish(problems)
}

/// Static CPU policy `allocateCPUs`.
fn allocate_cpus_case(
    policy: &PolicyRuntime,
    file: &Value,
    case_name: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let topology = vector_topology(file, input["topology"].as_str().unwrap_or_default())?;
    let node = static_cpu_node(input, case_name)?;
    let request = wit::ManagerRequest::AllocateCpus(wit::AllocateCpusRequest {
        state: vector_cpu_state(&input["state"])?,
        num_cpus: as_u32(&input["num_cpus"], "num_cpus")?,
        numa_affinity: vector_mask(&input["numa_affinity"])?,
        reusable: input["reusable_cpus"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    });
    match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::CpusAllocated(got)) => {
            let want = vector_cpus(&expected["cpuset"])?;
            let got = cpus(&got.cpus)?;
            if got == want {
                Ok(())
            } else {
                Err(format!("expected {want}, got {got}"))
            }
        }
        Ok(other) => Err(unexpected_response(&other)),
        Err(e) => Err(format!("unexpected error {:?}", e.message)),
    }
}

fn remove(
    policy: &PolicyRuntime,
    topology: &wit::NodeTopology,
    node: &NodeSettings,
    state: wit::ManagerState,
    pod_uid: &str,
    container: &str,
) -> Checked<wit::ManagerState> {
    let request = wit::ManagerRequest::RemoveContainer(wit::RemoveRequest {
        manager: wit::ResourceManager::Cpu,
        state,
        pod_uid: pod_uid.to_string(),
        container: container.to_string(),
    });
    match operation(policy, &request, topology, node)? {
        Ok(wit::ManagerResponse::State(state)) => Ok(state),
        Ok(other) => Err(unexpected_response(&other)),
        Err(e) => Err(format!("unexpected error {:?}", e.message)),
    }
}

/// Static CPU policy `RemoveContainer`.
fn cpu_remove_case(
    policy: &PolicyRuntime,
    file: &Value,
    case_name: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let topology = vector_topology(file, input["topology"].as_str().unwrap_or_default())?;
    let node = static_cpu_node(input, case_name)?;
    let uid = input["pod_uid"]
        .as_str()
        .ok_or("input.pod_uid is not a string")?;
    let container = input["container"]
        .as_str()
        .ok_or("input.container is not a string")?;
    let state = remove(
        policy,
        &topology,
        &node,
        vector_cpu_state(&input["state"])?,
        uid,
        container,
    )?;
    let mut problems = Vec::new();
    check_eq(
        &mut problems,
        "default cpuset",
        cpus(&state.cpu.default_cpuset)?,
        vector_cpus(&expected["default_cpuset"])?,
    );
    let removed = !cpu_entries(&state)?
        .get(uid)
        .is_some_and(|c| c.contains_key(container));
    check_eq(
        &mut problems,
        "container removed",
        removed,
        expect_bool(expected, "container_removed")?,
    );
    finish(problems)
}

/// `Allocate` for every init then app container (then, optionally, `RemoveContainer`).
fn cpu_sequence_case(
    policy: &PolicyRuntime,
    file: &Value,
    case_name: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let topology = vector_topology(file, input["topology"].as_str().unwrap_or_default())?;
    let node = static_cpu_node(input, case_name)?;
    let uid = input["pod"]["uid"]
        .as_str()
        .ok_or("input.pod.uid is not a string")?;
    let request = wit::ManagerRequest::AllocateContainers(wit::PodRequest {
        manager: wit::ResourceManager::Cpu,
        state: vector_cpu_state(&input["state"])?,
        pod: vector_pod(&input["pod"], uid)?,
        hint: vector_hint(&Value::Null)?,
    });
    let allocated = match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Allocated(allocation)) => allocation.state,
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => return Err(format!("unexpected error {:?}", e.message)),
    };
    let mut problems = Vec::new();
    check_eq(
        &mut problems,
        "default cpuset after allocation",
        cpus(&allocated.cpu.default_cpuset)?,
        vector_cpus(&expected["default_cpuset_after_alloc"])?,
    );
    if let Some(container) = input.get("remove_container").and_then(Value::as_str) {
        let after = remove(policy, &topology, &node, allocated, uid, container)?;
        check_eq(
            &mut problems,
            "default cpuset after removal",
            cpus(&after.cpu.default_cpuset)?,
            vector_cpus(&expected["default_cpuset_after_remove"])?,
        );
    }
    finish(problems)
}

fn names(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// KEP-5526 `AllocatePod` (pod scope) and `AllocateContainerScope`
/// (`Allocate` per container), with the checks both files' `notes` ask for.
fn pod_allocation_case(
    policy: &PolicyRuntime,
    file: &Value,
    function: &str,
    case_name: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let topology = vector_topology(file, input["topology"].as_str().unwrap_or_default())?;
    let node = static_cpu_node(input, case_name)?;
    let uid = input["pod"]["uid"]
        .as_str()
        .ok_or("input.pod.uid is not a string")?;
    let start_state = vector_cpu_state(&input["state"])?;
    let pod_request = wit::PodRequest {
        manager: wit::ResourceManager::Cpu,
        state: start_state.clone(),
        pod: vector_pod(&input["pod"], uid)?,
        hint: vector_hint(&input["topology_hint"])?,
    };
    let request = if function == "AllocatePod" {
        wit::ManagerRequest::AllocatePod(pod_request)
    } else {
        wit::ManagerRequest::AllocateContainers(pod_request)
    };
    let want_error = expected_error(expected, "error");
    let mut problems = Vec::new();
    let (state, assignment) = match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Allocated(allocation)) => {
            check_eq(&mut problems, "error", None, want_error.clone());
            (allocation.state, Some(allocation.assignment))
        }
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => {
            check_eq(
                &mut problems,
                "error",
                Some(e.reason.clone()),
                want_error.clone(),
            );
            (start_state, None)
        }
    };
    if let Some(admitted) = expected.get("admitted").and_then(Value::as_bool) {
        check_eq(&mut problems, "admitted", assignment.is_some(), admitted);
    }
    if let Some(want) = expected.get("assignments") {
        check_eq(
            &mut problems,
            "assignments",
            cpu_entries(&state)?,
            vector_entries(want)?,
        );
    }
    if let Some(want) = expected.get("default_cpuset") {
        check_eq(
            &mut problems,
            "default cpuset",
            cpus(&state.cpu.default_cpuset)?,
            vector_cpus(want)?,
        );
    }
    let Some(assignment) = assignment else {
        return finish(problems);
    };
    let level = |want: wit::CpuIsolation| -> BTreeMap<String, Option<String>> {
        assignment
            .containers
            .iter()
            .filter(|c| c.cpu_isolation == want)
            .map(|c| (c.name.clone(), c.cpuset.clone()))
            .collect()
    };
    let exclusive = level(wit::CpuIsolation::Container);
    let pod_shared = level(wit::CpuIsolation::Pod);
    let node_shared: BTreeSet<String> = level(wit::CpuIsolation::Host).into_keys().collect();
    let metrics = &expected["metrics"];
    if let Some(allocs) = metrics.get("allocs").and_then(Value::as_u64) {
        let held = cpu_entries(&state)?.get(uid).map_or(0, BTreeMap::len);
        check_eq(&mut problems, "allocs", held as u64, allocs);
    }
    if let Some(n) = metrics.get("exclusive_assignments").and_then(Value::as_u64) {
        check_eq(
            &mut problems,
            "exclusive assignments",
            exclusive.len() as u64,
            n,
        );
    }
    if let Some(n) = metrics
        .get("pod_shared_pool_assignments")
        .and_then(Value::as_u64)
    {
        check_eq(
            &mut problems,
            "pod shared pool assignments",
            pod_shared.len() as u64,
            n,
        );
    }
    let set = |text: &Option<String>| text.as_deref().map_or(Ok(CpuSet::new()), cpus);
    let pod_set = set(&assignment.pod_cpuset)?;
    let pool = set(&assignment.pod_shared_pool)?;
    if let Some(size) = expected.get("podSetSize").and_then(Value::as_u64) {
        check_eq(&mut problems, "pod set size", pod_set.len() as u64, size);
    }
    if let Some(want) = expected.get("exclusiveSizes").and_then(Value::as_object) {
        let want: BTreeMap<String, u64> = want
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(u64::MAX)))
            .collect();
        let got = exclusive
            .iter()
            .map(|(k, v)| Ok((k.clone(), set(v)?.len() as u64)))
            .collect::<Checked<BTreeMap<_, _>>>()?;
        check_eq(&mut problems, "exclusive sizes", got, want);
    }
    if let Some(size) = expected.get("sharedPoolSize").and_then(Value::as_u64) {
        check_eq(&mut problems, "shared pool size", pool.len() as u64, size);
    }
    if let Some(want) = expected.get("nodeSharedContainers") {
        check_eq(
            &mut problems,
            "node shared containers",
            node_shared,
            names(want),
        );
    }
    let long_running: Vec<&wit::ContainerAssignment> = assignment
        .containers
        .iter()
        .filter(|c| c.kind != wit::ContainerKind::Init)
        .collect();
    if let Some(want) = expected.get("sharedContainers") {
        let want = names(want);
        let got: BTreeSet<String> = long_running
            .iter()
            .filter(|c| c.cpu_isolation == wit::CpuIsolation::Pod)
            .map(|c| c.name.clone())
            .collect();
        check_eq(&mut problems, "shared containers", got, want.clone());
        for name in &want {
            let got = pod_shared.get(name).map(set).transpose()?;
            check_eq(
                &mut problems,
                &format!("{name} gets the pod shared pool"),
                got,
                Some(pool.clone()),
            );
        }
    }
    if expected.get("admitted").is_some() {
        // kep-derived notes: exclusive long-running slices are pairwise
        // disjoint, disjoint from the pool, and everything is inside the pod set.
        let default = cpus(&state.cpu.default_cpuset)?;
        let slices = long_running
            .iter()
            .filter(|c| c.cpu_isolation == wit::CpuIsolation::Container)
            .map(|c| Ok((c.name.clone(), set(&c.cpuset)?)))
            .collect::<Checked<Vec<_>>>()?;
        for (i, (a, a_cpus)) in slices.iter().enumerate() {
            for (b, b_cpus) in &slices[i + 1..] {
                if !a_cpus.is_disjoint(b_cpus) {
                    problems.push(format!("{a} ({a_cpus}) overlaps {b} ({b_cpus})"));
                }
            }
            if !a_cpus.is_disjoint(&pool) {
                problems.push(format!(
                    "{a} ({a_cpus}) overlaps the pod shared pool ({pool})"
                ));
            }
        }
        for (name, cpuset) in exclusive.iter().chain(pod_shared.iter()) {
            let cpuset = set(cpuset)?;
            if !pod_set.is_empty() && !cpuset.is_subset_of(&pod_set) {
                problems.push(format!(
                    "{name} ({cpuset}) is outside the pod set ({pod_set})"
                ));
            }
            if !cpuset.is_disjoint(&default) {
                problems.push(format!("{name} ({cpuset}) holds shared-pool CPUs"));
            }
        }
    }
    finish(problems)
}

/// The memory vectors' state: `assignments` (pod -> container -> blocks) on
/// the default machine state.
fn vector_memory_state(value: &Value) -> Checked<wit::ManagerState> {
    let mut state = crate::empty_manager_state();
    state.memory.policy_name = "Static".into();
    for (uid, containers) in value.as_object().into_iter().flatten() {
        let mut entry = wit::PodMemoryEntries {
            pod_uid: uid.clone(),
            containers: Vec::new(),
        };
        for (name, blocks) in containers.as_object().into_iter().flatten() {
            let blocks = blocks
                .as_array()
                .ok_or("blocks are not a list")?
                .iter()
                .map(|b| {
                    Ok(wit::MemoryBlock {
                        numa_affinity: vector_mask(&b["numaAffinity"])?.unwrap_or_default(),
                        resource_name: b["type"].as_str().unwrap_or_default().to_string(),
                        size: b["size"].as_u64().ok_or("block size is not a number")?,
                    })
                })
                .collect::<Checked<Vec<_>>>()?;
            entry.containers.push(wit::ContainerMemory {
                container: name.clone(),
                blocks,
            });
        }
        state.memory.entries.push(entry);
    }
    Ok(state)
}

fn memory_node() -> (wit::NodeTopology, NodeSettings) {
    let (topology, reserved) = memory_test_machine();
    let node = NodeSettings {
        memory_manager_policy: Some("Static".into()),
        reserved_memory: reserved,
        ..empty_node()
    };
    (topology, node)
}

/// Memory manager `GetTopologyHints` (container scope).
fn memory_hints_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    let uid = input["pod_uid"]
        .as_str()
        .ok_or("input.pod_uid is not a string")?;
    let name = input["container"]
        .as_str()
        .ok_or("input.container is not a string")?;
    let resources = &input["container_resources"];
    // A string describes upstream's burstable requirements (requests != limits).
    let container = if resources.is_object() {
        serde_json::json!({"name": name, "requests": resources["requests"], "limits": resources["limits"]})
    } else {
        serde_json::json!({"name": name, "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}})
    };
    let pod = vector_pod(&serde_json::json!({"containers": [container]}), uid)?;
    let (topology, node) = memory_node();
    let request = wit::ManagerRequest::TopologyHints(wit::HintsRequest {
        manager: wit::ResourceManager::Memory,
        state: vector_memory_state(&input["assignments"])?,
        pod,
        container: Some(name.to_string()),
    });
    let hints = match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Hints(hints)) => hints,
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => return Err(format!("unexpected error {:?}", e.message)),
    };
    let want: Option<BTreeMap<String, Vec<wit::TopologyHint>>> = match &expected["hints"] {
        Value::Null => None,
        Value::Object(map) => Some(
            map.iter()
                .map(|(resource, list)| {
                    let list = list
                        .as_array()
                        .ok_or("hint list is not a list")?
                        .iter()
                        .map(vector_hint)
                        .collect::<Checked<Vec<_>>>()?;
                    Ok((resource.clone(), list))
                })
                .collect::<Checked<BTreeMap<_, _>>>()?,
        ),
        other => return Err(format!("expected.hints: unexpected {other}")),
    };
    let got = match hints {
        None => None,
        Some(list) => Some(
            list.into_iter()
                .map(|r| Ok((r.resource_name, r.hints.ok_or("a nil hint list")?)))
                .collect::<Checked<BTreeMap<_, _>>>()?,
        ),
    };
    if got == want {
        Ok(())
    } else {
        Err(format!("expected {want:?}, got {got:?}"))
    }
}

/// Memory manager `getPodRequestedResources`.
fn memory_requested_case(
    policy: &PolicyRuntime,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let pod = vector_pod(input, "pod")?;
    let (topology, node) = memory_node();
    let request = wit::ManagerRequest::PodRequested(wit::PodRequestedRequest {
        manager: wit::ResourceManager::Memory,
        pod,
    });
    let got: BTreeMap<String, u64> = match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Requested(list)) => list
            .into_iter()
            .map(|r| (r.resource_name, r.amount))
            .collect(),
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => return Err(format!("unexpected error {:?}", e.message)),
    };
    let want: BTreeMap<String, u64> = expected["requested"]
        .as_object()
        .ok_or("expected.requested is not a map")?
        .iter()
        .map(|(k, v)| Ok((k.clone(), v.as_u64().ok_or("not a byte count")?)))
        .collect::<Checked<_>>()?;
    if got == want {
        Ok(())
    } else {
        Err(format!("expected {want:?}, got {got:?}"))
    }
}
