//! The conformance runner: vector files of the shape described in
//! `shared/vectors/README.md`, every case run through the component's
//! public interface and compared with its `expected`.
//!
//! Each upstream function a case names maps to one adapter that builds the
//! WIT inputs, calls the component and compares. Quantities compare
//! numerically (as `Quantity.Cmp`). A case is skipped only when it tests an
//! upstream internal the interface does not expose, and the reason is
//! printed; a function no adapter knows fails, naming itself.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use policy_wasm::quantity::Quantity;
use serde_json::{Map, Value};

use crate::bindings::{
    self as wit, FeatureGate, NodeSettings, PodResourcesOptions, QosClass, ResourceAmount,
};
use crate::pod_input::pod_from_json;
use crate::runtime::PolicyRuntime;
use crate::{empty_node, format_field_errors};

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
pub fn run_case(policy: &PolicyRuntime, _file: &Value, case: &Value) -> Outcome {
    let function = case_function(case);
    let input = &case["input"];
    let expected = &case["expected"];
    let result = match function.as_str() {
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
