//! The policy directory on a real node (`podpolicy::policy_dir`): what is
//! dropped into it cannot stall or exhaust the server. Symbolic links,
//! FIFOs and oversized files are refused once, by what they are, without
//! being read; candidates are vetted on their own thread while the poll
//! returns at once; a file caught half written is vetted again once
//! complete; requests are only complete request files and are handled once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use podpolicy::policy_dir::{
    DirState, MAX_CANDIDATE_BYTES, PolicyDir, PolicyDirServer, PollOutcome, ShadowReport,
};
use podpolicy::runtime::{Cache, EMBEDDED_POLICY, Limits, PolicyRuntime};
use podpolicy::swap::PolicySlot;

use crate::hostile_policy::{Hostility, component};
use crate::util::{cache_dir, embedded_variant, temp_dir};

fn slot() -> PolicySlot {
    PolicySlot::new(
        PolicyRuntime::from_bytes(EMBEDDED_POLICY, &Cache::Dir(cache_dir()), Limits::default())
            .expect("the embedded policy loads"),
    )
}

fn server(dir: &Path, slot: &PolicySlot) -> PolicyDirServer {
    PolicyDirServer::start(dir, slot, Cache::Dir(cache_dir()), Limits::default())
        .expect("the policy directory server starts")
}

/// What the webhook vets with: the self-check alone.
fn vet(candidate: &PolicyRuntime, _: &PolicyRuntime) -> anyhow::Result<ShadowReport> {
    podpolicy::policy_dir::self_check(candidate)?;
    Ok(ShadowReport::default())
}

fn settle(server: &mut PolicyDirServer, slot: &PolicySlot) -> PollOutcome {
    let outcome = server
        .settle(slot, &vet, Duration::from_secs(300))
        .expect("poll");
    assert!(server.is_idle(), "vetting did not finish");
    outcome
}

fn state(dir: &Path) -> DirState {
    PolicyDir::open(dir).unwrap().state().unwrap()
}

fn policies(name: &str) -> PathBuf {
    let dir = temp_dir(name).join("policies");
    std::fs::create_dir_all(dir.join("requests")).unwrap();
    dir
}

#[test]
fn a_symlink_to_dev_zero_is_refused_once_and_not_retried() {
    let dir = policies("policy-dir-symlink");
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.wasm")).unwrap();
    let slot = slot();
    let base = slot.current().digest().to_string();
    let mut server = server(&dir, &slot);

    let outcome = server.poll(&slot, &vet).unwrap();
    assert_eq!(
        outcome.rejected,
        [
            "policy candidate zero.wasm is not a regular file (a symbolic link); links are not followed here"
        ]
    );
    assert!(
        server.is_idle(),
        "a link is refused without a vetting thread"
    );
    let recorded = &state(&dir).files["zero.wasm"];
    assert!(
        !recorded.accepted && recorded.digest.is_none(),
        "{recorded:?}"
    );

    // Not retried: not by later polls, not after a restart.
    assert!(settle(&mut server, &slot).rejected.is_empty());
    drop(server);
    let mut server = self::server(&dir, &slot);
    assert!(settle(&mut server, &slot).rejected.is_empty());

    // An explicit activation opens it with O_NOFOLLOW: refused, consumed.
    std::fs::write(
        dir.join("requests/000000000000000000000001-1-activate-zero.wasm"),
        "zero.wasm",
    )
    .unwrap();
    let outcome = settle(&mut server, &slot);
    assert_eq!(outcome.rejected.len(), 1, "{outcome:?}");
    assert!(
        outcome.rejected[0].contains("zero.wasm: policy candidate is not a regular file"),
        "{outcome:?}"
    );
    assert!(
        PolicyDir::open(&dir)
            .unwrap()
            .requests()
            .unwrap()
            .is_empty()
    );
    assert!(settle(&mut server, &slot).rejected.is_empty());
    assert_eq!(slot.current().digest(), base);
}

#[test]
fn fifos_and_oversized_candidates_are_refused_by_what_they_are() {
    let dir = policies("policy-dir-special");
    nix::unistd::mkfifo(&dir.join("fifo.wasm"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    // A sparse file: its size is refused before anything is read.
    let big = std::fs::File::create(dir.join("big.wasm")).unwrap();
    big.set_len(MAX_CANDIDATE_BYTES + 1).unwrap();
    let slot = slot();
    let mut server = server(&dir, &slot);
    let mut rejected = settle(&mut server, &slot).rejected;
    rejected.sort();
    assert_eq!(
        rejected,
        [
            format!(
                "policy candidate big.wasm is larger than {MAX_CANDIDATE_BYTES} bytes ({} bytes)",
                MAX_CANDIDATE_BYTES + 1
            ),
            "policy candidate fifo.wasm is not a regular file (a FIFO)".to_string(),
        ]
    );
    // An activation of the FIFO does not block its vetting thread either.
    std::fs::write(
        dir.join("requests/000000000000000000000001-1-activate-fifo.wasm"),
        "",
    )
    .unwrap();
    let outcome = settle(&mut server, &slot);
    assert!(
        outcome.rejected[0].contains("fifo.wasm: policy candidate is not a regular file (a FIFO)"),
        "{outcome:?}"
    );

    // A lower cap, for a file that is read: refused with its size too.
    let dir = policies("policy-dir-cap");
    std::fs::write(dir.join("v2.wasm"), embedded_variant("cap")).unwrap();
    let mut server = self::server(&dir, &slot);
    server.set_max_candidate_bytes(1000);
    let rejected = settle(&mut server, &slot).rejected;
    assert_eq!(
        rejected,
        [format!(
            "policy candidate v2.wasm is larger than 1000 bytes ({} bytes)",
            embedded_variant("cap").len()
        )]
    );
}

#[test]
fn a_poll_never_waits_for_a_candidate_and_a_later_poll_swaps_it() {
    let dir = policies("policy-dir-async");
    let slot = slot();
    let base = slot.current().digest().to_string();
    let mut server = server(&dir, &slot);
    let good = embedded_variant("async");
    std::fs::write(dir.join("v2.wasm"), &good).unwrap();

    // The poll that finds it starts its vetting thread and returns: the
    // base version keeps serving, the state says what is being vetted.
    let outcome = server.poll(&slot, &vet).unwrap();
    assert!(outcome.swapped.is_empty() && outcome.rejected.is_empty());
    assert_eq!(slot.current().digest(), base);
    assert_eq!(state(&dir).vetting, ["v2.wasm"]);
    assert!(!server.is_idle());

    let outcome = settle(&mut server, &slot);
    assert_eq!(outcome.swapped.len(), 1, "{outcome:?}");
    assert_eq!(slot.current().digest(), podpolicy::runtime::digest(&good));
    let state = state(&dir);
    assert!(state.vetting.is_empty());
    assert_eq!(state.active_file.as_deref(), Some("v2.wasm"));
    assert!(state.files["v2.wasm"].accepted);
}

#[test]
fn a_candidate_written_in_two_halves_is_accepted_once_complete() {
    let dir = policies("policy-dir-halves");
    let slot = slot();
    let mut server = server(&dir, &slot);
    let good = embedded_variant("halves");
    let (first, second) = good.split_at(good.len() / 2);
    let path = dir.join("v2.wasm");
    std::fs::write(&path, first).unwrap();
    let outcome = settle(&mut server, &slot);
    assert_eq!(outcome.rejected.len(), 1, "{outcome:?}");
    assert!(
        outcome.rejected[0].starts_with("loading candidate v2.wasm"),
        "{outcome:?}"
    );
    assert!(!state(&dir).files["v2.wasm"].accepted);
    // Nothing changed: not vetted again.
    assert!(settle(&mut server, &slot).rejected.is_empty());

    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(second)
        .unwrap();
    let outcome = settle(&mut server, &slot);
    assert_eq!(outcome.swapped.len(), 1, "{outcome:?}");
    assert_eq!(slot.current().digest(), podpolicy::runtime::digest(&good));
    let recorded = &state(&dir).files["v2.wasm"];
    assert!(recorded.accepted, "{recorded:?}");
    assert_eq!(recorded.stamp.size, good.len() as u64);
}

#[test]
fn only_complete_request_files_are_requests_and_each_is_handled_once() {
    let dir = policies("policy-dir-requests");
    let requests = dir.join("requests");
    // What `policy activate` writes before its rename, and stray files.
    let temp = requests.join(".000000000000000000000001-7-activate-x.wasm.tmp.7");
    std::fs::write(&temp, "x.wasm").unwrap();
    std::fs::write(requests.join("notes-rollback"), "").unwrap();
    std::fs::write(requests.join("README"), "").unwrap();
    let policy_dir = PolicyDir::open(&dir).unwrap();
    assert!(policy_dir.requests().unwrap().is_empty());

    let slot = slot();
    let mut server = server(&dir, &slot);
    assert!(settle(&mut server, &slot).rejected.is_empty());
    assert!(temp.exists(), "a temp file is left to its writer");

    // Requests that fail are consumed with their rejection recorded.
    std::fs::write(
        requests.join("000000000000000000000002-7-activate-missing.wasm"),
        "",
    )
    .unwrap();
    policy_dir.request_rollback().unwrap();
    let outcome = settle(&mut server, &slot);
    assert_eq!(outcome.rejected.len(), 2, "{outcome:?}");
    assert!(
        outcome.rejected.iter().any(|r| r.contains("missing.wasm")),
        "{outcome:?}"
    );
    assert!(
        outcome
            .rejected
            .iter()
            .any(|r| r.contains("no earlier policy version")),
        "{outcome:?}"
    );
    assert!(policy_dir.requests().unwrap().is_empty());
    assert!(state(&dir).last_error.is_some());
    // Never replayed.
    assert!(settle(&mut server, &slot).rejected.is_empty());
}

/// A rewrite in place that keeps the size and lands in the same timestamp
/// tick as the write the server read leaves the file's stamp as it was
/// ("racy git"). The server reads a file once more when its verdict was
/// taken within a tick of the file's last change, so the finished file is
/// vetted (here: a corrupted byte restored; the recorded verdict is put at
/// the restored file's stamp, as such a collision would leave it).
#[test]
fn a_same_size_rewrite_within_a_timestamp_tick_is_vetted_again() {
    let dir = policies("policy-dir-racy");
    let slot = slot();
    let good = embedded_variant("racy");
    let mut torn = good.clone();
    torn[8] ^= 0xff;
    let path = dir.join("v2.wasm");
    std::fs::write(&path, &torn).unwrap();
    {
        let mut server = server(&dir, &slot);
        let outcome = settle(&mut server, &slot);
        assert_eq!(outcome.rejected.len(), 1, "{outcome:?}");
    }
    // The last byte arrives: same size, and (forced here) the same stamp.
    std::fs::write(&path, &good).unwrap();
    let now = podpolicy::bounded_read::FileStamp::of(&std::fs::metadata(&path).unwrap());
    let state_path = dir.join("state.json");
    let mut recorded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&state_path).unwrap()).unwrap();
    let file = &mut recorded["files"]["v2.wasm"];
    file["modifiedNs"] = now.modified_ns.into();
    file["changedNs"] = now.changed_ns.into();
    file["inode"] = now.inode.into();
    file["readNs"] = (now.changed_ns - 1).into();
    std::fs::write(&state_path, serde_json::to_vec(&recorded).unwrap()).unwrap();
    assert_eq!(state(&dir).files["v2.wasm"].stamp, now);

    let mut server = server(&dir, &slot);
    // Within the tick the verdict stands (a later write may still come).
    assert!(settle(&mut server, &slot).swapped.is_empty());
    std::thread::sleep(Duration::from_millis(2_100));
    let outcome = settle(&mut server, &slot);
    assert_eq!(outcome.swapped.len(), 1, "{outcome:?}");
    assert_eq!(slot.current().digest(), podpolicy::runtime::digest(&good));
    // Settled: not read again.
    std::thread::sleep(Duration::from_millis(100));
    let outcome = settle(&mut server, &slot);
    assert!(
        outcome.swapped.is_empty() && outcome.rejected.is_empty(),
        "{outcome:?}"
    );
}

/// Whether a child process of this test process runs `podpolicy`.
fn compiler_children() -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some((head, tail)) = stat.rsplit_once(") ") else {
            continue;
        };
        let ppid: Option<u32> = tail.split(' ').nth(1).and_then(|p| p.parse().ok());
        if ppid == Some(me) && head.ends_with("(podpolicy") {
            found.extend(head.split(' ').next().and_then(|p| p.parse::<u32>().ok()));
        }
    }
    found
}

/// wasmtime cannot stop a compile in-process: a long-lived server compiles
/// a candidate in a child (`podpolicy policy precompile`) and kills it at
/// the vetting deadline, so a candidate built to compile for long costs no
/// more than the deadline and leaves no compile running. A good candidate
/// compiled the same way is swapped in (its artifact comes from the cache
/// the child wrote).
#[test]
fn a_candidate_that_compiles_past_the_deadline_is_killed_with_its_compiler() {
    let dir = policies("policy-dir-slow-compile");
    let slot = slot();
    // A cache of its own: an artifact left by an earlier run is not used.
    let cache = temp_dir("policy-dir-slow-compile-cache");
    let mut server = PolicyDirServer::start(&dir, &slot, Cache::Dir(cache), Limits::default())
        .expect("the policy directory server starts");
    server.set_compiler(Some(PathBuf::from(env!("CARGO_BIN_EXE_podpolicy"))));
    // Compiling it takes seconds here (more under load); the child gets
    // 0.25 s, and the job as a whole 30 s, so the kill is what ends it.
    server.set_vetting_deadline(Duration::from_secs(30));
    server.set_compile_deadline(Duration::from_millis(250));
    std::fs::write(dir.join("slow.wasm"), component(Hostility::SlowCompile)).unwrap();
    let began = Instant::now();
    let outcome = settle(&mut server, &slot);
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(outcome.rejected.len(), 1, "{outcome:?}");
    assert!(
        outcome.rejected[0].contains("the compiler process was killed"),
        "{outcome:?}"
    );
    assert!(compiler_children().is_empty(), "{:?}", compiler_children());

    server.set_vetting_deadline(Duration::from_secs(300));
    server.set_compile_deadline(Duration::from_secs(200));
    let good = embedded_variant("compiled-in-a-child");
    std::fs::write(dir.join("good.wasm"), &good).unwrap();
    let outcome = settle(&mut server, &slot);
    assert_eq!(outcome.swapped.len(), 1, "{outcome:?}");
    assert_eq!(slot.current().digest(), podpolicy::runtime::digest(&good));
    assert!(slot.current().compiled_from_cache());
    assert!(compiler_children().is_empty());
}

#[test]
fn a_candidate_interrupted_by_a_restart_is_not_vetted_again_until_it_changes() {
    let dir = policies("policy-dir-interrupted");
    let slot = slot();
    let mut server = server(&dir, &slot);
    std::fs::write(dir.join("crash.wasm"), embedded_variant("crash")).unwrap();
    // The server stops while the candidate is being vetted (a crash it
    // caused would look the same).
    server.poll(&slot, &vet).unwrap();
    assert_eq!(state(&dir).vetting, ["crash.wasm"]);
    drop(server);

    let mut server = self::server(&dir, &slot);
    let recorded = state(&dir);
    assert!(recorded.vetting.is_empty());
    assert!(
        recorded.files["crash.wasm"].detail.contains("interrupted"),
        "{recorded:?}"
    );
    let outcome = server.poll(&slot, &vet).unwrap();
    assert!(
        server.is_idle() && outcome.rejected.is_empty(),
        "{outcome:?}"
    );

    // Changed, it is a candidate again.
    std::fs::write(dir.join("crash.wasm"), embedded_variant("crash-2")).unwrap();
    assert_eq!(settle(&mut server, &slot).swapped.len(), 1);
}

#[test]
fn a_candidate_past_its_deadline_is_given_up_and_the_next_one_is_vetted() {
    let dir = policies("policy-dir-deadline");
    let slot = slot();
    let base = slot.current().digest().to_string();
    // The looping candidate's self-check runs until its call deadline, far
    // longer than the vetting deadline of zero.
    let limits = Limits {
        fuel: None,
        deadline: Duration::from_secs(5),
        memory_bytes: 64 << 20,
    };
    let mut server = PolicyDirServer::start(&dir, &slot, Cache::Dir(cache_dir()), limits).unwrap();
    server.set_vetting_deadline(Duration::ZERO);
    std::fs::write(dir.join("loop.wasm"), component(Hostility::InfiniteLoop)).unwrap();
    server.poll(&slot, &vet).unwrap();
    let outcome = server.poll(&slot, &vet).unwrap();
    assert_eq!(
        outcome.rejected,
        [
            "policy candidate loop.wasm: not read, compiled and self-checked within 0 s; given up (its thread is abandoned)"
        ]
    );
    assert!(server.is_idle());
    assert_eq!(slot.current().digest(), base);

    // The abandoned thread does not hold up the next candidate.
    server.set_vetting_deadline(Duration::from_secs(300));
    let good = embedded_variant("after-deadline");
    std::fs::write(dir.join("v2.wasm"), &good).unwrap();
    let outcome = settle(&mut server, &slot);
    assert_eq!(outcome.swapped.len(), 1, "{outcome:?}");
    assert_eq!(slot.current().digest(), podpolicy::runtime::digest(&good));
}

#[test]
fn the_agent_reconciles_while_the_policy_directory_holds_a_fifo_and_a_link_to_dev_zero() {
    let root = temp_dir("policy-dir-agent-process");
    let (pods, cgroups, state_dir, dir) = (
        root.join("pods"),
        root.join("cgroup"),
        root.join("state"),
        root.join("policies"),
    );
    for d in [&pods, &cgroups, &dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::copy(
        crate::util::workspace().join("fixtures/pods/kep-ide.yaml"),
        pods.join("kep-ide.yaml"),
    )
    .unwrap();
    nix::unistd::mkfifo(&dir.join("fifo.wasm"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.wasm")).unwrap();
    std::fs::create_dir_all(dir.join("requests")).unwrap();
    // Activations of both: a plain read blocks on the FIFO for ever, and
    // reads /dev/zero until memory runs out (bounded here by the
    // command's data limit).
    for (n, file) in [(1, "fifo.wasm"), (2, "zero.wasm")] {
        std::fs::write(
            dir.join(format!("requests/{n:024}-1-activate-{file}")),
            file,
        )
        .unwrap();
    }
    let mut child = crate::pod_inputs::podpolicy_command()
        .current_dir(crate::util::workspace())
        .env("PODPOLICY_CACHE_DIR", cache_dir())
        .args([
            "agent",
            "--node",
            "fixtures/nodes/node-1000gi.yaml",
            "--metrics-addr",
            "off",
            "--resync-ms",
            "200",
        ])
        .arg("--pods-dir")
        .arg(&pods)
        .arg("--cgroup-root")
        .arg(&cgroups)
        .arg("--state-dir")
        .arg(&state_dir)
        .arg("--policy-dir")
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Passes go on (the status file is rewritten by each pass that has
    // something new: a pod is added after each) and the refusals are
    // recorded.
    let status = state_dir.join("agent_status.json");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut passes = 0;
    let mut last = None;
    while Instant::now() < deadline {
        let stamp = std::fs::metadata(&status).and_then(|m| m.modified()).ok();
        if stamp.is_some() && stamp != last {
            passes += 1;
            last = stamp;
            // A pass that changes nothing writes nothing: give the next one
            // something new to report (one more pod).
            let ide = std::fs::read_to_string(pods.join("kep-ide.yaml")).unwrap();
            std::fs::write(
                pods.join(format!("kep-ide-{passes}.yaml")),
                ide.replace("name: myide", &format!("name: myide-{passes}")),
            )
            .unwrap();
        }
        let recorded = PolicyDir::open(&dir).unwrap().state().unwrap_or_default();
        if passes >= 3 && recorded.files.len() == 2 && recorded.vetting.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let alive = child.try_wait().unwrap().is_none();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let exit = child.wait().unwrap();
    assert!(alive, "the agent exited: {exit:?}");
    assert!(passes >= 3, "reconcile passes stopped after {passes}");
    let recorded = PolicyDir::open(&dir).unwrap().state().unwrap();
    assert!(
        recorded.files["fifo.wasm"].detail.contains("(a FIFO)"),
        "{recorded:?}"
    );
    assert!(
        recorded.files["zero.wasm"]
            .detail
            .contains("(a symbolic link)"),
        "{recorded:?}"
    );
    assert!(
        PolicyDir::open(&dir)
            .unwrap()
            .requests()
            .unwrap()
            .is_empty()
    );
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn an_older_state_keeps_its_verdicts_and_a_file_replaced_under_its_name_is_vetted() {
    let dir = policies("policy-dir-older-state");
    let slot = slot();
    let old = embedded_variant("old");
    std::fs::write(dir.join("v1.wasm"), &old).unwrap();
    // A state.json from before file versions were recorded: v1.wasm was
    // seen (and rolled back since); it is not vetted again.
    let digest = podpolicy::runtime::digest(&old);
    std::fs::write(
        dir.join("state.json"),
        serde_json::json!({
            "active": slot.current().digest(),
            "activeFile": null,
            "history": [],
            "seen": {digest.as_str(): {"file": "v1.wasm", "version": "x", "accepted": true, "detail": ""}},
            "lastError": null,
        })
        .to_string(),
    )
    .unwrap();
    let mut server = server(&dir, &slot);
    let outcome = server.poll(&slot, &vet).unwrap();
    assert!(
        server.is_idle() && outcome.swapped.is_empty(),
        "{outcome:?}"
    );
    assert_eq!(
        state(&dir).files["v1.wasm"].digest.as_deref(),
        Some(digest.as_str())
    );

    // Removed, then a new file under the same name: a new candidate.
    std::fs::remove_file(dir.join("v1.wasm")).unwrap();
    assert!(settle(&mut server, &slot).rejected.is_empty());
    let new = embedded_variant("new");
    std::fs::write(dir.join("v1.wasm"), &new).unwrap();
    assert_eq!(settle(&mut server, &slot).swapped.len(), 1);
    assert_eq!(slot.current().digest(), podpolicy::runtime::digest(&new));
}
