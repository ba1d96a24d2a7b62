//! The `Plugin` service the runtime calls (conn 1): each RPC hands its
//! request to the [`Engine`] on a blocking thread and waits at most the
//! answer deadline. A policy error, trap or timeout answers "no change"
//! (an empty adjustment or update list), logs a warning and counts the
//! outcome: the runtime never sees a plugin error for an event the plugin
//! subscribed to, and a container is never failed by the plugin.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ttrpc::r#async::TtrpcContext;

use super::engine::{Engine, Outcome};
use super::proto::{api, api_ttrpc};
use super::{event, runtime_nri};
use crate::metrics::{Metrics, NriEventLabels};

/// The plugin service.
pub struct PluginService {
    engine: Arc<Mutex<Engine>>,
    metrics: Arc<Metrics>,
    deadline: Duration,
    /// Set once `Configure` arrived (the runtime accepted the plugin).
    pub configured: Arc<tokio::sync::Notify>,
    /// `Synchronize` chunks received with `more` set, answered together
    /// with the last one.
    pending_sync: Mutex<(Vec<api::PodSandbox>, Vec<api::Container>)>,
    /// The runtime's service (conn 2), once registered: the updates of an
    /// event that has no answer to carry them (`StateChange`) go to its
    /// `UpdateContainers`.
    runtime: OnceLock<api_ttrpc::RuntimeClient>,
}

impl PluginService {
    /// A service answering from `engine` within `deadline` per request.
    pub fn new(engine: Arc<Mutex<Engine>>, metrics: Arc<Metrics>, deadline: Duration) -> Self {
        PluginService {
            engine,
            metrics,
            deadline,
            configured: Arc::new(tokio::sync::Notify::new()),
            pending_sync: Mutex::new((Vec::new(), Vec::new())),
            runtime: OnceLock::new(),
        }
    }

    /// The runtime's service for unsolicited updates (set once, after
    /// registration).
    pub fn set_runtime(&self, client: api_ttrpc::RuntimeClient) {
        let _ = self.runtime.set(client);
    }

    /// Send `updates` to the runtime's `UpdateContainers` without waiting:
    /// the event's own answer must not wait on a call back into the runtime
    /// (which may still be dispatching that event). A failure is logged and
    /// counted; `Synchronize` repairs what it left.
    fn push_updates(&self, event: &'static str, updates: Vec<api::ContainerUpdate>) {
        if updates.is_empty() {
            return;
        }
        let Some(client) = self.runtime.get().cloned() else {
            tracing::warn!(
                event,
                updates = updates.len(),
                "shared-pool updates not sent: not registered with the runtime"
            );
            return;
        };
        let metrics = self.metrics.clone();
        let deadline = self.deadline;
        tokio::spawn(async move {
            let mut req = api::UpdateContainersRequest::new();
            let n = updates.len();
            req.update = updates;
            let outcome = match client
                .update_containers(
                    ttrpc::context::with_timeout(deadline.as_nanos() as i64),
                    &req,
                )
                .await
            {
                Ok(resp) if resp.failed.is_empty() => {
                    tracing::info!(event, updates = n, "shared-pool updates sent");
                    "answered"
                }
                Ok(resp) => {
                    let failed: Vec<&str> = resp
                        .failed
                        .iter()
                        .map(|u| u.container_id.as_str())
                        .collect();
                    tracing::warn!(
                        event,
                        ?failed,
                        "the runtime failed some shared-pool updates"
                    );
                    "error"
                }
                Err(e) => {
                    tracing::warn!(event, error = %e, "shared-pool updates not applied by the runtime");
                    "error"
                }
            };
            metrics
                .nri_events
                .get_or_create(&NriEventLabels {
                    event: "update_containers".into(),
                    outcome: outcome.into(),
                })
                .inc();
        });
    }

    /// Run `work` on the engine within the deadline; `None` on an error or
    /// timeout (logged and counted as such).
    async fn answer<T: Send + 'static>(
        &self,
        event: &'static str,
        subject: String,
        work: impl FnOnce(&mut Engine) -> anyhow::Result<(T, Outcome, String)> + Send + 'static,
    ) -> Option<T> {
        let began = Instant::now();
        let engine = self.engine.clone();
        let (answer, answered) = tokio::sync::oneshot::channel();
        // The blocking task hands the answer over as soon as it has it, then
        // (still holding the engine, so the next event finds it done)
        // replaces the files of a commit that was made durable as its
        // intent record only (`Engine::answer_on_durable_record`). A panic
        // drops `answer` unsent.
        tokio::task::spawn_blocking(move || {
            let mut engine = match engine.lock() {
                Ok(engine) => engine,
                Err(_) => {
                    let _ = answer.send(Err(anyhow::anyhow!(
                        "the engine's lock is poisoned (an earlier answer panicked)"
                    )));
                    return;
                }
            };
            let _ = answer.send(work(&mut engine));
            if let Err(e) = engine.finish_recorded() {
                tracing::warn!(event, error = %format!("{e:#}"), "the state files lag their durable commit record; the next commit or a restart replaces them");
            }
        });
        let (value, outcome) = match tokio::time::timeout(self.deadline, answered).await {
            Ok(Ok(Ok((value, outcome, detail)))) => {
                let label = match outcome {
                    Outcome::Answered => "answered",
                    Outcome::Nothing => "nothing",
                };
                tracing::info!(event, %subject, outcome = label, %detail, elapsed_ms = began.elapsed().as_secs_f64() * 1e3, "NRI event");
                (Some(value), label)
            }
            Ok(Ok(Err(e))) => {
                tracing::warn!(event, %subject, error = %format!("{e:#}"), "NRI event: no change (policy or input error; the runtime's values stand)");
                (None, "error")
            }
            Ok(Err(_)) => {
                tracing::warn!(event, %subject, "NRI event: no change (the answer panicked)");
                (None, "error")
            }
            Err(_) => {
                tracing::warn!(event, %subject, deadline_ms = self.deadline.as_millis() as u64, "NRI event: no change (no answer within the deadline)");
                (None, "timeout")
            }
        };
        self.metrics
            .nri_events
            .get_or_create(&NriEventLabels {
                event: event.into(),
                outcome: outcome.into(),
            })
            .inc();
        self.metrics
            .nri_answer_seconds
            .observe(began.elapsed().as_secs_f64());
        value
    }
}

fn subject(pod: Option<&api::PodSandbox>, container: Option<&api::Container>) -> String {
    let pod = pod
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .unwrap_or_default();
    match container {
        Some(c) => format!("{pod}/{}", c.name),
        None => pod,
    }
}

#[async_trait]
impl api_ttrpc::Plugin for PluginService {
    async fn configure(
        &self,
        _ctx: &TtrpcContext,
        req: api::ConfigureRequest,
    ) -> ttrpc::Result<api::ConfigureResponse> {
        let nri = runtime_nri(&req.runtime_name, &req.runtime_version, &req.NRI_version);
        let events = nri.events();
        tracing::info!(
            runtime = %req.runtime_name,
            version = %req.runtime_version,
            nri_version = %req.NRI_version,
            nri = %nri.basis,
            update_pod_sandbox = nri.update_pod_sandbox,
            request_timeout_ms = req.request_timeout,
            events = format!("{events:#x}"),
            "NRI configure"
        );
        if req.request_timeout > 0 && self.deadline.as_millis() as i64 >= req.request_timeout {
            tracing::warn!(
                request_timeout_ms = req.request_timeout,
                deadline_ms = self.deadline.as_millis() as u64,
                "the runtime's request timeout is not above the plugin's answer deadline"
            );
        }
        self.metrics
            .nri_events
            .get_or_create(&NriEventLabels {
                event: "configure".into(),
                outcome: "answered".into(),
            })
            .inc();
        self.configured.notify_one();
        let mut resp = api::ConfigureResponse::new();
        resp.events = events;
        Ok(resp)
    }

    async fn synchronize(
        &self,
        _ctx: &TtrpcContext,
        req: api::SynchronizeRequest,
    ) -> ttrpc::Result<api::SynchronizeResponse> {
        let mut resp = api::SynchronizeResponse::new();
        // A large node arrives in chunks: collect them, answer with the last.
        let (pods, containers) = {
            let Ok(mut pending) = self.pending_sync.lock() else {
                return Ok(resp);
            };
            pending.0.extend(req.pods);
            pending.1.extend(req.containers);
            if req.more {
                resp.more = true;
                return Ok(resp);
            }
            std::mem::take(&mut *pending)
        };
        let subject = format!("pods={} containers={}", pods.len(), containers.len());
        // Evaluations stop at half the deadline; what is left waits for its
        // next event (a policy slower than that is answered "no change").
        let budget = Instant::now() + self.deadline / 2;
        let updates = self
            .answer("synchronize", subject, move |engine| {
                let (updates, detail) = engine.synchronize(&pods, &containers, budget)?;
                let outcome = if updates.is_empty() {
                    Outcome::Nothing
                } else {
                    Outcome::Answered
                };
                Ok((updates, outcome, detail))
            })
            .await
            .unwrap_or_default();
        resp.update = updates;
        Ok(resp)
    }

    async fn shutdown(&self, _ctx: &TtrpcContext, _req: api::Empty) -> ttrpc::Result<api::Empty> {
        tracing::info!("NRI shutdown requested by the runtime");
        Ok(api::Empty::new())
    }

    async fn create_container(
        &self,
        _ctx: &TtrpcContext,
        req: api::CreateContainerRequest,
    ) -> ttrpc::Result<api::CreateContainerResponse> {
        let subject = subject(req.pod.as_ref(), req.container.as_ref());
        let answer = self
            .answer("create_container", subject, move |engine| {
                let pod = req.pod.unwrap_or_default();
                let container = req.container.unwrap_or_default();
                let (adjust, updates, detail) = engine.create_container(&pod, &container)?;
                Ok(((adjust, updates), Outcome::Answered, detail))
            })
            .await;
        let mut resp = api::CreateContainerResponse::new();
        if let Some((adjust, updates)) = answer {
            resp.adjust = Some(adjust).into();
            resp.update = updates;
        }
        Ok(resp)
    }

    async fn update_container(
        &self,
        _ctx: &TtrpcContext,
        req: api::UpdateContainerRequest,
    ) -> ttrpc::Result<api::UpdateContainerResponse> {
        let subject = subject(req.pod.as_ref(), req.container.as_ref());
        let updates = self
            .answer("update_container", subject, move |engine| {
                let pod = req.pod.unwrap_or_default();
                let container = req.container.unwrap_or_default();
                let requested = req.linux_resources.unwrap_or_default();
                let (updates, detail) = engine.update_container(&pod, &container, &requested)?;
                Ok((updates, Outcome::Answered, detail))
            })
            .await
            .unwrap_or_default();
        let mut resp = api::UpdateContainerResponse::new();
        resp.update = updates;
        Ok(resp)
    }

    async fn stop_container(
        &self,
        _ctx: &TtrpcContext,
        req: api::StopContainerRequest,
    ) -> ttrpc::Result<api::StopContainerResponse> {
        let subject = subject(req.pod.as_ref(), req.container.as_ref());
        let updates = self
            .answer("stop_container", subject, move |engine| {
                let pod = req.pod.unwrap_or_default();
                let container = req.container.unwrap_or_default();
                let (outcome, updates) = engine.release_container(&pod, &container, false)?;
                let detail = format!("released shared_pool_updates={}", updates.len());
                Ok((updates, outcome, detail))
            })
            .await
            .unwrap_or_default();
        let mut resp = api::StopContainerResponse::new();
        resp.update = updates;
        Ok(resp)
    }

    async fn update_pod_sandbox(
        &self,
        _ctx: &TtrpcContext,
        req: api::UpdatePodSandboxRequest,
    ) -> ttrpc::Result<api::UpdatePodSandboxResponse> {
        let subject = subject(req.pod.as_ref(), None);
        self.answer("update_pod_sandbox", subject, move |engine| {
            let pod = req.pod.unwrap_or_default();
            let resources = req.linux_resources.unwrap_or_default();
            let (outcome, detail) = engine.update_pod_sandbox(&pod, &resources)?;
            Ok(((), outcome, detail))
        })
        .await;
        Ok(api::UpdatePodSandboxResponse::new())
    }

    async fn state_change(
        &self,
        _ctx: &TtrpcContext,
        req: api::StateChangeEvent,
    ) -> ttrpc::Result<api::Empty> {
        let subject = subject(req.pod.as_ref(), req.container.as_ref());
        let kind = req.event.value();
        let pod = req.pod.unwrap_or_default();
        let container = req.container.unwrap_or_default();
        match kind {
            event::RUN_POD_SANDBOX => {
                self.answer("run_pod_sandbox", subject, move |engine| {
                    let (outcome, detail) = engine.run_pod_sandbox(&pod)?;
                    Ok(((), outcome, detail))
                })
                .await;
            }
            event::REMOVE_POD_SANDBOX => {
                let updates = self
                    .answer("remove_pod_sandbox", subject, move |engine| {
                        let (outcome, updates) = engine.remove_pod_sandbox(&pod)?;
                        let detail = format!("released shared_pool_updates={}", updates.len());
                        Ok((updates, outcome, detail))
                    })
                    .await;
                self.push_updates("remove_pod_sandbox", updates.unwrap_or_default());
            }
            event::STOP_CONTAINER | event::REMOVE_CONTAINER => {
                let (name, forget) = if kind == event::STOP_CONTAINER {
                    ("stop_container", false)
                } else {
                    ("remove_container", true)
                };
                let updates = self
                    .answer(name, subject, move |engine| {
                        let (outcome, updates) =
                            engine.release_container(&pod, &container, forget)?;
                        let detail = format!("released shared_pool_updates={}", updates.len());
                        Ok((updates, outcome, detail))
                    })
                    .await;
                self.push_updates(name, updates.unwrap_or_default());
            }
            other => {
                tracing::debug!(event = other, %subject, "NRI state change not subscribed to; ignored");
            }
        }
        Ok(api::Empty::new())
    }
}
