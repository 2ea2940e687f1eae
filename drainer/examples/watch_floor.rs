//! The floor under the drainer's CPU per node update: a process that watches every Node as the
//! drainer does (the same client, `nodemedic_common::client::for_flags`; kube's `watcher` with the
//! drainer's page size; a current-thread tokio runtime) and does nothing with an event but read the
//! node's name and resourceVersion. What it costs per update is what HTTP, kube's watch stream and
//! a JSON scan of the line cost with the wake-up, before any decoding, caching or deciding.
//!
//! Run by the `watch_floor` bench (built with the drainer's own cargo profile, as the drainer is);
//! by hand: `KUBECONFIG=... cargo run --profile drainer -p nodemedic-drainer --example watch_floor`.
//! It prints `synced <n>` once the first list is in, then one line a minute with the events seen.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::Deserialize;

/// A Node read for its name and resourceVersion only: every other field is skipped unparsed.
#[derive(Clone, Debug)]
struct Bare {
    metadata: ObjectMeta,
}

impl<'de> Deserialize<'de> for Bare {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bare, D::Error> {
        #[derive(Deserialize)]
        struct Meta {
            name: String,
            #[serde(rename = "resourceVersion")]
            resource_version: String,
        }
        #[derive(Deserialize)]
        struct Node {
            metadata: Meta,
        }
        let n = Node::deserialize(d)?;
        Ok(Bare {
            metadata: ObjectMeta {
                name: Some(n.metadata.name),
                resource_version: Some(n.metadata.resource_version),
                ..ObjectMeta::default()
            },
        })
    }
}

impl kube::Resource for Bare {
    type DynamicType = ();
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Node".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "nodes".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = nodemedic_common::client::for_flags("watch-floor", None, None).await?;
        let api: Api<Bare> = Api::all(client);
        let stream = watcher(api, watcher::Config::default().page_size(100)).default_backoff();
        futures::pin_mut!(stream);
        let (mut listed, mut events, mut last) = (0usize, 0usize, Instant::now());
        let mut newest = String::new();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::InitApply(_)) => listed += 1,
                Ok(watcher::Event::InitDone) => println!("synced {listed}"),
                Ok(watcher::Event::Apply(n) | watcher::Event::Delete(n)) => {
                    events += 1;
                    // Kept, so the decode is not optimised away.
                    newest = n.metadata.resource_version.unwrap_or_default();
                }
                Ok(watcher::Event::Init) => listed = 0,
                Err(e) => eprintln!("watch failed: {e}"),
            }
            if last.elapsed() >= Duration::from_secs(60) {
                println!("{events} events, newest resourceVersion {newest}");
                last = Instant::now();
            }
        }
        Ok(())
    })
}
