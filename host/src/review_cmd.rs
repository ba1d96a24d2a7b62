//! `podpolicy review FILE`: one `AdmissionReview` (JSON or YAML,
//! `admission.k8s.io/v1`) run offline through exactly what the webhook's
//! `/mutate` and `/validate` answer ([`crate::webhook::review`]), without
//! HTTP. The responses are printed as the webhook sends them, with the
//! base64 JSONPatch decoded next to them.

use std::path::Path;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use serde::Serialize;
use serde_json::Value;

use crate::bindings::NodeSettings;
use crate::runtime::PolicyRuntime;
use crate::webhook::review::{self, AdmissionResponse, Endpoint};

/// The largest review file read (the webhook's default body limit is far
/// below this; a review is a pod or two).
pub const MAX_REVIEW_BYTES: u64 = 64 << 20;

/// One endpoint's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointOut {
    /// `allowed`, `patched`, `denied` or `ignored`.
    pub outcome: &'static str,
    /// The `AdmissionReview` the webhook would send back.
    pub review: Value,
    /// The response's JSONPatch, decoded; `null` without a patch.
    pub patch: Value,
}

/// Both answers.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewReport {
    /// The review file (`<stdin>` for `-`).
    pub source: String,
    /// `request.uid`.
    pub uid: String,
    /// Whether both endpoints allow the request.
    pub allowed: bool,
    /// `/mutate`.
    pub mutate: EndpointOut,
    /// `/validate`.
    pub validate: EndpointOut,
}

impl ReviewReport {
    /// Plain text for a terminal.
    pub fn to_table(&self) -> String {
        let mut out = format!("review {} (uid {})\n", self.source, self.uid);
        for (name, endpoint) in [("mutate", &self.mutate), ("validate", &self.validate)] {
            out.push_str(&format!("{name:<9} {}\n", endpoint.outcome));
            let response = &endpoint.review["response"];
            if let Some(status) = response.get("status") {
                if let Some(message) = status.get("message").and_then(Value::as_str) {
                    out.push_str(&format!("  message: {message}\n"));
                }
                if let Some(causes) = status.pointer("/details/causes").and_then(Value::as_array) {
                    for cause in causes {
                        out.push_str(&format!(
                            "  cause: {}: {}\n",
                            cause["field"].as_str().unwrap_or_default(),
                            cause["message"].as_str().unwrap_or_default()
                        ));
                    }
                }
            }
            if let Some(ops) = endpoint.patch.as_array() {
                for op in ops {
                    out.push_str(&format!(
                        "  patch: {} {} {}\n",
                        op["op"].as_str().unwrap_or_default(),
                        op["path"].as_str().unwrap_or_default(),
                        op["value"]
                    ));
                }
            }
            if let Some(warnings) = response.get("warnings").and_then(Value::as_array) {
                for w in warnings {
                    out.push_str(&format!("  warning: {}\n", w.as_str().unwrap_or_default()));
                }
            }
        }
        out.push_str(if self.allowed {
            "allowed\n"
        } else {
            "denied\n"
        });
        out
    }
}

/// Read a review file (`-` = stdin) as the JSON body the webhook would get:
/// JSON as it is, YAML converted (an error names the line).
pub fn read_review(path: &Path) -> Result<(String, Vec<u8>)> {
    let (name, bytes) = crate::bounded_read::read_input(path, MAX_REVIEW_BYTES, "review")?;
    let text = crate::bounded_read::into_text(path, "review", bytes)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if text.trim_start().starts_with('{') {
        return Ok((name, text.as_bytes().to_vec()));
    }
    let value: Value = serde_yaml_ng::from_str(text)
        .with_context(|| format!("{name}: not a JSON or YAML AdmissionReview"))?;
    Ok((name, serde_json::to_vec(&value)?))
}

/// Run the review through `/mutate` and `/validate`.
pub fn run(
    policy: &PolicyRuntime,
    node: &NodeSettings,
    source: String,
    body: &[u8],
) -> Result<ReviewReport> {
    let request = review::parse(body).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    // A fresh instance per call, as the one-shot commands run the policy;
    // the webhook's answers on its prepared nodes are the same.
    let mut calls = review::OneShot { policy, node };
    let mut answer = |endpoint: Endpoint| -> Result<EndpointOut> {
        let verdict = review::review(&mut calls, endpoint, &request)
            .with_context(|| format!("/{}: the policy failed", endpoint.name()))?;
        Ok(EndpointOut {
            outcome: verdict.outcome.name(),
            patch: decoded_patch(&verdict.response)?,
            review: serde_json::from_slice(&review::to_body(&verdict.response))?,
        })
    };
    let mutate = answer(Endpoint::Mutate)?;
    let validate = answer(Endpoint::Validate)?;
    let allowed = mutate.review["response"]["allowed"] == Value::Bool(true)
        && validate.review["response"]["allowed"] == Value::Bool(true);
    Ok(ReviewReport {
        source,
        uid: request.uid.clone(),
        allowed,
        mutate,
        validate,
    })
}

fn decoded_patch(response: &AdmissionResponse) -> Result<Value> {
    let Some(patch) = &response.patch else {
        return Ok(Value::Null);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .context("the response's patch is not base64")?;
    let value: Value =
        serde_json::from_slice(&bytes).context("the response's patch is not JSON")?;
    if !value.is_array() {
        bail!("the response's patch is not a JSON array");
    }
    Ok(value)
}
