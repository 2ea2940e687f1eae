//! Both binaries run outside a cluster as NPD's and draino's users run theirs (issue 78, point 5):
//! the detector with NPD's own `--apiserver-override=URL?inClusterConfig=false&auth=KUBECONFIG`
//! (the URL's server used, the kubeconfig's credential) and with its own `--kubeconfig`, on a real
//! API server, with `KUBECONFIG` pointing at an API server that is not there, so only the flags can
//! have reached it.

use nodemedic_tests::bins::debug_bin;

use crate::ladder::Machine;
use crate::remedies::{Proc, Scenario};

/// The scenario's kubeconfig with its server moved to a port nothing listens on, and the real
/// server's URL.
fn elsewhere(s: &Scenario) -> (std::path::PathBuf, String) {
    let text = std::fs::read_to_string(&s.kubeconfig).unwrap();
    let after = text.split_once("server:").expect("a server").1.trim_start();
    let server = after
        .trim_start_matches('"')
        .split(['"', ',', '}', '\n'])
        .next()
        .unwrap()
        .trim();
    let wrong = s.dir.path().join("elsewhere.kubeconfig");
    std::fs::write(&wrong, text.replace(server, "https://127.0.0.1:1")).unwrap();
    (wrong, server.to_string())
}

/// The detector's healthy condition on `node` (its start reached the API server).
async fn reported(s: &Scenario, node: &str) -> Option<()> {
    let n = s.env.get_node(node).await;
    n["status"]["conditions"]
        .as_array()?
        .iter()
        .any(|c| c["type"] == "NodemedicLadderTest" && c["status"] == "False")
        .then_some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_detector_takes_npds_apiserver_override_and_its_own_kubeconfig() {
    let s = Scenario::new().await;
    let (wrong, server) = elsewhere(&s);
    let bin = debug_bin("nodemedic-detector", "detector");
    for (i, how) in [
        format!(
            "--apiserver-override={server}?inClusterConfig=false&auth={}",
            wrong.display()
        ),
        format!("--kubeconfig={}", s.kubeconfig.display()),
    ]
    .into_iter()
    .enumerate()
    {
        let node = s
            .env
            .node(&format!("outside-{i}"), "False", 0, serde_json::json!({}))
            .await;
        let m = Machine::at(&s, &format!("machine-{i}"));
        let at = |p: &str| m.dir.join(p).display().to_string();
        let args = vec![
            "run".to_string(),
            format!("--node-name={node}"),
            format!("--rules={}", at("rules")),
            format!("--kmsg-path={}", at("kmsg")),
            format!("--state-file={}", at("state/detector.json")),
            "--listen=127.0.0.1:0".into(),
            how.clone(),
        ];
        // KUBECONFIG names the API server that is not there: only the flag reaches the real one.
        let det = Proc::spawn(&bin, &args, &wrong, m.dir.join("detector.log"));
        s.until(
            &format!("the detector's report through {how}"),
            &det,
            || reported(&s, &node),
        )
        .await;
        assert!(
            det.output().contains(&server),
            "it says which API server it uses: {}",
            det.output()
        );
    }
    s.env.cleanup().await;
}
