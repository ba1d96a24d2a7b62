//! The evaluation threads: `--max-concurrency` OS threads that run reviews
//! off the async runtime, each keeping one prepared node in a warm policy
//! instance.
//!
//! A fresh pooled instance per call (what the rest of the host does) costs
//! an instantiation and the page faults of a new linear memory on every
//! review, and a one-shot export decodes the node settings on every call;
//! the load target needs both gone. So each thread prepares the webhook's
//! node settings on the serving policy once and reuses the prepared node
//! ([`PreparedPolicy`]: full fuel and a new epoch deadline per call, memory
//! cap unchanged) for `validate-pod` and `default-pod`; `pod-warnings` and
//! `resize`'s `plan` run as plain exports on the same instance. The
//! instance is dropped and made again after any failed call (a trapped
//! instance is unusable), after [`RECYCLE_AFTER`] reviews (bounds what the
//! guest's allocator can accumulate), and when a review arrives for another
//! policy version (a hot swap): every review runs on the version it took
//! from the slot, on a node prepared on that version
//! ([`PreparedPolicy::is_for`]).
//!
//! Every thread prepares its node when it starts, and
//! [`EvaluationPool::start`] waits for all of them: a pool of wasmtime
//! instances too small for the threads fails the start, with wasmtime's
//! reason, instead of failing the reviews that land on the last threads
//! under load. A thread drops its instance before it makes the next one, so
//! the threads never hold more than one instance each.
//!
//! Node settings that do not prepare on a version (its field errors) hold
//! no instance: their reviews run the one-shot exports on a fresh instance
//! per call ([`OneShot`]), whose answers report those errors exactly as
//! before the prepared node, and the thread does not try to prepare them
//! on that version again. The command checks the settings (`validate-node`)
//! before it serves, so this is for callers of `start` with settings of
//! their own and for a swapped-in version that reads them differently.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, anyhow};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::oneshot;

use super::review::{self, AdmissionRequest, Endpoint, OneShot, Verdict};
use crate::bindings::NodeSettings;
use crate::runtime::{PolicyRuntime, PreparedPolicy};

/// Reviews one prepared node (and its warm instance) serves before it is
/// replaced.
pub const RECYCLE_AFTER: u32 = 10_000;

/// One review to evaluate.
pub(crate) struct Job {
    /// The policy version taken from the slot for this review.
    pub policy: Arc<PolicyRuntime>,
    /// Node settings.
    pub node: Arc<NodeSettings>,
    /// Which webhook.
    pub endpoint: Endpoint,
    /// The parsed request.
    pub request: AdmissionRequest,
    /// Where the answer goes (the receiver may be gone after a timeout).
    pub reply: oneshot::Sender<Result<Verdict>>,
    /// Held while the job exists (concurrency permit, in-flight gauge).
    pub guards: Box<dyn Send>,
}

/// The evaluation threads have ended.
#[derive(Debug)]
pub(crate) struct Closed;

/// The threads and the queue in front of them.
pub(crate) struct EvaluationPool {
    queue: Sender<Job>,
}

impl EvaluationPool {
    /// Start `threads` evaluation threads, each with `node` prepared on
    /// `policy` in a warm instance, and wait until every one holds it;
    /// `warm` counts the threads holding one. The first failure to make one
    /// (instantiating, or preparing failing in the sandbox) fails the start
    /// (the threads already started end); settings that do not prepare
    /// (field errors) do not: then no thread holds one, and reviews run on
    /// a fresh instance per call. The threads end when the pool is dropped.
    pub(crate) fn start(
        threads: usize,
        policy: &Arc<PolicyRuntime>,
        node: &Arc<NodeSettings>,
        warm: &Gauge,
    ) -> Result<EvaluationPool> {
        let (queue, jobs) = channel::<Job>();
        let jobs = Arc::new(Mutex::new(jobs));
        let (ready, started) = channel::<Result<()>>();
        let threads = threads.max(1);
        for i in 0..threads {
            let jobs = jobs.clone();
            let policy = policy.clone();
            let node = node.clone();
            let ready = ready.clone();
            let warm = warm.clone();
            std::thread::Builder::new()
                .name(format!("podpolicy-eval-{i}"))
                .spawn(move || worker(&jobs, policy, node, ready, &warm))
                .with_context(|| format!("starting evaluation thread {} of {threads}", i + 1))?;
        }
        drop(ready);
        for _ in 0..threads {
            match started.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    return Err(e.context(format!(
                        "each of the {threads} evaluation threads (--max-concurrency) keeps a policy instance with the node settings prepared in it"
                    )));
                }
                Err(_) => return Err(anyhow!("an evaluation thread ended while starting")),
            }
        }
        Ok(EvaluationPool { queue })
    }

    /// Queue a job; `Err` when the threads are gone (the job is dropped,
    /// which releases its guards).
    pub(crate) fn submit(&self, job: Job) -> std::result::Result<(), Closed> {
        self.queue.send(job).map_err(|_| Closed)
    }
}

/// Times an idle thread yields, looking for the next job, before it
/// sleeps: under load the next review is usually microseconds away, and
/// waking a sleeping thread costs more than that on a small VM.
const YIELDS_BEFORE_SLEEP: u32 = 64;

fn next(jobs: &Mutex<Receiver<Job>>) -> Option<Job> {
    // A poisoned lock means another evaluation thread panicked while
    // waiting; the receiver itself is intact.
    let jobs = jobs.lock().unwrap_or_else(|p| p.into_inner());
    for _ in 0..YIELDS_BEFORE_SLEEP {
        match jobs.try_recv() {
            Ok(job) => return Some(job),
            Err(std::sync::mpsc::TryRecvError::Empty) => std::thread::yield_now(),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return None,
        }
    }
    jobs.recv().ok()
}

/// What one evaluation thread keeps: at most one prepared node in a warm
/// instance, counted in the warm instances gauge while held.
struct Evaluator<'a> {
    /// The prepared node of the last review's policy version and node
    /// settings; `None` after a failed call, before a recycle or a swap
    /// prepares the next one, and while the settings do not prepare.
    prepared: Option<PreparedPolicy>,
    /// Reviews the prepared node has answered.
    served: u32,
    /// A policy version and node settings that do not prepare (the node's
    /// field errors): their reviews take the fresh-instance path without
    /// preparing again, since preparing is pure.
    unpreparable: Option<(Arc<PolicyRuntime>, Arc<NodeSettings>)>,
    gauge: &'a Gauge,
    /// Whether `prepared` is counted in `gauge`.
    counted: bool,
}

impl<'a> Evaluator<'a> {
    fn new(gauge: &'a Gauge) -> Evaluator<'a> {
        Evaluator {
            prepared: None,
            served: 0,
            unpreparable: None,
            gauge,
            counted: false,
        }
    }

    /// Keep the gauge in step with `prepared`.
    fn count(&mut self) {
        match (self.prepared.is_some(), self.counted) {
            (true, false) => self.gauge.inc(),
            (false, true) => self.gauge.dec(),
            _ => return,
        };
        self.counted = !self.counted;
    }

    /// Drop the prepared node and its instance (back to the pool).
    fn drop_instance(&mut self) {
        self.prepared = None;
        self.count();
    }

    /// Hold the prepared node of `node` on `policy`: the one held when it
    /// is for them and has not served [`RECYCLE_AFTER`] reviews, else a
    /// new one, made after the old one is dropped. `Ok(false)`: the
    /// settings do not prepare on this version (field errors), so nothing
    /// is held. `Err`: the instance could not be made or the call failed
    /// in the sandbox.
    fn prepare(&mut self, policy: &Arc<PolicyRuntime>, node: &Arc<NodeSettings>) -> Result<bool> {
        if self.served >= RECYCLE_AFTER
            || self
                .prepared
                .as_ref()
                .is_some_and(|p| !p.is_for(policy, node, None))
        {
            // Before the next one is made: never two instances at once.
            self.drop_instance();
        }
        match &self.unpreparable {
            Some((p, n)) if Arc::ptr_eq(p, policy) && (Arc::ptr_eq(n, node) || **n == **node) => {
                return Ok(false);
            }
            // Another version (or settings) may prepare: try it.
            Some(_) => self.unpreparable = None,
            None => {}
        }
        if self.prepared.is_none() {
            self.served = 0;
        }
        let prepared = PreparedPolicy::reuse_or_prepare(&mut self.prepared, policy, node, None)
            .map(|answer| answer.map(|_| ()));
        self.count();
        match prepared? {
            Ok(()) => Ok(true),
            Err(errors) => {
                tracing::warn!(
                    errors = %crate::format_field_errors(&errors),
                    policy = %crate::swap::short(policy.digest()),
                    "the node settings do not prepare on this policy version; its reviews use a fresh instance per call"
                );
                self.unpreparable = Some((policy.clone(), node.clone()));
                Ok(false)
            }
        }
    }

    /// Answer one job: on the prepared node when it prepares, else on a
    /// fresh instance per call. A failed review drops the instance.
    fn answer(&mut self, job: &Job) -> Result<Verdict> {
        if let Err(e) = self.prepare(&job.policy, &job.node) {
            tracing::warn!(error = %format!("{e:#}"), "cannot keep a prepared node in a warm policy instance; using a fresh one per call");
        }
        let result = match self.prepared.as_mut() {
            Some(prepared) => {
                self.served += 1;
                review::review(prepared, job.endpoint, &job.request)
            }
            None => {
                let mut one_shot = OneShot {
                    policy: &job.policy,
                    node: &job.node,
                };
                review::review(&mut one_shot, job.endpoint, &job.request)
            }
        };
        if result.is_err() {
            // A trap leaves the instance unusable; a fuel or deadline stop
            // leaves it mid-call. The next review prepares a new one.
            self.drop_instance();
        }
        result
    }
}

impl Drop for Evaluator<'_> {
    fn drop(&mut self) {
        self.drop_instance();
    }
}

fn worker(
    jobs: &Mutex<Receiver<Job>>,
    first: Arc<PolicyRuntime>,
    node: Arc<NodeSettings>,
    ready: Sender<Result<()>>,
    gauge: &Gauge,
) {
    let mut evaluator = Evaluator::new(gauge);
    // Settings that do not prepare are not a failure to start: their
    // reviews get the one-shot exports' answers (the node's field errors).
    if let Err(e) = evaluator.prepare(&first, &node) {
        let _ = ready.send(Err(e));
        return;
    }
    drop((first, node));
    let _ = ready.send(Ok(()));
    while let Some(job) = next(jobs) {
        let result = evaluator.answer(&job);
        // The evaluation is over: free its place before answering, so
        // that whoever reads the answer sees the gauge already down.
        drop(job.guards);
        // The requester may have given up (deadline): nothing to do then.
        let _ = job.reply.send(result);
    }
}
