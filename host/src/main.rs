//! `podpolicy`: the command-line front of the host library.
//!
//! Exit status: 0 success, 1 the policy rejected something (invalid pod,
//! failed conformance case), 2 an error (bad input, broken module).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use podpolicy::bindings::NodeSettings;
use podpolicy::runtime::{Cache, Limits, PolicyRuntime};
use podpolicy::{apply, conformance, explain_all, node_input, output, pod_input};

// mimalloc rather than glibc malloc: reading pods and crossing into the
// component allocate and free many small values per pod, and glibc's
// malloc/free were a quarter of `explain`'s time (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "podpolicy",
    version,
    about = "Kubernetes node-side pod resource policy, run as a sandboxed WebAssembly component"
)]
struct Cli {
    /// Policy component to run instead of the embedded default.
    #[arg(long, global = true, value_name = "FILE.wasm")]
    policy: Option<PathBuf>,
    /// Directory for compiled policy artifacts (default: ~/.cache/podpolicy).
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile the policy every time instead of caching it.
    #[arg(long, global = true)]
    no_cache: bool,
    /// Fuel (a deterministic instruction budget) per policy call; off by
    /// default, since --timeout-ms bounds every call and metering costs
    /// about a tenth of a call.
    #[arg(long, global = true, value_name = "FUEL")]
    fuel: Option<u64>,
    /// Wall-clock limit per policy call, in milliseconds.
    #[arg(long, global = true, default_value_t = Limits::default().deadline.as_millis() as u64)]
    timeout_ms: u64,
    /// Memory cap per policy instance, in MiB.
    #[arg(long, global = true, default_value_t = (Limits::default().memory_bytes >> 20) as u64)]
    memory_mib: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Policy versions and feature gate defaults.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Validate, default and evaluate pods: QoS, effective resources, oom_score_adj, cgroup files.
    Explain {
        #[command(flatten)]
        pods: PodFiles,
        #[command(flatten)]
        node: NodeArgs,
        /// Root of the sysfs tree the resource managers read the topology
        /// from, when the node runs a static CPU or memory policy (default:
        /// the node file's `sysfs`, else `/`).
        #[arg(long, value_name = "DIR")]
        sysfs: Option<PathBuf>,
        /// The manager checkpoints the placements start from (read only);
        /// without it, an empty node.
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// Also give, for every value, the rule that produced it and its
        /// inputs (from the policy).
        #[arg(long)]
        why: bool,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Evaluate pods and write their cgroup v2 files (and oom_score_adj) once, as a node agent.
    ///
    /// Nothing is written when the policy rejects a pod (exit 1), when a name
    /// is unsafe as a path or the policy's output fails a sanity check (exit 2).
    /// Only files whose value changes are written; a failed write stops the
    /// run and the report lists the changes applied before it (exit 2).
    Apply {
        #[command(flatten)]
        pods: PodFiles,
        #[command(flatten)]
        node: NodeArgs,
        /// The cgroup v2 root (a cgroup2 mount, or a plain directory standing in for one).
        #[arg(long, value_name = "DIR", default_value = "/sys/fs/cgroup")]
        cgroup_root: PathBuf,
        /// Where `<pid>/oom_score_adj` lives.
        #[arg(long, value_name = "DIR", default_value = "/proc")]
        proc_root: PathBuf,
        /// Print the changes (path, old, new) without writing anything.
        #[arg(long)]
        dry_run: bool,
        /// Root of the sysfs tree the resource managers read the topology
        /// from, when the node runs a static CPU or memory policy (default:
        /// the node file's `sysfs`, else `/`).
        #[arg(long, value_name = "DIR")]
        sysfs: Option<PathBuf>,
        /// The manager checkpoints (the agent's `--state-dir`): pods are
        /// placed from them and the new state is saved there before any write.
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// Write the container's oom_score_adj for a process: CONTAINER, POD/CONTAINER
        /// or NAMESPACE/POD/CONTAINER, `=`, PID. Repeatable.
        #[arg(long = "pid", value_name = "CONTAINER=PID")]
        pids: Vec<apply::PidAssignment>,
        /// The kubelet's kubeReservedCgroup (below the root), when the policy writes to it.
        #[arg(long, value_name = "CGROUP")]
        kube_reserved_cgroup: Option<String>,
        /// The kubelet's systemReservedCgroup (below the root), when the policy writes to it.
        #[arg(long, value_name = "CGROUP")]
        system_reserved_cgroup: Option<String>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Plan an in-place resize from OLD (the running pod) to NEW; with
    /// --apply, carry it out on the pod's cgroups.
    ///
    /// Exit 0: planned or completed; 1: not accepted (Deferred, Infeasible,
    /// Invalid) or deferred by a memory usage check; 2: a write failed (the
    /// report lists the steps applied; run again to converge).
    Resize {
        /// The pod as it runs now (actuated resources).
        old: PathBuf,
        /// The pod with the desired resources.
        new: PathBuf,
        #[command(flatten)]
        node: NodeArgs,
        /// Requests of the node's other pods, summed (`cpu=10,memory=8Gi`).
        #[arg(long, value_name = "LIST")]
        others: Option<String>,
        /// Carry the plan out on the cgroup files.
        #[arg(long, requires = "cgroup_root")]
        apply: bool,
        /// The cgroup v2 root (a cgroup2 mount, or a plain directory standing in for one).
        #[arg(long)]
        cgroup_root: Option<PathBuf>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Admit a pod through the topology, CPU and memory managers (KEP-5526):
    /// hints, NUMA affinity, cpusets, memory blocks, isolation, or the
    /// rejection (exit 1). The new state is checkpointed in --state.
    Admit {
        /// The pod (a file of one pod, or `-`).
        pod: PathBuf,
        #[command(flatten)]
        node: NodeArgs,
        /// Root of the sysfs tree to read the topology from.
        #[arg(long, default_value = "/")]
        sysfs: PathBuf,
        /// Directory of the manager checkpoints (read, then written crash-safe).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Also write cpuset.cpus / cpuset.mems (and quota) under this cgroup root.
        #[arg(long)]
        cgroup_root: Option<PathBuf>,
        /// Also give, for every topology decision, each provider's hints,
        /// the merged hint and the policy rule that admitted or refused it,
        /// and the check behind a rejection (from the policy).
        #[arg(long)]
        why: bool,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Release a container's manager resources (the pod's go with its last container).
    Release {
        /// The pod's metadata.uid.
        pod_uid: String,
        /// The container's name.
        container: String,
        #[command(flatten)]
        node: NodeArgs,
        /// Root of the sysfs tree to read the topology from.
        #[arg(long, default_value = "/")]
        sysfs: PathBuf,
        /// Directory of the manager checkpoints.
        #[arg(long)]
        state: PathBuf,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Run as the node agent: watch a directory of pod manifests and keep
    /// the cgroup tree, the resource managers' state and the serving policy
    /// version (hot swapped from --policy-dir) in line with it, until SIGTERM.
    Agent {
        /// Directory of pod manifests (`*.yaml`, `*.yml`, `*.json`), watched for changes.
        #[arg(long, value_name = "DIR")]
        pods_dir: PathBuf,
        #[command(flatten)]
        node: NodeArgs,
        /// The cgroup v2 root (a cgroup2 mount, or a plain directory standing in for one).
        #[arg(long, value_name = "DIR", default_value = "/sys/fs/cgroup")]
        cgroup_root: PathBuf,
        /// Where `<pid>/oom_score_adj` lives.
        #[arg(long, value_name = "DIR", default_value = "/proc")]
        proc_root: PathBuf,
        /// Manager checkpoints and the agent's own state (crash-safe files).
        #[arg(long, value_name = "DIR", default_value = "/var/lib/podpolicy/state")]
        state_dir: PathBuf,
        /// Directory of policy versions to hot swap (`podpolicy policy activate|rollback`).
        #[arg(long, value_name = "DIR")]
        policy_dir: Option<PathBuf>,
        /// Root of the sysfs tree to read the topology from (static managers).
        #[arg(long, default_value = "/")]
        sysfs: PathBuf,
        /// Reconcile at least this often, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        resync_ms: u64,
        /// Prometheus endpoint (`/metrics`, `/healthz`); `off` disables it.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
        metrics_addr: String,
        /// The kubelet's kubeReservedCgroup (below the root), when the policy writes to it.
        #[arg(long, value_name = "CGROUP")]
        kube_reserved_cgroup: Option<String>,
        /// The kubelet's systemReservedCgroup (below the root), when the policy writes to it.
        #[arg(long, value_name = "CGROUP")]
        system_reserved_cgroup: Option<String>,
        /// Reconcile once, print the report as JSON and exit (0, or 1 when a
        /// pod was rejected or could not be evaluated).
        #[arg(long)]
        once: bool,
    },
    /// Run as an NRI plugin: the container runtime (containerd, CRI-O) calls
    /// it for every pod and container and applies the policy's values;
    /// reconnects when the runtime restarts, runs until SIGTERM or SIGINT.
    Nri {
        /// The runtime's NRI socket.
        #[arg(long, value_name = "PATH", default_value = podpolicy::nri::DEFAULT_SOCKET)]
        socket: PathBuf,
        #[command(flatten)]
        node: NodeArgs,
        /// Root of the sysfs tree to read the topology from (static managers).
        #[arg(long, value_name = "DIR", default_value = "/")]
        sysfs: PathBuf,
        /// Manager checkpoints and the plugin's own record (crash-safe files).
        #[arg(
            long,
            value_name = "DIR",
            default_value = "/var/lib/podpolicy/nri-state"
        )]
        state_dir: PathBuf,
        /// The cgroup v2 root the pod cgroups' values are written below.
        #[arg(long, value_name = "DIR", default_value = "/sys/fs/cgroup")]
        cgroup_root: PathBuf,
        /// Directory of policy versions to hot swap (`podpolicy policy activate|rollback`).
        #[arg(long, value_name = "DIR")]
        policy_dir: Option<PathBuf>,
        /// Prometheus endpoint (`/metrics`, `/healthz`); `off` disables it.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9465")]
        metrics_addr: String,
        /// The name the plugin registers under.
        #[arg(long, value_name = "NAME", default_value = "podpolicy")]
        plugin_name: String,
        /// The plugin's index (two digits; plugins are called in ascending order).
        #[arg(long, value_name = "NN", default_value = "90")]
        plugin_idx: String,
        /// Serve one connection: exit when the runtime closes it instead of reconnecting.
        #[arg(long)]
        once_connected: bool,
    },
    /// Serve Kubernetes admission reviews over HTTPS: /mutate (defaulting as
    /// a JSONPatch), /validate (validation; resize rules for resource-only
    /// updates), /healthz, /readyz, /metrics. Runs until SIGTERM or SIGINT.
    Webhook {
        /// Certificate chain, PEM (a TLS secret's tls.crt).
        #[arg(long, value_name = "PEM")]
        tls_cert: PathBuf,
        /// Private key, PEM (a TLS secret's tls.key).
        #[arg(long, value_name = "PEM")]
        tls_key: PathBuf,
        /// Address to listen on.
        #[arg(long, value_name = "ADDR", default_value = podpolicy::webhook::DEFAULT_LISTEN)]
        listen: std::net::SocketAddr,
        /// Node settings (for feature gates that differ from the 1.36
        /// defaults); without them, every default (the webhook is cluster-side).
        #[command(flatten)]
        node: NodeArgs,
        /// Policy evaluations at once: evaluation threads, each keeping a
        /// warm policy instance (1 to 1024; default: one per CPU, at most 1024).
        #[arg(long, value_name = "N", value_parser = podpolicy::webhook::flags::max_concurrency)]
        max_concurrency: Option<usize>,
        /// Largest request body accepted (4096 to 67108864); larger ones get 413.
        #[arg(long, value_name = "N", value_parser = podpolicy::webhook::flags::max_body_bytes, default_value_t = podpolicy::webhook::DEFAULT_MAX_BODY_BYTES)]
        max_body_bytes: usize,
        /// Deadline for one review, in milliseconds (1 to 30000); after it, 504.
        #[arg(long, value_name = "MS", value_parser = podpolicy::webhook::flags::request_timeout_ms, default_value_t = podpolicy::webhook::DEFAULT_REQUEST_TIMEOUT.as_millis() as u64)]
        request_timeout: u64,
        /// Connections served at once (1 to 65536); further clients wait
        /// until one closes. Idle and half-sent connections close after 10 s.
        #[arg(long, value_name = "N", value_parser = podpolicy::webhook::flags::max_connections, default_value_t = podpolicy::webhook::DEFAULT_MAX_CONNECTIONS)]
        max_connections: usize,
        /// Directory of policy versions to hot swap (`podpolicy policy activate|rollback`);
        /// candidates are vetted by the built-in self-check.
        #[arg(long, value_name = "DIR")]
        policy_dir: Option<PathBuf>,
    },
    /// Run an AdmissionReview file (JSON or YAML, admission.k8s.io/v1)
    /// offline through the webhook's /mutate and /validate logic and print
    /// both responses (the patch decoded).
    ///
    /// Exit 0: both allow; 1: one denies; 2: an error (a malformed review).
    Review {
        /// The AdmissionReview file, or `-` for stdin.
        file: PathBuf,
        /// Node settings (for feature gates that differ from the 1.36
        /// defaults); without them, every default, as the webhook runs.
        #[command(flatten)]
        node: NodeArgs,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Draw the machine: sockets, NUMA nodes, L3 groups, cores and CPUs,
    /// with the reserved CPUs, the shared pool, each pod's exclusive CPUs and
    /// pod shared pool, and per-NUMA memory and huge pages from the managers'
    /// state; PODs given are placed in a dry run (nothing is written).
    Topology {
        #[command(flatten)]
        pods: PodFiles,
        #[command(flatten)]
        node: NodeArgs,
        /// Root of the sysfs tree to read the topology from (default: the
        /// node file's `sysfs`, else `/`).
        #[arg(long, value_name = "DIR")]
        sysfs: Option<PathBuf>,
        /// The manager checkpoints (read only).
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = TopologyFormat::Text)]
        output: TopologyFormat,
    },
    /// Print a shell completion script (e.g. `podpolicy completions bash >
    /// /etc/bash_completion.d/podpolicy`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), generated from the command-line definition.
    Man,
    /// Print the versions: this binary, the policy it runs (version and
    /// digest; the embedded one unless --policy), the WIT contract.
    Version {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Run conformance vector files through the component.
    Conformance {
        /// Vector files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// Where the node settings come from.
#[derive(clap::Args)]
struct NodeArgs {
    /// Node settings: a podpolicy node file (schemas/node-file.schema.json),
    /// or a Kubernetes Node (`kubectl get node NAME -o yaml`); without it,
    /// this machine is described.
    #[arg(long, value_name = "FILE")]
    node: Option<PathBuf>,
    /// A KubeletConfiguration (`kubelet.config.k8s.io/v1beta1`, e.g.
    /// /var/lib/kubelet/config.yaml) with a Node or this machine.
    #[arg(long, value_name = "FILE")]
    kubelet_config: Option<PathBuf>,
}

impl NodeArgs {
    fn given(&self) -> bool {
        self.node.is_some() || self.kubelet_config.is_some()
    }
}

/// Where pods come from, as `kubectl -f` reads them.
#[derive(clap::Args)]
struct PodFiles {
    /// Pod or workload files (YAML or JSON: a Pod, Deployment, ReplicaSet,
    /// StatefulSet, DaemonSet, Job, CronJob, PodTemplate, a List, or several
    /// YAML documents) or directories of them; `-` reads stdin.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The same, as `kubectl -f` takes them (repeatable).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    filenames: Vec<PathBuf>,
    /// Read directories recursively.
    #[arg(short = 'R', long)]
    recursive: bool,
    /// What an unknown field in a pod or workload is: an error with its
    /// path (kubectl's strict field validation), or a warning.
    #[arg(long, value_enum, default_value_t = pod_input::UnknownFields::Error)]
    unknown_fields: pod_input::UnknownFields,
}

impl PodFiles {
    /// Every pod document, in the order given; warnings go to stderr.
    fn read(&self) -> Result<Vec<pod_input::PodDocument>> {
        let options = pod_input::ReadOptions {
            recursive: self.recursive,
            unknown_fields: self.unknown_fields,
            node_name: None,
        };
        let paths: Vec<&PathBuf> = self.files.iter().chain(&self.filenames).collect();
        if paths.is_empty() {
            anyhow::bail!("no pods given: name files or directories (or `-f FILE`, `-` for stdin)");
        }
        let mut docs = Vec::new();
        for path in paths {
            let read = pod_input::read_pods_with(path, &options)?;
            for warning in &read.warnings {
                eprintln!("podpolicy: warning: {warning}");
            }
            docs.extend(read.docs);
        }
        Ok(docs)
    }

    /// Every pod document, in the order given, handed to `each` as it is
    /// read (see `pod_input::visit_pods`); warnings go to stderr.
    fn visit(&self, each: &mut dyn FnMut(pod_input::PodDocument) -> Result<()>) -> Result<()> {
        let options = pod_input::ReadOptions {
            recursive: self.recursive,
            unknown_fields: self.unknown_fields,
            node_name: None,
        };
        let paths: Vec<&std::path::Path> = self
            .files
            .iter()
            .chain(&self.filenames)
            .map(PathBuf::as_path)
            .collect();
        if paths.is_empty() {
            anyhow::bail!("no pods given: name files or directories (or `-f FILE`, `-` for stdin)");
        }
        pod_input::visit_pods(&paths, &options, each, &mut |warning| {
            eprintln!("podpolicy: warning: {warning}")
        })?;
        Ok(())
    }
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Print the policy, WIT and Kubernetes versions.
    Info {
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Write the policy component (the embedded one, or --policy) to a file.
    Export {
        /// Where to write the `.wasm` component.
        path: PathBuf,
    },
    /// Hand a policy version to the agent serving from --policy-dir: it is
    /// compiled and self-checked here, then copied there; the agent swaps it
    /// in after a shadow evaluation of the node's pods (see `policy status`).
    Activate {
        /// The candidate `.wasm` component.
        file: PathBuf,
        /// The agent's policy directory.
        #[arg(long, value_name = "DIR")]
        policy_dir: PathBuf,
    },
    /// Ask the agent serving from --policy-dir to return to the version it served before.
    Rollback {
        /// The agent's policy directory.
        #[arg(long, value_name = "DIR")]
        policy_dir: PathBuf,
    },
    /// Compile the component on stdin into the cache and exit: what the
    /// agent and the webhook run, in a child they can kill, to compile a
    /// policy candidate.
    #[command(hide = true)]
    Precompile,
    /// Compare two policy versions on pods: every value that changes per pod
    /// and container (cgroup files, QoS, oom_score_adj, validation errors,
    /// defaulting patches, cpusets where the node's managers place pods).
    ///
    /// Exit 0: nothing changes; 1: something does; 2: an error.
    Diff {
        /// The old policy: a `.wasm` component, or `embedded`.
        old: String,
        /// The new policy: a `.wasm` component, or `embedded`.
        new: String,
        #[command(flatten)]
        pods: PodFiles,
        #[command(flatten)]
        node: NodeArgs,
        /// Root of the sysfs tree the resource managers read the topology
        /// from, when the node runs a static CPU or memory policy (default:
        /// the node file's `sysfs`, else `/`).
        #[arg(long, value_name = "DIR")]
        sysfs: Option<PathBuf>,
        /// The manager checkpoints the placements start from (read only).
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// The policy directory's state: active version, history, verdicts.
    Status {
        /// The policy directory.
        #[arg(long, value_name = "DIR")]
        policy_dir: PathBuf,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
}

/// `topology` output formats.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TopologyFormat {
    Text,
    Svg,
    Json,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Table,
    Json,
    Yaml,
}

fn main() -> ExitCode {
    // Colour only for a person at a terminal: log collectors (a pod's
    // stderr, journald, a pipe) get plain text. NO_COLOR is honoured too.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    START.get_or_init(std::time::Instant::now);
    let cli = Cli::parse();
    // `podpolicy nri` logs one line per event unless PODPOLICY_LOG says otherwise.
    let filter = match (&cli.command, std::env::var_os("PODPOLICY_LOG")) {
        (Command::Nri { .. }, None) => tracing_subscriber::EnvFilter::new("info"),
        _ => tracing_subscriber::EnvFilter::from_env("PODPOLICY_LOG"),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .init();
    // Commands a person waits on over many pods show their progress on
    // stderr (on a terminal only; see podpolicy::progress).
    if matches!(
        &cli.command,
        Command::Explain { .. }
            | Command::Apply { .. }
            | Command::Topology { .. }
            | Command::Policy {
                command: PolicyCommand::Diff { .. },
            }
    ) {
        podpolicy::progress::enable();
    }
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            let text = format!("{err:#}");
            if text.contains("Broken pipe") {
                return ExitCode::SUCCESS;
            }
            eprintln!("podpolicy: {text}");
            ExitCode::from(2)
        }
    }
}

fn cache(cli: &Cli) -> Cache {
    match (&cli.cache_dir, cli.no_cache) {
        (_, true) => Cache::Off,
        (Some(dir), false) => Cache::Dir(dir.clone()),
        (None, false) => Cache::default_location(),
    }
}

fn limits(cli: &Cli) -> Limits {
    Limits {
        fuel: cli.fuel,
        deadline: Duration::from_millis(cli.timeout_ms.max(1)),
        memory_bytes: usize::try_from(cli.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
    }
}

fn load_policy(cli: &Cli) -> Result<PolicyRuntime> {
    let (cache, limits) = (cache(cli), limits(cli));
    match &cli.policy {
        Some(path) => PolicyRuntime::from_file(path, &cache, limits),
        None => PolicyRuntime::embedded(&cache, limits).context("loading the embedded policy"),
    }
}

/// The node settings, or this machine's; refused when invalid.
fn read_node(policy: &PolicyRuntime, args: &NodeArgs) -> Result<NodeSettings> {
    read_node_inputs(policy, args).map(|inputs| inputs.settings)
}

/// The node settings (checked by the policy), the sysfs tree a node file
/// names and the notes on what was read (kubelet fields the policy does
/// not use).
fn read_node_inputs(policy: &PolicyRuntime, args: &NodeArgs) -> Result<node_input::NodeInputs> {
    let inputs = node_input::read_node_inputs(
        args.node.as_deref(),
        args.kubelet_config.as_deref(),
        "/proc".as_ref(),
        "/sys/fs/cgroup".as_ref(),
    )?;
    let node_errors = policy.validate_node(&inputs.settings)?;
    if !node_errors.is_empty() {
        anyhow::bail!(
            "invalid node settings:\n{}",
            podpolicy::format_field_errors(&node_errors)
        );
    }
    Ok(inputs)
}

/// The node settings, the notes on them, and the managers' placement
/// (`explain`, `apply`): `--sysfs` over the node file's `sysfs`.
fn node_and_placement(
    policy: &PolicyRuntime,
    args: &NodeArgs,
    sysfs: Option<&std::path::Path>,
    state: Option<&std::path::Path>,
) -> Result<(NodeSettings, Vec<String>, Option<podpolicy::Placement>)> {
    let inputs = read_node_inputs(policy, args)?;
    let placement = placement(
        policy,
        &inputs.settings,
        sysfs.or(inputs.sysfs.as_deref()),
        state,
    )?;
    Ok((inputs.settings, inputs.notes, placement))
}

/// The resource managers' placement for `explain` / `apply`, when the
/// policy says the node's managers place pods: the topology from `sysfs`
/// (default `/`) and the state from the checkpoints in `state` (or a new one).
fn placement(
    policy: &PolicyRuntime,
    node: &NodeSettings,
    sysfs: Option<&std::path::Path>,
    state: Option<&std::path::Path>,
) -> Result<Option<podpolicy::Placement>> {
    if !policy.managers_active(node)? {
        return Ok(None);
    }
    let sysfs = sysfs.unwrap_or("/".as_ref());
    let topology = podpolicy::topology_input::read_node_topology(sysfs)
        .with_context(|| format!("reading the topology from {}", sysfs.display()))?;
    let state = podpolicy::admit::start_state(policy, &topology, node, state)?;
    Ok(Some(podpolicy::Placement { topology, state }))
}

/// Print a result: a table for people, or a JSON / YAML document with
/// `apiVersion` and `kind` (see `schemas/output/`).
fn print(
    format: Format,
    kind: &str,
    table: impl FnOnce() -> String,
    value: &impl serde::Serialize,
) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match format {
        Format::Table => stdout.write_all(table().as_bytes())?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut stdout, &output::document(kind, value)?)?;
            stdout.write_all(b"\n")?;
        }
        Format::Yaml => stdout
            .write_all(serde_yaml_ng::to_string(&output::document(kind, value)?)?.as_bytes())?,
    }
    Ok(())
}

/// The explain report's format for `--output`.
fn report_format(format: Format) -> output::ReportFormat {
    match format {
        Format::Table => output::ReportFormat::Table,
        Format::Json => output::ReportFormat::Json,
        Format::Yaml => output::ReportFormat::Yaml,
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    if let Command::Policy {
        command: PolicyCommand::Precompile,
    } = &cli.command
    {
        podpolicy::compiler_process::precompile_stdin(&cache(&cli), limits(&cli))?;
        return Ok(ExitCode::SUCCESS);
    }
    if matches!(cli.command, Command::Agent { .. } | Command::Webhook { .. })
        && let Ok(program) = std::env::current_exe()
    {
        // Long-lived servers compile policy candidates in a child process
        // they can kill past the vetting deadline.
        podpolicy::compiler_process::use_program(program);
    }
    if let Command::Webhook {
        max_concurrency, ..
    } = &cli.command
    {
        // Each evaluation thread keeps a warm instance: the engine's pool is
        // sized for them before the policy is loaded into it.
        podpolicy::runtime::reserve_instances(
            max_concurrency.unwrap_or_else(podpolicy::webhook::default_concurrency),
        )?;
    }
    match &cli.command {
        Command::Completions { shell } => {
            // Into a buffer first: the generator panics on a failed write
            // (a closed pipe), the buffer never fails.
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "podpolicy", &mut script);
            std::io::stdout().lock().write_all(&script)?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Man => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut page)?;
            std::io::stdout().lock().write_all(&page)?;
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    let policy = load_policy(&cli)?;
    match &cli.command {
        Command::Policy {
            command: PolicyCommand::Info { output },
        } => {
            let info = policy.info();
            let value = serde_json::json!({
                "policyVersion": info.policy_version,
                "witPackage": format!("podpolicy:policy@{}", info.wit_version),
                "kubernetesVersion": info.kubernetes_version,
                "digest": policy.digest(),
                "featureGates": info.feature_gates.iter().map(|g| (g.name.clone(), g.enabled)).collect::<std::collections::BTreeMap<_, _>>(),
            });
            print(
                *output,
                "PolicyInfo",
                || {
                    let mut s = format!(
                        "policy version      {}\nWIT package         podpolicy:policy@{}\nKubernetes version  {}\ndigest              sha256:{}\nfeature gates (defaults):\n",
                        info.policy_version,
                        info.wit_version,
                        info.kubernetes_version,
                        policy.digest()
                    );
                    for g in &info.feature_gates {
                        s.push_str(&format!("  {:<44} {}\n", g.name, g.enabled));
                    }
                    s
                },
                &value,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy {
            command: PolicyCommand::Export { path },
        } => {
            let bytes = match &cli.policy {
                Some(source) => podpolicy::bounded_read::read_regular_file(
                    source,
                    podpolicy::policy_dir::MAX_CANDIDATE_BYTES,
                    "policy component",
                )?,
                None => podpolicy::runtime::EMBEDDED_POLICY.to_vec(),
            };
            std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?;
            eprintln!(
                "wrote {} ({} bytes, sha256:{})",
                path.display(),
                bytes.len(),
                policy.digest()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy {
            command: PolicyCommand::Activate { file, policy_dir },
        } => {
            let bytes = podpolicy::bounded_read::read_regular_file(
                file,
                podpolicy::policy_dir::MAX_CANDIDATE_BYTES,
                "policy component",
            )?;
            let candidate = PolicyRuntime::from_bytes(&bytes, &cache(&cli), limits(&cli))
                .with_context(|| format!("loading candidate {}", file.display()))?;
            podpolicy::policy_dir::self_check(&candidate)
                .with_context(|| format!("{} fails the built-in self-check", file.display()))?;
            let dir = podpolicy::policy_dir::PolicyDir::open(policy_dir)?;
            let path = dir.submit(&bytes)?;
            eprintln!(
                "{} (policy {}, sha256:{}) passed the self-check and is queued as {}; the agent swaps it in after a shadow evaluation (`podpolicy policy status --policy-dir {}`)",
                file.display(),
                candidate.info().policy_version,
                candidate.digest(),
                path.display(),
                policy_dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy {
            command: PolicyCommand::Precompile,
        } => unreachable!("handled before the policy is loaded"),
        Command::Policy {
            command: PolicyCommand::Rollback { policy_dir },
        } => {
            let dir = podpolicy::policy_dir::PolicyDir::open(policy_dir)?;
            if dir.state()?.history.is_empty() {
                anyhow::bail!(
                    "{}: no earlier policy version to roll back to",
                    policy_dir.display()
                );
            }
            dir.request_rollback()?;
            eprintln!("rollback requested in {}", policy_dir.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy {
            command:
                PolicyCommand::Diff {
                    old,
                    new,
                    pods,
                    node,
                    sysfs,
                    state,
                    output,
                },
        } => {
            let docs = pods.read()?;
            let load = |side: &str| -> Result<(PolicyRuntime, String)> {
                if side == "embedded" {
                    let p = PolicyRuntime::embedded(&cache(&cli), limits(&cli))
                        .context("loading the embedded policy")?;
                    return Ok((p, side.to_string()));
                }
                let p = PolicyRuntime::from_file(side.as_ref(), &cache(&cli), limits(&cli))
                    .with_context(|| format!("loading policy {side}"))?;
                Ok((p, side.to_string()))
            };
            let mut sides = Vec::new();
            for source in [old, new] {
                let (p, source) = load(source)?;
                let (settings, _, mut placed) =
                    node_and_placement(&p, node, sysfs.as_deref(), state.as_deref())
                        .with_context(|| format!("with policy {source}"))?;
                let evaluations = explain_all(&p, &docs, &settings, placed.as_mut())
                    .with_context(|| format!("evaluating with policy {source}"))?;
                let side = podpolicy::policy_diff::Side {
                    source,
                    policy_version: p.info().policy_version.clone(),
                    digest: p.digest().to_string(),
                };
                sides.push((side, evaluations));
            }
            let (new_side, new_eval) = sides.pop().context("two sides")?;
            let (old_side, old_eval) = sides.pop().context("two sides")?;
            let diff =
                podpolicy::policy_diff::PolicyDiff::new(old_side, new_side, &old_eval, &new_eval);
            print(*output, "PolicyDiff", || diff.to_table(), &diff)?;
            Ok(if diff.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Policy {
            command: PolicyCommand::Status { policy_dir, output },
        } => {
            let dir = podpolicy::policy_dir::PolicyDir::open_existing(policy_dir)?;
            let state = dir.state()?;
            print(*output, "PolicyStatus", || state.to_table(), &state)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Agent {
            pods_dir,
            node,
            cgroup_root,
            proc_root,
            state_dir,
            policy_dir,
            sysfs,
            resync_ms,
            metrics_addr,
            kube_reserved_cgroup,
            system_reserved_cgroup,
            once,
        } => {
            let node = server_node(&policy, node)?;
            let options = podpolicy::agent::AgentOptions {
                pods_dir: pods_dir.clone(),
                node,
                apply: apply::ApplyOptions {
                    cgroup_root: cgroup_root.clone(),
                    proc_root: proc_root.clone(),
                    dry_run: false,
                    pids: Vec::new(),
                    kube_reserved_cgroup: kube_reserved_cgroup.clone(),
                    system_reserved_cgroup: system_reserved_cgroup.clone(),
                },
                state_dir: state_dir.clone(),
                policy_dir: policy_dir.clone(),
                sysfs_root: sysfs.clone(),
                resync: Duration::from_millis((*resync_ms).max(10)),
                cache: cache(&cli),
                limits: limits(&cli),
            };
            run_agent(options, policy, metrics_addr, *once)
        }
        Command::Nri {
            socket,
            node,
            sysfs,
            state_dir,
            cgroup_root,
            policy_dir,
            metrics_addr,
            plugin_name,
            plugin_idx,
            once_connected,
        } => {
            if plugin_idx.len() != 2 || !plugin_idx.bytes().all(|b| b.is_ascii_digit()) {
                anyhow::bail!("--plugin-idx `{plugin_idx}` must be two digits (00-99)");
            }
            // Every answer is "no change" until a good policy arrives when
            // the first one is broken.
            let node = server_node(&policy, node)?;
            let metrics_addr =
                match metrics_addr.as_str() {
                    "off" => None,
                    text => Some(text.parse().with_context(|| {
                        format!("--metrics-addr `{text}` is not HOST:PORT or off")
                    })?),
                };
            // A policy call must end well inside the answer deadline, so that
            // a looping version frees the engine for the next request.
            let mut call_limits = limits(&cli);
            call_limits.deadline = call_limits
                .deadline
                .min(podpolicy::nri::ANSWER_DEADLINE / 2);
            let options = podpolicy::nri::NriOptions {
                socket: socket.clone(),
                engine: podpolicy::nri::engine::EngineOptions {
                    node,
                    state_dir: state_dir.clone(),
                    cgroup_root: cgroup_root.clone(),
                    sysfs_root: sysfs.clone(),
                },
                policy_dir: policy_dir.clone(),
                cache: cache(&cli),
                limits: call_limits,
                metrics_addr,
                plugin_name: plugin_name.clone(),
                plugin_idx: plugin_idx.clone(),
                once_connected: *once_connected,
                deadline: podpolicy::nri::ANSWER_DEADLINE,
            };
            let policy = match &cli.policy {
                Some(path) => PolicyRuntime::from_file(path, &cache(&cli), call_limits)?,
                None => PolicyRuntime::embedded(&cache(&cli), call_limits)?,
            };
            let slot = std::sync::Arc::new(podpolicy::swap::PolicySlot::new(policy));
            podpolicy::nri::run(options, slot)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Explain {
            pods,
            node,
            sysfs,
            state,
            why,
            output,
        } => {
            let (node, notes, mut placement) =
                node_and_placement(&policy, node, sysfs.as_deref(), state.as_deref())?;
            // Shared: the streaming path prepares the node on it.
            let policy = std::sync::Arc::new(policy);
            let stdout = std::io::BufWriter::new(std::io::stdout().lock());
            let mut writer = output::ReportWriter::new(stdout, report_format(*output));
            let why_of = |outcome: &podpolicy::evaluation::PodOutcome,
                          explanation: &mut output::Explanation|
             -> Result<()> {
                if !*why {
                    return Ok(());
                }
                match &outcome.verdict {
                    podpolicy::evaluation::Verdict::Evaluated(pod) => {
                        explanation.why = podpolicy::evaluation::reasons(&policy, pod, &node)
                            .with_context(|| format!("explaining {}", outcome.name))?;
                    }
                    podpolicy::evaluation::Verdict::NotAdmitted(refusal) => {
                        explanation.why = podpolicy::admit::admission_reasons(&refusal.admission);
                    }
                    podpolicy::evaluation::Verdict::Invalid(_) => {}
                }
                Ok(())
            };
            let node_values = match placement.as_mut() {
                // The placements need every pod (a second admission on the
                // final state), so this path keeps them all.
                Some(placement) => {
                    let evaluations = explain_all(&policy, &pods.read()?, &node, Some(placement))?;
                    for outcome in &evaluations.pods {
                        let mut explanation = outcome.explanation();
                        why_of(outcome, &mut explanation)?;
                        writer.pod(&explanation)?;
                    }
                    evaluations.node
                }
                // Without placements, a pod is printed as soon as it is
                // evaluated and nothing of it is kept.
                None => {
                    let runtime = policy.clone();
                    let mut prepared =
                        match podpolicy::runtime::PreparedPolicy::new(runtime, node.clone(), None)?
                        {
                            Ok(prepared) => prepared,
                            Err(errors) => anyhow::bail!(
                                "the node settings:\n{}",
                                podpolicy::format_field_errors(&errors)
                            ),
                        };
                    podpolicy::explain_stream(
                        &mut prepared,
                        |each| pods.visit(each),
                        |outcome| {
                            let mut explanation = outcome.explanation();
                            why_of(&outcome, &mut explanation)?;
                            writer.pod(&explanation)
                        },
                    )?
                }
            };
            let mut node_out = output::NodeOut::new(&node.name, &node_values);
            node_out.notes = notes;
            Ok(if writer.finish(&node_out)? {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Apply {
            pods,
            node,
            cgroup_root,
            proc_root,
            dry_run,
            sysfs,
            state,
            pids,
            kube_reserved_cgroup,
            system_reserved_cgroup,
            output,
        } => {
            // A run that saves manager state holds the state directory's
            // lock from reading it to saving it (see podpolicy::state_dir).
            let locked = match (state, *dry_run) {
                (Some(dir), false) => Some(podpolicy::state_dir::StateDir::lock(
                    dir,
                    podpolicy::state_dir::DEFAULT_LOCK_WAIT,
                )?),
                _ => None,
            };
            let (node, _, mut placement) =
                node_and_placement(&policy, node, sysfs.as_deref(), state.as_deref())?;
            let docs = pods.read()?;
            let options = apply::ApplyOptions {
                cgroup_root: cgroup_root.clone(),
                proc_root: proc_root.clone(),
                dry_run: *dry_run,
                pids: pids.clone(),
                kube_reserved_cgroup: kube_reserved_cgroup.clone(),
                system_reserved_cgroup: system_reserved_cgroup.clone(),
            };
            match apply::apply_pods(
                &policy,
                &docs,
                &node,
                &options,
                placement.as_mut(),
                locked.as_ref(),
            )? {
                apply::ApplyOutcome::Rejected(report) => {
                    print(*output, "ExplainReport", || report.to_table(), &report)?;
                    eprintln!("podpolicy: the policy rejected a pod; nothing was written");
                    Ok(ExitCode::from(1))
                }
                apply::ApplyOutcome::Planned(report) => {
                    print(*output, "ApplyReport", || report.to_table(), &report)?;
                    match &report.error {
                        Some(error) => anyhow::bail!(
                            "{error}; {} of {} change(s) were applied (the other owners were written)",
                            report.applied,
                            report.changes.len()
                        ),
                        None => Ok(ExitCode::SUCCESS),
                    }
                }
            }
        }
        Command::Resize {
            old,
            new,
            node,
            others,
            apply,
            cgroup_root,
            output,
        } => {
            let node = read_node(&policy, node)?;
            let current = single_pod(old)?;
            let desired = single_pod(new)?;
            let others = parse_resource_list(others.as_deref().unwrap_or(""))?;
            let root = if *apply { cgroup_root.as_deref() } else { None };
            let report =
                podpolicy::resize_cmd::resize(&policy, &current, &desired, &others, &node, root)?;
            print(
                *output,
                "ResizeReport",
                || report.to_table(),
                &report.to_json(),
            )?;
            Ok(ExitCode::from(report.exit_code()))
        }
        Command::Admit {
            pod,
            node,
            sysfs,
            state,
            cgroup_root,
            why,
            output,
        } => {
            let node = read_node(&policy, node)?;
            let topology = podpolicy::topology_input::read_node_topology(sysfs)?;
            let pod = single_pod(pod)?;
            let admission = podpolicy::admit::admit(
                &policy,
                &pod,
                &node,
                &topology,
                state.as_deref(),
                cgroup_root.as_deref(),
            )?;
            let mut value = podpolicy::admit::AdmissionOut::new(&pod, &admission);
            if *why {
                value = value.with_why(&admission);
            }
            print(*output, "Admission", || value.to_table(), &value)?;
            Ok(if admission.rejection.is_some() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Release {
            pod_uid,
            container,
            node,
            sysfs,
            state,
            output,
        } => {
            let node = read_node(&policy, node)?;
            let topology = podpolicy::topology_input::read_node_topology(sysfs)?;
            let state =
                podpolicy::admit::release(&policy, pod_uid, container, &node, &topology, state)?;
            let value = serde_json::json!({
                "podUid": pod_uid,
                "container": container,
                "nodeSharedPool": state.cpu.default_cpuset,
            });
            print(
                *output,
                "Release",
                || {
                    format!(
                        "released {pod_uid}/{container}; node shared pool now {}\n",
                        state.cpu.default_cpuset
                    )
                },
                &value,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Webhook {
            tls_cert,
            tls_key,
            listen,
            node,
            max_concurrency,
            max_body_bytes,
            request_timeout,
            max_connections,
            policy_dir,
        } => {
            let node = if node.given() {
                read_node(&policy, node)?
            } else {
                podpolicy::empty_node()
            };
            let tls = podpolicy::webhook::tls::server_config_from_files(tls_cert, tls_key)?;
            let options = podpolicy::webhook::WebhookOptions {
                listen: *listen,
                node,
                max_concurrency: max_concurrency
                    .unwrap_or_else(podpolicy::webhook::default_concurrency),
                max_body_bytes: *max_body_bytes,
                request_timeout: Duration::from_millis(*request_timeout),
                max_connections: *max_connections,
                header_timeout: podpolicy::webhook::DEFAULT_HEADER_TIMEOUT,
            };
            let slot = std::sync::Arc::new(podpolicy::swap::PolicySlot::new(policy));
            if let Some(dir) = policy_dir {
                // The same policy directory as the agent's; with no pods of
                // its own, the webhook vets candidates with the self-check.
                let server = podpolicy::policy_dir::PolicyDirServer::start(
                    dir,
                    &slot,
                    cache(&cli),
                    limits(&cli),
                )?;
                podpolicy::policy_dir::watch_in_background(
                    server,
                    slot.clone(),
                    Duration::from_secs(1),
                    |outcome| outcome.log(),
                )?;
            }
            podpolicy::webhook::run(options, tls, slot)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Review { file, node, output } => {
            let node = if node.given() {
                read_node(&policy, node)?
            } else {
                podpolicy::empty_node()
            };
            let (source, body) = podpolicy::review_cmd::read_review(file)?;
            let report = podpolicy::review_cmd::run(&policy, &node, source, &body)?;
            print(*output, "ReviewReport", || report.to_table(), &report)?;
            Ok(if report.allowed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Topology {
            pods,
            node,
            sysfs,
            state,
            output,
        } => {
            let inputs = read_node_inputs(&policy, node)?;
            let docs = if pods.files.is_empty() && pods.filenames.is_empty() {
                Vec::new()
            } else {
                pods.read()?
            };
            let root = sysfs
                .as_deref()
                .or(inputs.sysfs.as_deref())
                .unwrap_or("/".as_ref());
            let view = podpolicy::topology_view::from_paths(
                &policy,
                &inputs.settings,
                root,
                state.as_deref(),
                &docs,
            )?;
            let mut stdout = std::io::stdout().lock();
            match output {
                TopologyFormat::Text => {
                    let colour = std::io::IsTerminal::is_terminal(&stdout)
                        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
                    stdout.write_all(view.to_text(colour).as_bytes())?;
                }
                TopologyFormat::Svg => stdout.write_all(view.to_svg().as_bytes())?,
                TopologyFormat::Json => {
                    serde_json::to_writer_pretty(
                        &mut stdout,
                        &output::document("TopologyView", &view)?,
                    )?;
                    stdout.write_all(b"\n")?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { .. } | Command::Man => {
            // Handled before the policy is loaded (see `run`).
            Ok(ExitCode::SUCCESS)
        }
        Command::Version { output } => {
            let info = policy.info();
            let value = serde_json::json!({
                "podpolicy": env!("CARGO_PKG_VERSION"),
                "policy": if cli.policy.is_some() { "file" } else { "embedded" },
                "policyVersion": info.policy_version,
                "policyDigest": format!("sha256:{}", policy.digest()),
                "witPackage": format!("podpolicy:policy@{}", info.wit_version),
                "hostWitPackage": format!("podpolicy:policy@{}", podpolicy::runtime::WIT_VERSION),
                "kubernetesVersion": info.kubernetes_version,
            });
            print(
                *output,
                "Version",
                || {
                    format!(
                        "podpolicy           {}\npolicy              {} ({})\npolicy digest       sha256:{}\nWIT package         podpolicy:policy@{}\nKubernetes version  {}\n",
                        env!("CARGO_PKG_VERSION"),
                        info.policy_version,
                        if cli.policy.is_some() {
                            "--policy"
                        } else {
                            "embedded"
                        },
                        policy.digest(),
                        info.wit_version,
                        info.kubernetes_version
                    )
                },
                &value,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Conformance { files } => {
            let mut total = conformance::Totals::default();
            let mut stdout = std::io::stdout().lock();
            for file in files {
                let report = conformance::run_file(&policy, file)?;
                total.add(report.totals());
                stdout.write_all(report.render().as_bytes())?;
            }
            writeln!(stdout, "total: {total}")?;
            Ok(if total.failed > 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

/// Read a file that must hold exactly one pod.
fn single_pod(path: &std::path::Path) -> Result<podpolicy::bindings::Pod> {
    let mut docs = pod_input::read_pods(path)?;
    if docs.len() != 1 {
        anyhow::bail!("{}: expected one pod, found {}", path.display(), docs.len());
    }
    Ok(docs.remove(0).pod)
}

/// `cpu=10,memory=8Gi` -> a resource list (the policy parses the quantities).
fn parse_resource_list(text: &str) -> Result<Vec<podpolicy::bindings::ResourceQuantity>> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| match item.split_once('=') {
            Some((name, quantity)) if !name.is_empty() => {
                Ok(podpolicy::bindings::ResourceQuantity {
                    name: name.trim().to_string(),
                    quantity: quantity.trim().to_string(),
                })
            }
            _ => anyhow::bail!("--others: `{item}` is not NAME=QUANTITY"),
        })
        .collect()
}

/// Set by SIGTERM / SIGINT.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The node settings of a long-lived server (the agent, the NRI plugin).
/// It must come up even when its first policy is broken, so that a good
/// version can still arrive through --policy-dir: a failed call here is
/// logged; field errors in the node still stop it.
fn server_node(
    policy: &PolicyRuntime,
    node: &NodeArgs,
) -> Result<podpolicy::bindings::NodeSettings> {
    let node = node_input::read_node_inputs(
        node.node.as_deref(),
        node.kubelet_config.as_deref(),
        "/proc".as_ref(),
        "/sys/fs/cgroup".as_ref(),
    )?
    .settings;
    match policy.validate_node(&node) {
        Ok(errors) if !errors.is_empty() => anyhow::bail!(
            "invalid node settings:\n{}",
            podpolicy::format_field_errors(&errors)
        ),
        Ok(_) => {}
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "the policy could not validate the node settings")
        }
    }
    Ok(node)
}

fn run_agent(
    options: podpolicy::agent::AgentOptions,
    policy: PolicyRuntime,
    metrics_addr: &str,
    once: bool,
) -> Result<ExitCode> {
    let started = *START.get_or_init(std::time::Instant::now);
    let metrics = std::sync::Arc::new(podpolicy::metrics::Metrics::new());
    let slot = std::sync::Arc::new(podpolicy::swap::PolicySlot::new(policy));
    let resync = options.resync;
    let mut agent = podpolicy::agent::Agent::start(options, slot, metrics.clone(), started)?;
    // /healthz fails when the loop has not gone round for three resync
    // periods and a minute (a pass stuck in a read, a write or a call).
    metrics.watch_liveness(
        agent.heartbeat(),
        resync * 3 + std::time::Duration::from_secs(60),
    );
    if once {
        // One shot: candidates are vetted to the end before the pass.
        agent.settle_policy_dir(podpolicy::policy_dir::VETTING_DEADLINE)?;
        let report = agent.reconcile()?;
        print(Format::Json, "ReconcileReport", String::new, &report)?;
        return Ok(if report.errors.is_empty() && report.rejected.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    if metrics_addr != "off" {
        let addr: std::net::SocketAddr = metrics_addr
            .parse()
            .with_context(|| format!("--metrics-addr `{metrics_addr}` is not HOST:PORT"))?;
        let bound = podpolicy::metrics::serve(addr, metrics)?;
        tracing::info!(%bound, "metrics endpoint listening");
    }
    let (wake, woken) = std::sync::mpsc::channel();
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal runtime")?;
    std::thread::Builder::new()
        .name("podpolicy-signals".into())
        .spawn(move || {
            signals.block_on(async {
                if podpolicy::termination_signal().await.is_err() {
                    return;
                }
                STOP.store(true, std::sync::atomic::Ordering::SeqCst);
                let _ = wake.send(());
            });
        })
        .context("starting the signal thread")?;
    agent.run(&STOP, woken)?;
    Ok(ExitCode::SUCCESS)
}

/// When the process started (for the agent's time to first decision).
static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
