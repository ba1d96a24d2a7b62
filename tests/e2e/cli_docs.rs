//! Shell completions, the man page and `version`, all from the clap
//! definition and the loaded policy.

use serde_json::Value;

use crate::util::podpolicy;

#[test]
fn completions_cover_every_subcommand_in_each_shell() {
    for (shell, marker) in [
        ("bash", "_podpolicy() {"),
        ("zsh", "#compdef podpolicy"),
        ("fish", "complete -c podpolicy"),
    ] {
        let (code, script, stderr) = podpolicy(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {stderr}");
        assert!(script.contains(marker), "{shell}: {script}");
        for sub in [
            "explain",
            "topology",
            "review",
            "diff",
            "version",
            "completions",
            "man",
        ] {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    let (code, _, stderr) = podpolicy(&["completions", "tcsh"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("invalid value 'tcsh'"), "{stderr}");
}

#[test]
fn the_man_page_is_roff_for_the_whole_cli() {
    let (code, page, stderr) = podpolicy(&["man"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(page.contains(".TH podpolicy 1"), "{page}");
    assert!(page.contains(".SH SYNOPSIS"));
    assert!(page.contains("\\fB\\-\\-policy\\fR"), "{page}");
    for sub in ["topology", "review", "policy", "version"] {
        assert!(page.contains(sub), "the man page lacks {sub}");
    }
}

#[test]
fn version_names_binary_policy_and_wit() {
    let (code, text, stderr) = podpolicy(&["version"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        text.starts_with(&format!(
            "podpolicy           {}\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    let digest = podpolicy::runtime::digest(podpolicy::runtime::EMBEDDED_POLICY);
    assert!(
        text.contains(&format!("policy digest       sha256:{digest}\n")),
        "{text}"
    );
    assert!(
        text.contains("WIT package         podpolicy:policy@3.0.0\n"),
        "{text}"
    );
    assert!(text.contains("(embedded)"), "{text}");
    let (code, json, _) = podpolicy(&["version", "-o", "json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["kind"], "Version");
    assert_eq!(v["policy"], "embedded");
    assert_eq!(v["policyDigest"], format!("sha256:{digest}"));
    assert_eq!(v["hostWitPackage"], "podpolicy:policy@3.0.0");
}
