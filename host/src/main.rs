//! `podpolicy`: the command-line front of the host library.
//!
//! Exit status: 0 success, 1 the policy rejected something (invalid pod,
//! failed conformance case), 2 an error (bad input, broken module).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use podpolicy::bindings::NodeSettings;
use podpolicy::runtime::{Cache, Limits, PolicyRuntime};
use podpolicy::{apply, conformance, explain_all, node_input, pod_input};

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
    /// Fuel (instruction budget) per policy call.
    #[arg(long, global = true, default_value_t = Limits::default().fuel)]
    fuel: u64,
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
        /// Pod files (YAML or JSON; a Pod, a List, or several YAML documents); `-` reads stdin.
        #[arg(required = true)]
        pods: Vec<PathBuf>,
        /// Node settings file; without it, this machine is described.
        #[arg(long)]
        node: Option<PathBuf>,
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
        /// Pod files (YAML or JSON; a Pod, a List, or several YAML documents); `-` reads stdin.
        #[arg(required = true)]
        pods: Vec<PathBuf>,
        /// Node settings file; without it, this machine is described.
        #[arg(long)]
        node: Option<PathBuf>,
        /// The cgroup v2 root (a cgroup2 mount, or a plain directory standing in for one).
        #[arg(long, value_name = "DIR", default_value = "/sys/fs/cgroup")]
        cgroup_root: PathBuf,
        /// Where `<pid>/oom_score_adj` lives.
        #[arg(long, value_name = "DIR", default_value = "/proc")]
        proc_root: PathBuf,
        /// Print the changes (path, old, new) without writing anything.
        #[arg(long)]
        dry_run: bool,
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
        /// Node settings file; without it, this machine is described.
        #[arg(long)]
        node: Option<PathBuf>,
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
        /// Node settings file (manager policies, reservations, gates).
        #[arg(long)]
        node: Option<PathBuf>,
        /// Root of the sysfs tree to read the topology from.
        #[arg(long, default_value = "/")]
        sysfs: PathBuf,
        /// Directory of the manager checkpoints (read, then written crash-safe).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Also write cpuset.cpus / cpuset.mems (and quota) under this cgroup root.
        #[arg(long)]
        cgroup_root: Option<PathBuf>,
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
        /// Node settings file.
        #[arg(long)]
        node: Option<PathBuf>,
        /// Root of the sysfs tree to read the topology from.
        #[arg(long, default_value = "/")]
        sysfs: PathBuf,
        /// Directory of the manager checkpoints.
        #[arg(long)]
        state: PathBuf,
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
        /// Node settings file, for feature gates that differ from the 1.36
        /// defaults; without it, every default (the webhook is cluster-side).
        #[arg(long)]
        node: Option<PathBuf>,
        /// Policy evaluations at once (default: one per CPU).
        #[arg(long, value_name = "N")]
        max_concurrency: Option<usize>,
        /// Largest request body accepted; larger ones get 413.
        #[arg(long, value_name = "N", default_value_t = podpolicy::webhook::DEFAULT_MAX_BODY_BYTES)]
        max_body_bytes: usize,
        /// Deadline for one review, in milliseconds; after it, 504.
        #[arg(long, value_name = "MS", default_value_t = podpolicy::webhook::DEFAULT_REQUEST_TIMEOUT.as_millis() as u64)]
        request_timeout: u64,
    },
    /// Run conformance vector files through the component.
    Conformance {
        /// Vector files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
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
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Table,
    Json,
    Yaml,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("PODPOLICY_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
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

fn load_policy(cli: &Cli) -> Result<PolicyRuntime> {
    let cache = match (&cli.cache_dir, cli.no_cache) {
        (_, true) => Cache::Off,
        (Some(dir), false) => Cache::Dir(dir.clone()),
        (None, false) => Cache::default_location(),
    };
    let limits = Limits {
        fuel: cli.fuel,
        deadline: Duration::from_millis(cli.timeout_ms.max(1)),
        memory_bytes: usize::try_from(cli.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
    };
    match &cli.policy {
        Some(path) => PolicyRuntime::from_file(path, &cache, limits),
        None => PolicyRuntime::embedded(&cache, limits).context("loading the embedded policy"),
    }
}

/// The node settings from `path`, or this machine's; refused when invalid.
fn read_node(policy: &PolicyRuntime, path: Option<&std::path::Path>) -> Result<NodeSettings> {
    let node = match path {
        Some(path) => node_input::read_node(path)?,
        None => node_input::local_node("/proc".as_ref(), "/sys/fs/cgroup".as_ref())?,
    };
    let node_errors = policy.validate_node(&node)?;
    if !node_errors.is_empty() {
        anyhow::bail!(
            "invalid node settings:\n{}",
            podpolicy::format_field_errors(&node_errors)
        );
    }
    Ok(node)
}

fn print(
    format: Format,
    table: impl FnOnce() -> String,
    value: &impl serde::Serialize,
) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match format {
        Format::Table => stdout.write_all(table().as_bytes())?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut stdout, value)?;
            stdout.write_all(b"\n")?;
        }
        Format::Yaml => stdout.write_all(serde_yaml_ng::to_string(value)?.as_bytes())?,
    }
    Ok(())
}

fn run(cli: Cli) -> Result<ExitCode> {
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
                Some(source) => std::fs::read(source)
                    .with_context(|| format!("reading {}", source.display()))?,
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
        Command::Explain { pods, node, output } => {
            let node = read_node(&policy, node.as_deref())?;
            let mut docs = Vec::new();
            for path in pods {
                docs.extend(pod_input::read_pods(path)?);
            }
            let report = explain_all(&policy, &docs, &node)?;
            print(*output, || report.to_table(), &report)?;
            Ok(if report.any_rejected() {
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
            pids,
            kube_reserved_cgroup,
            system_reserved_cgroup,
            output,
        } => {
            let node = read_node(&policy, node.as_deref())?;
            let mut docs = Vec::new();
            for path in pods {
                docs.extend(pod_input::read_pods(path)?);
            }
            let options = apply::ApplyOptions {
                cgroup_root: cgroup_root.clone(),
                proc_root: proc_root.clone(),
                dry_run: *dry_run,
                pids: pids.clone(),
                kube_reserved_cgroup: kube_reserved_cgroup.clone(),
                system_reserved_cgroup: system_reserved_cgroup.clone(),
            };
            match apply::apply_pods(&policy, &docs, &node, &options)? {
                apply::ApplyOutcome::Rejected(report) => {
                    print(*output, || report.to_table(), &report)?;
                    eprintln!("podpolicy: the policy rejected a pod; nothing was written");
                    Ok(ExitCode::from(1))
                }
                apply::ApplyOutcome::Planned(report) => {
                    print(*output, || report.to_table(), &report)?;
                    match &report.error {
                        Some(error) => anyhow::bail!(
                            "{error}; {} of {} change(s) were applied before it",
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
            let node = read_node(&policy, node.as_deref())?;
            let current = single_pod(old)?;
            let desired = single_pod(new)?;
            let others = parse_resource_list(others.as_deref().unwrap_or(""))?;
            let root = if *apply { cgroup_root.as_deref() } else { None };
            let report =
                podpolicy::resize_cmd::resize(&policy, &current, &desired, &others, &node, root)?;
            print(*output, || report.to_table(), &report.to_json())?;
            Ok(ExitCode::from(report.exit_code()))
        }
        Command::Admit {
            pod,
            node,
            sysfs,
            state,
            cgroup_root,
            output,
        } => {
            let node = read_node(&policy, node.as_deref())?;
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
            let value = podpolicy::admit::admission_json(&pod, &admission);
            print(
                *output,
                || serde_yaml_ng::to_string(&value).unwrap_or_default(),
                &value,
            )?;
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
        } => {
            let node = read_node(&policy, node.as_deref())?;
            let topology = podpolicy::topology_input::read_node_topology(sysfs)?;
            let state =
                podpolicy::admit::release(&policy, pod_uid, container, &node, &topology, state)?;
            println!(
                "released {pod_uid}/{container}; default cpuset now {}",
                state.cpu.default_cpuset
            );
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
        } => {
            let node = match node {
                Some(path) => read_node(&policy, Some(path))?,
                None => podpolicy::empty_node(),
            };
            let tls = podpolicy::webhook::tls::server_config_from_files(tls_cert, tls_key)?;
            let options = podpolicy::webhook::WebhookOptions {
                listen: *listen,
                node,
                max_concurrency: max_concurrency
                    .unwrap_or_else(podpolicy::webhook::default_concurrency),
                max_body_bytes: *max_body_bytes,
                request_timeout: Duration::from_millis((*request_timeout).max(1)),
            };
            let slot = std::sync::Arc::new(podpolicy::swap::PolicySlot::new(policy));
            podpolicy::webhook::run(options, tls, slot)?;
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
