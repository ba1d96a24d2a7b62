//! Seed corpora from the repository's fixtures: every pod in fixtures/pods
//! on every node in fixtures/nodes (read with the host's `pod_input` and
//! `node_input`), encoded as [`Case`]s, and every quantity string in them for
//! the `quantity` target.
//!
//! Each fuzz target writes its seeds into `fuzz/corpus/<target>/seed-*`
//! when it starts (libFuzzer reads the corpus after that), so `cargo fuzz
//! run <target>` always starts from the current fixtures.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use podpolicy::bindings as host;
use podpolicy::node_input::{read_node, read_node_inputs};
use podpolicy::pod_input::read_pods;

use crate::alloc::{self, AllocCase};
use crate::{Case, DiffCase, render};

/// The repository root (fuzz/ is one of its directories).
pub(crate) fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fuzz/ lives in the repository")
        .to_path_buf()
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
}

/// A node fixture as the command reads it. A KubeletConfiguration file is
/// not a node: it is applied to the Node object `kubectl-get-node.yaml`, as
/// `--node fixtures/nodes/kubectl-get-node.yaml --kubelet-config <file>`
/// does (a custom node file with a `kubeletConfig` section refuses a second
/// source of kubelet settings).
fn fixture_node(root: &Path, path: &Path) -> host::NodeSettings {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let node = if text.contains("kind: KubeletConfiguration") {
        read_node_inputs(
            Some(&root.join("fixtures/nodes/kubectl-get-node.yaml")),
            Some(path),
            Path::new("/proc"),
            Path::new("/sys/fs/cgroup"),
        )
        .map(|inputs| inputs.settings)
    } else {
        read_node(path)
    };
    node.unwrap_or_else(|e| panic!("{e:#}"))
}

/// The fixture pods on the fixture nodes, named `seed-<pod>-<node>`.
pub fn cases() -> Vec<(String, Case)> {
    let root = repository();
    let nodes: Vec<(String, host::NodeSettings)> = yaml_files(&root.join("fixtures/nodes"))
        .iter()
        .map(|p| (stem(p), fixture_node(&root, p)))
        .collect();
    let mut out = Vec::new();
    for pod_file in yaml_files(&root.join("fixtures/pods")) {
        for (i, doc) in read_pods(&pod_file)
            .unwrap_or_else(|e| panic!("{e:#}"))
            .into_iter()
            .enumerate()
        {
            for (node_name, node) in &nodes {
                let name = format!("seed-{}-{i}-{node_name}", stem(&pod_file));
                out.push((name, Case::new(doc.pod.clone(), node.clone())));
            }
        }
    }
    out
}

/// Every quantity string of the fixtures, and a few spellings they lack.
pub fn quantities() -> BTreeSet<String> {
    let mut texts = BTreeSet::new();
    let mut add = |list: &[host::ResourceQuantity]| {
        texts.extend(list.iter().map(|q| q.quantity.clone()));
    };
    for (_, case) in cases() {
        let spec = &case.pod.spec;
        let requirements = spec
            .containers
            .iter()
            .chain(&spec.init_containers)
            .filter_map(|c| c.resources.as_ref())
            .chain(spec.resources.as_ref());
        for r in requirements {
            add(r.requests.as_deref().unwrap_or_default());
            add(r.limits.as_deref().unwrap_or_default());
        }
        add(&case.node.capacity);
        add(&case.node.kube_reserved);
        add(&case.node.system_reserved);
    }
    for extra in [
        "0",
        "1.5Gi",
        "100m",
        "12e6",
        "5e-3",
        "0.1n",
        "-1",
        "+2k",
        "9223372036854775807",
        "8Ei",
        "1.0001",
        "0.000000001",
    ] {
        texts.insert(extra.to_string());
    }
    texts
}

/// Write `bytes` unless the file already holds them (temp file + rename, so
/// parallel fuzzer processes never see half a seed).
fn write(dir: &Path, name: &str, bytes: &[u8]) {
    let path = dir.join(name);
    if std::fs::read(&path).is_ok_and(|old| old == bytes) {
        return;
    }
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    std::fs::write(&tmp, bytes).unwrap_or_else(|e| panic!("{}: {e}", tmp.display()));
    std::fs::rename(&tmp, &path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Every pod of fixtures/pods (every document of every file).
pub fn fixture_pods() -> Vec<host::Pod> {
    yaml_files(&repository().join("fixtures/pods"))
        .iter()
        .flat_map(|f| read_pods(f).unwrap_or_else(|e| panic!("{e:#}")))
        .map(|doc| doc.pod)
        .collect()
}

/// The seeds of the `allocation` target, checked against the codec.
pub fn allocation_cases() -> Vec<(String, AllocCase)> {
    let cases = alloc::seed_cases();
    for (name, case) in &cases {
        assert_eq!(
            AllocCase::from_bytes(&case.to_bytes()),
            *case,
            "{name} does not survive the codec"
        );
    }
    cases
}

/// The seeds of the `differential` target: every pod case (with an empty
/// manager case), and every allocation case (with an empty pod case).
pub fn differential_cases() -> Vec<(String, DiffCase)> {
    let mut out: Vec<(String, DiffCase)> = cases()
        .into_iter()
        .map(|(name, case)| {
            let diff = DiffCase {
                case,
                managers: AllocCase::default(),
            };
            (name, diff)
        })
        .collect();
    for (name, managers) in allocation_cases() {
        let case = Case::new(crate::empty_pod(), podpolicy::empty_node());
        out.push((format!("{name}-managers"), DiffCase { case, managers }));
    }
    out
}

/// Write the seeds of fuzz target `target` into `fuzz/corpus/<target>`.
pub fn write_seed_corpus(target: &str) {
    let dir = repository().join("fuzz/corpus").join(target);
    match target {
        "quantity" => {
            for (i, text) in quantities().iter().enumerate() {
                write(&dir, &format!("seed-{i:03}"), text.as_bytes());
            }
        }
        "allocation" => {
            for (name, case) in allocation_cases() {
                write(&dir, &name, &case.to_bytes());
            }
        }
        "differential" => {
            for (name, diff) in differential_cases() {
                let bytes = diff.to_bytes();
                let again = DiffCase::from_bytes(&bytes);
                assert_eq!(render(&again.case), render(&diff.case), "{name}");
                assert_eq!(again.managers, diff.managers, "{name}");
                write(&dir, &name, &bytes);
            }
        }
        _ => {
            for (name, case) in cases() {
                let bytes = case.to_bytes();
                // The codec must give the fixture back, or the seed is not the fixture.
                assert_eq!(
                    render(&Case::from_bytes(&bytes)),
                    render(&case),
                    "{name} does not survive the codec"
                );
                write(&dir, &name, &bytes);
            }
        }
    }
}
