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

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
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
    /// Start `threads` evaluation threads. They end when the pool is dropped.
    pub(crate) fn start(threads: usize) -> Result<EvaluationPool> {
        let (queue, jobs) = channel::<Job>();
        let jobs = Arc::new(Mutex::new(jobs));
        for i in 0..threads.max(1) {
            let jobs = jobs.clone();
            std::thread::Builder::new()
                .name(format!("podpolicy-eval-{i}"))
                .spawn(move || worker(&jobs))
                .context("starting an evaluation thread")?;
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

fn worker(jobs: &Mutex<Receiver<Job>>) {
    let mut pending = next(jobs);
    // One pass per policy version: `warm` borrows `runtime`, so it lives
    // inside the pass and a job for another version starts a new pass.
    while let Some(first) = pending.take() {
        let runtime = first.policy.clone();
        let mut warm: Option<WarmPolicy<'_>> = None;
        let mut served = 0u32;
        let mut job = first;
        loop {
            if warm.is_none() || served >= RECYCLE_AFTER {
                warm = match runtime.warm() {
                    Ok(instance) => Some(instance),
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "cannot keep a warm policy instance; using a fresh one per call");
                        None
                    }
                };
                served = 0;
            }
            let result = match warm.as_mut() {
                Some(instance) => review::review(instance, &job.node, job.endpoint, &job.request),
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
            match next(jobs) {
                Some(following) if Arc::ptr_eq(&following.policy, &runtime) => job = following,
                Some(following) => {
                    pending = Some(following);
                    break;
                }
                None => return,
            }
        }
    }
}
