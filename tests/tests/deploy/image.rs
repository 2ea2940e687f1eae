//! The Dockerfile's build stage, step by step, in a temporary copy of the repository: its `COPY`
//! lines as written, its `RUN` lines through `sh -c`. A stub the dependency-caching step misses (a new
//! `[[bench]]`, a new crate) fails here instead of in someone's `docker build`.
//!
//! What differs from a real `docker build`: no network (the registry cache the test build already
//! filled is used, `CARGO_NET_OFFLINE`), and the final builds (the detector's release profile, the
//! drainer's own) keep their profiles' settings but without fat LTO and with opt-level 0
//! (`CARGO_PROFILE_RELEASE_*`, `CARGO_PROFILE_DRAINER_*`), into a target directory of its own that
//! later runs reuse, so that CI builds the binaries in a few minutes instead of the image's quarter
//! hour. The drainer's profile-guided build (`build/pgo-drainer.sh`) runs in full: its instrumented
//! build, its training run against a test API server, the merge and the build with the profile; the
//! profile of an unoptimised drainer only proves the steps work (the image test builds without PGO to
//! keep CI short; the benches build and measure the optimised one).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::render::repo;

/// One instruction: its keyword and the rest of its (continuation-joined) line.
fn instructions(dockerfile: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in dockerfile.lines() {
        let t = line.trim();
        // Comment lines are dropped, also between continuation lines (as Docker does).
        if t.starts_with('#') || (t.is_empty() && current.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(t);
                let (kw, rest) = current
                    .split_once(char::is_whitespace)
                    .unwrap_or((&current, ""));
                out.push((kw.to_uppercase(), rest.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

/// The instructions of the stage named `name` (`FROM ... AS name`), without the FROM.
fn stage(all: &[(String, String)], name: &str) -> Vec<(String, String)> {
    let start = all
        .iter()
        .position(|(k, r)| k == "FROM" && r.to_lowercase().ends_with(&format!(" as {name}")))
        .unwrap_or_else(|| panic!("Dockerfile: no stage {name:?}"));
    all[start + 1..]
        .iter()
        .take_while(|(k, _)| k != "FROM")
        .cloned()
        .collect()
}

/// `.dockerignore`'s patterns of the forms it uses (`dir/` and `*.ext`).
fn ignored(patterns: &[String], rel: &Path) -> bool {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    patterns.iter().any(|p| {
        if let Some(dir) = p.strip_suffix('/') {
            rel == Path::new(dir)
        } else if let Some(ext) = p.strip_prefix('*') {
            name.ends_with(ext)
        } else {
            rel == Path::new(p)
        }
    })
}

fn copy_tree(from: &Path, to: &Path, rel: &Path, ignore: &[String]) {
    for e in std::fs::read_dir(from.join(rel)).unwrap() {
        let e = e.unwrap();
        let r = rel.join(e.file_name());
        if ignored(ignore, &r) {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(to.join(&r)).unwrap();
            copy_tree(from, to, &r, ignore);
        } else if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(&r)).unwrap();
        }
    }
}

#[test]
fn the_dockerfile_build_stage_runs_step_by_step() {
    let repo = repo().canonicalize().unwrap();
    let dockerfile = std::fs::read_to_string(repo.join("Dockerfile")).unwrap();
    let steps = stage(&instructions(&dockerfile), "build");
    let ignore: Vec<String> = std::fs::read_to_string(repo.join(".dockerignore"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let ctx = tempfile::tempdir().unwrap();
    let mut workdir = ctx.path().to_path_buf();
    let target: PathBuf = repo.join("target/dockerfile-build");
    let mut ran = Vec::new();
    // ARGs with their defaults, in the environment of the RUN lines after them (as Docker does).
    let mut args: Vec<(String, String)> = Vec::new();
    for (kw, rest) in &steps {
        match kw.as_str() {
            // The build stage's WORKDIR is the copy's root.
            "WORKDIR" => workdir = ctx.path().to_path_buf(),
            "COPY" => {
                assert!(
                    !rest.starts_with("--"),
                    "COPY {rest}: flags are not handled here"
                );
                let args: Vec<&str> = rest.split_whitespace().collect();
                let (dst, srcs) = args.split_last().unwrap();
                if srcs == ["."] {
                    copy_tree(&repo, &workdir.join(dst), Path::new(""), &ignore);
                    continue;
                }
                for src in srcs {
                    let to = if dst.ends_with('/') || srcs.len() > 1 {
                        workdir.join(dst).join(Path::new(src).file_name().unwrap())
                    } else {
                        workdir.join(dst)
                    };
                    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                    std::fs::copy(repo.join(src), &to)
                        .unwrap_or_else(|e| panic!("COPY {src} {dst}: {e}"));
                }
            }
            "RUN" => {
                let out = Command::new("sh")
                    .arg("-c")
                    .arg(rest)
                    .current_dir(&workdir)
                    .env("CARGO_NET_OFFLINE", "true")
                    .env("CARGO_TARGET_DIR", &target)
                    .env("CARGO_PROFILE_RELEASE_LTO", "off")
                    .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
                    .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
                    .env("CARGO_PROFILE_DRAINER_LTO", "off")
                    .env("CARGO_PROFILE_DRAINER_OPT_LEVEL", "0")
                    .env("CARGO_PROFILE_DRAINER_CODEGEN_UNITS", "16")
                    .envs(args.iter().map(|(k, v)| (k, v)))
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "Dockerfile step `RUN {rest}` failed:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                ran.push(rest.clone());
            }
            "ARG" => {
                let (name, default) = rest.split_once('=').unwrap_or((rest, ""));
                args.push((name.to_string(), default.to_string()));
            }
            "ENV" => panic!("{kw} in the build stage: teach this test to apply it"),
            other => panic!("{other} in the build stage: teach this test to run it"),
        }
    }
    assert!(
        ran.iter().any(|r| r.contains("cargo fetch --locked")),
        "the dependency step ran: {ran:?}"
    );
    assert!(
        ran.iter()
            .any(|r| r.contains("cargo build --locked --release"))
    );
    // Each with the profile the image ships it with (Cargo.toml says why), the drainer also with
    // the profile of its training run (build/pgo-drainer.sh), which has run here; both in dist/,
    // where the image stages copy them from.
    for exe in [
        workdir.join("dist/detector"),
        workdir.join("dist/drainer"),
        target.join("pgo/drainer.profdata"),
    ] {
        assert!(exe.is_file(), "{} was not built", exe.display());
    }
    assert!(
        args.contains(&("NODEMEDIC_PGO".into(), "on".into())),
        "the image's drainer is built with profile-guided optimisation: {args:?}"
    );
}

#[test]
fn a_bench_without_a_stub_fails_the_dependency_step() {
    // The check above is only worth something if the step fails when a stub is missing: run the
    // dependency step over manifests declaring a bench no stub line could know of by name.
    let repo = repo().canonicalize().unwrap();
    let steps = stage(
        &instructions(&std::fs::read_to_string(repo.join("Dockerfile")).unwrap()),
        "build",
    );
    let (_, fetch) = steps
        .iter()
        .find(|(k, r)| k == "RUN" && r.contains("cargo fetch"))
        .unwrap();
    let ctx = tempfile::tempdir().unwrap();
    for f in [
        "Cargo.toml",
        "Cargo.lock",
        "common/Cargo.toml",
        "detector/Cargo.toml",
        "drainer/Cargo.toml",
        "tests/Cargo.toml",
    ] {
        std::fs::create_dir_all(ctx.path().join(f).parent().unwrap()).unwrap();
        std::fs::copy(repo.join(f), ctx.path().join(f)).unwrap();
    }
    let manifest = ctx.path().join("drainer/Cargo.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str("\n[[bench]]\nname = \"brand-new\"\nharness = false\n");
    std::fs::write(&manifest, &text).unwrap();
    let run = |cmd: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(ctx.path())
            .env("CARGO_NET_OFFLINE", "true")
            .output()
            .unwrap()
    };
    // The step stubs it (it reads the names from the manifests) ...
    let out = run(fetch);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(ctx.path().join("drainer/benches/brand-new.rs").is_file());
    // ... and without the stub cargo refuses the manifests, which is what this step guards against.
    std::fs::remove_file(ctx.path().join("drainer/benches/brand-new.rs")).unwrap();
    let out = run("cargo fetch --locked");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("brand-new"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 76, principle 6: every stage starts from a base image pinned by digest. Each FROM names
/// an argument declared before the first stage (CI sets them to the bases it builds itself), and
/// each such argument's default is `NAME:TAG@sha256:<64 hex digits>`, the tag kept for people.
#[test]
fn every_base_image_is_pinned_by_digest() {
    let text = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let all = instructions(&text);
    let first_from = all.iter().position(|(k, _)| k == "FROM").unwrap();
    let globals: std::collections::BTreeMap<&str, &str> = all[..first_from]
        .iter()
        .filter(|(k, _)| k == "ARG")
        .filter_map(|(_, r)| r.split_once('='))
        .collect();
    let stages: Vec<&str> = all
        .iter()
        .filter(|(k, _)| k == "FROM")
        .map(|(_, r)| r.as_str())
        .collect();
    assert!(stages.len() >= 4, "{stages:?}");
    let pinned = regex::Regex::new(r"^[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$").unwrap();
    for from in stages {
        let image = from.split_whitespace().next().unwrap();
        let arg = image
            .strip_prefix("${")
            .and_then(|a| a.strip_suffix('}'))
            .unwrap_or_else(|| {
                panic!("FROM {from}: name the base through an ARG pinned by digest")
            });
        let default = globals
            .get(arg)
            .unwrap_or_else(|| panic!("FROM {from}: {arg} is not an ARG before the first stage"));
        assert!(
            pinned.is_match(default),
            "{arg}={default}: not NAME:TAG@sha256:DIGEST"
        );
    }
}
