//! The evaluation threads: `--max-concurrency` OS threads that run reviews
//! off the async runtime, each keeping one warm policy instance.
//!
//! A fresh pooled instance per call (what the rest of the host does) costs
//! an instantiation and the page faults of a new linear memory on every
//! review; the load target needs that gone. So each thread instantiates the
//! serving policy once and reuses it ([`WarmPolicy`]: full fuel and a new
//! epoch deadline per call, memory cap unchanged). The instance is dropped
//! and made again after any failed call (a trapped instance is unusable),
//! after [`RECYCLE_AFTER`] reviews (bounds what the guest's allocator can
//! accumulate), and when a review arrives for another policy version (a
//! hot swap): every review runs on the version it took from the slot.
//!
//! Every thread makes its instance when it starts, and [`EvaluationPool::start`]
//! waits for all of them: a pool of wasmtime instances too small for the
//! threads fails the start, with wasmtime's reason, instead of failing the
//! reviews that land on the last threads under load. A thread drops its
//! instance before it makes the next one, so the threads never hold more
//! than one instance each.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, anyhow};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::oneshot;

use super::review::{self, AdmissionRequest, Endpoint, Verdict};
use crate::bindings::NodeSettings;
use crate::runtime::{PolicyRuntime, WarmPolicy};

/// Reviews one warm instance serves before it is replaced.
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
    /// Start `threads` evaluation threads, each with a warm instance of
    /// `policy`, and wait until every one holds it; `warm` counts the
    /// threads holding one. The first failure to instantiate fails the
    /// start (the threads already started end). They end when the pool is
    /// dropped.
    pub(crate) fn start(
        threads: usize,
        policy: &Arc<PolicyRuntime>,
        warm: &Gauge,
    ) -> Result<EvaluationPool> {
        let (queue, jobs) = channel::<Job>();
        let jobs = Arc::new(Mutex::new(jobs));
        let (ready, started) = channel::<Result<()>>();
        let threads = threads.max(1);
        for i in 0..threads {
            let jobs = jobs.clone();
            let policy = policy.clone();
            let ready = ready.clone();
            let warm = warm.clone();
            std::thread::Builder::new()
                .name(format!("podpolicy-eval-{i}"))
                .spawn(move || worker(&jobs, policy, ready, &warm))
                .with_context(|| format!("starting evaluation thread {} of {threads}", i + 1))?;
        }
        drop(ready);
        for _ in 0..threads {
            match started.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    return Err(e.context(format!(
                        "each of the {threads} evaluation threads (--max-concurrency) keeps a policy instance"
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

/// A warm instance, counted in the warm instances gauge while held.
struct Held<'a> {
    policy: WarmPolicy<'a>,
    gauge: &'a Gauge,
}

impl<'a> Held<'a> {
    fn new(runtime: &'a PolicyRuntime, gauge: &'a Gauge) -> Result<Held<'a>> {
        let policy = runtime.warm()?;
        gauge.inc();
        Ok(Held { policy, gauge })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

fn worker(
    jobs: &Mutex<Receiver<Job>>,
    first: Arc<PolicyRuntime>,
    ready: Sender<Result<()>>,
    gauge: &Gauge,
) {
    let mut ready = Some(ready);
    let mut runtime = first;
    // A job taken from the queue for another version than `runtime`.
    let mut pending: Option<Job> = None;
    // One pass per policy version: `warm` borrows `runtime`, so it lives
    // inside the pass and a job for another version starts a new pass.
    loop {
        {
            let mut warm: Option<Held<'_>> = None;
            let mut served = 0u32;
            loop {
                if warm.is_none() || served >= RECYCLE_AFTER {
                    // The old instance goes back to the pool before the new one is made.
                    drop(warm.take());
                    warm = match Held::new(&runtime, gauge) {
                        Ok(held) => Some(held),
                        Err(e) => {
                            if let Some(ready) = ready.take() {
                                let _ = ready.send(Err(e));
                                return;
                            }
                            tracing::warn!(error = %format!("{e:#}"), "cannot keep a warm policy instance; using a fresh one per call");
                            None
                        }
                    };
                    served = 0;
                }
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Ok(()));
                }
                let Some(job) = pending.take().or_else(|| next(jobs)) else {
                    return;
                };
                if !Arc::ptr_eq(&job.policy, &runtime) {
                    pending = Some(job);
                    break;
                }
                let result = match warm.as_mut() {
                    Some(held) => {
                        review::review(&mut held.policy, &job.node, job.endpoint, &job.request)
                    }
                    None => review::review(&mut &*runtime, &job.node, job.endpoint, &job.request),
                };
                served += 1;
                if result.is_err() {
                    // A trap leaves the instance unusable; a fuel or deadline
                    // stop leaves it mid-call. Start over with a new one.
                    warm = None;
                }
                // The evaluation is over: free its place before answering, so
                // that whoever reads the answer sees the gauge already down.
                drop(job.guards);
                // The requester may have given up (deadline): nothing to do then.
                let _ = job.reply.send(result);
            }
        }
        // Only a job for another version ends a pass without returning.
        let Some(job) = pending.as_ref() else {
            return;
        };
        runtime = job.policy.clone();
    }
}
