//! `drainer config` (the settings `drainer run` would run with, given the same flags) and
//! `kubectl nodemedic config` (the running drainer's, as it publishes them), both written as a
//! config file by `config::effective`; and the read of the published settings that `plan` and
//! `explain` decide with. I/O: the file, the ConfigMap, stdout.

use std::process::ExitCode;

use super::shared::{ClusterArgs, block_on};
use crate::config::effective::Whose;
use crate::config::flags::PolicyArgs;
use crate::config::published::{self, Published};

#[derive(clap::Args)]
pub(crate) struct PublishedArgs {
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
    /// The namespace of the drainer's Lease (its settings are beside it).
    #[arg(long = "lease-namespace", default_value = "kube-system")]
    pub(crate) lease_namespace: String,
    /// The name of the drainer's Lease.
    #[arg(long = "lease-name", default_value = "nodemedic-drainer")]
    pub(crate) lease_name: String,
}

/// Published settings read from the cluster, and who published them when.
pub(super) struct Read {
    pub(super) settings: Published,
    /// `ConfigMap NAMESPACE/NAME`.
    pub(super) at: String,
    pub(super) by: String,
    pub(super) when: String,
}

/// Why published settings could not be used.
pub(super) enum Unread {
    /// None are published there (no drainer leads, or has led yet, or another Lease).
    Missing { at: String },
    /// The cluster could not be reached or read.
    Cluster(String),
    /// They are there but cannot be read back.
    Bad { at: String, why: String },
}

/// The settings the drainer leading with Lease `namespace`/`lease` publishes.
pub(super) fn read_published(
    cluster: &ClusterArgs,
    namespace: &str,
    lease: &str,
) -> Result<Read, Unread> {
    let name = published::configmap_name(lease);
    let at = format!("ConfigMap {namespace}/{name}");
    let read = block_on(async {
        let client =
            crate::live::client(cluster.kubeconfig.as_deref(), cluster.context.as_deref()).await?;
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client, namespace);
        api.get_opt(&name)
            .await
            .map_err(|source| crate::live::LiveError::Get {
                what: at.clone(),
                source,
            })
    });
    let data = match read {
        // Shipped empty by the manifests: nothing published until a drainer leads.
        Ok(Ok(Some(cm))) if cm.data.as_ref().is_none_or(|d| d.is_empty()) => {
            return Err(Unread::Missing { at });
        }
        Ok(Ok(Some(cm))) => cm.data.unwrap_or_default(),
        Ok(Ok(None)) => return Err(Unread::Missing { at }),
        Ok(Err(e)) => return Err(Unread::Cluster(e.to_string())),
        Err(_) => return Err(Unread::Cluster("cannot start a runtime".into())),
    };
    let settings = Published::from_data(&data).map_err(|e| Unread::Bad {
        at: at.clone(),
        why: e.to_string(),
    })?;
    let field = |k: &str| data.get(k).cloned().unwrap_or_else(|| "?".into());
    Ok(Read {
        settings,
        by: field(published::IDENTITY_KEY),
        when: field(published::AT_KEY),
        at,
    })
}

/// `drainer config FLAGS`: what `drainer run FLAGS` would run with.
pub(super) fn effective(args: &PolicyArgs) -> ExitCode {
    let cfg = match crate::config::build::build_for_reading(args) {
        Ok(cfg) => cfg,
        Err(errors) => {
            for e in &errors {
                say!("{e}");
            }
            return ExitCode::from(2);
        }
    };
    let text = match &args.config {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(t) => Some((path.display().to_string(), t)),
            Err(e) => {
                say!("{}: cannot read: {e}", path.display());
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let file = text.as_ref().map(|(n, t)| (n.as_str(), t.as_str()));
    if cfg.conditions.is_empty() {
        say!(
            "no problem conditions given: `drainer run` with these settings would refuse to start"
        );
    }
    super::shared::say_settings_warnings(&cfg, &[]);
    print_or_exit(args, file, Whose::Given)
}

/// `kubectl nodemedic config`: the running drainer's settings.
pub(super) fn published(args: PublishedArgs) -> ExitCode {
    match read_published(&args.cluster, &args.lease_namespace, &args.lease_name) {
        Ok(read) => {
            if let Err(errors) = read.settings.config() {
                for e in &errors {
                    say!("the settings in {} do not build: {e}", read.at);
                }
                return ExitCode::from(1);
            }
            println!(
                "# Published in {} by {} at {}.",
                read.at, read.by, read.when
            );
            let p = &read.settings;
            let file = p.file.as_deref().map(|t| ("its config file", t));
            print_or_exit(&p.args, file, Whose::Published)
        }
        Err(Unread::Missing { at }) => {
            say!(
                "no running drainer's settings in {at}: is a drainer leading with that Lease (--lease-namespace, --lease-name)?"
            );
            ExitCode::from(1)
        }
        Err(Unread::Cluster(e)) => {
            say!("{e}");
            ExitCode::from(1)
        }
        Err(Unread::Bad { at, why }) => {
            say!("the settings in {at} cannot be read: {why}");
            ExitCode::from(1)
        }
    }
}

fn print_or_exit(args: &PolicyArgs, file: Option<(&str, &str)>, whose: Whose) -> ExitCode {
    match crate::config::effective::render(args, file, whose) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            say!("{e}");
            ExitCode::from(2)
        }
    }
}
