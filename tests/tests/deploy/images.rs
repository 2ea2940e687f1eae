//! The images, built and run: the base images the Dockerfile names are made locally from Debian's
//! packages (`tests/images/bases.sh`: no registry is reachable here, Debian's mirror is), both targets
//! are built with buildah from the Dockerfile as it is, and each is run by containerd (a private
//! `containerd` started here, driven with `ctr`, runc underneath: what a kubelet uses):
//! - `detector check` on the bundled sample, inside the detector image, finds what the same check
//!   finds on the host;
//! - the detector image's `detector run`, with `/dev/kmsg` and CAP_SYSLOG, reports a line written to
//!   this machine's kernel log to the cluster (the real control plane with KUBEBUILDER_ASSETS, else
//!   the test API server), as its DaemonSet pod does on a node;
//! - the drainer image runs as 65532 and prints `drainer plan` for the bundled snapshot, the same
//!   plan the host computes.
//!
//! The drainer is built here without its profile-guided optimisation (`--build-arg NODEMEDIC_PGO=off`):
//! that build (`build/pgo-drainer.sh`: an instrumented build, a training run, a second build) adds
//! some 12 minutes on 2 cores, which would put CI near half an hour; `image.rs` runs its steps, and
//! it changes how fast the binary runs, not what the image is or does.
//!
//! Image and binary sizes are printed. Needs root, buildah, mmdebstrap, containerd and runc (`.ci/run`
//! installs them from Debian); without them it says it is skipped, and fails in CI (`CI` set). Base images stay in
//! buildah's storage and layers are cached (`--layers`), so a later run on the same machine builds
//! only what changed.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use nodemedic_tests::cluster::{Cluster, eventually};
use serde_json::Value;

use crate::render::repo;

pub(crate) const DETECTOR: &str = "localhost/nodemedic/detector:ci";
pub(crate) const DRAINER: &str = "localhost/nodemedic/drainer:ci";
/// The `--now` both sides of a comparison plan and check at.
const NOW: &str = "2026-11-22T10:00:00Z";

/// A line on stderr that the test harness does not capture, so CI's log shows it for a passing test
/// too (the sizes and times this test measures).
pub(crate) fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Why the images cannot be built here, if they cannot.
pub(crate) fn missing() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root (buildah and mmdebstrap need it)".into());
    }
    let absent: Vec<&str> = [
        "buildah",
        "mmdebstrap",
        "containerd",
        "ctr",
        "runc",
        "readelf",
    ]
    .into_iter()
    .filter(|t| {
        Command::new(t)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
    })
    .collect();
    (!absent.is_empty()).then(|| format!("{} not installed (Debian packages)", absent.join(", ")))
}

/// The size of a file in `image`, in bytes (through a buildah working container's mount).
/// `f` of the path of `path` inside `image` (mounted for the call).
fn in_image<T>(image: &str, path: &str, f: impl FnOnce(&Path) -> T) -> T {
    let c = text(&ok(Command::new("buildah").args([
        "from",
        "--pull-never",
        image,
    ])));
    let c = c.trim();
    let mount = text(&ok(Command::new("buildah").args(["mount", c])));
    let out = f(&Path::new(mount.trim()).join(path.trim_start_matches('/')));
    ok(Command::new("buildah").args(["umount", c]));
    ok(Command::new("buildah").args(["rm", c]));
    out
}

fn file_size(image: &str, path: &str) -> u64 {
    in_image(image, path, |p| std::fs::metadata(p).map(|m| m.len()))
        .unwrap_or_else(|e| panic!("{path} in {image}: {e}"))
}

/// The ELF sections of `path` in `image` that hold symbols or debug information, by binutils'
/// `readelf` (none in a stripped binary; `.dynsym` is what the dynamic linker needs, and stays).
fn unstripped_sections(image: &str, path: &str) -> Vec<String> {
    let out = in_image(image, path, |p| {
        ok(Command::new("readelf")
            .args(["--section-headers", "--wide"])
            .arg(p))
    });
    let sections: Vec<String> = text(&out)
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('.')))
        .map(str::to_string)
        .collect();
    assert!(
        sections.iter().any(|s| s == ".text"),
        "readelf listed no sections of {path}: {sections:?}"
    );
    sections
        .into_iter()
        .filter(|s| s == ".symtab" || s == ".strtab" || s.starts_with(".debug"))
        .collect()
}

/// A containerd of this test's own (its own socket, root and state), stopped when dropped.
struct Containerd {
    dir: tempfile::TempDir,
    daemon: std::process::Child,
}

impl Containerd {
    fn start() -> Containerd {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "version = 2\nroot = \"{d}/root\"\nstate = \"{d}/state\"\n\
                 disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = \"{d}/containerd.sock\"\n"
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("containerd.log")).unwrap();
        let daemon = Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start containerd");
        let ctrd = Containerd { dir, daemon };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !ctrd
            .ctr(&["version"])
            .output()
            .is_ok_and(|o| o.status.success())
        {
            assert!(
                std::time::Instant::now() < deadline,
                "containerd did not start: {}",
                ctrd.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        ctrd
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    fn ctr(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ctr");
        c.arg("--address")
            .arg(self.dir.path().join("containerd.sock"))
            .args(["--namespace", "nodemedic-ci"])
            .args(args);
        c
    }

    /// Hand `image` from buildah's storage to containerd (an OCI archive, as a registry would).
    fn import(&self, image: &str) {
        let archive = self.dir.path().join("image.tar");
        ok(Command::new("buildah")
            .args(["push", "--quiet", image])
            .arg(format!("oci-archive:{}:{image}", archive.display())));
        ok(self.ctr(&["images", "import"]).arg(&archive));
        std::fs::remove_file(archive).unwrap();
    }

    /// `ctr run --rm` of `image` with `opts` before it, `id` and the command after.
    fn run(&self, opts: &[&str], image: &str, id: &str, cmd: &[&str]) -> Command {
        let mut c = self.ctr(&["run", "--rm"]);
        c.args(opts).args([image, id]).args(cmd);
        c
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// `--mount` for a bind mount of `src` at `dst`.
fn bind(src: &Path, dst: &str, ro: bool) -> String {
    let opts = if ro { "rbind:ro" } else { "rbind:rw" };
    format!("type=bind,src={},dst={dst},options={opts}", src.display())
}

/// The base images and both targets built, once per test binary (the real-node test runs them too;
/// buildah's layers make a second build on the same machine short, but not two at once).
pub(crate) fn built() {
    static BUILT: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut done = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if *done {
        return;
    }
    let started = std::time::Instant::now();
    ok(Command::new("bash").arg(repo().join("tests/images/bases.sh")));
    say(&format!(
        "images: bases ready in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    build("drainer", DRAINER);
    build("detector", DETECTOR);
    *done = true;
}

fn build(target: &str, tag: &str) {
    let started = std::time::Instant::now();
    ok(Command::new("buildah")
        .args([
            "bud",
            "--layers",
            "--network",
            "host",
            "--pull-never",
            "--build-arg",
            "NODEMEDIC_PGO=off",
            // The bases tests/images/bases.sh made, by tag: the Dockerfile's pinned digests are
            // the registries' images, which cannot be pulled here.
            "--build-arg",
            "RUST_IMAGE=docker.io/library/rust:1-bookworm",
            "--build-arg",
            "RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot",
            "--build-arg",
            "DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim",
            "--target",
            target,
            "-t",
            tag,
            "-f",
        ])
        .arg(repo().join("Dockerfile"))
        .arg(repo()));
    say(&format!(
        "images: built {tag} in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
}

fn image_size(image: &str) -> String {
    text(&ok(Command::new("buildah").args([
        "images",
        "--format",
        "{{.Size}}",
        image,
    ])))
    .trim()
    .to_string()
}

/// The JSON findings of `detector check` over the bundled sample, on the host (the library, with the
/// bundled rules the binary uses by default).
fn host_findings(sample: &Path) -> Vec<Value> {
    use nodemedic_detector::check::{self, InputFormat};
    let rules = nodemedic_detector::config::bundled_defaults();
    let reader = std::io::BufReader::new(std::fs::File::open(sample).unwrap());
    let mut out = Vec::new();
    check::check_with_progress(
        &rules,
        reader,
        InputFormat::Kmsg,
        NOW.parse().unwrap(),
        &mut |f| out.push(serde_json::to_value(&f).unwrap()),
        &mut |_| {},
    )
    .unwrap();
    out
}

/// The JSON plan of the bundled snapshot on the host (the library, as `drainer plan` makes it).
fn host_plan(samples: &Path, conditions: &[&str]) -> Vec<Value> {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use nodemedic_drainer::plan;
    let args = nodemedic_drainer::config::flags::PolicyArgs {
        conditions: conditions.iter().map(|c| c.to_string()).collect(),
        ..Default::default()
    };
    let cfg = nodemedic_drainer::config::build::build(&args).unwrap();
    let mut skipped = Vec::new();
    let nodes = plan::read_items_map(&samples.join("nodes.json"), |n: Node| {
        nodemedic_drainer::model::node::NodeView::of(&n)
    })
    .unwrap()
    .items_noting(&mut skipped);
    let pods = plan::read_items_map(&samples.join("pods.json"), |p: Pod| {
        nodemedic_drainer::model::pod::PodInfo::from_pod(&p, None)
    })
    .unwrap()
    .items_noting(&mut skipped);
    let pdbs = plan::read_items(&samples.join("pdbs.json"))
        .unwrap()
        .items_noting(&mut skipped);
    let mut out = Vec::new();
    plan::run(
        &cfg,
        &nodes,
        &pods,
        &pdbs,
        &Default::default(),
        NOW.parse().unwrap(),
        true,
        &mut out,
    )
    .unwrap();
    lines(&out)
}

fn lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn both_images_build_from_the_dockerfile_and_run() {
    if let Some(why) = missing() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the image test must run in CI, but {why} (.ci/run installs buildah and mmdebstrap)"
        );
        say(&format!(
            "skipped both_images_build_from_the_dockerfile_and_run: {why}"
        ));
        return;
    }
    // 1. The base images, from Debian's packages (kept from an earlier run when there), and 2. both
    // targets, the Dockerfile unchanged.
    built();
    say(&format!(
        "images: {DRAINER} {}, drainer binary {} bytes; {DETECTOR} {}, detector binary {} bytes",
        image_size(DRAINER),
        file_size(DRAINER, "/usr/local/bin/drainer"),
        image_size(DETECTOR),
        file_size(DETECTOR, "/usr/local/bin/detector"),
    ));
    // What `cargo build --release` and the image ship: no symbol table, no debug information
    // (a per-package profile override once made cargo keep both).
    for (image, bin) in [
        (DRAINER, "/usr/local/bin/drainer"),
        (DETECTOR, "/usr/local/bin/detector"),
    ] {
        let left = unstripped_sections(image, bin);
        assert!(
            left.is_empty(),
            "{bin} in {image} is not stripped: {left:?}"
        );
    }
    // No shell in the detector's image (every shipped check is built in): nothing in it runs a
    // script a rules ConfigMap points at.
    let shells = in_image(DETECTOR, "/", |root| {
        ["sh", "bash", "dash", "busybox", "ash"]
            .into_iter()
            .flat_map(|s| [format!("bin/{s}"), format!("usr/bin/{s}")])
            .filter(|p| root.join(p).symlink_metadata().is_ok())
            .collect::<Vec<_>>()
    });
    assert!(
        shells.is_empty(),
        "the detector image has a shell: {shells:?}"
    );
    let ctrd = Containerd::start();
    ctrd.import(DRAINER);
    ctrd.import(DETECTOR);
    let id = |what: &str| format!("{what}-{}", std::process::id());
    // journalctl, which the journal input runs, and a built-in probe run there without a shell.
    let out = ok(&mut ctrd.run(
        &[],
        DETECTOR,
        &id("journalctl"),
        &["/usr/bin/journalctl", "--version"],
    ));
    assert!(text(&out).starts_with("systemd "), "{}", text(&out));
    // nsenter, the first word of the default reboot and restart commands (`--reboot-command`,
    // `--systemctl`): without it the reboot component could reboot nothing.
    let out = ok(&mut ctrd.run(
        &[],
        DETECTOR,
        &id("nsenter"),
        &["/usr/bin/nsenter", "--version"],
    ));
    assert!(text(&out).contains("util-linux"), "{}", text(&out));
    let out = ctrd
        .run(
            &[],
            DETECTOR,
            &id("clock"),
            &["/usr/local/bin/detector", "probe", "clock"],
        )
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)) && text(&out).starts_with("clock "),
        "{out:?}"
    );
    let samples = repo().join("config/samples");
    let mount = bind(&samples, "/samples", true);

    // 3. detector check on the bundled sample finds in the image what it finds on the host.
    let out = ok(&mut ctrd.run(
        &["--mount", &mount],
        DETECTOR,
        &id("check"),
        &[
            "detector",
            "check",
            "--input",
            "/samples/kern.kmsg",
            "--output",
            "json",
            "--now",
            NOW,
        ],
    ));
    let found = lines(&out.stdout);
    assert!(!found.is_empty(), "the sample has problems to find");
    assert_eq!(found, host_findings(&samples.join("kern.kmsg")));

    // 4. The drainer image runs as 65532 (what it writes is owned by 65532) and plans the snapshot
    // as the host does.
    let out_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        out_dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    ok(&mut ctrd.run(
        &["--mount", &bind(out_dir.path(), "/out", false)],
        DRAINER,
        &id("man"),
        &["/usr/local/bin/drainer", "man", "/out"],
    ));
    let page = std::fs::read_dir(out_dir.path())
        .unwrap()
        .next()
        .expect("a man page written")
        .unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&page.metadata().unwrap()),
        65532,
        "the drainer process runs as 65532"
    );
    // One malloc arena (Dockerfile): what the drainer's memory figures are measured with.
    let env = text(&ok(Command::new("buildah").args([
        "inspect",
        "--type",
        "image",
        "--format",
        "{{.OCIv1.Config.Env}}",
        DRAINER,
    ])));
    assert!(
        env.split([' ', '[', ']'])
            .any(|e| e == "MALLOC_ARENA_MAX=1"),
        "the drainer image sets MALLOC_ARENA_MAX=1: {env}"
    );
    let conditions = ["KernelDeadlock=True,10m", "Ready=Unknown,5m"];
    let mut plan = vec![
        "/usr/local/bin/drainer",
        "plan",
        "--nodes",
        "/samples/nodes.json",
        "--pods",
        "/samples/pods.json",
        "--pdbs",
        "/samples/pdbs.json",
        "--output",
        "json",
        "--now",
        NOW,
    ];
    plan.extend(conditions);
    let out = ok(&mut ctrd.run(&["--mount", &mount], DRAINER, &id("plan"), &plan));
    let planned = lines(&out.stdout);
    assert_eq!(planned, host_plan(&samples, &conditions));
    assert!(
        planned.len() >= 5,
        "every node of the snapshot planned: {planned:?}"
    );

    // 5. The detector image, privileged with /dev/kmsg, reports a line of this machine's kernel log.
    kmsg_reaches_the_cluster(&ctrd, &id("run")).await;
}

async fn kmsg_reaches_the_cluster(ctrd: &Containerd, id: &str) {
    use std::io::Write;
    let Ok(mut kmsg) = std::fs::OpenOptions::new().write(true).open("/dev/kmsg") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "/dev/kmsg is not writable in CI"
        );
        say("skipped the image's /dev/kmsg check: /dev/kmsg is not writable here");
        return;
    };
    let cluster = Cluster::new().await;
    let node = cluster.create_node("image-kmsg").await;
    let dir = tempfile::tempdir().unwrap();
    cluster.write_kubeconfig(&dir.path().join("kubeconfig"));
    let node_env = format!("NODE_NAME={node}");
    let log = dir.path().join("detector.log");
    let log_uri = format!("file://{}", log.display());
    // As its DaemonSet runs it: privileged (the kernel log device), the node's network.
    ok(ctrd
        .ctr(&["run", "--detach", "--privileged", "--net-host"])
        .args([
            "--log-uri",
            &log_uri,
            "--mount",
            &bind(dir.path(), "/kube", true),
            "--env",
            "KUBECONFIG=/kube/kubeconfig",
            "--env",
            &node_env,
            DETECTOR,
            id,
            "detector",
            "run",
            "--listen",
            "127.0.0.1:0",
        ]));
    struct Task<'a>(&'a Containerd, &'a str);
    impl Drop for Task<'_> {
        fn drop(&mut self) {
            let _ = self
                .0
                .ctr(&["task", "kill", "--signal", "SIGKILL", self.1])
                .output();
            let _ = self.0.ctr(&["task", "delete", "--force", self.1]).output();
            let _ = self.0.ctr(&["container", "delete", self.1]).output();
        }
    }
    let _task = Task(ctrd, id);
    let wait = Duration::from_secs(120);
    // Up: it has written its conditions (KernelDeadlock False) to the Node.
    let up = tokio::time::timeout(
        wait,
        eventually(
            "the detector in its image writes its conditions",
            wait * 2,
            || async { cluster.condition(&node, "KernelDeadlock").await.map(|_| ()) },
        ),
    )
    .await;
    assert!(
        up.is_ok(),
        "the detector in its image wrote no condition within {wait:?}; its log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let marker = format!("nodemedic-image-{}", std::process::id());
    // The README's harmless test line: it matches the shipped OOM rule and is tagged so nobody
    // mistakes it for a real OOM kill.
    kmsg.write_all(
        format!(
            "Out of memory: Killed process 1 ({marker}) total-vm:0kB, anon-rss:0kB, file-rss:0kB\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let reported = tokio::time::timeout(
        wait,
        eventually(
            "the kernel log line as an OOMKilling Event",
            wait * 2,
            || async {
                cluster.node_events(&node).await.into_iter().find(|e| {
                    e.reason.as_deref() == Some("OOMKilling")
                        && e.message.as_deref().is_some_and(|m| m.contains(&marker))
                })
            },
        ),
    )
    .await;
    assert!(
        reported.is_ok(),
        "no OOMKilling Event with {marker} within {wait:?}; Events: {:?}; the detector's log:\n{}",
        cluster
            .node_events(&node)
            .await
            .iter()
            .map(|e| (&e.reason, &e.message))
            .collect::<Vec<_>>(),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    drop(_task);
    cluster.delete_node(&node).await;
}
