//! Metal3's BareMetalHost behind a Node, and the reboot annotation Metal3's baremetal-operator
//! honours. Pure.
//!
//! The host is found only through objects the node cannot write: the Cluster API Machine the Node
//! names must name the Node back (`super::capi`: its nodeRef's name, its UID where kept, and its
//! provider ID, equal to the Node's); its `spec.infrastructureRef` is a Metal3Machine, whose
//! `metal3.io/BareMetalHost` annotation (`NAMESPACE/NAME`, which Cluster API Provider Metal3 writes)
//! names the host.
//!
//! The annotation `reboot.metal3.io` asks the operator to power the host off and on again; it
//! removes the annotation once done. `{"mode":"hard"}`: a hung machine is not asked to shut down
//! softly first. (A suffixed `reboot.metal3.io/KEY` would keep the host off until its owner
//! removes it: not what a reboot wants.)

pub(crate) const GROUP: &str = "metal3.io";
pub(crate) const VERSION: &str = "v1alpha1";
pub(crate) const PLURAL: &str = "baremetalhosts";
pub(crate) const KIND: &str = "BareMetalHost";
/// The infrastructure kind of a Metal3 Machine, and its plural.
pub(crate) const MACHINE_KIND: &str = "Metal3Machine";
pub(crate) const MACHINE_PLURAL: &str = "metal3machines";
/// The Metal3Machine's annotation naming its host.
pub(crate) const HOST_ANNOTATION: &str = "metal3.io/BareMetalHost";

/// The annotation that asks for a reboot, and its value.
pub(crate) const REBOOT_ANNOTATION: &str = "reboot.metal3.io";
pub(crate) const HARD: &str = r#"{"mode":"hard"}"#;

/// The host (namespace, name) a Metal3Machine's `metal3.io/BareMetalHost` annotation names.
pub(crate) fn host_named(annotation: &str) -> Option<(String, String)> {
    let (namespace, name) = annotation.split_once('/')?;
    let ok = |s: &str| !s.is_empty() && !s.contains('/');
    (ok(namespace) && ok(name)).then(|| (namespace.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_a_metal3_machine_names() {
        assert_eq!(
            host_named("metal3/worker-0"),
            Some(("metal3".into(), "worker-0".into()))
        );
        for bad in ["worker-0", "/worker-0", "metal3/", "a/b/c", ""] {
            assert_eq!(host_named(bad), None, "{bad}");
        }
    }
}
