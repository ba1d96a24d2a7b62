//! The wasmtime side: one [`PolicyRuntime`] owns the engine, the compiled
//! policy component and its `InstancePre`; every call gets a fresh store
//! with an epoch deadline, a memory cap and, when asked for, a fuel budget,
//! so a looping, trapping or memory-hungry module costs one failed call and
//! nothing else.
//!
//! Compiled components are cached on disk keyed by the module's SHA-256 and
//! the engine's compatibility hash, so a restart does not recompile.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Instance, InstancePre, Linker, ResourceAny};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store,
    StoreLimits, StoreLimitsBuilder, Trap,
};

use crate::bindings::{ExportIndices, PodPolicy, PodPolicyPre, PolicyInfo};

mod node_cgroups_sum;
pub use node_cgroups_sum::NodeCgroupsSum;

/// The policy component built from `policy-wasm/` at build time.
pub static EMBEDDED_POLICY: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/policy.component.wasm"));

/// The WIT package version this host speaks: `wit/policy.wit`'s, which the
/// bindings are generated from (read there once, by `policy-wasm`).
pub const WIT_VERSION: &str = policy_wasm::WIT_VERSION;

/// Bytes of each pooled linear memory and table kept resident between
/// instances when the kernel has `PAGEMAP_SCAN` (Linux >= 6.7): a fresh
/// instance then reuses its slot's pages, reset by `memset` of the resident
/// ones, instead of page-faulting every page it touches again. That halved a
/// fresh 3-container evaluation here (BENCHMARKS.md). The scan finds the
/// pages ever touched in the slot, not only the last call's: without
/// userfaultfd write-protection the kernel reports every resident page as
/// written. Smaller values (down to 64 KiB) were measured: the reset gets
/// cheaper, the next call page-faults as much back, and a fresh evaluation
/// was no faster. Without the ioctl wasmtime would `memset` all of it, so
/// it stays off.
const KEEP_RESIDENT: usize = 4 << 20;

/// How often the epoch ticker advances the engine's epoch.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Policy instances an engine's pool holds when nobody reserved more
/// ([`reserve_instances`]): the CLI and the agent make one call at a time;
/// the rest is room for batch callers and tests running calls in parallel.
pub const DEFAULT_POOL_INSTANCES: usize = 64;

/// Instances a server needs on top of the ones its threads keep warm: a
/// readiness check, loading a candidate (its `policy-info` call), the
/// self-check and the shadow evaluation that vet it (each one fresh
/// instance at a time, candidate then serving version), and a warm
/// instance being replaced after a swap or a failure.
pub const POOL_HEADROOM: usize = 8;

/// The most instances one engine's pool may hold. Every pooled linear
/// memory reserves `memory_reservation` (4 GiB: 32-bit memories run without
/// bounds checks) plus a 32 MiB guard of address space, `PROT_NONE` until
/// used: 1,032 slots (1,024 concurrent evaluations and the headroom) are
/// about 4.2 TiB of the 128 TiB a process has on x86-64, and no RAM.
pub const MAX_POOL_INSTANCES: usize = 1024 + POOL_HEADROOM;

/// Core module instances, and tables, one policy component may contain
/// (`wit-component` makes one for the policy module and a few small shims at
/// most); the pool holds this many per component instance, so no component
/// within the limits can use up the pool before its instance count does.
const CORE_INSTANCES_PER_COMPONENT: u32 = 4;

/// Linear memories one policy component may contain: the policy module's.
/// The pool holds one per component instance: they are what reserves
/// address space.
const MEMORIES_PER_COMPONENT: u32 = 1;

/// Pool size for engines made from now on (see [`reserve_instances`]).
static POOL_INSTANCES: AtomicUsize = AtomicUsize::new(DEFAULT_POOL_INSTANCES);

/// Size the instance pools of the engines made from now on for
/// `concurrent` instances kept alive at once (a server's warm instances),
/// plus [`POOL_HEADROOM`]. Call it before loading the policy: an engine
/// keeps the size it was made with, and every policy loaded later with the
/// same limits (hot swap candidates) shares it. Never shrinks the size.
/// Returns the pool size engines now get.
pub fn reserve_instances(concurrent: usize) -> Result<usize> {
    let wanted = concurrent.saturating_add(POOL_HEADROOM);
    if concurrent == 0 || wanted > MAX_POOL_INSTANCES {
        bail!(
            "{concurrent} concurrent policy instances: between 1 and {} can be pooled",
            MAX_POOL_INSTANCES - POOL_HEADROOM
        );
    }
    let previous = POOL_INSTANCES.fetch_max(wanted, Ordering::SeqCst);
    Ok(previous.max(wanted))
}

/// Per-call sandbox limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Fuel per call (a deterministic instruction budget), or `None` for no
    /// fuel metering. Off by default: metering every basic block cost about
    /// a tenth of a warm evaluation (BENCHMARKS.md), and the epoch
    /// `deadline` already bounds every call. Turn it on where a budget must
    /// give the same answer on every run (fuzzing, reproducing a report).
    pub fuel: Option<u64>,
    /// Wall-clock backstop per call.
    pub deadline: Duration,
    /// Linear memory cap per instance, in bytes.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: None,
            deadline: Duration::from_secs(2),
            memory_bytes: 64 << 20,
        }
    }
}

/// Where compiled artifacts are cached.
#[derive(Clone, Debug)]
pub enum Cache {
    /// No cache: compile every time.
    Off,
    /// Cache in this directory.
    Dir(PathBuf),
}

impl Cache {
    /// `$PODPOLICY_CACHE_DIR`, else `$XDG_CACHE_HOME/podpolicy`, else `~/.cache/podpolicy`.
    pub fn default_location() -> Cache {
        if let Some(dir) = std::env::var_os("PODPOLICY_CACHE_DIR") {
            return Cache::Dir(dir.into());
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
        base.map_or(Cache::Off, |b| Cache::Dir(b.join("podpolicy")))
    }
}

/// State each store carries: its memory limiter.
pub struct CallState {
    limits: StoreLimits,
}

/// A compiled policy ready to serve calls.
pub struct PolicyRuntime {
    engine: Engine,
    instance_pre: InstancePre<CallState>,
    exports: Arc<ExportIndices>,
    limits: Limits,
    digest: String,
    info: PolicyInfo,
    compiled_from_cache: bool,
    pool_instances: usize,
}

fn engine_config(limits: &Limits, instances: usize) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.consume_fuel(limits.fuel.is_some());
    config.epoch_interruption(true);
    // `reserve_instances` bounds `instances` far below u32::MAX.
    let instances = u32::try_from(instances).unwrap_or(u32::MAX);
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(instances)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_tables_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .total_core_instances(instances.saturating_mul(CORE_INSTANCES_PER_COMPONENT))
        .total_tables(instances.saturating_mul(CORE_INSTANCES_PER_COMPONENT))
        .total_memories(instances.saturating_mul(MEMORIES_PER_COMPONENT))
        .max_memory_size(limits.memory_bytes);
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        pooling
            .linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(KEEP_RESIDENT)
            .pagemap_scan(Enabled::Yes);
    }
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    config
}

/// One engine per process, engine-level limits (memory cap, fuel on or
/// off) and pool size; the ticker thread lives as long as it. Returns the
/// engine and its pool size.
fn shared_engine(limits: &Limits) -> Result<(Engine, usize)> {
    type Key = (usize, bool, usize);
    static ENGINES: OnceLock<std::sync::Mutex<Vec<(Key, Engine)>>> = OnceLock::new();
    let instances = POOL_INSTANCES.load(Ordering::SeqCst);
    let key = (limits.memory_bytes, limits.fuel.is_some(), instances);
    let engines = ENGINES.get_or_init(Default::default);
    let mut engines = engines
        .lock()
        .map_err(|_| anyhow!("engine registry poisoned"))?;
    if let Some((_, engine)) = engines.iter().find(|(k, _)| *k == key) {
        return Ok((engine.clone(), instances));
    }
    let engine = Engine::new(&engine_config(limits, instances))
        .map_err(|e| anyhow!("creating the wasmtime engine: {e:#}"))?;
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("podpolicy-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .context("starting the epoch ticker thread")?;
    engines.push((key, engine.clone()));
    Ok((engine, instances))
}

/// Hex SHA-256 of a module.
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn compat_key(engine: &Engine) -> String {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

fn load_or_compile(
    engine: &Engine,
    wasm: &[u8],
    digest: &str,
    cache: &Cache,
    limits: &Limits,
) -> Result<(Component, bool)> {
    let cached = match cache {
        Cache::Off => None,
        Cache::Dir(dir) => Some(dir.join(format!("{digest}-{}.cwasm", compat_key(engine)))),
    };
    if let Some(path) = cached.as_ref().filter(|p| p.exists()) {
        // SAFETY: the file is named after the SHA-256 of the module we were
        // asked to run and the engine's compatibility hash, and only this
        // function writes it (temp file + rename, so never half-written).
        // wasmtime also checks the artifact header against the engine.
        match unsafe { Component::deserialize_file(engine, path) } {
            Ok(component) => return Ok((component, true)),
            Err(e) => {
                if let Some(refusal) = beyond_memory_cap(&e, limits) {
                    // The artifact is sound; this engine's cap is too small.
                    return Err(refusal);
                }
                // A stale or damaged artifact: recompile and replace it.
                let _ = std::fs::remove_file(path);
            }
        }
    }
    let component = Component::new(engine, wasm).map_err(|e| {
        beyond_memory_cap(&e, limits)
            .unwrap_or_else(|| anyhow!("compiling the policy component: {e:#}"))
    })?;
    if let Some(path) = cached
        && let Err(e) = store_artifact(&component, &path)
    {
        tracing::warn!(path = %path.display(), error = %e, "could not cache the compiled policy");
    }
    Ok((component, false))
}

/// The pooling allocator checks a module's declared memory against the cap
/// when it compiles or loads it: name the flag that sets the cap.
fn beyond_memory_cap(error: &wasmtime::Error, limits: &Limits) -> Option<anyhow::Error> {
    let text = format!("{error:#}");
    text.contains("does not fit in pooling allocator requirements")
        .then(|| {
            anyhow!(
                "the policy component's initial memory does not fit the memory cap of {} bytes (`--memory-mib`); raise the cap: {text}",
                limits.memory_bytes
            )
        })
}

fn store_artifact(component: &Component, path: &Path) -> Result<()> {
    let dir = path.parent().context("cache path has no parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let bytes = component
        .serialize()
        .map_err(|e| anyhow!("serializing the compiled policy: {e:#}"))?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} into place", tmp.display()))?;
    Ok(())
}

/// Compile `wasm` with `limits` into `cache` (when it is a directory), and
/// nothing else: what `podpolicy policy precompile` does in the child that
/// [`crate::compiler_process`] can kill. A compile error is returned.
pub fn precompile(wasm: &[u8], cache: &Cache, limits: Limits) -> Result<()> {
    let (engine, _) = shared_engine(&limits)?;
    load_or_compile(&engine, wasm, &digest(wasm), cache, &limits).map(|_| ())
}

impl PolicyRuntime {
    /// Load the embedded default policy.
    pub fn embedded(cache: &Cache, limits: Limits) -> Result<PolicyRuntime> {
        PolicyRuntime::from_bytes(EMBEDDED_POLICY, cache, limits)
    }

    /// Load a policy component from a file.
    pub fn from_file(path: &Path, cache: &Cache, limits: Limits) -> Result<PolicyRuntime> {
        // A regular file of bounded size: never a FIFO, a device or a
        // file growing without end.
        let bytes = crate::bounded_read::read_regular_file(
            path,
            crate::policy_dir::MAX_CANDIDATE_BYTES,
            "policy component",
        )?;
        PolicyRuntime::from_bytes(&bytes, cache, limits)
            .with_context(|| format!("loading policy {}", path.display()))
    }

    /// Compile (or load from cache), check imports and versions, and prepare instantiation.
    pub fn from_bytes(wasm: &[u8], cache: &Cache, limits: Limits) -> Result<PolicyRuntime> {
        let (engine, pool_instances) = shared_engine(&limits)?;
        let digest = digest(wasm);
        let (component, compiled_from_cache) =
            load_or_compile(&engine, wasm, &digest, cache, &limits)?;
        let imports: Vec<String> = component
            .component_type()
            .imports(&engine)
            .map(|(name, _)| name.to_string())
            .collect();
        if !imports.is_empty() {
            bail!(
                "the policy component imports {}; a policy must import nothing",
                imports.join(", ")
            );
        }
        let linker: Linker<CallState> = Linker::new(&engine);
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(|e| anyhow!("preparing the policy component: {e:#}"))?;
        // The generated pre-instance type-checks every export of the
        // contract; only the check is kept (see `bindings::PodPolicy`).
        match PodPolicyPre::new(instance_pre.clone()) {
            Ok(_) => {}
            Err(e) => {
                // A component of another contract version fails the type
                // check; name both versions, read from its export names
                // (`podpolicy:policy/node@X.Y.Z`, contracts since 0.9.0) or,
                // for the older flat world, from its `policy-info`.
                if let Some(version) = exported_contract_version(&engine, &component)
                    .or_else(|| other_contract_version(&engine, &instance_pre, limits))
                    && version != WIT_VERSION
                {
                    bail!(
                        "the policy implements WIT podpolicy:policy@{version}, this host speaks @{WIT_VERSION}; rebuild the policy against wit/policy.wit {WIT_VERSION}"
                    );
                }
                bail!("the component does not implement the pod-policy world: {e:#}");
            }
        }
        let exports = ExportIndices::new(&component)
            .map_err(|e| anyhow!("finding the policy's exports: {e:#}"))?;
        let mut runtime = PolicyRuntime {
            engine,
            instance_pre,
            exports: Arc::new(exports),
            limits,
            digest,
            info: PolicyInfo {
                policy_version: String::new(),
                wit_version: String::new(),
                kubernetes_version: String::new(),
                feature_gates: Vec::new(),
            },
            compiled_from_cache,
            pool_instances,
        };
        // Once per component: the signatures the calls use, against its exports.
        let (mut store, instance) = runtime.new_instance()?;
        runtime
            .exports
            .check(&mut store, &instance)
            .map_err(|e| anyhow!("the policy's exports do not match this host's calls: {e:#}"))?;
        let info = runtime.call(|policy, store| policy.call_policy_info(store))?;
        if info.wit_version != WIT_VERSION {
            bail!(
                "the policy implements WIT podpolicy:policy@{}, this host speaks @{WIT_VERSION}",
                info.wit_version
            );
        }
        runtime.info = info;
        Ok(runtime)
    }

    /// What the policy says about itself.
    pub fn info(&self) -> &PolicyInfo {
        &self.info
    }

    /// SHA-256 of the component bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Whether the compiled code came from the on-disk cache.
    pub fn compiled_from_cache(&self) -> bool {
        self.compiled_from_cache
    }

    /// How many instances of any policy on this engine can be alive at once
    /// (the pooling allocator's size; see [`reserve_instances`]).
    pub fn pool_instances(&self) -> usize {
        self.pool_instances
    }

    /// Run one call in a fresh, limited store.
    pub fn call<T>(
        &self,
        f: impl FnOnce(&PodPolicy, &mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T> {
        let (mut store, policy) = self.instance()?;
        f(&policy, &mut store).map_err(|e| describe_failure(e, "the policy call failed"))
    }
}

/// Turn a wasmtime failure into a message that says which limit was hit.
fn describe_failure(error: wasmtime::Error, context: &str) -> anyhow::Error {
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => {
            anyhow!("{context}: the policy ran out of fuel (its instruction budget)")
        }
        Some(Trap::Interrupt) => anyhow!("{context}: the policy exceeded its time budget"),
        Some(trap) => anyhow!("{context}: the policy trapped: {trap}"),
        None => {
            let text = format!("{error:#}");
            if text.contains("growing memory") {
                anyhow!("{context}: the policy exceeded its memory cap: {text}")
            } else {
                anyhow!("{context}: {text}")
            }
        }
    }
}

// ---------------------------------------------------------------------------
// A warm instance (benchmarks, batch callers)
// ---------------------------------------------------------------------------

/// The `wit-version` a component of another contract version reports,
/// through its `policy-info` export alone (a record every version shares),
/// under the same memory cap and deadline as any call; `None` when it has
/// no such export or the call fails.
/// The contract version in a component's export names: the `X.Y.Z` of the
/// first `podpolicy:policy/<interface>@X.Y.Z` it exports.
fn exported_contract_version(engine: &Engine, component: &Component) -> Option<String> {
    component
        .component_type()
        .exports(engine)
        .find_map(|(name, _)| {
            let (_, version) = name.strip_prefix("podpolicy:policy/")?.split_once('@')?;
            Some(version.to_string())
        })
}

fn other_contract_version(
    engine: &Engine,
    instance_pre: &wasmtime::component::InstancePre<CallState>,
    limits: Limits,
) -> Option<String> {
    let store_limits = StoreLimitsBuilder::new()
        .memory_size(limits.memory_bytes)
        .trap_on_grow_failure(true)
        .build();
    let mut store = Store::new(
        engine,
        CallState {
            limits: store_limits,
        },
    );
    store.limiter(|state| &mut state.limits);
    if let Some(fuel) = limits.fuel {
        store.set_fuel(fuel).ok()?;
    }
    store.set_epoch_deadline((limits.deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64);
    let instance = instance_pre.instantiate(&mut store).ok()?;
    let info = instance
        .get_typed_func::<(), (PolicyInfo,)>(&mut store, "policy-info")
        .ok()?;
    let (info,) = info.call(&mut store, ()).ok()?;
    Some(info.wit_version)
}

/// One policy instance kept across calls, for callers that make many calls
/// in a row and want to skip the per-call instantiation (benchmarks, batch
/// jobs). Each call gets a full fuel budget (when on) and a fresh epoch
/// deadline, but the instance's linear memory carries over from call to
/// call, and after a trap the instance refuses every further call: make a
/// new one then.
/// [`PolicyRuntime::call`] (a fresh instance per call) stays the default.
pub struct WarmPolicy<'a> {
    runtime: &'a PolicyRuntime,
    store: Store<CallState>,
    policy: PodPolicy,
}

impl PolicyRuntime {
    /// Instantiate the policy once for many calls (see [`WarmPolicy`]).
    pub fn warm(&self) -> Result<WarmPolicy<'_>> {
        let (store, policy) = self.instance()?;
        Ok(WarmPolicy {
            runtime: self,
            store,
            policy,
        })
    }

    /// A fresh store with the memory cap, a full fuel budget (when on) and
    /// the epoch deadline, and the policy instantiated in it.
    fn instance(&self) -> Result<(Store<CallState>, PodPolicy)> {
        let (store, instance) = self.new_instance()?;
        Ok((
            store,
            PodPolicy::from_instance(instance, self.exports.clone()),
        ))
    }

    /// [`PolicyRuntime::instance`] before its exports are wrapped.
    fn new_instance(&self) -> Result<(Store<CallState>, Instance)> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.limits.memory_bytes)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(&self.engine, CallState { limits });
        store.limiter(|state| &mut state.limits);
        if let Some(fuel) = self.limits.fuel {
            store
                .set_fuel(fuel)
                .map_err(|e| anyhow!("setting the fuel budget: {e:#}"))?;
        }
        store.set_epoch_deadline(self.deadline_ticks());
        let instance = self
            .instance_pre
            .instantiate(&mut store)
            .map_err(|e| describe_failure(e, "instantiating the policy"))?;
        Ok((store, instance))
    }

    fn deadline_ticks(&self) -> u64 {
        (self.limits.deadline.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
    }
}

/// A prepared node (the contract's `prepared-node`) in a warm instance, for
/// long-lived hosts that evaluate and admit many pods on one node: the
/// node's settings are decoded and its managers built once, and each call
/// sends only the pod (and the managers' state).
///
/// Isolation: the instance carries nothing from one call to the next but
/// the prepared node, which no call changes (the guest holds it
/// immutably). A call that fails in the sandbox (trap, deadline, memory
/// cap) drops the instance; the next call prepares the node again in a
/// fresh one. An error answer (a bad pod) keeps the instance: it is a
/// normal answer. Each call gets a fresh epoch deadline and, when on, a
/// full fuel budget.
pub struct PreparedPolicy {
    runtime: Arc<PolicyRuntime>,
    node: crate::bindings::NodeSettings,
    topology: Option<crate::bindings::NodeTopology>,
    warm: Option<PreparedInstance>,
    prepared_count: u64,
}

struct PreparedInstance {
    store: Store<CallState>,
    policy: PodPolicy,
    node: ResourceAny,
}

impl PreparedPolicy {
    /// Prepare `node` (with `topology` for admissions) on `runtime`. The
    /// inner `Err` is the node's field errors, as `evaluate` or `admit`
    /// would report them.
    pub fn new(
        runtime: Arc<PolicyRuntime>,
        node: crate::bindings::NodeSettings,
        topology: Option<crate::bindings::NodeTopology>,
    ) -> Result<crate::PolicyResult<PreparedPolicy>> {
        let mut prepared = PreparedPolicy {
            runtime,
            node,
            topology,
            warm: None,
            prepared_count: 0,
        };
        Ok(prepared.prepare()?.map(|()| prepared))
    }

    /// The prepared node in `slot` when it is for `runtime`, `node` and
    /// `topology` (nothing changed since it was made), else a new one put
    /// there: how a long-lived host keeps one per node settings and policy
    /// version. The inner `Err` is the node's field errors.
    pub fn reuse_or_prepare<'a>(
        slot: &'a mut Option<PreparedPolicy>,
        runtime: &Arc<PolicyRuntime>,
        node: &crate::bindings::NodeSettings,
        topology: Option<&crate::bindings::NodeTopology>,
    ) -> Result<crate::PolicyResult<&'a mut PreparedPolicy>> {
        if !slot
            .as_ref()
            .is_some_and(|p| p.is_for(runtime, node, topology))
        {
            match PreparedPolicy::new(runtime.clone(), node.clone(), topology.cloned())? {
                Ok(prepared) => *slot = Some(prepared),
                Err(errors) => return Ok(Err(errors)),
            }
        }
        Ok(Ok(slot.as_mut().expect("set above")))
    }

    /// The runtime this node is prepared on.
    pub fn runtime(&self) -> &Arc<PolicyRuntime> {
        &self.runtime
    }

    /// Whether this is the prepared form of `node` and `topology` on `runtime`.
    pub fn is_for(
        &self,
        runtime: &Arc<PolicyRuntime>,
        node: &crate::bindings::NodeSettings,
        topology: Option<&crate::bindings::NodeTopology>,
    ) -> bool {
        Arc::ptr_eq(&self.runtime, runtime)
            && &self.node == node
            && self.topology.as_ref() == topology
    }

    /// How many times the node was prepared (1 unless a call failed in the
    /// sandbox and the instance was replaced).
    pub fn prepared_count(&self) -> u64 {
        self.prepared_count
    }

    /// `validate-pod`, `default-pod` and `evaluate` of `pod` on the
    /// prepared node, in one call of the instance, as
    /// [`PolicyRuntime::validate_default_evaluate`] does them: `Err` in the
    /// answer is the first step's field errors.
    pub fn validate_default_evaluate(
        &mut self,
        pod: &crate::bindings::Pod,
    ) -> Result<
        crate::PolicyResult<(
            crate::bindings::DefaultedPod,
            crate::bindings::PodEvaluation,
        )>,
    > {
        self.call(|p, s, node| {
            let errors = p.call_prepared_validate_pod(&mut *s, node, pod)?;
            if !errors.is_empty() {
                return Ok(Err(errors));
            }
            let defaulted = match p.call_prepared_default_pod(&mut *s, node, pod)? {
                Ok(defaulted) => defaulted,
                Err(errors) => return Ok(Err(errors)),
            };
            Ok(p.call_prepared_evaluate(&mut *s, node, &defaulted.pod)?
                .map(|evaluation| (defaulted, evaluation)))
        })
    }

    /// `validate-pod` of `pod` on the prepared node.
    pub fn validate_pod(
        &mut self,
        pod: &crate::bindings::Pod,
    ) -> Result<Vec<crate::bindings::FieldError>> {
        self.call(|p, s, node| p.call_prepared_validate_pod(s, node, pod))
    }

    /// `default-pod` of `pod` on the prepared node.
    pub fn default_pod(
        &mut self,
        pod: &crate::bindings::Pod,
    ) -> Result<crate::PolicyResult<crate::bindings::DefaultedPod>> {
        self.call(|p, s, node| p.call_prepared_default_pod(s, node, pod))
    }

    /// `evaluate` of `pod` on the prepared node.
    pub fn evaluate(
        &mut self,
        pod: &crate::bindings::Pod,
    ) -> Result<crate::PolicyResult<crate::bindings::PodEvaluation>> {
        self.call(|p, s, node| p.call_prepared_evaluate(s, node, pod))
    }

    /// `admit` of `pod` with `state` on the prepared node (prepared with a topology).
    pub fn admit(
        &mut self,
        pod: &crate::bindings::Pod,
        state: &crate::bindings::ManagerState,
    ) -> Result<crate::PolicyResult<crate::bindings::Admission>> {
        self.call(|p, s, node| p.call_prepared_admit(s, node, pod, state))
    }

    /// `release` of one container with `state` on the prepared node.
    pub fn release(
        &mut self,
        pod_uid: &str,
        container: &str,
        state: &crate::bindings::ManagerState,
    ) -> Result<crate::PolicyResult<crate::bindings::ManagerState>> {
        self.call(|p, s, node| p.call_prepared_release(s, node, pod_uid, container, state))
    }

    /// `pod-warnings` of `pod` (upstream's warnings about the pod as
    /// written) on the warm instance. The warnings do not depend on the
    /// node, so this is the plain export; the prepared node is not used.
    pub fn pod_warnings(
        &mut self,
        pod: &crate::bindings::Pod,
    ) -> Result<Vec<crate::bindings::PodWarning>> {
        self.call(|p, s, _| p.call_pod_warnings(s, pod))
    }

    /// `resize`'s `plan` from `current` to `desired` (with `others`, the
    /// requests of the node's other pods) on the warm instance, with the
    /// node settings this was prepared for. The `prepared-node` resource
    /// has no resize method yet, so this is the plain export: the settings
    /// are sent, and decoded by the guest, on every call.
    pub fn resize_plan(
        &mut self,
        current: &crate::bindings::Pod,
        desired: &crate::bindings::Pod,
        others: &[crate::bindings::ResourceQuantity],
    ) -> Result<crate::PolicyResult<crate::bindings::ResizePlan>> {
        // `call` borrows `self`, and may prepare the node again from
        // `self.node` before it runs the closure: the closure gets a copy.
        let node = self.node.clone();
        self.call(|p, s, _| p.call_resize_plan(s, current, desired, others, &node))
    }

    /// A fresh instance with the node prepared in it.
    fn prepare(&mut self) -> Result<crate::PolicyResult<()>> {
        let (mut store, policy) = self.runtime.instance()?;
        let prepared = policy
            .call_prepare(&mut store, &self.node, self.topology.as_ref())
            .map_err(|e| describe_failure(e, "preparing the node"))?;
        self.prepared_count += 1;
        Ok(prepared.map(|node| {
            self.warm = Some(PreparedInstance {
                store,
                policy,
                node,
            });
        }))
    }

    fn call<T>(
        &mut self,
        f: impl FnOnce(&PodPolicy, &mut Store<CallState>, ResourceAny) -> wasmtime::Result<T>,
    ) -> Result<T> {
        if self.warm.is_none() {
            // Preparing succeeded before on these inputs and is pure, so an
            // error now can only be the sandbox's.
            if let Err(errors) = self.prepare()? {
                bail!(
                    "preparing the node again failed: {}",
                    crate::format_field_errors(&errors)
                );
            }
        }
        let limits = self.runtime.limits;
        let ticks = self.runtime.deadline_ticks();
        let warm = self.warm.as_mut().expect("prepared above");
        if let Some(fuel) = limits.fuel {
            warm.store
                .set_fuel(fuel)
                .map_err(|e| anyhow!("setting the fuel budget: {e:#}"))?;
        }
        warm.store.set_epoch_deadline(ticks);
        match f(&warm.policy, &mut warm.store, warm.node) {
            Ok(answer) => Ok(answer),
            Err(e) => {
                // A trap or a limit: the instance may be in any state.
                self.warm = None;
                Err(describe_failure(e, "the policy call failed"))
            }
        }
    }
}

impl WarmPolicy<'_> {
    /// Run one call on the warm instance, with a full budget.
    pub fn call<T>(
        &mut self,
        f: impl FnOnce(&PodPolicy, &mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T> {
        let limits = self.runtime.limits;
        if let Some(fuel) = limits.fuel {
            self.store
                .set_fuel(fuel)
                .map_err(|e| anyhow!("setting the fuel budget: {e:#}"))?;
        }
        self.store.set_epoch_deadline(self.runtime.deadline_ticks());
        f(&self.policy, &mut self.store).map_err(|e| describe_failure(e, "the policy call failed"))
    }
}
