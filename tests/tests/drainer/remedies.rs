//! The operator controls of issue 24 through the real binaries, as operators run them: `drainer
//! run` (and `detector run`) as their own processes, configured by flags and a `--config` file,
//! against the cluster (the real control plane with KUBEBUILDER_ASSETS, else the test API server):
//! - the detector watchdog: a detector killed with SIGKILL is reported silent (an Event on the
//!   node, the gauge), then heard again once a new one runs; the node is not cordoned for it;
//! - taints instead of the cordon: a problem node is tainted, not cordoned, and only our taint
//!   comes off on recovery;
//! - drain policies: a Job's pod waited for (never evicted), a pod skipped, a PDB-blocked pod
//!   deleted after the refusals went on for `after`;
//! - probation: a recovered node is let go only after `--uncordon-after`, carrying the probation
//!   taint meanwhile; a relapse in probation holds it again at once.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodemedic_tests::bins::debug_bin;
use serde_json::{Value, json};

use crate::env::{Env, LABEL, WAIT};

/// A process killed (SIGKILL) when dropped; its output goes to `log`, printed if a wait fails.
pub(crate) struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    pub(crate) fn spawn(bin: &Path, args: &[String], kubeconfig: &Path, log: PathBuf) -> Proc {
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin)
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        Proc { child, log }
    }

    /// SIGKILL, as a node losing its detector would.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) struct Scenario {
    pub(crate) env: Env,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) kubeconfig: PathBuf,
}

impl Scenario {
    pub(crate) async fn new() -> Scenario {
        Scenario::on(Env::new().await).await
    }

    /// One per supported release built here (`Env::each_release`), for the attack scenarios.
    pub(crate) async fn each_release() -> Vec<Scenario> {
        let mut all = Vec::new();
        for env in Env::each_release().await {
            all.push(Scenario::on(env).await);
        }
        all
    }

    pub(crate) async fn on(env: Env) -> Scenario {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        env.cluster.write_kubeconfig(&kubeconfig);
        let s = Scenario {
            env,
            dir,
            kubeconfig,
        };
        let run = s.env.cluster.id_label();
        let client = &s.env.cluster.client;
        nodemedic_tests::drainer_objects(client, "kube-system", &s.lease(), Some(&run)).await;
        // The reboot requests' signing key (as the operator makes it with openssl) and its public
        // half, which the detectors verify with.
        let pem = nodemedic_common::reboot::SigningKey::generate_pem();
        let key = nodemedic_common::reboot::SigningKey::from_pem(&pem, "key.pem").unwrap();
        std::fs::write(s.dir.path().join("key.pem"), pem).unwrap();
        std::fs::write(
            s.dir.path().join("public.pem"),
            key.verifying_key().to_pem(),
        )
        .unwrap();
        s
    }

    /// The public half of the drainer's reboot signing key, for `--reboot-public-key`.
    pub(crate) fn public_key(&self) -> PathBuf {
        self.dir.path().join("public.pem")
    }

    pub(crate) fn lease(&self) -> String {
        format!("nodemedic-drainer-test-{}", self.env.id)
    }

    /// `drainer run` on this scenario's nodes, the fleet safety gates off (a scenario's few nodes
    /// would trip them), with `args` (conditions and the controls under test); its metrics address,
    /// on a port of its own choosing read from its log (a port picked beforehand could be taken by
    /// a test running beside).
    pub(crate) async fn drainer(&self, args: &[&str]) -> (Proc, String) {
        let mut all: Vec<String> = [
            "run",
            "--namespace=kube-system",
            "--leader-election-lease-duration=2s",
            "--leader-election-renew-deadline=1500ms",
            "--leader-election-retry-period=200ms",
            "--max-unhealthy=100%",
            "--breaker-new=100%",
            "--domain-outage=100%",
            "--flap-threshold=0",
            "--max-grace-period=30s",
            "--max-cordoned=10",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        all.push(format!("--lease-name={}", self.lease()));
        let key = self.dir.path().join("key.pem");
        all.push(format!("--reboot-signing-key={}", key.display()));
        all.push("--listen=127.0.0.1:0".into());
        all.push(format!("--node-selector={LABEL}={}", self.env.id));
        all.extend(args.iter().map(|s| s.to_string()));
        let bin = debug_bin("nodemedic-drainer", "drainer");
        let log = self.dir.path().join("drainer.log");
        let proc = Proc::spawn(&bin, &all, &self.kubeconfig, log);
        let addr = nodemedic_tests::cluster::eventually(
            "the drainer's address in its log",
            WAIT,
            || async {
                proc.output()
                    .lines()
                    .find(|l| l.contains("serving /metrics"))
                    .and_then(|l| l.split_once("addr=").map(|(_, a)| a.trim().to_string()))
            },
        )
        .await;
        (proc, addr)
    }

    async fn set(&self, node: &str, status: &str) {
        self.env
            .set_condition(node, "KernelDeadlock", status, 0)
            .await;
    }

    /// The node's taints as `key=value:effect` (`key:effect` without a value).
    async fn taints(&self, node: &str) -> Vec<String> {
        let n = self.env.get_node(node).await;
        n["spec"]["taints"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .map(|t| match t["value"].as_str().filter(|v| !v.is_empty()) {
                        Some(v) => format!(
                            "{}={v}:{}",
                            t["key"].as_str().unwrap(),
                            t["effect"].as_str().unwrap()
                        ),
                        None => format!(
                            "{}:{}",
                            t["key"].as_str().unwrap(),
                            t["effect"].as_str().unwrap()
                        ),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Wait until `check` holds, printing the drainer's output if it never does.
    pub(crate) async fn until<T, F, Fut>(&self, what: &str, proc: &Proc, check: F) -> T
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let got = tokio::time::timeout(WAIT, async {
            loop {
                if let Some(v) = check().await {
                    return v;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        match got {
            Ok(v) => v,
            Err(_) => panic!(
                "{what}: not within {WAIT:?}; the process said:\n{}",
                proc.output()
            ),
        }
    }

    async fn has_event(&self, node: &str, reason: &str) -> bool {
        self.env
            .event_reasons(node)
            .await
            .iter()
            .any(|r| r == reason)
    }
}

/// The value of the series `name` on the process's /metrics (None while it does not serve yet).
async fn metric(addr: &str, name: &str) -> Option<f64> {
    let url = format!("http://{addr}/metrics");
    let body = nodemedic_tests::try_http_get(&url).await.ok()?;
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

const DETECTOR_RULES: &str = r#"
source: kernel-monitor
input: {kind: kmsg}
conditions:
  - type: KernelDeadlock
    reason: KernelHasNoDeadlock
    message: kernel has no deadlock
rules:
  - type: permanent
    condition: KernelDeadlock
    reason: DockerHung
    pattern: 'task docker:\w+ blocked for more than \w+ seconds\.'
"#;

/// `detector run` for `node`, heartbeat every second.
fn detector(s: &Scenario, node: &str) -> Proc {
    let d = s.dir.path();
    std::fs::create_dir_all(d.join("rules")).unwrap();
    std::fs::write(d.join("rules/kernel.yaml"), DETECTOR_RULES).unwrap();
    if !d.join("kmsg").exists() {
        std::fs::write(d.join("kmsg"), "").unwrap();
    }
    let args: Vec<String> = vec![
        "run".into(),
        format!("--node-name={node}"),
        format!("--rules={}", d.join("rules").display()),
        format!("--kmsg-path={}", d.join("kmsg").display()),
        format!("--state-file={}", d.join("state/detector.json").display()),
        "--listen=127.0.0.1:0".into(),
        "--heartbeat-period=1s".into(),
    ];
    let bin = debug_bin("nodemedic-detector", "detector");
    Proc::spawn(&bin, &args, &s.kubeconfig, d.join("detector.log"))
}

#[tokio::test]
async fn a_killed_detector_is_reported_silent_then_heard_again_and_nothing_is_drained() {
    let s = Scenario::new().await;
    let node = s.env.node("silent", "False", 3600, json!({})).await;
    let mut det = detector(&s, &node);
    s.until("the detector's heartbeats on the node", &det, || async {
        let n: Node = Api::all(s.env.cluster.client.clone())
            .get(&node)
            .await
            .ok()?;
        let c = n
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "KernelDeadlock")?;
        (c.reason.as_deref() == Some("KernelHasNoDeadlock")).then_some(())
    })
    .await;
    // Every node runs a detector here (no DaemonSet named): silent after 4s without a heartbeat.
    let (drainer, port) = s
        .drainer(&[
            "KernelDeadlock=True,10m",
            "--detector-silent-after=4s",
            "--detector-daemonset=",
        ])
        .await;
    s.until("the drainer serving its metrics", &drainer, || async {
        metric(&port, "nodemedic_drainer_silent_detectors")
            .await
            .filter(|v| *v == 0.0)
    })
    .await;
    assert!(
        !s.has_event(&node, "DetectorSilent").await,
        "heard: not silent"
    );
    det.kill();
    s.until("a DetectorSilent Event on the node", &drainer, || async {
        s.has_event(&node, "DetectorSilent").await.then_some(())
    })
    .await;
    let ev = s
        .env
        .drainer_events(&node)
        .await
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("DetectorSilent"))
        .unwrap();
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(
        ev.message
            .as_deref()
            .unwrap_or("")
            .contains("has not refreshed its conditions since"),
        "{ev:?}"
    );
    s.until("the silent-detectors gauge at 1", &drainer, || async {
        metric(&port, "nodemedic_drainer_silent_detectors")
            .await
            .filter(|v| *v == 1.0)
    })
    .await;
    assert!(!s.env.cordoned(&node).await, "silence alone drains nothing");
    // A new detector (its DaemonSet would restart it): heard again, once.
    let det = detector(&s, &node);
    s.until("a DetectorHeardAgain Event on the node", &det, || async {
        s.has_event(&node, "DetectorHeardAgain").await.then_some(())
    })
    .await;
    s.until("the gauge back at 0", &drainer, || async {
        metric(&port, "nodemedic_drainer_silent_detectors")
            .await
            .filter(|v| *v == 0.0)
    })
    .await;
    let silent = s.env.event_reasons(&node).await;
    assert_eq!(
        silent.iter().filter(|r| *r == "DetectorSilent").count(),
        1,
        "one Event for the episode: {silent:?}"
    );
    assert!(!s.env.cordoned(&node).await);
    drop((det, drainer));
    s.env.cleanup().await;
}

#[tokio::test]
async fn taint_only_remediation_taints_instead_of_cordoning_and_removes_only_its_taint() {
    let s = Scenario::new().await;
    let node = s.env.node("taint", "False", 3600, json!({})).await;
    // Someone else's taint, which must stay.
    Api::<Node>::all(s.env.cluster.client.clone())
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [{"key": "team", "value": "infra", "effect": "NoSchedule"}]}})),
        )
        .await
        .unwrap();
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True",
            "--cordon=false",
            "--problem-taint=nodemedic.io/problem=kernel:NoSchedule",
            "--skip-drain",
        ])
        .await;
    s.set(&node, "True").await;
    s.until("the problem taint on the node", &drainer, || async {
        let t = s.taints(&node).await;
        t.contains(&"nodemedic.io/problem=kernel:NoSchedule".to_string())
            .then_some(t)
    })
    .await;
    assert!(!s.env.cordoned(&node).await, "taint-only: not cordoned");
    // The Event comes after the node write.
    let reasons = s
        .until("the TaintSucceeded Event", &drainer, || async {
            let reasons = s.env.event_reasons(&node).await;
            reasons
                .contains(&"TaintSucceeded".to_string())
                .then_some(reasons)
        })
        .await;
    assert!(
        !reasons.contains(&"CordonSucceeded".to_string()),
        "{reasons:?}"
    );
    s.set(&node, "False").await;
    s.until(
        "the problem taint off, the other kept",
        &drainer,
        || async {
            let t = s.taints(&node).await;
            (t == ["team=infra:NoSchedule"]).then_some(())
        },
    )
    .await;
    assert!(!s.env.cordoned(&node).await);
    s.until("the record gone", &drainer, || async {
        s.env.record_phase(&node).await.is_none().then_some(())
    })
    .await;
    drop(drainer);
    s.env.cleanup().await;
}

#[tokio::test]
async fn pod_policies_wait_for_a_job_skip_a_pod_and_delete_a_pdb_blocked_one_after_the_limit() {
    let s = Scenario::new().await;
    let node = s.env.node("policies", "False", 3600, json!({})).await;
    let job_owner = s.env.cluster.owner_of_kind("default", "Job", "batch").await;
    let job = s
        .env
        .pod(
            "default",
            "job",
            &node,
            json!({"metadata": {"ownerReferences": job_owner}}),
        )
        .await;
    let keep = s
        .env
        .pod(
            "default",
            "keep",
            &node,
            json!({"metadata": {"labels": {"nodemedic.test/keep": "yes"}}}),
        )
        .await;
    let db = s
        .env
        .pod(
            "default",
            "db",
            &node,
            json!({"metadata": {"labels": {"tier": "db"}}}),
        )
        .await;
    let web = s.env.pod("default", "web", &node, json!({})).await;
    s.env.blocking_pdb(&db).await;
    let config = s.dir.path().join("drainer.yaml");
    std::fs::write(
        &config,
        "podPolicies:\n  - name: batch-jobs\n    ownerKinds: [Job]\n    action: wait\n    maxWait: 1h\n  \
         - name: pinned\n    selector: nodemedic.test/keep=yes\n    action: skip\n  \
         - name: databases\n    selector: tier=db\n    action: delete\n    after: 2s\n",
    )
    .unwrap();
    let (drainer, port) = s
        .drainer(&[
            "KernelDeadlock=True",
            &format!("--config={}", config.display()),
            "--drain-buffer=0s",
        ])
        .await;
    s.set(&node, "True").await;
    // The plain pod is evicted; the database's PDB refuses until the 2s are up, then it is deleted.
    s.until("the web pod evicted", &drainer, || async {
        (!s.env.pod_exists("default", &web).await).then_some(())
    })
    .await;
    s.until(
        "the PDB-blocked pod deleted by its policy",
        &drainer,
        || async { (!s.env.pod_exists("default", &db).await).then_some(()) },
    )
    .await;
    assert!(
        s.env.evictions(&db, Some(429)) >= 1,
        "its evictions were refused first"
    );
    s.until("a PodDeletedByPolicy Event", &drainer, || async {
        s.has_event(&node, "PodDeletedByPolicy").await.then_some(())
    })
    .await;
    // The Job's pod is waited for: the drain is not done while it runs.
    assert_eq!(s.env.record_phase(&node).await.as_deref(), Some("draining"));
    assert!(s.env.pod_exists("default", &job).await);
    s.env
        .cluster
        .set_pod_status("default", &job, json!({"phase": "Succeeded"}))
        .await;
    s.env.wait_drained(&node).await;
    assert_eq!(s.env.evictions(&job, None), 0, "a Job's pod is let finish");
    for (outcome, n) in [
        ("skipped", 1.0),
        ("waited", 1.0),
        ("deleted", 1.0),
        ("evicted_after_wait", 0.0),
    ] {
        let name = format!("nodemedic_drainer_pod_policy_actions_total{{outcome=\"{outcome}\"}}");
        assert_eq!(metric(&port, &name).await, Some(n), "{name}");
    }
    assert_eq!(
        s.env.evictions(&keep, None),
        0,
        "a skipped pod is never evicted"
    );
    assert!(s.env.pod_exists("default", &keep).await);
    drop(drainer);
    s.env.cleanup().await;
}

#[tokio::test]
async fn probation_uncordons_only_after_the_period_and_a_relapse_holds_the_node_again() {
    let s = Scenario::new().await;
    let calm = s.env.node("calm", "False", 3600, json!({})).await;
    let relapsing = s.env.node("relapse", "False", 3600, json!({})).await;
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True",
            "--skip-drain",
            "--uncordon-after=8s",
            "--probation-taint=nodemedic.io/probation:PreferNoSchedule",
        ])
        .await;
    for n in [&calm, &relapsing] {
        s.set(n, "True").await;
    }
    for n in [&calm, &relapsing] {
        s.until("cordoned", &drainer, || async {
            s.env.cordoned(n).await.then_some(())
        })
        .await;
    }
    for n in [&calm, &relapsing] {
        s.set(n, "False").await;
    }
    // Probation: the cordon lifted, the probation taint on, the record says until when.
    for n in [&calm, &relapsing] {
        s.until("in probation", &drainer, || async {
            (s.env.record_phase(n).await.as_deref() == Some("probation")).then_some(())
        })
        .await;
    }
    let t = s.taints(&calm).await;
    assert!(
        t.contains(&"nodemedic.io/probation:PreferNoSchedule".to_string()),
        "{t:?}"
    );
    // The relapse: held again at once, without a new drain buffer.
    s.set(&relapsing, "True").await;
    s.until("the relapsing node cordoned again", &drainer, || async {
        (s.env.cordoned(&relapsing).await
            && s.has_event(&relapsing, "ProblemBackInProbation").await)
            .then_some(())
    })
    .await;
    let t = s.taints(&relapsing).await;
    assert!(
        !t.iter().any(|t| t.starts_with("nodemedic.io/probation")),
        "{t:?}"
    );
    // The calm node is let go once the 8s are up: record, taint and cordon gone, and the Event
    // that says so (written after the uncordon lands, so it is waited for too).
    s.until(
        "the calm node released after its probation",
        &drainer,
        || async {
            let done = s.env.record_phase(&calm).await.is_none()
                && !s.env.cordoned(&calm).await
                && s.taints(&calm).await.is_empty()
                && s.has_event(&calm, "UncordonSucceeded").await;
            done.then_some(())
        },
    )
    .await;
    let uncordon = s
        .env
        .drainer_events(&calm)
        .await
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("UncordonSucceeded"))
        .expect("an UncordonSucceeded Event at the end of probation");
    let probation = s
        .env
        .drainer_events(&calm)
        .await
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("ProbationStarted"))
        .expect("a ProbationStarted Event");
    let (a, b) = (event_time(&probation), event_time(&uncordon));
    assert!(b - a >= 7, "uncordoned {}s into an 8s probation", b - a);
    assert_eq!(
        s.env.record_phase(&relapsing).await.as_deref(),
        Some("cordoned")
    );
    drop(drainer);
    s.env.cleanup().await;
}

/// When an Event was (first) written, in Unix seconds.
fn event_time(e: &k8s_openapi::api::core::v1::Event) -> i64 {
    let v: Value = serde_json::to_value(e).unwrap();
    let t = v["firstTimestamp"]
        .as_str()
        .or(v["eventTime"].as_str())
        .unwrap_or_default();
    t.parse::<k8s_openapi::jiff::Timestamp>()
        .map(|t| t.as_second())
        .unwrap_or_default()
}
