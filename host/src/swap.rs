//! Hot swap of policy versions: the one place that decides which compiled
//! policy serves calls.
//!
//! A [`PolicySlot`] holds the serving [`PolicyRuntime`] behind an `Arc`;
//! callers take [`PolicySlot::current`] once per request and keep using that
//! version until they are done, so a swap never interrupts a call in flight.
//! A candidate goes through [`PolicySlot::activate`]: it is compiled off the
//! serving path by the caller, then vetted (WIT version, the built-in
//! self-check, a shadow evaluation of the pods the node runs) and only then
//! swapped in with one pointer store. Any failure leaves the serving version
//! untouched and says why. [`PolicySlot::rollback`] returns to the version
//! served before the last swap.

use std::sync::{Arc, RwLock};

use anyhow::{Result, anyhow, bail};

use crate::runtime::PolicyRuntime;

/// How many earlier versions are kept for rollback.
const HISTORY: usize = 4;

/// The serving policy and the versions it replaced.
pub struct PolicySlot {
    state: RwLock<SlotState>,
}

struct SlotState {
    current: Arc<PolicyRuntime>,
    /// Earlier versions, most recent last.
    previous: Vec<Arc<PolicyRuntime>>,
    swaps: u64,
}

/// What a successful swap or rollback did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwapOutcome {
    /// Digest of the version that served before.
    pub from_digest: String,
    /// Digest of the version that serves now.
    pub to_digest: String,
    /// Policy version string of the version that serves now.
    pub to_version: String,
    /// Whether this was a rollback (to the version served before).
    pub rollback: bool,
}

impl PolicySlot {
    /// A slot serving `initial`.
    pub fn new(initial: PolicyRuntime) -> PolicySlot {
        PolicySlot::from_arc(Arc::new(initial))
    }

    /// A slot serving an already shared runtime.
    pub fn from_arc(initial: Arc<PolicyRuntime>) -> PolicySlot {
        PolicySlot {
            state: RwLock::new(SlotState {
                current: initial,
                previous: Vec::new(),
                swaps: 0,
            }),
        }
    }

    /// The version serving now. Hold the `Arc` for the whole request: a swap
    /// meanwhile does not affect it.
    pub fn current(&self) -> Arc<PolicyRuntime> {
        match self.state.read() {
            Ok(state) => state.current.clone(),
            // A panic while holding the lock cannot leave the state half
            // updated (every write is a single assignment), so keep serving.
            Err(poisoned) => poisoned.into_inner().current.clone(),
        }
    }

    /// How many swaps and rollbacks have happened.
    pub fn swaps(&self) -> u64 {
        self.read().swaps
    }

    /// Digests of the versions a rollback can return to, most recent last.
    pub fn history(&self) -> Vec<String> {
        self.read()
            .previous
            .iter()
            .map(|p| p.digest().to_string())
            .collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, SlotState> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, SlotState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Vet `candidate` with `vet` (run against the candidate while the
    /// current version keeps serving) and swap it in when it passes.
    /// Activating the version that already serves is a no-op success.
    pub fn activate(
        &self,
        candidate: PolicyRuntime,
        vet: impl FnOnce(&PolicyRuntime, &PolicyRuntime) -> Result<()>,
    ) -> Result<SwapOutcome> {
        let serving = self.current();
        if serving.digest() == candidate.digest() {
            return Ok(SwapOutcome {
                from_digest: serving.digest().to_string(),
                to_digest: serving.digest().to_string(),
                to_version: serving.info().policy_version.clone(),
                rollback: false,
            });
        }
        vet(&candidate, &serving).map_err(|e| {
            anyhow!(
                "policy {} ({}) rejected, {} ({}) keeps serving: {e:#}",
                short(candidate.digest()),
                candidate.info().policy_version,
                short(serving.digest()),
                serving.info().policy_version
            )
        })?;
        let candidate = Arc::new(candidate);
        let mut state = self.write();
        if !Arc::ptr_eq(&state.current, &serving) {
            bail!(
                "policy {} rejected: another swap happened while it was being checked",
                short(candidate.digest())
            );
        }
        let outcome = SwapOutcome {
            from_digest: state.current.digest().to_string(),
            to_digest: candidate.digest().to_string(),
            to_version: candidate.info().policy_version.clone(),
            rollback: false,
        };
        let old = std::mem::replace(&mut state.current, candidate);
        state.previous.push(old);
        if state.previous.len() > HISTORY {
            state.previous.remove(0);
        }
        state.swaps += 1;
        Ok(outcome)
    }

    /// Return to the version served before the last swap.
    pub fn rollback(&self) -> Result<SwapOutcome> {
        let mut state = self.write();
        let Some(previous) = state.previous.pop() else {
            bail!("no earlier policy version to roll back to");
        };
        let outcome = SwapOutcome {
            from_digest: state.current.digest().to_string(),
            to_digest: previous.digest().to_string(),
            to_version: previous.info().policy_version.clone(),
            rollback: true,
        };
        state.current = previous;
        state.swaps += 1;
        Ok(outcome)
    }
}

/// When a serving loop last went round: the loop calls [`Heartbeat::beat`]
/// on every turn, a liveness probe (`/healthz`) asks
/// [`Heartbeat::is_alive`]. A loop stuck in a read, a write or a call
/// stops beating, and the probe says so instead of answering from another
/// thread that is still fine.
#[derive(Debug)]
pub struct Heartbeat {
    started: std::time::Instant,
    /// Milliseconds from `started` to the last beat.
    last_ms: std::sync::atomic::AtomicU64,
}

impl Default for Heartbeat {
    fn default() -> Self {
        Heartbeat::new()
    }
}

impl Heartbeat {
    /// A heartbeat that beat just now.
    pub fn new() -> Heartbeat {
        Heartbeat {
            started: std::time::Instant::now(),
            last_ms: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The loop went round.
    pub fn beat(&self) {
        let now = self.started.elapsed().as_millis() as u64;
        self.last_ms
            .fetch_max(now, std::sync::atomic::Ordering::Relaxed);
    }

    /// How long since the last beat.
    pub fn age(&self) -> std::time::Duration {
        let last = self.last_ms.load(std::sync::atomic::Ordering::Relaxed);
        let now = self.started.elapsed().as_millis() as u64;
        std::time::Duration::from_millis(now.saturating_sub(last))
    }

    /// Whether the loop beat within `max_age`.
    pub fn is_alive(&self, max_age: std::time::Duration) -> bool {
        self.age() <= max_age
    }
}

/// The first 12 hex digits of a digest, for messages.
pub fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

// The slot is shared by server threads: keep that a compile-time fact.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<PolicySlot>();
    shared::<Heartbeat>();
};
