//! The conformance runner: vector files of the shape described in
//! `tests/vectors/README.md` (the repository's copy of the shared vectors),
//! every case run through the component's public interface and compared
//! with its `expected`.
//!
//! Each upstream function a case names maps to one adapter that builds the
//! WIT inputs, calls the component and compares. Quantities compare
//! numerically (as `Quantity.Cmp`). A case is skipped only when it tests an
//! upstream internal the interface does not expose, and the reason is
//! printed; a function no adapter knows fails, naming itself.
//!
//! Every adapter reads every input field its function has (the ones the
//! files' `notes` define, not only the ones the shared cases vary) and
//! compares every `expected` field; a field it does not know, at the top of
//! `input` / `expected` or inside the vector shapes it decodes (options,
//! vector pods and containers, states, hints, machine states, error
//! objects), fails the case, so a vector with a new field cannot pass
//! vacuously. Expected errors are strings (an exact message, or a type
//! where the file says so), objects `{type, message, field}`, or lists of
//! either.
//!
//! The upstream corpus (`tests/vectors/upstream/`, see its README) adds the
//! functions `Evaluate`, `PodResize`, `NodeCgroups`, `ValidateNode`,
//! `GetWarningsForPod` and `Admit`, defined in each of its files' `notes`
//! and on their adapters below.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use policy_wasm::cpuset::CpuSet;
use policy_wasm::quantity::Quantity;
use serde_json::{Map, Value};

use crate::bindings::{
    self as wit, FeatureGate, KubeletName as _, NodeSettings, PodResourcesOptions, QosClass,
    ResourceAmount,
};
use crate::pod_input::pod_from_json;
use crate::runtime::PolicyRuntime;
use crate::{ManagerOutcome, empty_node, format_field_errors};

mod memory_manager;

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
    let dispatch = DISPATCH_KEYS
        .iter()
        .filter(|k| input.get(**k).is_some())
        .count();
    if dispatch > 1 {
        return Outcome::Fail(format!(
            "the input names its function more than once ({})",
            DISPATCH_KEYS.join("/")
        ));
    }
    let result = match function.as_str() {
        "best-effort" | "restricted" | "single-numa-node" | "none" => {
            merge_case(policy, file, input, expected)
        }
        "takeByTopologyNUMAPacked" | "takeByTopologyNUMADistributed" => {
            take_case(policy, file, &function, input, expected)
        }
        // Both static policies have these; the memory manager's cases say
        // so by their file or their fields.
        "Start"
        | "Allocate"
        | "Allocate all (init then app)"
        | "AllocatePod"
        | "RemoveContainer"
        | "GetTopologyHints"
        | "GetPodTopologyHints"
            if memory_manager::is_memory_case(file, input) =>
        {
            memory_manager::memory_policy_case(policy, &function, input, expected)
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
        "GetTopologyHints" | "GetPodTopologyHints" => {
            cpu_hints_case(policy, file, &function, name, input, expected)
        }
        "getPodRequestedResources" => {
            memory_manager::memory_requested_case(policy, input, expected)
        }
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
        "Evaluate" => evaluate_case(policy, file, input, expected),
        "PodResize" => pod_resize_case(policy, file, input, expected),
        "NodeCgroups" => node_cgroups_case(policy, file, input, expected),
        "ValidateNode" => validate_node_case(policy, file, input, expected),
        "GetWarningsForPod" => warnings_case(policy, input, expected),
        "Admit" => admit_case(policy, file, input, expected),
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

// ----------------------------------------------------------------------
// The vector contract: every field a case carries is either read by its
// adapter or the case fails, so a vector with a field this runner does not
// know cannot pass vacuously.
// ----------------------------------------------------------------------

/// The keys that name a case's function; exactly one of them is given.
const DISPATCH_KEYS: [&str; 3] = ["function", "operation", "policy"];

/// Fail unless `value` is an object whose keys are all in `known`.
fn known_keys(what: &str, value: &Value, known: &[&str]) -> CaseResultText {
    let Some(map) = value.as_object() else {
        return Err(format!("{what} is not an object: {value}"));
    };
    let unknown: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|k| !known.contains(k))
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{what} has field(s) the runner does not understand: {} (known: {}); \
             the case cannot be checked",
            unknown.join(", "),
            known.join(", ")
        ))
    }
}

/// As [`known_keys`] for an optional object: absent (`Value::Null`) is fine.
fn known_keys_opt(what: &str, value: &Value, known: &[&str]) -> CaseResultText {
    if value.is_null() {
        Ok(())
    } else {
        known_keys(what, value, known)
    }
}

/// The case's `input` carries only `known` fields (besides its dispatch key).
fn input_fields(input: &Value, known: &[&str]) -> CaseResultText {
    let all: Vec<&str> = DISPATCH_KEYS.iter().chain(known).copied().collect();
    known_keys("input", input, &all)
}

/// The case's `expected` carries only `known` fields: each one is compared.
fn expected_fields(expected: &Value, known: &[&str]) -> CaseResultText {
    known_keys("expected", expected, known)
}

/// `input[key]` as an optional whole number: absent or `null` is `None`,
/// anything else must be a non-negative integer.
fn opt_u64(value: &Value, key: &str) -> Checked<Option<u64>> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{key} is not a non-negative integer: {v}")),
    }
}

/// `input[key]` as an optional number (absent or `null` = `None`).
fn opt_f64(value: &Value, key: &str) -> Checked<Option<f64>> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| format!("{key} is not a number: {v}")),
    }
}

/// `input[key]` as an optional boolean (absent or `null` = `None`).
fn opt_bool(value: &Value, key: &str) -> Checked<Option<bool>> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_bool()
            .map(Some)
            .ok_or_else(|| format!("{key} is not a boolean: {v}")),
    }
}

/// `input[key]` as an optional string (absent or `null` = `None`).
fn opt_str<'a>(value: &'a Value, key: &str) -> Checked<Option<&'a str>> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_str()
            .map(Some)
            .ok_or_else(|| format!("{key} is not a string: {v}")),
    }
}

/// `input[key]`, a closed set, by its KubeletConfiguration name.
fn kubelet_enum<T: wit::KubeletName>(value: &Value, key: &str) -> Checked<Option<T>> {
    match opt_str(value, key)? {
        None => Ok(None),
        Some(name) => T::from_kubelet_name(name).map(Some).ok_or_else(|| {
            let known: Vec<&str> = T::ALL.iter().map(|v| v.kubelet_name()).collect();
            format!("{key} `{name}` is not one of {}", known.join(", "))
        }),
    }
}

/// `input[key]` as a required string.
fn req_str<'a>(value: &'a Value, key: &str) -> Checked<&'a str> {
    opt_str(value, key)?.ok_or_else(|| format!("{key} is missing"))
}

/// `featureGates` (or the manager files' `feature_gates`): gate -> bool.
/// Absent gates keep the Kubernetes 1.36 defaults (the component's).
fn gates(input: &Value) -> Checked<Vec<FeatureGate>> {
    let gates = match (input.get("featureGates"), input.get("feature_gates")) {
        (Some(_), Some(_)) => {
            return Err("input has both featureGates and feature_gates".to_string());
        }
        (Some(g), None) | (None, Some(g)) => g,
        (None, None) => return Ok(Vec::new()),
    };
    match gates {
        Value::Null => Ok(Vec::new()),
        Value::Object(m) => m
            .iter()
            .map(|(name, v)| {
                v.as_bool()
                    .map(|enabled| FeatureGate {
                        name: name.clone(),
                        enabled,
                    })
                    .ok_or_else(|| format!("feature gate {name} is not a boolean: {v}"))
            })
            .collect(),
        other => Err(format!("featureGates is not a map: {other}")),
    }
}

/// Set (or replace) one gate.
fn set_gate(node: &mut NodeSettings, name: &str, enabled: bool) {
    node.feature_gates.retain(|g| g.name != name);
    node.feature_gates.push(FeatureGate {
        name: name.into(),
        enabled,
    });
}

fn node_with_gates(input: &Value) -> Checked<NodeSettings> {
    Ok(NodeSettings {
        feature_gates: gates(input)?,
        ..empty_node()
    })
}

// ----------------------------------------------------------------------
// Expected errors: a string (its meaning is the file's: an exact message,
// or an error type), an object `{type|reason, message, field}`, or a list
// of either.
// ----------------------------------------------------------------------

/// What a bare string stands for in a file's expected errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StringIs {
    /// The error's text (`err.Error()`).
    Message,
    /// The error's type (`Type()`, e.g. `EmptyPodSharedPoolError`).
    Type,
}

/// One expected error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct WantError {
    /// `type` (or `reason`).
    kind: Option<String>,
    /// `message`.
    message: Option<String>,
    /// `field`: a field path (prefix).
    field: Option<String>,
}

impl std::fmt::Display for WantError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(k) = &self.kind {
            parts.push(format!("type {k:?}"));
        }
        if let Some(m) = &self.message {
            parts.push(format!("message {m:?}"));
        }
        if let Some(p) = &self.field {
            parts.push(format!("field {p:?}"));
        }
        write!(f, "{{{}}}", parts.join(", "))
    }
}

fn want_error(value: &Value, strings: StringIs) -> Checked<WantError> {
    match value {
        Value::String(s) => Ok(match strings {
            StringIs::Message => WantError {
                message: Some(s.clone()),
                ..WantError::default()
            },
            StringIs::Type => WantError {
                kind: Some(s.clone()),
                ..WantError::default()
            },
        }),
        Value::Object(_) => {
            known_keys(
                "an expected error",
                value,
                &["type", "reason", "message", "field"],
            )?;
            let kind = match (opt_str(value, "type")?, opt_str(value, "reason")?) {
                (Some(a), Some(b)) if a != b => {
                    return Err(format!("an expected error has type {a:?} and reason {b:?}"));
                }
                (a, b) => a.or(b).map(str::to_string),
            };
            let want = WantError {
                kind,
                message: opt_str(value, "message")?.map(str::to_string),
                field: opt_str(value, "field")?.map(str::to_string),
            };
            if want == WantError::default() {
                return Err("an expected error object names no type, message or field".into());
            }
            Ok(want)
        }
        other => Err(format!(
            "an expected error is neither a string nor an object: {other}"
        )),
    }
}

/// The errors `expected[key]` (for each of `keys`) expects; `None` when no
/// key is given, an empty list when they are `null` or `[]` (no error).
fn want_errors(
    expected: &Value,
    keys: &[&str],
    strings: StringIs,
) -> Checked<Option<Vec<WantError>>> {
    let mut out: Option<Vec<WantError>> = None;
    for key in keys {
        let Some(value) = expected.get(*key) else {
            continue;
        };
        let list = out.get_or_insert_with(Vec::new);
        match value {
            Value::Null => {}
            Value::Array(items) => {
                for item in items {
                    list.push(
                        want_error(item, strings).map_err(|e| format!("expected.{key}: {e}"))?,
                    );
                }
            }
            one => list.push(want_error(one, strings).map_err(|e| format!("expected.{key}: {e}"))?),
        }
    }
    Ok(out)
}

/// The kubelet's name for a manager error kind (`Type()` of its Go error).
fn manager_kind_names(kind: &wit::ManagerErrorKind) -> &'static [&'static str] {
    use wit::ManagerErrorKind as K;
    match kind {
        K::Configuration => &["configuration"],
        K::TopologyAffinity => &["topology-affinity", "TopologyAffinityError"],
        K::SmtAlignment(_) => &["smt-alignment", "SMTAlignmentError"],
        K::EmptyPodSharedPool => &["empty-pod-shared-pool", "EmptyPodSharedPoolError"],
        K::UnexpectedAdmission => &["unexpected-admission", "UnexpectedAdmissionError"],
    }
}

/// Whether a manager error is the expected one: its type is the error's
/// admission reason, kind or failing function; its message is equal (the
/// manager files: "error strings are the exact Go error texts"). Manager
/// errors carry no field path, so an expected `field` never matches.
fn manager_error_matches(want: &WantError, got: &wit::ManagerError) -> bool {
    let kind_ok = want.kind.as_deref().is_none_or(|k| {
        (!got.reason().is_empty() && k == got.reason())
            || k == got.function
            || manager_kind_names(&got.kind).contains(&k)
    });
    let message_ok = want.message.as_deref().is_none_or(|m| m == got.message);
    kind_ok && message_ok && want.field.is_none()
}

/// Compare a manager operation's error (or success) with the expected errors
/// (`None`/empty: no error expected); every expected entry must match.
fn check_manager_error(
    problems: &mut Vec<String>,
    want: &[WantError],
    got: Option<&wit::ManagerError>,
) {
    match (want.is_empty(), got) {
        (true, None) => {}
        (true, Some(e)) => problems.push(format!(
            "unexpected error from {}: {} {:?}",
            e.function,
            e.reason(),
            e.message
        )),
        (false, None) => problems.push(format!(
            "expected error {}, the call succeeded",
            want.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        (false, Some(e)) => {
            for w in want {
                if !manager_error_matches(w, e) {
                    let field = if w.field.is_some() {
                        " (manager errors have no field path)"
                    } else {
                        ""
                    };
                    problems.push(format!(
                        "expected error {w}{field}, got {:?} from {} (reason {:?}, kind {:?})",
                        e.message,
                        e.function,
                        e.reason(),
                        e.kind
                    ));
                }
            }
        }
    }
}

/// The WIT reason a Kubernetes `field.ErrorType` name stands for: its Go
/// constant (`FieldValueInvalid`), its short name (`Invalid`), its `String()`
/// (`Invalid value`) or the WIT name (`invalid`).
fn reason_from_name(name: &str) -> Checked<wit::ErrorReason> {
    use wit::ErrorReason as R;
    Ok(match name {
        "FieldValueInvalid" | "Invalid" | "Invalid value" | "invalid" => R::Invalid,
        "FieldValueForbidden" | "Forbidden" | "forbidden" => R::Forbidden,
        "FieldValueNotSupported" | "NotSupported" | "Unsupported value" | "not-supported" => {
            R::NotSupported
        }
        "FieldValueRequired" | "Required" | "Required value" | "required" => R::Required,
        "FieldValueDuplicate" | "Duplicate" | "Duplicate value" | "duplicate" => R::Duplicate,
        "FieldValueTooLong" | "TooLong" | "Too long" | "FieldValueTooMany" | "TooMany"
        | "Too many" | "too-long" => R::TooLong,
        other => return Err(format!("unknown field error type `{other}`")),
    })
}

/// Whether a field error is the expected one: same reason, a field path equal
/// to or extending the expected one, a message containing the expected one
/// (a bare string may also match the rendered `field: message (Reason)` line).
fn field_error_matches(want: &WantError, got: &wit::FieldError) -> Checked<bool> {
    let reason_ok = match want.kind.as_deref() {
        None => true,
        Some(k) => reason_from_name(k)? == got.reason,
    };
    let field_ok = want
        .field
        .as_deref()
        .is_none_or(|f| got.field.starts_with(f));
    let message_ok = want.message.as_deref().is_none_or(|m| {
        got.message.contains(m) || format_field_errors(std::slice::from_ref(got)).contains(m)
    });
    Ok(reason_ok && field_ok && message_ok)
}

/// Every expected error matched by a distinct actual one (extra actual errors allowed).
fn check_field_errors(want: &[WantError], got: &[wit::FieldError]) -> CaseResultText {
    let mut used = vec![false; got.len()];
    for w in want {
        let mut found = None;
        for (i, e) in got.iter().enumerate() {
            if !used[i] && field_error_matches(w, e)? {
                found = Some(i);
                break;
            }
        }
        match found {
            Some(i) => used[i] = true,
            None => {
                return Err(format!(
                    "expected an error {w}; got:\n{}",
                    format_field_errors(got)
                ));
            }
        }
    }
    Ok(())
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

/// `input.options`: Go `PodResourcesOptions` in lowerCamelCase; missing = false/nil.
fn options(input: &Value) -> Checked<PodResourcesOptions> {
    let o = &input["options"];
    known_keys_opt(
        "input.options",
        o,
        &[
            "excludeOverhead",
            "useStatusResources",
            "inPlacePodLevelResourcesVerticalScalingEnabled",
            "nonMissingContainerRequests",
            "skipPodLevelResources",
            "skipContainerLevelResources",
        ],
    )?;
    let flag = |k: &str| opt_bool(o, k).map(Option::unwrap_or_default);
    let non_missing = match o.get("nonMissingContainerRequests") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(
            m.iter()
                .map(|(name, q)| {
                    Ok(wit::ResourceQuantity {
                        name: name.clone(),
                        quantity: quantity_text(q).ok_or_else(|| {
                            format!("nonMissingContainerRequests[{name}] is not a quantity: {q}")
                        })?,
                    })
                })
                .collect::<Checked<Vec<_>>>()?,
        ),
        Some(other) => return Err(format!("nonMissingContainerRequests is not a map: {other}")),
    };
    Ok(PodResourcesOptions {
        exclude_overhead: flag("excludeOverhead")?,
        use_status_resources: flag("useStatusResources")?,
        in_place_pod_level_resources_vertical_scaling_enabled: flag(
            "inPlacePodLevelResourcesVerticalScalingEnabled",
        )?,
        non_missing_container_requests: non_missing,
        skip_pod_level_resources: flag("skipPodLevelResources")?,
        skip_container_level_resources: flag("skipContainerLevelResources")?,
    })
}

fn effective_case(
    policy: &PolicyRuntime,
    function: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    input_fields(input, &["pod", "options", "featureGates"])?;
    expected_fields(expected, &["requests", "limits"])?;
    let pod = pod(&input["pod"])?;
    let eff = call(policy.effective_resources(&pod, &options(input)?, &node_with_gates(input)?))?;
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
    input_fields(input, &["pod", "options", "featureGates"])?;
    expected_fields(expected, &["result"])?;
    let pod = pod(&input["pod"])?;
    let eff = call(policy.effective_resources(&pod, &options(input)?, &node_with_gates(input)?))?;
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
    input_fields(input, &["resourceName", "featureGates"])?;
    expected_fields(expected, &["result"])?;
    let name = req_str(input, "resourceName")?;
    let pod = pod(&serde_json::json!({
        "spec": {"resources": {"limits": {name: "1Gi"}}, "containers": [{"name": "c"}]}
    }))?;
    let errors = policy
        .validate_pod(&pod, &node_with_gates(input)?)
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

/// An optional integer of `expected` (absent = not asserted).
fn expected_i64(expected: &Value, key: &str) -> Checked<Option<i64>> {
    match expected.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("expected.{key} is not an integer: {v}")),
    }
}

/// `GetContainerOOMScoreAdjust`: `oomScoreAdj` exact, `oomScoreAdjMin` /
/// `oomScoreAdjMax` bounds; each one given is checked.
fn oom_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    input_fields(
        input,
        &["pod", "containerName", "memoryCapacity", "featureGates"],
    )?;
    expected_fields(
        expected,
        &["oomScoreAdj", "oomScoreAdjMin", "oomScoreAdjMax"],
    )?;
    let pod = pod(&input["pod"])?;
    let capacity = quantity_text(&input["memoryCapacity"])
        .ok_or("input.memoryCapacity is not a quantity (bytes)")?;
    let node = NodeSettings {
        capacity: vec![wit::ResourceQuantity {
            name: "memory".into(),
            quantity: capacity,
        }],
        ..node_with_gates(input)?
    };
    let name = req_str(input, "containerName")?;
    let scores = call(policy.oom_score_adjust(&pod, &node))?;
    let (_, got) = scores
        .iter()
        .find(|(n, _)| n == name)
        .ok_or_else(|| format!("no score for container `{name}`"))?;
    let got = i64::from(*got);
    let exact = expected_i64(expected, "oomScoreAdj")?;
    let low = expected_i64(expected, "oomScoreAdjMin")?;
    let high = expected_i64(expected, "oomScoreAdjMax")?;
    if exact.is_none() && low.is_none() && high.is_none() {
        return Err("no expected score".into());
    }
    let mut problems = Vec::new();
    if let Some(want) = exact
        && got != want
    {
        problems.push(format!("expected {want}, got {got}"));
    }
    if let Some(low) = low
        && got < low
    {
        problems.push(format!("expected at least {low}, got {got}"));
    }
    if let Some(high) = high
        && got > high
    {
        problems.push(format!("expected at most {high}, got {got}"));
    }
    finish(problems)
}

fn reservation_policy(
    input: &Value,
) -> std::result::Result<Option<wit::MemoryReservationPolicy>, String> {
    Ok(match opt_str(input, "memoryReservationPolicy")? {
        None => None,
        Some("None") => Some(wit::MemoryReservationPolicy::None),
        Some("HardReservation") => Some(wit::MemoryReservationPolicy::HardReservation),
        Some("TieredReservation") => Some(wit::MemoryReservationPolicy::TieredReservation),
        Some(other) => return Err(format!("unknown memoryReservationPolicy `{other}`")),
    })
}

/// `ResourceConfigForPod(pod, enforceCPULimits, cpuPeriod, enforceMemoryQoS)`
/// with the reservation policy and gates as node settings.
fn resource_config_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    input_fields(
        input,
        &[
            "pod",
            "featureGates",
            "enforceCPULimits",
            "cpuPeriod",
            "enforceMemoryQoS",
            "memoryReservationPolicy",
        ],
    )?;
    expected_fields(
        expected,
        &[
            "cpuShares",
            "cpuQuota",
            "cpuPeriod",
            "memory",
            "hugePageLimit",
            "unified",
        ],
    )?;
    let pod = pod(&input["pod"])?;
    let mut node = node_with_gates(input)?;
    node.cpu_cfs_quota = opt_bool(input, "enforceCPULimits")?;
    // Without CustomCPUCFSQuotaPeriod the kubelet forces the 100ms period
    // (MilliCPUToQuota ignores its argument, and config validation rejects
    // another), so the Go argument only reaches the node settings when the gate is on.
    let custom_period = node
        .feature_gates
        .iter()
        .any(|g| g.name == "CustomCPUCFSQuotaPeriod" && g.enabled);
    node.cpu_cfs_quota_period_us =
        opt_u64(input, "cpuPeriod")?.filter(|p| *p != 0 && custom_period);
    // The Go argument decides whether memory QoS values are computed at all.
    if let Some(enforce) = opt_bool(input, "enforceMemoryQoS")? {
        set_gate(&mut node, "MemoryQoS", enforce);
    }
    node.memory_reservation_policy = reservation_policy(input)?;
    let rc = call(policy.pod_resource_config(&pod, &node))?;
    let mut problems = Vec::new();
    let mut check = |key: &str, got: Option<i128>| -> CaseResultText {
        if let Some(want) = expected.get(key) {
            let want = match want {
                Value::Null => None,
                v => Some(
                    v.as_i64()
                        .map(i128::from)
                        .or_else(|| v.as_u64().map(i128::from))
                        .ok_or_else(|| format!("expected.{key} is not an integer: {v}"))?,
                ),
            };
            if want != got {
                problems.push(format!("{key}: expected {want:?}, got {got:?}"));
            }
        }
        Ok(())
    };
    check("cpuShares", rc.cpu_shares.map(i128::from))?;
    check("cpuQuota", rc.cpu_quota.map(i128::from))?;
    check("cpuPeriod", rc.cpu_period.map(i128::from))?;
    check("memory", rc.memory_limit.map(i128::from))?;
    if let Some(want) = expected.get("hugePageLimit") {
        compare_hugepages(want, rc.hugepage_limits.as_deref().unwrap_or_default())
            .unwrap_or_else(|p| problems.push(p));
    }
    if let Some(want) = expected.get("unified") {
        let empty = Map::new();
        let want = match want {
            Value::Null => &empty,
            Value::Object(m) => m,
            other => return Err(format!("expected.unified is not a map: {other}")),
        };
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
    finish(problems)
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

/// `HugePageLimits(resourceList)`, through its public face: `alsoCheck`
/// (the only form the shared files use) says `ResourceConfigForPod` of a pod
/// with one container requesting `resourceList` (CPU limits not enforced,
/// period 0, no memory QoS, policy None) must give the same map, and that
/// is the call made.
fn hugepage_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    input_fields(input, &["resourceList", "alsoCheck", "featureGates"])?;
    expected_fields(expected, &["hugePageLimitBytesByPageSizeBytes"])?;
    if let Some(also) = opt_str(input, "alsoCheck")?
        && !also.starts_with("ResourceConfigForPod(")
    {
        return Err(format!(
            "input.alsoCheck names a check the runner does not know: {also}"
        ));
    }
    let resources = &input["resourceList"];
    if !resources.is_object() {
        return Err(format!("input.resourceList is not a map: {resources}"));
    }
    let pod = pod(&serde_json::json!({
        "spec": {"containers": [{"name": "c", "resources": {"requests": resources.clone()}}]}
    }))?;
    let mut node = node_with_gates(input)?;
    node.cpu_cfs_quota = Some(false);
    set_gate(&mut node, "MemoryQoS", false);
    node.memory_reservation_policy = Some(wit::MemoryReservationPolicy::None);
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
    input_fields(input, &["pod", "featureGates"])?;
    expected_fields(expected, &["qosClass"])?;
    let mut pod = pod(&input["pod"])?;
    if function == "ComputePodQOS" {
        pod.status.qos_class = None;
    }
    let got = call(policy.qos_class(&pod, &node_with_gates(input)?))?;
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
            known_keys(what, expected, &["requests", "limits"])?;
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
    input_fields(input, &["pod", "featureGates"])?;
    expected_fields(expected, &["pod"])?;
    let pod = pod(&input["pod"])?;
    let defaulted = call(policy.default_pod(&pod, &node_with_gates(input)?))?;
    let want = &expected["pod"];
    known_keys(
        "expected.pod",
        want,
        &["resources", "containers", "initContainers"],
    )?;
    if let Some(resources) = want.get("resources") {
        compare_requirements("spec.resources", resources, &defaulted.pod.spec.resources)?;
    }
    for key in ["containers", "initContainers"] {
        let map = match want.get(key) {
            None => continue,
            Some(Value::Object(map)) => map,
            Some(other) => return Err(format!("expected.pod.{key} is not a map: {other}")),
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

/// `ValidatePodResources`: `valid`, and `errors` (each a `{field, reason}`
/// or `{type, message, field}` object, or a message string) matched by
/// distinct actual errors: same reason, field equal or extended, message contained.
fn validation_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    input_fields(input, &["pod", "featureGates"])?;
    expected_fields(expected, &["valid", "errors", "error", "err"])?;
    let pod = pod(&input["pod"])?;
    let errors = policy
        .validate_pod(&pod, &node_with_gates(input)?)
        .map_err(|e| format!("calling the component failed: {e:#}"))?;
    let want_errors = want_errors(expected, &["errors", "error", "err"], StringIs::Message)?;
    let want_valid = match expected.get("valid") {
        Some(_) => expect_bool(expected, "valid")?,
        None => want_errors
            .as_ref()
            .map(Vec::is_empty)
            .ok_or("expected has neither valid nor errors")?,
    };
    if errors.is_empty() != want_valid {
        return Err(format!(
            "expected valid={want_valid}; errors:\n{}",
            format_field_errors(&errors)
        ));
    }
    match want_errors {
        Some(want) => check_field_errors(&want, &errors),
        None => Ok(()),
    }
}

/// `ValidateMemoryThrottlingFactor(factor)`: node validation of
/// `memoryThrottlingFactor`; `errors` (if given) as in [`validation_case`].
fn factor_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    input_fields(input, &["factor", "featureGates"])?;
    expected_fields(expected, &["valid", "errors", "error", "err"])?;
    let factor = opt_f64(input, "factor")?.ok_or("input.factor is missing")?;
    let node = NodeSettings {
        memory_throttling_factor: Some(factor),
        ..node_with_gates(input)?
    };
    let errors: Vec<wit::FieldError> = policy
        .validate_node(&node)
        .map_err(|e| format!("calling the component failed: {e:#}"))?
        .into_iter()
        .filter(|e| e.field == "memoryThrottlingFactor")
        .collect();
    let valid = errors.is_empty();
    let want_errors = want_errors(expected, &["errors", "error", "err"], StringIs::Message)?;
    let want = match expected.get("valid") {
        Some(_) => expect_bool(expected, "valid")?,
        None => want_errors
            .as_ref()
            .map(Vec::is_empty)
            .ok_or("expected has neither valid nor errors")?,
    };
    if valid != want {
        return Err(format!(
            "expected valid={want}, got {valid}: {}",
            format_field_errors(&errors)
        ));
    }
    match want_errors {
        Some(want) => check_field_errors(&want, &errors),
        None => Ok(()),
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
    input_fields(
        input,
        &[
            "requestBytes",
            "limitBytes",
            "nodeAllocatableBytes",
            "memoryThrottlingFactor",
            "pageSizeBytes",
            "qosClass",
            "featureGates",
        ],
    )?;
    expected_fields(expected, &["memoryHigh"])?;
    let allocatable =
        opt_u64(input, "nodeAllocatableBytes")?.ok_or("input.nodeAllocatableBytes is missing")?;
    let node = NodeSettings {
        allocatable: Some(vec![wit::ResourceQuantity {
            name: "memory".into(),
            quantity: allocatable.to_string(),
        }]),
        memory_throttling_factor: opt_f64(input, "memoryThrottlingFactor")?,
        page_size_bytes: opt_u64(input, "pageSizeBytes")?,
        ..node_with_gates(input)?
    };
    let qos = qos_from_name(req_str(input, "qosClass")?)?;
    let got = call(policy.container_memory_high(
        opt_u64(input, "requestBytes")?,
        opt_u64(input, "limitBytes")?,
        qos,
        &node,
    ))?;
    if expected.get("memoryHigh").is_none() {
        return Err("expected.memoryHigh is missing".into());
    }
    let want = opt_u64(expected, "memoryHigh").map_err(|e| format!("expected.{e}"))?;
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
    input_fields(input, &["pod", "memoryReservationPolicy", "featureGates"])?;
    expected_fields(expected, &["pod", "containers"])?;
    let pod = pod(&input["pod"])?;
    let node = NodeSettings {
        capacity: vec![wit::ResourceQuantity {
            name: "memory".into(),
            quantity: "1Ti".into(),
        }],
        memory_reservation_policy: reservation_policy(input)?,
        ..node_with_gates(input)?
    };
    let eval = call(policy.evaluate(&pod, &node))?;
    let unified_value = |unified: &[(String, String)], key: &str| -> Option<u64> {
        unified
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.parse().ok())
    };
    let check = |what: String,
                 want: &Value,
                 unified: &[(String, String)],
                 problems: &mut Vec<String>|
     -> CaseResultText {
        known_keys_opt(
            &format!("expected {what}"),
            want,
            &["memory.min", "memory.low"],
        )?;
        for key in ["memory.min", "memory.low"] {
            if want.get(key).is_some() {
                let want = opt_u64(want, key).map_err(|e| format!("expected {what} {e}"))?;
                let got = unified_value(unified, key);
                if got != want {
                    problems.push(format!("{what} {key}: expected {want:?}, got {got:?}"));
                }
            }
        }
        Ok(())
    };
    let mut problems = Vec::new();
    check(
        "pod".into(),
        &expected["pod"],
        &eval.pod_resources.unified,
        &mut problems,
    )?;
    match &expected["containers"] {
        Value::Null => {}
        Value::Object(containers) => {
            for (name, want) in containers {
                match eval.containers.iter().find(|c| &c.name == name) {
                    Some(c) => check(
                        format!("container {name}"),
                        want,
                        &c.resources.unified,
                        &mut problems,
                    )?,
                    None => problems.push(format!("no container `{name}` in the evaluation")),
                }
            }
        }
        other => return Err(format!("expected.containers is not a map: {other}")),
    }
    finish(problems)
}

/// A map of quantities (absent or `null` = empty).
fn quantity_list(what: &str, value: &Value) -> Checked<Vec<wit::ResourceQuantity>> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Object(m) => m
            .iter()
            .map(|(name, q)| {
                Ok(wit::ResourceQuantity {
                    name: name.clone(),
                    quantity: quantity_text(q)
                        .ok_or_else(|| format!("{what}[{name}] is not a quantity: {q}"))?,
                })
            })
            .collect(),
        other => Err(format!("{what} is not a map: {other}")),
    }
}

/// The plan's cgroup write targets in order, `pod:<res>` and
/// `container:<name>:<res>`, each once (first write).
pub fn resize_targets(plan: &wit::ResizePlan) -> Vec<String> {
    let mut targets: Vec<String> = Vec::new();
    for step in &plan.steps {
        let target = match (step.kind, &step.container) {
            (wit::ResizeStepKind::WritePod, _) => {
                format!("pod:{}", step.resource.kubelet_name())
            }
            (wit::ResizeStepKind::WriteContainer, Some(c)) => {
                format!("container:{c}:{}", step.resource.kubelet_name())
            }
            _ => continue,
        };
        if !targets.contains(&target) {
            targets.push(target);
        }
    }
    targets
}

/// A list of strings.
fn string_list(what: &str, value: &Value) -> Checked<Vec<String>> {
    value
        .as_array()
        .ok_or_else(|| format!("{what} is not a list: {value}"))?
        .iter()
        .map(|x| {
            x.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{what} holds a non-string: {x}"))
        })
        .collect()
}

fn resize_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    input_fields(input, &["pod", "desired", "node", "featureGates"])?;
    expected_fields(expected, &["decision", "order", "targets", "before"])?;
    known_keys_opt("input.node", &input["node"], &["allocatable", "allocated"])?;
    let current = pod(&input["pod"])?;
    let desired = pod(&input["desired"])?;
    let node = NodeSettings {
        allocatable: Some(quantity_list(
            "input.node.allocatable",
            &input["node"]["allocatable"],
        )?),
        ..node_with_gates(input)?
    };
    let others = quantity_list("input.node.allocated", &input["node"]["allocated"])?;
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
    if let Some(order) = expected.get("order") {
        let order = string_list("expected.order", order)?;
        if targets != order {
            return Err(format!("expected order {order:?}, got {targets:?}"));
        }
    }
    if let Some(want_targets) = expected.get("targets") {
        let mut want_sorted = string_list("expected.targets", want_targets)?;
        want_sorted.sort();
        let mut got_sorted = targets.clone();
        got_sorted.sort();
        if want_sorted != got_sorted {
            return Err(format!("expected targets {want_sorted:?}, got {targets:?}"));
        }
    }
    if let Some(pairs) = expected.get("before") {
        for pair in pairs
            .as_array()
            .ok_or_else(|| format!("expected.before is not a list: {pairs}"))?
        {
            let pair = string_list("a before pair", pair)?;
            let [a, b] = pair.as_slice() else {
                return Err(format!("bad before pair {pair:?}"));
            };
            let position = |t: &String| targets.iter().position(|x| x == t);
            match (position(a), position(b)) {
                (Some(i), Some(j)) if i < j => {}
                _ => return Err(format!("expected {a} before {b}, got {targets:?}")),
            }
        }
    }
    Ok(())
}

// ----------------------------------------------------------------------
// Node-side adapters (tests/vectors/upstream): a whole node described in
// the vector, the component's cgroup files, CRI values, resize plans,
// node-level cgroups, node validation and pod warnings.
// ----------------------------------------------------------------------

/// The fields of a vector node (`input.node`, or an entry of the file's
/// `nodes`): the WIT `node-settings` in camelCase.
const VECTOR_NODE_KEYS: [&str; 27] = [
    "name",
    "capacity",
    "allocatable",
    "kubeReserved",
    "systemReserved",
    "cgroupVersion",
    "cgroupDriver",
    "cgroupsPerQOS",
    "enforceNodeAllocatable",
    "cpuCFSQuota",
    "cpuCFSQuotaPeriodUs",
    "memoryThrottlingFactor",
    "memoryReservationPolicy",
    "pageSizeBytes",
    "cpuWeightCurve",
    "singleProcessOOMKill",
    "cpuManagerPolicy",
    "cpuManagerPolicyOptions",
    "reservedSystemCPUs",
    "memoryManagerPolicy",
    "reservedMemory",
    "topologyManagerPolicy",
    "topologyManagerScope",
    "topologyManagerPolicyOptions",
    "featureGates",
    "kernelVersion",
    "evictionHard",
];

/// An optional list of strings (absent or `null` = `None`).
fn opt_strings(value: &Value, key: &str) -> Checked<Option<Vec<String>>> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => string_list(key, v).map(Some),
    }
}

/// A vector node object as WIT node settings; every field is read.
fn node_settings(what: &str, value: &Value) -> Checked<NodeSettings> {
    known_keys(what, value, &VECTOR_NODE_KEYS)?;
    let err = |e: String| format!("{what}.{e}");
    let list = |key: &str| quantity_list(&format!("{what}.{key}"), &value[key]);
    let cgroup_version = match opt_str(value, "cgroupVersion").map_err(err)? {
        None | Some("v2") => wit::CgroupVersion::V2,
        Some("v1") => wit::CgroupVersion::V1,
        Some(other) => return Err(format!("{what}.cgroupVersion `{other}` is not v1 or v2")),
    };
    let cgroup_driver = match opt_str(value, "cgroupDriver").map_err(err)? {
        None | Some("cgroupfs") => wit::CgroupDriver::Cgroupfs,
        Some("systemd") => wit::CgroupDriver::Systemd,
        Some(other) => {
            return Err(format!(
                "{what}.cgroupDriver `{other}` is not cgroupfs or systemd"
            ));
        }
    };
    let cpu_weight_curve = match opt_str(value, "cpuWeightCurve").map_err(err)? {
        None => None,
        Some("linear") => Some(wit::CpuWeightCurve::Linear),
        Some("logarithmic") => Some(wit::CpuWeightCurve::Logarithmic),
        Some(other) => {
            return Err(format!(
                "{what}.cpuWeightCurve `{other}` is not linear or logarithmic"
            ));
        }
    };
    let reserved_memory = match &value["reservedMemory"] {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let item_what = format!("{what}.reservedMemory[{i}]");
                known_keys(&item_what, item, &["numaNode", "limits"])?;
                Ok(wit::NumaReservedMemory {
                    numa_node: as_u32(&item["numaNode"], &format!("{item_what}.numaNode"))?,
                    limits: quantity_list(&format!("{item_what}.limits"), &item["limits"])?,
                })
            })
            .collect::<Checked<Vec<_>>>()?,
        other => return Err(format!("{what}.reservedMemory is not a list: {other}")),
    };
    let eviction_hard = match &value["evictionHard"] {
        Value::Null => None,
        Value::Object(m) => Some(
            m.iter()
                .map(|(signal, threshold)| {
                    threshold
                        .as_str()
                        .map(|t| (signal.clone(), t.to_string()))
                        .ok_or_else(|| {
                            format!("{what}.evictionHard[{signal}] is not a string: {threshold}")
                        })
                })
                .collect::<Checked<Vec<_>>>()?,
        ),
        other => return Err(format!("{what}.evictionHard is not a map: {other}")),
    };
    Ok(NodeSettings {
        name: opt_str(value, "name")
            .map_err(err)?
            .unwrap_or_default()
            .to_string(),
        capacity: list("capacity")?,
        allocatable: match &value["allocatable"] {
            Value::Null => None,
            v => Some(quantity_list(&format!("{what}.allocatable"), v)?),
        },
        kube_reserved: list("kubeReserved")?,
        system_reserved: list("systemReserved")?,
        cgroup_version,
        cgroup_driver,
        cgroups_per_qos: opt_bool(value, "cgroupsPerQOS").map_err(err)?,
        enforce_node_allocatable: opt_strings(value, "enforceNodeAllocatable").map_err(err)?,
        cpu_cfs_quota: opt_bool(value, "cpuCFSQuota").map_err(err)?,
        cpu_cfs_quota_period_us: opt_u64(value, "cpuCFSQuotaPeriodUs").map_err(err)?,
        memory_throttling_factor: opt_f64(value, "memoryThrottlingFactor").map_err(err)?,
        memory_reservation_policy: reservation_policy(value).map_err(err)?,
        page_size_bytes: opt_u64(value, "pageSizeBytes").map_err(err)?,
        cpu_weight_curve,
        single_process_oom_kill: opt_bool(value, "singleProcessOOMKill").map_err(err)?,
        cpu_manager_policy: kubelet_enum::<wit::CpuManagerPolicy>(value, "cpuManagerPolicy")
            .map_err(err)?,
        cpu_manager_policy_options: policy_options(
            &format!("{what}.cpuManagerPolicyOptions"),
            &value["cpuManagerPolicyOptions"],
        )?,
        reserved_system_cpus: opt_str(value, "reservedSystemCPUs")
            .map_err(err)?
            .map(str::to_string),
        memory_manager_policy: kubelet_enum::<wit::MemoryManagerPolicy>(
            value,
            "memoryManagerPolicy",
        )
        .map_err(err)?,
        reserved_memory,
        topology_manager_policy: kubelet_enum::<wit::TopologyManagerPolicy>(
            value,
            "topologyManagerPolicy",
        )
        .map_err(err)?,
        topology_manager_scope: kubelet_enum::<wit::TopologyManagerScope>(
            value,
            "topologyManagerScope",
        )
        .map_err(err)?,
        topology_manager_policy_options: policy_options(
            &format!("{what}.topologyManagerPolicyOptions"),
            &value["topologyManagerPolicyOptions"],
        )?,
        feature_gates: gates(value).map_err(err)?,
        kernel_version: opt_str(value, "kernelVersion")
            .map_err(err)?
            .map(str::to_string),
        eviction_hard,
    })
}

/// The case's node: `input.node` is a node object or the name of one in the
/// file's `nodes`; `input.featureGates` (if any) override the node's gates.
fn vector_node(file: &Value, input: &Value) -> Checked<NodeSettings> {
    let mut node = match &input["node"] {
        Value::String(name) => {
            let value = file["nodes"]
                .get(name)
                .ok_or_else(|| format!("the file has no nodes.{name}"))?;
            node_settings(&format!("nodes.{name}"), value)?
        }
        value @ Value::Object(_) => node_settings("input.node", value)?,
        Value::Null => return Err("input.node is missing".into()),
        other => return Err(format!("input.node is neither a name nor a node: {other}")),
    };
    for gate in gates(input)? {
        set_gate(&mut node, &gate.name, gate.enabled);
    }
    Ok(node)
}

/// Numeric value of a cgroup file for comparisons: `max` is +infinity.
fn file_number(text: &str) -> Checked<f64> {
    if text == "max" {
        return Ok(f64::INFINITY);
    }
    text.parse::<f64>()
        .map_err(|_| format!("`{text}` is not a number"))
}

/// Whether one cgroup file value (`None` = the policy writes no such file)
/// meets an expected spec: a string (exact), `null` (not written), a list of
/// those (any of them), or `{gt|ge|lt|le|ne: number}` (numeric, `max` = +inf;
/// a file not written fails).
fn file_matches(what: &str, spec: &Value, got: Option<&str>) -> Checked<bool> {
    Ok(match spec {
        Value::Null => got.is_none(),
        Value::String(want) => got == Some(want.as_str()),
        Value::Array(options) => {
            for option in options {
                if matches!(option, Value::Array(_)) {
                    return Err(format!("{what}: nested alternatives"));
                }
                if file_matches(what, option, got)? {
                    return Ok(true);
                }
            }
            false
        }
        Value::Object(map) => {
            known_keys(what, spec, &["gt", "ge", "lt", "le", "ne"])?;
            if map.is_empty() {
                return Err(format!("{what}: an empty comparison"));
            }
            let Some(got) = got else {
                return Ok(false);
            };
            let got = file_number(got)?;
            let mut ok = true;
            for (op, bound) in map {
                let bound = match bound {
                    Value::Number(n) => n.as_f64().ok_or("bad bound")?,
                    Value::String(s) => file_number(s)?,
                    other => return Err(format!("{what}.{op}: not a number: {other}")),
                };
                ok &= match op.as_str() {
                    "gt" => got > bound,
                    "ge" => got >= bound,
                    "lt" => got < bound,
                    "le" => got <= bound,
                    _ => got != bound,
                };
            }
            ok
        }
        other => return Err(format!("{what}: not a file spec: {other}")),
    })
}

/// A file's value in a file list.
fn file_value(files: &[wit::CgroupFile], name: &str) -> Option<String> {
    let name = wit::CgroupFileName::parse(name)?;
    files
        .iter()
        .find(|f| f.file == name)
        .map(|f| f.value.to_string())
}

/// Compare the expected files (`want`: file -> spec) with a cgroup's files
/// through `lookup`; only the listed files are compared.
fn check_files_with(
    what: &str,
    want: &Value,
    lookup: impl Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) -> CaseResultText {
    let Some(map) = want.as_object() else {
        return Err(format!("expected {what} is not a map of files: {want}"));
    };
    for (file, spec) in map {
        let got = lookup(file);
        if !file_matches(&format!("expected {what}[{file}]"), spec, got.as_deref())? {
            problems.push(format!(
                "{what} {file}: expected {spec}, got {}",
                got.map_or_else(|| "no such file".to_string(), |v| format!("{v:?}"))
            ));
        }
    }
    Ok(())
}

fn check_files(
    what: &str,
    want: &Value,
    got: &[wit::CgroupFile],
    problems: &mut Vec<String>,
) -> CaseResultText {
    check_files_with(what, want, |name| file_value(got, name), problems)
}

/// The CRI name of a huge page size (`2MB`, `1GB`): upstream `HugePageUnitSizeFromByteSize`.
fn hugepage_size_name(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let (mut value, mut unit) = (bytes, 0);
    while value >= 1024 && value.is_multiple_of(1024) && unit < UNITS.len() - 1 {
        value /= 1024;
        unit += 1;
    }
    format!("{value}{}", UNITS[unit])
}

/// A CRI `LinuxContainerResources` field as an integer; unset is 0 (proto default).
fn expect_integer(what: &str, value: &Value) -> Checked<i128> {
    value
        .as_i64()
        .map(i128::from)
        .or_else(|| value.as_u64().map(i128::from))
        .ok_or_else(|| format!("{what} is not an integer: {value}"))
}

/// Compare the CRI `LinuxContainerResources` a case expects with a
/// container's `resources`: `cpuShares`, `cpuQuota`, `cpuPeriod`,
/// `memoryLimitInBytes` (unset = 0), `hugepageLimits` (page size name ->
/// limit, the whole list) and `unified` (the whole map; absent = empty).
fn check_cri(
    what: &str,
    want: &Value,
    got: &wit::ResourceConfig,
    problems: &mut Vec<String>,
) -> CaseResultText {
    known_keys(
        &format!("expected {what}"),
        want,
        &[
            "cpuShares",
            "cpuQuota",
            "cpuPeriod",
            "memoryLimitInBytes",
            "hugepageLimits",
            "unified",
        ],
    )?;
    let numbers = [
        ("cpuShares", got.cpu_shares.map_or(0, i128::from)),
        ("cpuQuota", got.cpu_quota.map_or(0, i128::from)),
        ("cpuPeriod", got.cpu_period.map_or(0, i128::from)),
        ("memoryLimitInBytes", got.memory_limit.map_or(0, i128::from)),
    ];
    for (key, got) in numbers {
        if let Some(want) = want.get(key) {
            let want = expect_integer(&format!("expected {what}.{key}"), want)?;
            if want != got {
                problems.push(format!("{what} {key}: expected {want}, got {got}"));
            }
        }
    }
    if let Some(limits) = want.get("hugepageLimits") {
        let want: BTreeMap<String, i128> = limits
            .as_object()
            .ok_or_else(|| format!("expected {what}.hugepageLimits is not a map"))?
            .iter()
            .map(|(k, v)| Ok((k.clone(), expect_integer("a hugepage limit", v)?)))
            .collect::<Checked<_>>()?;
        let got: BTreeMap<String, i128> = got
            .hugepage_limits
            .iter()
            .flatten()
            .map(|h| {
                (
                    hugepage_size_name(h.page_size_bytes),
                    i128::from(h.limit_bytes),
                )
            })
            .collect();
        if want != got {
            problems.push(format!(
                "{what} hugepageLimits: expected {want:?}, got {got:?}"
            ));
        }
    }
    if let Some(unified) = want.get("unified") {
        let want: BTreeMap<String, String> = match unified {
            Value::Null => BTreeMap::new(),
            Value::Object(m) => m
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_string()))
                        .ok_or_else(|| format!("expected {what}.unified[{k}] is not a string"))
                })
                .collect::<Checked<_>>()?,
            other => return Err(format!("expected {what}.unified is not a map: {other}")),
        };
        let got: BTreeMap<String, String> = got.unified.iter().cloned().collect();
        if want != got {
            problems.push(format!("{what} unified: expected {want:?}, got {got:?}"));
        }
    }
    Ok(())
}

/// The pod as the kubelet receives it: with `apiServerDefaults`, defaulted
/// by `default-pod` (as the API server defaults every pod it stores).
fn kubelet_pod(
    policy: &PolicyRuntime,
    value: &Value,
    defaults: bool,
    node: &NodeSettings,
) -> Checked<wit::Pod> {
    let parsed = pod(value)?;
    if defaults {
        Ok(call(policy.default_pod(&parsed, node))?.pod)
    } else {
        Ok(parsed)
    }
}

fn qos_name(class: QosClass) -> &'static str {
    match class {
        QosClass::Guaranteed => "Guaranteed",
        QosClass::Burstable => "Burstable",
        QosClass::BestEffort => "BestEffort",
    }
}

/// `Evaluate`: the component's `evaluate` of the pod (defaulted first with
/// `apiServerDefaults`) on the case's node. Expected: `qosClass`, `pod`
/// (pod cgroup files), `podConfig` (the pod `ResourceConfig`, as
/// `ResourceConfigForPod`), `containers` (per container: `files`, `cri`,
/// `oomScoreAdj`), `requests` / `limits` (effective), `spec` (the
/// defaulted resources, with `apiServerDefaults`).
fn evaluate_case(
    policy: &PolicyRuntime,
    file: &Value,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    input_fields(input, &["pod", "node", "featureGates", "apiServerDefaults"])?;
    expected_fields(
        expected,
        &[
            "qosClass",
            "pod",
            "podConfig",
            "containers",
            "requests",
            "limits",
            "spec",
        ],
    )?;
    let node = vector_node(file, input)?;
    let defaults = opt_bool(input, "apiServerDefaults")?.unwrap_or(false);
    let pod = kubelet_pod(policy, &input["pod"], defaults, &node)?;
    let mut problems = Vec::new();
    if let Some(spec) = expected.get("spec") {
        if !defaults {
            return Err("expected.spec needs input.apiServerDefaults".into());
        }
        known_keys(
            "expected.spec",
            spec,
            &["resources", "containers", "initContainers"],
        )?;
        if let Some(resources) = spec.get("resources") {
            compare_requirements("spec.resources", resources, &pod.spec.resources)
                .unwrap_or_else(|p| problems.push(p));
        }
        for key in ["containers", "initContainers"] {
            let Some(map) = spec.get(key) else { continue };
            let map = map
                .as_object()
                .ok_or_else(|| format!("expected.spec.{key} is not a map"))?;
            let list = if key == "containers" {
                &pod.spec.containers
            } else {
                &pod.spec.init_containers
            };
            for (name, resources) in map {
                match list.iter().find(|c| &c.name == name) {
                    Some(c) => {
                        compare_requirements(&format!("{key}[{name}]"), resources, &c.resources)
                            .unwrap_or_else(|p| problems.push(p))
                    }
                    None => problems.push(format!("no {key} entry `{name}`")),
                }
            }
        }
    }
    let eval = call(policy.evaluate(&pod, &node))?;
    if let Some(want) = expected.get("qosClass") {
        let want = want.as_str().ok_or("expected.qosClass is not a string")?;
        check_eq(&mut problems, "qosClass", qos_name(eval.qos_class), want);
    }
    if let Some(want) = expected.get("requests") {
        compare_amounts("requests", want, &eval.effective.requests)
            .unwrap_or_else(|p| problems.push(p));
    }
    if let Some(want) = expected.get("limits") {
        compare_amounts("limits", want, &eval.effective.limits)
            .unwrap_or_else(|p| problems.push(p));
    }
    if let Some(want) = expected.get("pod") {
        check_files("pod", want, &eval.pod_cgroup_files, &mut problems)?;
    }
    if let Some(want) = expected.get("podConfig") {
        known_keys(
            "expected.podConfig",
            want,
            &[
                "cpuShares",
                "cpuQuota",
                "cpuPeriod",
                "memory",
                "hugePageLimit",
                "unified",
            ],
        )?;
        let rc = &eval.pod_resources;
        for (key, got) in [
            ("cpuShares", rc.cpu_shares.map(i128::from)),
            ("cpuQuota", rc.cpu_quota.map(i128::from)),
            ("cpuPeriod", rc.cpu_period.map(i128::from)),
            ("memory", rc.memory_limit.map(i128::from)),
        ] {
            if let Some(v) = want.get(key) {
                let want = match v {
                    Value::Null => None,
                    v => Some(expect_integer(&format!("expected.podConfig.{key}"), v)?),
                };
                if want != got {
                    problems.push(format!("podConfig {key}: expected {want:?}, got {got:?}"));
                }
            }
        }
        if let Some(v) = want.get("hugePageLimit") {
            compare_hugepages(v, rc.hugepage_limits.as_deref().unwrap_or_default())
                .unwrap_or_else(|p| problems.push(p));
        }
        if let Some(v) = want.get("unified") {
            let want: BTreeMap<String, String> = match v {
                Value::Null => BTreeMap::new(),
                Value::Object(m) => m
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), v.as_str().ok_or("not a string")?.to_string())))
                    .collect::<Checked<_>>()?,
                other => return Err(format!("expected.podConfig.unified: {other}")),
            };
            let got: BTreeMap<String, String> = rc.unified.iter().cloned().collect();
            if want != got {
                problems.push(format!("podConfig unified: expected {want:?}, got {got:?}"));
            }
        }
    }
    if let Some(containers) = expected.get("containers") {
        let map = containers
            .as_object()
            .ok_or("expected.containers is not a map")?;
        for (name, want) in map {
            known_keys(
                &format!("expected.containers[{name}]"),
                want,
                &["files", "cri", "oomScoreAdj"],
            )?;
            let Some(c) = eval.containers.iter().find(|c| &c.name == name) else {
                problems.push(format!("no container `{name}` in the evaluation"));
                continue;
            };
            if let Some(files) = want.get("files") {
                check_files(
                    &format!("container {name}"),
                    files,
                    &c.cgroup_files,
                    &mut problems,
                )?;
            }
            if let Some(cri) = want.get("cri") {
                check_cri(
                    &format!("container {name} CRI"),
                    cri,
                    &c.resources,
                    &mut problems,
                )?;
            }
            if let Some(score) = want.get("oomScoreAdj") {
                let score = expect_integer("expected oomScoreAdj", score)?;
                check_eq(
                    &mut problems,
                    &format!("container {name} oomScoreAdj"),
                    i128::from(c.oom_score_adj),
                    score,
                );
            }
        }
    }
    finish(problems)
}

/// Strategic merge patch of a pod, as the API server applies a resize
/// patch: objects merge key by key, `null` deletes, the container lists
/// (`containers`, `initContainers`, `ephemeralContainers`) merge by `name`
/// (an unknown name is appended), any other value is replaced.
fn strategic_merge(target: &mut Value, patch: &Value, path: &str) -> CaseResultText {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(target_map) = target.as_object_mut() else {
        return Err(format!("{path} is not an object"));
    };
    for (key, value) in patch_map {
        if key.starts_with('$') {
            return Err(format!(
                "patch directive {path}.{key} is not supported by the runner"
            ));
        }
        let here = format!("{path}.{key}");
        match value {
            Value::Null => {
                target_map.remove(key);
            }
            Value::Array(items)
                if matches!(
                    key.as_str(),
                    "containers" | "initContainers" | "ephemeralContainers"
                ) =>
            {
                let list = target_map
                    .entry(key.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(list) = list else {
                    return Err(format!("{here} is not a list"));
                };
                for item in items {
                    let name = item
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| format!("{here}: a patch entry without a name"))?;
                    match list
                        .iter_mut()
                        .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
                    {
                        Some(existing) => {
                            strategic_merge(existing, item, &format!("{here}[{name}]"))?
                        }
                        None => list.push(item.clone()),
                    }
                }
            }
            Value::Object(_) => {
                let entry = target_map.entry(key.clone()).or_insert(Value::Null);
                strategic_merge(entry, value, &here)?;
            }
            other => {
                target_map.insert(key.clone(), other.clone());
            }
        }
    }
    Ok(())
}

/// `PodResize`: an in-place resize of `pod` to `desired` (or to `pod` with
/// the strategic merge `patch` applied), through `resize-plan` with the
/// other pods' requests `allocated`, and `evaluate` of both pods. Expected:
/// `decision`, `message` (the kubelet's PodResizePending message, exact),
/// `errors` (field errors: what the API server refuses, for Invalid and, as
/// `PodResizeValidator`'s Forbidden, for Infeasible above the node's
/// allocatable), `restarts` (the containers
/// the plan restarts, any order, exact), `containers` (name -> files) and
/// `pod` (files) after the resize, `usageChecks` (memory usage checks the
/// plan must make before lowering memory.max; others may come too).
fn pod_resize_case(
    policy: &PolicyRuntime,
    file: &Value,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    input_fields(
        input,
        &[
            "pod",
            "patch",
            "desired",
            "node",
            "featureGates",
            "allocated",
            "apiServerDefaults",
        ],
    )?;
    expected_fields(
        expected,
        &[
            "decision",
            "message",
            "errors",
            "restarts",
            "containers",
            "pod",
            "usageChecks",
        ],
    )?;
    let node = vector_node(file, input)?;
    let defaults = opt_bool(input, "apiServerDefaults")?.unwrap_or(false);
    let desired_json = match (input.get("patch"), input.get("desired")) {
        (Some(patch), None) => {
            let mut desired = input["pod"].clone();
            strategic_merge(&mut desired, patch, "patch")?;
            desired
        }
        (None, Some(desired)) => desired.clone(),
        _ => return Err("input needs exactly one of patch and desired".into()),
    };
    let current = kubelet_pod(policy, &input["pod"], defaults, &node)?;
    let desired = kubelet_pod(policy, &desired_json, defaults, &node)?;
    let others = quantity_list("input.allocated", &input["allocated"])?;
    let plan = call(policy.resize_plan(&current, &desired, &others, &node))?;
    let decision = match plan.decision {
        wit::ResizeDecision::Accepted => "Accepted",
        wit::ResizeDecision::Deferred => "Deferred",
        wit::ResizeDecision::Infeasible => "Infeasible",
        wit::ResizeDecision::Invalid => "Invalid",
    };
    let mut problems = Vec::new();
    let want = req_str(expected, "decision").map_err(|e| format!("expected.{e}"))?;
    if decision != want {
        problems.push(format!(
            "decision: expected {want}, got {decision} ({}; errors: {})",
            plan.message,
            format_field_errors(&plan.errors)
        ));
        return finish(problems);
    }
    // The kubelet's PodResizePending message, exactly.
    if let Some(want) = opt_str(expected, "message").map_err(|e| format!("expected.{e}"))? {
        check_eq(&mut problems, "message", plan.message.as_str(), want);
    }
    if let Some(want) = want_errors(expected, &["errors"], StringIs::Message)? {
        if want.is_empty() && !plan.errors.is_empty() {
            problems.push(format!(
                "expected no errors, got:\n{}",
                format_field_errors(&plan.errors)
            ));
        }
        check_field_errors(&want, &plan.errors).unwrap_or_else(|p| problems.push(p));
    }
    let restarted: BTreeSet<String> = plan
        .steps
        .iter()
        .filter(|s| s.kind == wit::ResizeStepKind::RestartContainer)
        .filter_map(|s| s.container.clone())
        .collect();
    if let Some(want) = expected.get("restarts") {
        let want: BTreeSet<String> = string_list("expected.restarts", want)?
            .into_iter()
            .collect();
        check_eq(&mut problems, "restarts", &restarted, &want);
    }
    if let Some(checks) = expected.get("usageChecks") {
        let got: Vec<(String, u64)> = plan
            .steps
            .iter()
            .filter(|s| s.kind == wit::ResizeStepKind::CheckMemoryUsage)
            .map(|s| {
                (
                    s.container
                        .as_ref()
                        .map_or_else(|| "pod".to_string(), |c| format!("container:{c}")),
                    s.memory_limit_bytes.unwrap_or_default(),
                )
            })
            .collect();
        let want = checks
            .as_array()
            .ok_or("expected.usageChecks is not a list")?
            .iter()
            .map(|c| {
                known_keys(
                    "an expected usage check",
                    c,
                    &["target", "memoryLimitBytes"],
                )?;
                Ok((
                    req_str(c, "target")?.to_string(),
                    opt_u64(c, "memoryLimitBytes")?.ok_or("memoryLimitBytes is missing")?,
                ))
            })
            .collect::<Checked<Vec<_>>>()?;
        for check in &want {
            if !got.contains(check) {
                problems.push(format!("usage checks: expected {check:?} among {got:?}"));
            }
        }
    }
    if expected.get("containers").is_some() || expected.get("pod").is_some() {
        if plan.decision != wit::ResizeDecision::Accepted {
            return Err("expected cgroup files need an Accepted resize".into());
        }
        let before = call(policy.evaluate(&current, &node))?;
        let after = call(policy.evaluate(&desired, &node))?;
        let written = |container: Option<&str>, name: &str| -> Option<String> {
            plan.steps
                .iter()
                .filter(|s| match container {
                    Some(c) => {
                        s.kind == wit::ResizeStepKind::WriteContainer
                            && s.container.as_deref() == Some(c)
                    }
                    None => s.kind == wit::ResizeStepKind::WritePod,
                })
                .filter_map(|s| file_value(&s.files, name))
                .next_back()
        };
        if let Some(containers) = expected.get("containers") {
            let map = containers
                .as_object()
                .ok_or("expected.containers is not a map")?;
            for (name, want) in map {
                let (Some(old), Some(new)) = (
                    before.containers.iter().find(|c| &c.name == name),
                    after.containers.iter().find(|c| &c.name == name),
                ) else {
                    problems.push(format!("no container `{name}` in the evaluations"));
                    continue;
                };
                let restarts = restarted.contains(name);
                check_files_with(
                    &format!("container {name} after the plan"),
                    want,
                    |file| {
                        written(Some(name), file).or_else(|| {
                            let source = if restarts { new } else { old };
                            file_value(&source.cgroup_files, file)
                        })
                    },
                    &mut problems,
                )?;
                check_files(
                    &format!("container {name} evaluated after the resize"),
                    want,
                    &new.cgroup_files,
                    &mut problems,
                )?;
            }
        }
        if let Some(want) = expected.get("pod") {
            check_files_with(
                "pod after the plan",
                want,
                |file| written(None, file).or_else(|| file_value(&before.pod_cgroup_files, file)),
                &mut problems,
            )?;
            check_files(
                "pod evaluated after the resize",
                want,
                &after.pod_cgroup_files,
                &mut problems,
            )?;
        }
    }
    finish(problems)
}

fn node_cgroup_name(cgroup: wit::NodeCgroup) -> &'static str {
    match cgroup {
        wit::NodeCgroup::Kubepods => "kubepods",
        wit::NodeCgroup::Burstable => "burstable",
        wit::NodeCgroup::Besteffort => "besteffort",
        wit::NodeCgroup::KubeReserved => "kube-reserved",
        wit::NodeCgroup::SystemReserved => "system-reserved",
    }
}

/// `NodeCgroups`: the node-level cgroups for the node's `pods` (each
/// defaulted first with `apiServerDefaults`). Expected: `cgroups` (cgroup ->
/// files, or `null` for a cgroup the policy must not configure) and
/// `warnings` (substrings each warning list must contain).
fn node_cgroups_case(
    policy: &PolicyRuntime,
    file: &Value,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    input_fields(
        input,
        &["pods", "node", "featureGates", "apiServerDefaults"],
    )?;
    expected_fields(expected, &["cgroups", "warnings"])?;
    let node = vector_node(file, input)?;
    let defaults = opt_bool(input, "apiServerDefaults")?.unwrap_or(false);
    let pods = match &input["pods"] {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|p| kubelet_pod(policy, p, defaults, &node))
            .collect::<Checked<Vec<_>>>()?,
        other => return Err(format!("input.pods is not a list: {other}")),
    };
    let values = call(policy.node_cgroups(&pods, &node))?;
    let mut problems = Vec::new();
    if let Some(cgroups) = expected.get("cgroups") {
        let map = cgroups.as_object().ok_or("expected.cgroups is not a map")?;
        for (name, want) in map {
            if ![
                "kubepods",
                "burstable",
                "besteffort",
                "kube-reserved",
                "system-reserved",
            ]
            .contains(&name.as_str())
            {
                return Err(format!("expected.cgroups names an unknown cgroup `{name}`"));
            }
            let got = values
                .cgroups
                .iter()
                .find(|c| node_cgroup_name(c.cgroup) == name);
            match (want, got) {
                (Value::Null, None) => {}
                (Value::Null, Some(_)) => {
                    problems.push(format!("cgroup {name}: expected none, got files"))
                }
                (_, None) => problems.push(format!("cgroup {name}: expected files, got none")),
                (want, Some(got)) => {
                    check_files(&format!("cgroup {name}"), want, &got.files, &mut problems)?
                }
            }
        }
    }
    if let Some(warnings) = expected.get("warnings") {
        // The policy's words for each warning (`evaluation_text!`).
        let got: Vec<String> = values.warnings.iter().map(ToString::to_string).collect();
        for want in string_list("expected.warnings", warnings)? {
            if !got.iter().any(|w| w.contains(&want)) {
                problems.push(format!("no warning contains {want:?}: {got:?}"));
            }
        }
    }
    finish(problems)
}

/// `ValidateNode`: `validate-node` of the case's node; `valid`, and
/// `errors` matched as in [`validation_case`].
fn validate_node_case(
    policy: &PolicyRuntime,
    file: &Value,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    input_fields(input, &["node", "featureGates"])?;
    expected_fields(expected, &["valid", "errors"])?;
    let node = vector_node(file, input)?;
    let errors = policy
        .validate_node(&node)
        .map_err(|e| format!("calling the component failed: {e:#}"))?;
    let want_errors = want_errors(expected, &["errors"], StringIs::Message)?;
    let want_valid = match expected.get("valid") {
        Some(_) => expect_bool(expected, "valid")?,
        None => want_errors
            .as_ref()
            .map(Vec::is_empty)
            .ok_or("expected has neither valid nor errors")?,
    };
    if errors.is_empty() != want_valid {
        return Err(format!(
            "expected valid={want_valid}; errors:\n{}",
            format_field_errors(&errors)
        ));
    }
    match want_errors {
        Some(want) => check_field_errors(&want, &errors),
        None => Ok(()),
    }
}

/// `GetWarningsForPod`: `pod-warnings`; `warnings` compared as a set (exact).
fn warnings_case(policy: &PolicyRuntime, input: &Value, expected: &Value) -> CaseResultText {
    input_fields(input, &["pod"])?;
    expected_fields(expected, &["warnings"])?;
    let pod = pod(&input["pod"])?;
    let got: BTreeSet<String> = policy
        .call(|p, s| p.call_pod_warnings(s, &pod))
        .map_err(|e| format!("calling the component failed: {e:#}"))?
        .iter()
        .map(ToString::to_string)
        .collect();
    let want: BTreeSet<String> = match expected.get("warnings") {
        None => return Err("expected.warnings is missing".into()),
        Some(Value::Null) => BTreeSet::new(),
        Some(v) => string_list("expected.warnings", v)?.into_iter().collect(),
    };
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "missing {:?}; extra {:?}",
            want.difference(&got).collect::<Vec<_>>(),
            got.difference(&want).collect::<Vec<_>>()
        ))
    }
}

/// Whether a CPU set meets an expected spec: a cpuset string (equal sets),
/// a list of specs (any of them), or `{size, excludes, subsetOf, overlaps,
/// sameAs, disjointFrom, differenceOf, countIn, wholeCores}`, all of which
/// must hold (`sameAs` / `disjointFrom` name another container: `name` of
/// the same pod or `pod/name`; `differenceOf: {set, minus}` = exactly `set`
/// without the CPUs of container `minus`; `countIn` maps a cpuset to how
/// many of the CPUs lie in it; `wholeCores: true` = every core of the
/// topology is in the set whole or not at all).
fn cpuset_matches(
    what: &str,
    spec: &Value,
    got: &CpuSet,
    topology: &wit::NodeTopology,
    sibling: &dyn Fn(&str) -> Option<CpuSet>,
) -> Checked<bool> {
    Ok(match spec {
        Value::String(text) => *got == cpus(text)?,
        Value::Array(options) => {
            for option in options {
                if option.is_array() {
                    return Err(format!("{what}: alternatives cannot nest"));
                }
                if cpuset_matches(what, option, got, topology, sibling)? {
                    return Ok(true);
                }
            }
            false
        }
        Value::Object(map) => {
            known_keys(
                what,
                spec,
                &[
                    "size",
                    "excludes",
                    "subsetOf",
                    "sameAs",
                    "disjointFrom",
                    "countIn",
                    "wholeCores",
                    "overlaps",
                    "differenceOf",
                ],
            )?;
            if map.is_empty() {
                return Err(format!("{what}: an empty cpuset spec"));
            }
            let mut ok = true;
            if let Some(size) = opt_u64(spec, "size").map_err(|e| format!("{what}.{e}"))? {
                ok &= got.len() as u64 == size;
            }
            if let Some(set) = opt_str(spec, "excludes").map_err(|e| format!("{what}.{e}"))? {
                ok &= got.is_disjoint(&cpus(set)?);
            }
            if let Some(set) = opt_str(spec, "subsetOf").map_err(|e| format!("{what}.{e}"))? {
                ok &= got.is_subset_of(&cpus(set)?);
            }
            if let Some(set) = opt_str(spec, "overlaps").map_err(|e| format!("{what}.{e}"))? {
                ok &= !got.is_disjoint(&cpus(set)?);
            }
            if let Some(difference) = spec.get("differenceOf") {
                known_keys(
                    &format!("{what}.differenceOf"),
                    difference,
                    &["set", "minus"],
                )?;
                let set = cpus(
                    req_str(difference, "set").map_err(|e| format!("{what}.differenceOf.{e}"))?,
                )?;
                let minus =
                    req_str(difference, "minus").map_err(|e| format!("{what}.differenceOf.{e}"))?;
                let minus = sibling(minus)
                    .ok_or_else(|| format!("{what}.differenceOf.minus: no container `{minus}`"))?;
                let want: Vec<u32> = set.iter().filter(|c| !minus.contains(*c)).collect();
                ok &= got.iter().collect::<Vec<u32>>() == want;
            }
            if let Some(counts) = spec.get("countIn") {
                let counts = counts
                    .as_object()
                    .ok_or_else(|| format!("{what}.countIn is not a map"))?;
                for (set, count) in counts {
                    let count = count
                        .as_u64()
                        .ok_or_else(|| format!("{what}.countIn[{set}] is not a count"))?;
                    let inside = cpus(set)?;
                    let n = got.iter().filter(|c| inside.contains(*c)).count();
                    ok &= n as u64 == count;
                }
            }
            if let Some(whole) = opt_bool(spec, "wholeCores").map_err(|e| format!("{what}.{e}"))? {
                let closed = got.iter().all(|c| {
                    let core = topology.cpus.iter().find(|t| t.id == c).map(|t| t.core_id);
                    topology
                        .cpus
                        .iter()
                        .filter(|t| Some(t.core_id) == core)
                        .all(|t| got.contains(t.id))
                });
                ok &= closed == whole;
            }
            for (key, same) in [("sameAs", true), ("disjointFrom", false)] {
                if let Some(other) = opt_str(spec, key).map_err(|e| format!("{what}.{e}"))? {
                    let other = sibling(other)
                        .ok_or_else(|| format!("{what}.{key}: no container `{other}`"))?;
                    ok &= if same {
                        *got == other
                    } else {
                        got.is_disjoint(&other)
                    };
                }
            }
            ok
        }
        other => return Err(format!("{what}: not a cpuset spec: {other}")),
    })
}

/// Files of a cgroup as `admit` leaves them: `evaluate`'s, with the
/// placement files of the admission written over them.
fn placed_files(
    evaluated: &[wit::CgroupFile],
    placement: &[wit::CgroupFile],
) -> Vec<wit::CgroupFile> {
    let mut files: Vec<wit::CgroupFile> = evaluated
        .iter()
        .filter(|f| !placement.iter().any(|p| p.file == f.file))
        .cloned()
        .collect();
    files.extend(placement.iter().cloned());
    files
}

/// `Admit`: the node's resource managers admit `pods` in order (`admit` on
/// the state the previous admission left, from a new state) on the file's
/// `topology`. Expected per pod (by `metadata.name`): `admitted`,
/// `rejection` (`{reason, message}`), `files` (the pod cgroup:
/// `evaluate`'s files with the admission's placement files over them) and
/// `containers` (`cpuset`: the container's CPUs, the node's shared pool
/// after the last admission when it has none of its own; `mems`: its NUMA
/// nodes as a set, from its `cpuset.mems`, every NUMA node of the topology
/// when `admit` writes none, compared like `cpuset`; `files` as for
/// the pod; `memory`: resource name -> byte size that every memory block of
/// the container of that resource has, no blocks of other resources, `{}`
/// = none); `sharedPool` (the node's shared pool after the last admission).
fn admit_case(
    policy: &PolicyRuntime,
    file: &Value,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    input_fields(
        input,
        &[
            "pods",
            "topology",
            "node",
            "featureGates",
            "apiServerDefaults",
        ],
    )?;
    expected_fields(expected, &["pods", "sharedPool"])?;
    let node = vector_node(file, input)?;
    let topology = vector_topology(file, req_str(input, "topology")?)?;
    let defaults = opt_bool(input, "apiServerDefaults")?.unwrap_or(false);
    let pods = input["pods"]
        .as_array()
        .ok_or("input.pods is not a list")?
        .iter()
        .map(|p| kubelet_pod(policy, p, defaults, &node))
        .collect::<Checked<Vec<_>>>()?;
    let mut state = crate::empty_manager_state();
    let mut admissions = Vec::new();
    // Pods `admit` refuses with field errors (the kubelet's admit handlers
    // before the managers, e.g. pod-level resources with their gate off):
    // the state stays as it was.
    let mut refused = Vec::new();
    for pod in &pods {
        let admission = match policy
            .admit(pod, &topology, &state, &node)
            .map_err(|e| format!("{e:#}"))?
        {
            Ok(admission) => admission,
            Err(errors) => {
                refused.push((pod.name.clone(), errors));
                continue;
            }
        };
        state = admission.state.clone();
        let evaluation = call(policy.evaluate(pod, &node))?;
        admissions.push((pod, admission, evaluation));
    }
    let shared_pool = admissions.last().map_or_else(
        || Ok(CpuSet::new()),
        |(_, a, _)| cpus(&a.assignment.node_shared_pool),
    )?;
    let mut problems = Vec::new();
    if let Some(spec) = expected.get("sharedPool")
        && !cpuset_matches(
            "expected.sharedPool",
            spec,
            &shared_pool,
            &topology,
            &|_| None,
        )?
    {
        problems.push(format!("shared pool: expected {spec}, got {shared_pool}"));
    }
    let no_pods = Map::new();
    let want_pods = match expected.get("pods") {
        None => &no_pods,
        Some(pods) => pods.as_object().ok_or("expected.pods is not a map")?,
    };
    // A pod admit refused must be expected so: one the case does not name
    // fails it, as any field error did before refusals were recorded.
    for (name, errors) in &refused {
        if !want_pods.contains_key(name) {
            problems.push(format!(
                "pod {name}: admit refused it with field errors:\n{}",
                format_field_errors(errors)
            ));
        }
    }
    for (name, want) in want_pods {
        known_keys(
            &format!("expected.pods[{name}]"),
            want,
            &["admitted", "rejection", "errors", "files", "containers"],
        )?;
        let expected_errors = want_errors(want, &["errors"], StringIs::Message)
            .map_err(|e| format!("expected.pods[{name}]: {e}"))?;
        if let Some((_, errors)) = refused.iter().find(|(p, _)| p == name) {
            match expected_errors {
                Some(want) if !want.is_empty() => {
                    check_field_errors(&want, errors).unwrap_or_else(|p| problems.push(p));
                }
                _ => problems.push(format!(
                    "pod {name}: admit refused it with field errors:\n{}",
                    format_field_errors(errors)
                )),
            }
            for key in ["rejection", "files", "containers"] {
                if want.get(key).is_some() {
                    problems.push(format!(
                        "pod {name}: expected {key}, but admit refused the pod"
                    ));
                }
            }
            if opt_bool(want, "admitted").map_err(|e| format!("expected.pods[{name}].{e}"))?
                == Some(true)
            {
                problems.push(format!(
                    "pod {name}: expected admitted, but admit refused the pod"
                ));
            }
            continue;
        }
        if expected_errors.is_some_and(|w| !w.is_empty()) {
            problems.push(format!(
                "pod {name}: expected field errors, admit gave none"
            ));
        }
        let Some((_, admission, evaluation)) = admissions.iter().find(|(p, _, _)| &p.name == name)
        else {
            return Err(format!("expected.pods names `{name}`, not an input pod"));
        };
        if let Some(admitted) =
            opt_bool(want, "admitted").map_err(|e| format!("expected.pods[{name}].{e}"))?
        {
            check_eq(
                &mut problems,
                &format!("pod {name} admitted"),
                admission.rejection.is_none(),
                admitted,
            );
        }
        if let Some(rejection) = want.get("rejection") {
            known_keys("an expected rejection", rejection, &["reason", "message"])?;
            match &admission.rejection {
                None => problems.push(format!("pod {name}: expected a rejection, admitted")),
                Some(got) => {
                    if let Some(reason) = opt_str(rejection, "reason")?
                        && reason != got.reason()
                    {
                        problems.push(format!(
                            "pod {name} rejection reason: expected {reason}, got {}",
                            got.reason()
                        ));
                    }
                    if let Some(message) = opt_str(rejection, "message")?
                        && !got.message.contains(message)
                    {
                        problems.push(format!(
                            "pod {name} rejection message: expected {message:?} in {:?}",
                            got.message
                        ));
                    }
                }
            }
        }
        if let Some(files) = want.get("files") {
            let got = placed_files(&evaluation.pod_cgroup_files, &admission.files.pod);
            check_files(&format!("pod {name}"), files, &got, &mut problems)?;
        }
        let Some(containers) = want.get("containers") else {
            continue;
        };
        let containers = containers
            .as_object()
            .ok_or_else(|| format!("expected.pods[{name}].containers is not a map"))?;
        // `container` of this pod, or `pod/container` of another input pod.
        let cpuset_of = |reference: &str| -> Option<CpuSet> {
            let (assignment, container) = match reference.split_once('/') {
                None => (&admission.assignment, reference),
                Some((pod, container)) => (
                    &admissions
                        .iter()
                        .find(|(p, _, _)| p.name == pod)?
                        .1
                        .assignment,
                    container,
                ),
            };
            let assigned = assignment.containers.iter().find(|c| c.name == container)?;
            match &assigned.cpuset {
                Some(set) => CpuSet::parse(set).ok(),
                None => Some(shared_pool.clone()),
            }
        };
        for (container, want) in containers {
            let what = format!("expected.pods[{name}].containers[{container}]");
            known_keys(&what, want, &["cpuset", "mems", "files", "memory"])?;
            if let Some(spec) = want.get("mems") {
                // Mems_allowed_list: the container's cpuset.mems as admit
                // leaves it, every NUMA node of the topology when unwritten.
                let written = admission
                    .files
                    .containers
                    .iter()
                    .find(|c| &c.name == container)
                    .and_then(|c| {
                        c.files
                            .iter()
                            .find(|f| f.file == wit::CgroupFileName::CpusetMems)
                    })
                    .map(|f| f.value.to_string());
                let got = match written {
                    Some(text) => cpus(&text)?,
                    None => cpus(
                        &topology
                            .numa_nodes
                            .iter()
                            .map(|n| n.id.to_string())
                            .collect::<Vec<_>>()
                            .join(","),
                    )?,
                };
                if !cpuset_matches(&format!("{what}.mems"), spec, &got, &topology, &|_| None)? {
                    problems.push(format!(
                        "pod {name} container {container} NUMA nodes: expected {spec}, got {got}"
                    ));
                }
            }
            if let Some(memory) = want.get("memory") {
                let memory = memory
                    .as_object()
                    .ok_or_else(|| format!("{what}.memory is not a map"))?;
                let blocks = admission
                    .assignment
                    .containers
                    .iter()
                    .find(|c| &c.name == container)
                    .map(|c| c.memory.clone())
                    .unwrap_or_default();
                for block in &blocks {
                    if !memory.contains_key(&block.resource_name) {
                        problems.push(format!(
                            "pod {name} container {container}: an unexpected {} block",
                            block.resource_name
                        ));
                    }
                }
                for (resource, size) in memory {
                    let size = size
                        .as_u64()
                        .ok_or_else(|| format!("{what}.memory[{resource}] is not a byte count"))?;
                    let of_type: Vec<_> = blocks
                        .iter()
                        .filter(|b| &b.resource_name == resource)
                        .collect();
                    if of_type.is_empty() || of_type.iter().any(|b| b.size != size) {
                        problems.push(format!(
                            "pod {name} container {container} {resource} blocks: expected size {size}, got {:?}",
                            of_type.iter().map(|b| b.size).collect::<Vec<_>>()
                        ));
                    }
                }
            }
            if let Some(spec) = want.get("cpuset") {
                match cpuset_of(container) {
                    None => problems.push(format!("pod {name}: no container `{container}`")),
                    Some(got) => {
                        if !cpuset_matches(&what, spec, &got, &topology, &cpuset_of)? {
                            problems.push(format!(
                                "pod {name} container {container} cpuset: expected {spec}, got {got}"
                            ));
                        }
                    }
                }
            }
            if let Some(files) = want.get("files") {
                let evaluated = evaluation
                    .containers
                    .iter()
                    .find(|c| &c.name == container)
                    .map(|c| c.cgroup_files.clone())
                    .unwrap_or_default();
                let placed = admission
                    .files
                    .containers
                    .iter()
                    .find(|c| &c.name == container)
                    .map(|c| c.files.clone())
                    .unwrap_or_default();
                check_files(
                    &format!("pod {name} container {container}"),
                    files,
                    &placed_files(&evaluated, &placed),
                    &mut problems,
                )?;
            }
        }
    }
    finish(problems)
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
    known_keys_opt("a topology hint", value, &["mask", "preferred"])?;
    Ok(wit::TopologyHint {
        numa_affinity: vector_mask(value)?,
        preferred: opt_bool(value, "preferred")?.unwrap_or(false),
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
    if let Some(nodes) = topology.get("numaNodes") {
        // Optional NUMA memory (the upstream/ corpus): `[{id, memoryBytes,
        // hugepages: [{pageSizeBytes, pages}]}]`, every node of the CPUs listed.
        let numa_nodes = nodes
            .as_array()
            .ok_or_else(|| format!("topology `{name}`.numaNodes is not a list"))?
            .iter()
            .map(|node| {
                let what = format!("topology `{name}` NUMA node");
                known_keys(&what, node, &["id", "memoryBytes", "hugepages"])?;
                let hugepages = match &node["hugepages"] {
                    Value::Null => Vec::new(),
                    Value::Array(pools) => pools
                        .iter()
                        .map(|pool| {
                            known_keys(&what, pool, &["pageSizeBytes", "pages"])?;
                            Ok(wit::HugepagePool {
                                page_size_bytes: opt_u64(pool, "pageSizeBytes")?.ok_or_else(
                                    || format!("{what}: a pool without pageSizeBytes"),
                                )?,
                                pages: opt_u64(pool, "pages")?
                                    .ok_or_else(|| format!("{what}: a pool without pages"))?,
                            })
                        })
                        .collect::<Checked<Vec<_>>>()?,
                    other => return Err(format!("{what}.hugepages is not a list: {other}")),
                };
                Ok(wit::NumaNodeInfo {
                    id: as_u32(&node["id"], &format!("{what} id"))?,
                    memory_bytes: opt_u64(node, "memoryBytes")?
                        .ok_or_else(|| format!("{what} without memoryBytes"))?,
                    hugepages,
                    distances: Vec::new(),
                })
            })
            .collect::<Checked<Vec<_>>>()?;
        if let Some(missing) = numa
            .iter()
            .find(|id| !numa_nodes.iter().any(|n| n.id == **id))
        {
            return Err(format!("topology `{name}`.numaNodes lacks node {missing}"));
        }
        return Ok(wit::NodeTopology { cpus, numa_nodes });
    }
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

fn quantity_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `{"cpu": .., "memory": ..}` from `cpu_<kind>` / `memory_<kind>` fields
/// (`null` = not set), merged with an explicit `<kind>s` map; a resource
/// given both ways is an error.
fn vector_resources(what: &str, value: &Value, kind: &str) -> Checked<Map<String, Value>> {
    let mut map = match value.get(format!("{kind}s")) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => return Err(format!("{what}.{kind}s is not a map: {other}")),
    };
    for resource in ["cpu", "memory"] {
        let key = format!("{resource}_{kind}");
        match value.get(&key) {
            None | Some(Value::Null) => {}
            Some(v) => {
                let q = quantity_text(v)
                    .ok_or_else(|| format!("{what}.{key} is not a quantity: {v}"))?;
                if map.insert(resource.to_string(), Value::String(q)).is_some() {
                    return Err(format!("{what} gives {resource} both in {kind}s and {key}"));
                }
            }
        }
    }
    Ok(map)
}

/// `requests` / `limits` of a vector container or pod-level stanza.
fn vector_requirements(what: &str, value: &Value) -> Checked<Map<String, Value>> {
    let mut resources = Map::new();
    for kind in ["request", "limit"] {
        let map = vector_resources(what, value, kind)?;
        if !map.is_empty() {
            resources.insert(format!("{kind}s"), Value::Object(map));
        }
    }
    Ok(resources)
}

/// The fields a vector container may have.
const VECTOR_CONTAINER_KEYS: [&str; 8] = [
    "name",
    "cpu_request",
    "cpu_limit",
    "memory_request",
    "memory_limit",
    "requests",
    "limits",
    "restart_policy",
];

fn vector_container(what: &str, value: &Value) -> Checked<Value> {
    known_keys(what, value, &VECTOR_CONTAINER_KEYS)?;
    let mut container = Map::new();
    container.insert(
        "name".into(),
        Value::String(
            req_str(value, "name")
                .map_err(|e| format!("{what}: {e}"))?
                .into(),
        ),
    );
    let resources = vector_requirements(what, value)?;
    if !resources.is_empty() {
        container.insert("resources".into(), Value::Object(resources));
    }
    if let Some(policy) = opt_str(value, "restart_policy").map_err(|e| format!("{what}: {e}"))? {
        container.insert("restartPolicy".into(), Value::String(policy.into()));
    }
    Ok(Value::Object(container))
}

/// The fields of a vector pod (`input.pod` of the CPU files; the memory
/// `getPodRequestedResources` cases give them at the top of `input`).
const VECTOR_POD_KEYS: [&str; 4] = [
    "uid",
    "containers",
    "init_containers",
    "pod_level_resources",
];

/// A vector pod (`uid`, `pod_level_resources`, `init_containers`,
/// `containers` with `cpu_request`, ... or `requests` maps) as a WIT pod.
/// The caller checks which other fields the object may carry.
fn vector_pod(value: &Value, uid: &str) -> Checked<wit::Pod> {
    let list = |key: &str| -> Checked<Value> {
        match value.get(key) {
            None | Some(Value::Null) => Ok(Value::Array(Vec::new())),
            Some(Value::Array(cs)) => cs
                .iter()
                .enumerate()
                .map(|(i, c)| vector_container(&format!("{key}[{i}]"), c))
                .collect::<Checked<Vec<_>>>()
                .map(Value::Array),
            Some(other) => Err(format!("{key} is not a list: {other}")),
        }
    };
    let mut spec = Map::new();
    spec.insert("containers".into(), list("containers")?);
    spec.insert("initContainers".into(), list("init_containers")?);
    match value.get("pod_level_resources") {
        None | Some(Value::Null) => {}
        Some(plr @ Value::Object(_)) => {
            known_keys(
                "pod_level_resources",
                plr,
                &[
                    "cpu_request",
                    "cpu_limit",
                    "memory_request",
                    "memory_limit",
                    "requests",
                    "limits",
                ],
            )?;
            let resources = vector_requirements("pod_level_resources", plr)?;
            spec.insert("resources".into(), Value::Object(resources));
        }
        Some(other) => return Err(format!("pod_level_resources is not a map: {other}")),
    }
    pod(&serde_json::json!({
        "metadata": {"name": uid, "uid": uid},
        "spec": Value::Object(spec),
    }))
}

/// `input.pod` of a CPU vector, with its uid.
fn vector_input_pod(input: &Value) -> Checked<(String, wit::Pod)> {
    let value = &input["pod"];
    known_keys("input.pod", value, &VECTOR_POD_KEYS)?;
    let uid = req_str(value, "uid").map_err(|e| format!("input.pod.{e}"))?;
    Ok((uid.to_string(), vector_pod(value, uid)?))
}

/// The input fields of every static CPU policy case (`Start`, `Allocate`,
/// ...): the node configuration and the state.
const CPU_NODE_KEYS: [&str; 7] = [
    "topology",
    "num_reserved_cpus",
    "reserved_cpus",
    "options",
    "state",
    "feature_gates",
    "featureGates",
];

/// [`CPU_NODE_KEYS`] plus a case's own fields.
fn cpu_input_fields(input: &Value, own: &[&str]) -> CaseResultText {
    let all: Vec<&str> = CPU_NODE_KEYS.iter().chain(own).copied().collect();
    input_fields(input, &all)
}

/// A policy option's value as the kubelet config writes it (`"true"`, `"2"`).
fn option_text(name: &str, value: &Value) -> Checked<String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(format!(
            "option {name} has a value that is not text: {other}"
        )),
    }
}

/// A map of policy options (absent or `null` = none).
fn policy_options(what: &str, value: &Value) -> Checked<Vec<wit::PolicyOption>> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Object(m) => m
            .iter()
            .map(|(name, value)| {
                Ok(wit::PolicyOption {
                    name: name.clone(),
                    value: option_text(name, value)?,
                })
            })
            .collect(),
        other => Err(format!("{what} is not a map: {other}")),
    }
}

/// The static-policy node of a CPU vector: `num_reserved_cpus` reserved
/// through `systemReserved[cpu]`, `reserved_cpus` as `reservedSystemCPUs`,
/// `options`, `feature_gates` (and the alpha-options gate its case name records).
fn static_cpu_node(input: &Value, case_name: &str) -> Checked<NodeSettings> {
    let mut node = node_with_gates(input)?;
    if case_name.contains("CPUManagerPolicyAlphaOptions enabled") {
        set_gate(&mut node, "CPUManagerPolicyAlphaOptions", true);
    }
    node.cpu_manager_policy = Some(wit::CpuManagerPolicy::Static);
    node.cpu_manager_policy_options = policy_options("input.options", &input["options"])?;
    let reserved = opt_u64(input, "num_reserved_cpus")?.unwrap_or(0);
    if reserved > 0 {
        node.system_reserved = vec![wit::ResourceQuantity {
            name: "cpu".into(),
            quantity: reserved.to_string(),
        }];
    }
    node.reserved_system_cpus = opt_str(input, "reserved_cpus")?.map(str::to_string);
    Ok(node)
}

/// A vector CPU state (`default_cpuset`, `assignments`) as a manager state.
fn vector_cpu_state(value: &Value) -> Checked<wit::ManagerState> {
    known_keys_opt("input.state", value, &["default_cpuset", "assignments"])?;
    let mut state = crate::empty_manager_state();
    state.cpu.policy_name = "static".into();
    state.cpu.default_cpuset = opt_str(value, "default_cpuset")
        .map_err(|e| format!("input.state.{e}"))?
        .unwrap_or_default()
        .to_string();
    match &value["assignments"] {
        Value::Null => {}
        Value::Object(pods) => {
            for (uid, containers) in pods {
                let containers = containers
                    .as_object()
                    .ok_or_else(|| format!("assignments[{uid}] is not a map"))?;
                state.cpu.entries.push(wit::PodCpuEntries {
                    pod_uid: uid.clone(),
                    containers: containers
                        .iter()
                        .map(|(name, cpus)| {
                            Ok(wit::ContainerCpuset {
                                container: name.clone(),
                                cpuset: cpus
                                    .as_str()
                                    .ok_or_else(|| {
                                        format!(
                                            "assignments[{uid}][{name}] is not a cpuset: {cpus}"
                                        )
                                    })?
                                    .to_string(),
                            })
                        })
                        .collect::<Checked<Vec<_>>>()?,
                });
            }
        }
        other => return Err(format!("input.state.assignments is not a map: {other}")),
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
    let pods = match value {
        Value::Null => return Ok(out),
        Value::Object(pods) => pods,
        other => return Err(format!("assignments is not a map: {other}")),
    };
    for (uid, containers) in pods {
        let mut map = BTreeMap::new();
        let containers = containers
            .as_object()
            .ok_or_else(|| format!("assignments[{uid}] is not a map: {containers}"))?;
        for (name, set) in containers {
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

/// The keys under which `expected` may carry errors.
const ERROR_KEYS: [&str; 3] = ["error", "errors", "err"];

/// The errors a manager case expects (none when absent or `null`).
fn manager_want(expected: &Value, keys: &[&str], strings: StringIs) -> Checked<Vec<WantError>> {
    Ok(want_errors(expected, keys, strings)?.unwrap_or_default())
}

/// The manager files' error strings are exact Go error texts.
fn manager_want_messages(expected: &Value) -> Checked<Vec<WantError>> {
    manager_want(expected, &ERROR_KEYS, StringIs::Message)
}

/// Topology manager `Merge` (`input.policy`), per the file's `notes`.
fn merge_case(
    policy: &PolicyRuntime,
    file: &Value,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    input_fields(
        input,
        &[
            "numa_info",
            "policy_options",
            "providers_hints",
            "featureGates",
            "feature_gates",
        ],
    )?;
    // `admit_is_derived` says where `admit` comes from (canAdmitPodResult,
    // not a Go assertion); `admit` itself is compared.
    let mut known = vec!["hint", "admit", "admit_is_derived"];
    known.extend(ERROR_KEYS);
    expected_fields(expected, &known)?;
    opt_bool(expected, "admit_is_derived").map_err(|e| format!("expected.{e}"))?;
    let info_name = req_str(input, "numa_info")?;
    let info = file["numa_infos"]
        .get(info_name)
        .ok_or_else(|| format!("the file has no numa_infos.{info_name}"))?;
    let nodes = info["nodes"].as_array().ok_or("numa info without nodes")?;
    let rows = info["distances"]
        .as_array()
        .ok_or("numa info without distances")?;
    if nodes.len() != rows.len() {
        return Err(format!(
            "numa_infos.{info_name}: {} nodes but {} distance rows",
            nodes.len(),
            rows.len()
        ));
    }
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
    let mut node = node_with_gates(input)?;
    node.topology_manager_policy =
        Some(kubelet_enum(input, "policy")?.ok_or_else(|| "policy is missing".to_string())?);
    node.topology_manager_policy_options =
        policy_options("input.policy_options", &input["policy_options"])?;
    let providers = input["providers_hints"]
        .as_array()
        .ok_or("input.providers_hints is not a list")?
        .iter()
        .map(|provider| -> Checked<wit::ProviderHints> {
            let map = match provider {
                Value::Null => return Ok(None),
                Value::Object(map) => map,
                other => return Err(format!("a provider's hints are not a map: {other}")),
            };
            map.iter()
                .map(|(resource, hints)| {
                    Ok(wit::ResourceHints {
                        resource_name: resource.clone(),
                        hints: match hints {
                            Value::Null => None,
                            Value::Array(list) => {
                                Some(list.iter().map(vector_hint).collect::<Checked<Vec<_>>>()?)
                            }
                            other => {
                                return Err(format!("hints of {resource} are not a list: {other}"));
                            }
                        },
                    })
                })
                .collect::<Checked<Vec<_>>>()
                .map(Some)
        })
        .collect::<Checked<Vec<_>>>()?;
    let want_error = manager_want_messages(expected)?;
    let request = wit::ManagerRequest::TopologyMerge(providers);
    let mut problems = Vec::new();
    match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Merged(merged)) => {
            check_manager_error(&mut problems, &want_error, None);
            if expected.get("hint").is_some() || want_error.is_empty() {
                let want = vector_hint(&expected["hint"])?;
                check_eq(&mut problems, "hint", merged.hint, want);
            }
            if let Some(admit) = opt_bool(expected, "admit").map_err(|e| format!("expected.{e}"))? {
                check_eq(&mut problems, "admit", merged.admit, admit);
            }
        }
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => {
            check_manager_error(&mut problems, &want_error, Some(&e));
            for key in ["hint", "admit"] {
                if expected.get(key).is_some_and(|v| !v.is_null()) {
                    problems.push(format!("expected.{key} given, but the merge failed"));
                }
            }
        }
    }
    finish(problems)
}

/// `takeByTopologyNUMAPacked` / `takeByTopologyNUMADistributed`. The static
/// policy options that choose the pickers' arguments (`options`) must agree
/// with the explicit `sorting` / `prefer_align_by_uncore_cache`.
fn take_case(
    policy: &PolicyRuntime,
    file: &Value,
    function: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    input_fields(
        input,
        &[
            "topology",
            "available",
            "num_cpus",
            "cpu_group_size",
            "sorting",
            "prefer_align_by_uncore_cache",
            "options",
            "featureGates",
            "feature_gates",
        ],
    )?;
    let mut known = vec!["cpuset"];
    known.extend(ERROR_KEYS);
    expected_fields(expected, &known)?;
    let topology = vector_topology(file, req_str(input, "topology")?)?;
    let mut sorting = match opt_str(input, "sorting")? {
        None => None,
        Some("packed") => Some(wit::CpuSortingStrategy::Packed),
        Some("spread") => Some(wit::CpuSortingStrategy::Spread),
        Some(other) => return Err(format!("unknown sorting `{other}`")),
    };
    let mut prefer_uncore = opt_bool(input, "prefer_align_by_uncore_cache")?;
    for option in policy_options("input.options", &input["options"])? {
        let on = match option.value.as_str() {
            "true" => true,
            "false" => false,
            other => return Err(format!("option {} is not a boolean: {other}", option.name)),
        };
        let (slot_name, implied) = match option.name.as_str() {
            "distribute-cpus-across-cores" => (
                "sorting",
                if on {
                    wit::CpuSortingStrategy::Spread
                } else {
                    wit::CpuSortingStrategy::Packed
                },
            ),
            "prefer-align-cpus-by-uncorecache" => {
                match prefer_uncore {
                    Some(explicit) if explicit != on => {
                        return Err(format!(
                            "option {} = {on} contradicts prefer_align_by_uncore_cache = {explicit}",
                            option.name
                        ));
                    }
                    _ => prefer_uncore = Some(on),
                }
                continue;
            }
            other => {
                return Err(format!(
                    "option {other} does not select an argument of {function}; the case cannot be checked"
                ));
            }
        };
        match sorting {
            Some(explicit) if explicit != implied => {
                return Err(format!(
                    "option {} = {on} contradicts {slot_name} = {explicit:?}",
                    option.name
                ));
            }
            _ => sorting = Some(implied),
        }
    }
    let request = wit::ManagerRequest::TakeCpus(wit::TakeCpusRequest {
        algorithm: if function == "takeByTopologyNUMAPacked" {
            wit::TakeAlgorithm::NumaPacked
        } else {
            wit::TakeAlgorithm::NumaDistributed
        },
        available: req_str(input, "available")?.to_string(),
        num_cpus: as_u32(&input["num_cpus"], "num_cpus")?,
        cpu_group_size: match opt_u64(input, "cpu_group_size")? {
            None => 1,
            Some(_) => as_u32(&input["cpu_group_size"], "cpu_group_size")?,
        },
        sorting: sorting.unwrap_or(wit::CpuSortingStrategy::Packed),
        prefer_align_by_uncore_cache: prefer_uncore.unwrap_or(false),
    });
    let want_error = manager_want_messages(expected)?;
    let mut problems = Vec::new();
    match operation(policy, &request, &topology, &node_with_gates(input)?)? {
        Ok(wit::ManagerResponse::Cpus(got)) => {
            check_manager_error(&mut problems, &want_error, None);
            if expected.get("cpuset").is_some() || want_error.is_empty() {
                check_eq(
                    &mut problems,
                    "cpuset",
                    cpus(&got)?,
                    vector_cpus(&expected["cpuset"])?,
                );
            }
        }
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => {
            check_manager_error(&mut problems, &want_error, Some(&e));
            if expected.get("cpuset").is_some_and(|v| !v.is_null()) {
                problems.push("expected.cpuset given, but the call failed".into());
            }
        }
    }
    finish(problems)
}

/// Static CPU policy `Start` / `NewStaticPolicy+Start`: `new_policy_error`
/// is `NewStaticPolicy`'s error, `error` the one of `Start` (a failed start
/// leaves the state as loaded).
fn cpu_start_case(
    policy: &PolicyRuntime,
    file: &Value,
    case_name: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    cpu_input_fields(input, &[])?;
    let mut known = vec!["default_cpuset", "new_policy_error"];
    known.extend(ERROR_KEYS);
    expected_fields(expected, &known)?;
    let topology = vector_topology(file, req_str(input, "topology")?)?;
    let node = static_cpu_node(input, case_name)?;
    let state = vector_cpu_state(&input["state"])?;
    let loaded_default = state.cpu.default_cpuset.clone();
    let got = operation(policy, &wit::ManagerRequest::Start(state), &topology, &node)?;
    let want_new_policy = manager_want(expected, &["new_policy_error"], StringIs::Message)?;
    let want_start = manager_want_messages(expected)?;
    let mut problems = Vec::new();
    let default_cpuset = match got {
        Ok(wit::ManagerResponse::State(state)) => {
            let mut all = want_new_policy.clone();
            all.extend(want_start.iter().cloned());
            check_manager_error(&mut problems, &all, None);
            state.cpu.default_cpuset
        }
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => {
            let (want, elsewhere) = if e.function == "NewStaticPolicy" {
                (&want_new_policy, &want_start)
            } else {
                (&want_start, &want_new_policy)
            };
            check_manager_error(&mut problems, want, Some(&e));
            if !elsewhere.is_empty() {
                problems.push(format!(
                    "{} failed, but the case expects the error of another step",
                    e.function
                ));
            }
            loaded_default
        }
    };
    if let Some(want) = expected.get("default_cpuset") {
        check_eq(
            &mut problems,
            "default cpuset",
            cpus(&default_cpuset)?,
            vector_cpus(want)?,
        );
    }
    finish(problems)
}

/// Static CPU policy `Allocate(pod, container)` with the case's hint.
fn cpu_allocate_case(
    policy: &PolicyRuntime,
    file: &Value,
    case_name: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    cpu_input_fields(input, &["pod", "container", "topology_hint"])?;
    // `note` explains the expectation in words (a string, nothing to compare).
    let mut known = vec!["allocated", "cpuset", "default_cpuset_after_alloc", "note"];
    known.extend(ERROR_KEYS);
    expected_fields(expected, &known)?;
    opt_str(expected, "note").map_err(|e| format!("expected.{e}"))?;
    let topology = vector_topology(file, req_str(input, "topology")?)?;
    let node = static_cpu_node(input, case_name)?;
    let (uid, pod) = vector_input_pod(input)?;
    let container = req_str(input, "container")?;
    let request = wit::ManagerRequest::Allocate(wit::ContainerRequest {
        manager: wit::ResourceManager::Cpu,
        state: vector_cpu_state(&input["state"])?,
        pod,
        container: container.to_string(),
        hint: vector_hint(&input["topology_hint"])?,
    });
    let want_error = manager_want_messages(expected)?;
    let want_allocated = expect_bool(expected, "allocated")?;
    let mut problems = Vec::new();
    let want_default = match expected.get("default_cpuset_after_alloc") {
        Some(want) => Some(vector_cpus(want)?),
        None => None,
    };
    let got = match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Allocated(allocation)) => {
            check_manager_error(&mut problems, &want_error, None);
            if let Some(want) = &want_default {
                check_eq(
                    &mut problems,
                    "default cpuset after allocation",
                    &cpus(&allocation.state.cpu.default_cpuset)?,
                    want,
                );
            }
            let entries = cpu_entries(&allocation.state)?;
            entries.get(&uid).and_then(|c| c.get(container)).cloned()
        }
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => {
            check_manager_error(&mut problems, &want_error, Some(&e));
            if want_default.is_some() {
                problems.push(
                    "expected.default_cpuset_after_alloc given, but the allocation failed".into(),
                );
            }
            None
        }
    };
    check_eq(&mut problems, "allocated", got.is_some(), want_allocated);
    if let Some(want) = expected.get("cpuset") {
        check_eq(
            &mut problems,
            "cpuset",
            got.unwrap_or_default(),
            vector_cpus(want)?,
        );
    }
    finish(problems)
}

/// Static CPU policy `GetTopologyHints(pod, container)` or
/// `GetPodTopologyHints(pod)` on the case's state. `expected.hints`: `null`
/// is a nil map, `{"cpu": []}` an empty list; hint lists compare as sorted
/// (upstream's hint tests sort both sides before comparing).
fn cpu_hints_case(
    policy: &PolicyRuntime,
    file: &Value,
    function: &str,
    case_name: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let pod_hints = function == "GetPodTopologyHints";
    cpu_input_fields(
        input,
        if pod_hints {
            &["pod"]
        } else {
            &["pod", "container"]
        },
    )?;
    // `note` explains the expectation in words (a string, nothing to compare).
    expected_fields(expected, &["hints", "note"])?;
    opt_str(expected, "note").map_err(|e| format!("expected.{e}"))?;
    let topology = vector_topology(file, req_str(input, "topology")?)?;
    let node = static_cpu_node(input, case_name)?;
    let (_, pod) = vector_input_pod(input)?;
    let container = if pod_hints {
        None
    } else {
        Some(req_str(input, "container")?.to_string())
    };
    let request = wit::ManagerRequest::TopologyHints(wit::HintsRequest {
        manager: wit::ResourceManager::Cpu,
        state: vector_cpu_state(&input["state"])?,
        pod,
        container,
    });
    let got = match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Hints(hints)) => memory_manager::hints_key(hints),
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => return Err(format!("unexpected error {:?}", e.message)),
    };
    let sorted = |hints: memory_manager::HintsKey| {
        hints.map(|map| {
            map.into_iter()
                .map(|(resource, list)| {
                    let list = list.map(|mut list| {
                        list.sort_by_key(|h| (h.numa_affinity.clone(), h.preferred));
                        list
                    });
                    (resource, list)
                })
                .collect::<BTreeMap<_, _>>()
        })
    };
    let want = memory_manager::expected_hints(expected)?;
    let mut problems = Vec::new();
    check_eq(&mut problems, "hints", sorted(got), sorted(want));
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
    cpu_input_fields(input, &["num_cpus", "numa_affinity", "reusable_cpus"])?;
    let mut known = vec!["cpuset"];
    known.extend(ERROR_KEYS);
    expected_fields(expected, &known)?;
    let topology = vector_topology(file, req_str(input, "topology")?)?;
    let node = static_cpu_node(input, case_name)?;
    let request = wit::ManagerRequest::AllocateCpus(wit::AllocateCpusRequest {
        state: vector_cpu_state(&input["state"])?,
        num_cpus: as_u32(&input["num_cpus"], "num_cpus")?,
        numa_affinity: vector_mask(&input["numa_affinity"])?,
        reusable: opt_str(input, "reusable_cpus")?
            .unwrap_or_default()
            .to_string(),
    });
    let want_error = manager_want_messages(expected)?;
    let mut problems = Vec::new();
    match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::CpusAllocated(got)) => {
            check_manager_error(&mut problems, &want_error, None);
            if expected.get("cpuset").is_some() || want_error.is_empty() {
                check_eq(
                    &mut problems,
                    "cpuset",
                    cpus(&got.cpus)?,
                    vector_cpus(&expected["cpuset"])?,
                );
            }
        }
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => {
            check_manager_error(&mut problems, &want_error, Some(&e));
            if expected.get("cpuset").is_some_and(|v| !v.is_null()) {
                problems.push("expected.cpuset given, but the call failed".into());
            }
        }
    }
    finish(problems)
}

/// `RemoveContainer` on the CPU manager: the new state, or its error.
fn remove(
    policy: &PolicyRuntime,
    topology: &wit::NodeTopology,
    node: &NodeSettings,
    state: wit::ManagerState,
    pod_uid: &str,
    container: &str,
) -> Checked<ManagerOutcome<wit::ManagerState>> {
    let request = wit::ManagerRequest::RemoveContainer(wit::RemoveRequest {
        manager: wit::ResourceManager::Cpu,
        state,
        pod_uid: pod_uid.to_string(),
        container: container.to_string(),
    });
    match operation(policy, &request, topology, node)? {
        Ok(wit::ManagerResponse::State(state)) => Ok(Ok(state)),
        Ok(other) => Err(unexpected_response(&other)),
        Err(e) => Ok(Err(e)),
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
    cpu_input_fields(input, &["pod_uid", "container"])?;
    let mut known = vec!["default_cpuset", "container_removed"];
    known.extend(ERROR_KEYS);
    expected_fields(expected, &known)?;
    let topology = vector_topology(file, req_str(input, "topology")?)?;
    let node = static_cpu_node(input, case_name)?;
    let uid = req_str(input, "pod_uid")?;
    let container = req_str(input, "container")?;
    let start = vector_cpu_state(&input["state"])?;
    let want_error = manager_want_messages(expected)?;
    let mut problems = Vec::new();
    let state = match remove(policy, &topology, &node, start.clone(), uid, container)? {
        Ok(state) => {
            check_manager_error(&mut problems, &want_error, None);
            state
        }
        Err(e) => {
            check_manager_error(&mut problems, &want_error, Some(&e));
            start
        }
    };
    if expected.get("default_cpuset").is_some() || want_error.is_empty() {
        check_eq(
            &mut problems,
            "default cpuset",
            cpus(&state.cpu.default_cpuset)?,
            vector_cpus(&expected["default_cpuset"])?,
        );
    }
    if expected.get("container_removed").is_some() || want_error.is_empty() {
        let removed = !cpu_entries(&state)?
            .get(uid)
            .is_some_and(|c| c.contains_key(container));
        check_eq(
            &mut problems,
            "container removed",
            removed,
            expect_bool(expected, "container_removed")?,
        );
    }
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
    cpu_input_fields(input, &["pod", "remove_container", "topology_hint"])?;
    // `note` explains the expectation in words (a string, nothing to compare).
    let mut known = vec![
        "default_cpuset_after_alloc",
        "default_cpuset_after_remove",
        "assignments",
        "note",
    ];
    known.extend(ERROR_KEYS);
    expected_fields(expected, &known)?;
    opt_str(expected, "note").map_err(|e| format!("expected.{e}"))?;
    let topology = vector_topology(file, req_str(input, "topology")?)?;
    let node = static_cpu_node(input, case_name)?;
    let (uid, pod) = vector_input_pod(input)?;
    let remove_container = opt_str(input, "remove_container")?;
    if remove_container.is_some() && expected.get("assignments").is_some() {
        return Err("expected.assignments is the state after the allocations: give it without input.remove_container".into());
    }
    if remove_container.is_none() && expected.get("default_cpuset_after_remove").is_some() {
        return Err(
            "expected.default_cpuset_after_remove is given but input.remove_container is not"
                .into(),
        );
    }
    let request = wit::ManagerRequest::AllocateContainers(wit::PodRequest {
        manager: wit::ResourceManager::Cpu,
        state: vector_cpu_state(&input["state"])?,
        pod,
        hint: vector_hint(&input["topology_hint"])?,
    });
    let want_error = manager_want_messages(expected)?;
    let mut problems = Vec::new();
    let allocated = match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Allocated(allocation)) => allocation.state,
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => {
            check_manager_error(&mut problems, &want_error, Some(&e));
            for key in [
                "default_cpuset_after_alloc",
                "default_cpuset_after_remove",
                "assignments",
            ] {
                if expected.get(key).is_some() {
                    problems.push(format!("expected.{key} given, but the allocation failed"));
                }
            }
            return finish(problems);
        }
    };
    check_eq(
        &mut problems,
        "default cpuset after allocation",
        cpus(&allocated.cpu.default_cpuset)?,
        vector_cpus(&expected["default_cpuset_after_alloc"])?,
    );
    if let Some(want) = expected.get("assignments") {
        check_eq(
            &mut problems,
            "assignments after allocation",
            cpu_entries(&allocated)?,
            vector_entries(want)?,
        );
    }
    let mut failure = None;
    if let Some(container) = remove_container {
        match remove(policy, &topology, &node, allocated, &uid, container)? {
            Ok(after) => check_eq(
                &mut problems,
                "default cpuset after removal",
                cpus(&after.cpu.default_cpuset)?,
                vector_cpus(&expected["default_cpuset_after_remove"])?,
            ),
            Err(e) => failure = Some(e),
        }
    }
    check_manager_error(&mut problems, &want_error, failure.as_ref());
    finish(problems)
}

fn names(what: &str, value: &Value) -> Checked<BTreeSet<String>> {
    Ok(string_list(what, value)?.into_iter().collect())
}

/// What a rejected pod gets: nothing.
fn no_assignment() -> wit::PodAssignment {
    wit::PodAssignment {
        pod_cpuset: None,
        pod_shared_pool: None,
        pod_memory: Vec::new(),
        pod_cfs_quota_disabled: false,
        node_shared_pool: String::new(),
        containers: Vec::new(),
    }
}

/// KEP-5526 `AllocatePod` (pod scope) and `AllocateContainerScope`
/// (`Allocate` per container), with the checks both files' `notes` ask for.
/// `error` strings are the error's type (`EmptyPodSharedPoolError`); a
/// rejected pod has no assignment, so every size and list compares with an
/// empty one.
fn pod_allocation_case(
    policy: &PolicyRuntime,
    file: &Value,
    function: &str,
    case_name: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    // `pod_builder` names the upstream helper that built the pod; the pod
    // itself is given in full.
    cpu_input_fields(input, &["pod", "topology_hint", "pod_builder"])?;
    opt_str(input, "pod_builder")?;
    let mut known = vec![
        "admitted",
        "assignments",
        "default_cpuset",
        "metrics",
        "podSetSize",
        "exclusiveSizes",
        "sharedPoolSize",
        "sharedContainers",
        "nodeSharedContainers",
    ];
    known.extend(ERROR_KEYS);
    expected_fields(expected, &known)?;
    let metrics = &expected["metrics"];
    known_keys_opt(
        "expected.metrics",
        metrics,
        &[
            "allocs",
            "exclusive_assignments",
            "pod_shared_pool_assignments",
            "errors",
        ],
    )?;
    let topology = vector_topology(file, req_str(input, "topology")?)?;
    let node = static_cpu_node(input, case_name)?;
    let (uid, pod) = vector_input_pod(input)?;
    let uid = uid.as_str();
    let start_state = vector_cpu_state(&input["state"])?;
    let pod_request = wit::PodRequest {
        manager: wit::ResourceManager::Cpu,
        state: start_state.clone(),
        pod,
        hint: vector_hint(&input["topology_hint"])?,
    };
    let request = if function == "AllocatePod" {
        wit::ManagerRequest::AllocatePod(pod_request)
    } else {
        wit::ManagerRequest::AllocateContainers(pod_request)
    };
    let want_error = manager_want(expected, &ERROR_KEYS, StringIs::Type)?;
    let mut problems = Vec::new();
    let (state, assignment) = match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Allocated(allocation)) => {
            check_manager_error(&mut problems, &want_error, None);
            (allocation.state, Some(allocation.assignment))
        }
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => {
            check_manager_error(&mut problems, &want_error, Some(&e));
            (start_state, None)
        }
    };
    let admitted = assignment.is_some();
    if let Some(want) = opt_bool(expected, "admitted").map_err(|e| format!("expected.{e}"))? {
        check_eq(&mut problems, "admitted", admitted, want);
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
    let assignment = assignment.unwrap_or_else(no_assignment);
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
    let count = |key: &str| -> Checked<Option<u64>> {
        opt_u64(metrics, key).map_err(|e| format!("expected.metrics.{e}"))
    };
    if let Some(allocs) = count("allocs")? {
        let held = cpu_entries(&state)?.get(uid).map_or(0, BTreeMap::len);
        check_eq(&mut problems, "allocs", held as u64, allocs);
    }
    if let Some(n) = count("exclusive_assignments")? {
        check_eq(
            &mut problems,
            "exclusive assignments",
            exclusive.len() as u64,
            n,
        );
    }
    if let Some(n) = count("pod_shared_pool_assignments")? {
        check_eq(
            &mut problems,
            "pod shared pool assignments",
            pod_shared.len() as u64,
            n,
        );
    }
    if let Some(n) = count("errors")? {
        check_eq(&mut problems, "errors", u64::from(!admitted), n);
    }
    let set = |text: &Option<String>| text.as_deref().map_or(Ok(CpuSet::new()), cpus);
    let pod_set = set(&assignment.pod_cpuset)?;
    let pool = set(&assignment.pod_shared_pool)?;
    let size = |key: &str| -> Checked<Option<u64>> {
        opt_u64(expected, key).map_err(|e| format!("expected.{e}"))
    };
    if let Some(size) = size("podSetSize")? {
        check_eq(&mut problems, "pod set size", pod_set.len() as u64, size);
    }
    match expected.get("exclusiveSizes") {
        None => {}
        Some(Value::Object(want)) => {
            let want = want
                .iter()
                .map(|(k, v)| {
                    v.as_u64()
                        .map(|n| (k.clone(), n))
                        .ok_or_else(|| format!("expected.exclusiveSizes[{k}] is not a count: {v}"))
                })
                .collect::<Checked<BTreeMap<String, u64>>>()?;
            let got = exclusive
                .iter()
                .map(|(k, v)| Ok((k.clone(), set(v)?.len() as u64)))
                .collect::<Checked<BTreeMap<_, _>>>()?;
            check_eq(&mut problems, "exclusive sizes", got, want);
        }
        Some(other) => return Err(format!("expected.exclusiveSizes is not a map: {other}")),
    }
    if let Some(size) = size("sharedPoolSize")? {
        check_eq(&mut problems, "shared pool size", pool.len() as u64, size);
    }
    if let Some(want) = expected.get("nodeSharedContainers") {
        check_eq(
            &mut problems,
            "node shared containers",
            node_shared,
            names("expected.nodeSharedContainers", want)?,
        );
    }
    let long_running: Vec<&wit::ContainerAssignment> = assignment
        .containers
        .iter()
        .filter(|c| c.kind != wit::ContainerKind::Init)
        .collect();
    if let Some(want) = expected.get("sharedContainers") {
        let want = names("expected.sharedContainers", want)?;
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
