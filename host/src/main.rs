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

use podpolicy::runtime::{Cache, Limits, PolicyRuntime};
use podpolicy::{conformance, explain_all, node_input, pod_input};

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
            let node = match node {
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
