//! Shared setup for the control-plane integration tests.

pub mod child;
pub mod fixtures;
pub mod webhook_server;

use std::sync::Once;
use std::time::Duration;

use cftunnel_testenv::{ControlPlane, ControlPlaneOptions, shared};

/// Generous: the control plane is eventually consistent and CI machines are slow.
pub const WAIT: Duration = Duration::from_secs(60);
/// Garbage collection re-reads discovery every 30 s, on top of its own work.
pub const GC_WAIT: Duration = Duration::from_secs(120);
pub const POLL: Duration = Duration::from_millis(250);

/// The control plane (with kube-controller-manager) shared by every test of this binary.
pub async fn plane() -> &'static ControlPlane {
    let plane = match shared(|| ControlPlaneOptions {
        controller_manager: true,
        crds: vec![fixtures::widget_crd()],
        extra_apiserver_args: vec![
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement".to_string(),
        ],
        ..ControlPlaneOptions::default()
    })
    .await
    {
        Ok(plane) => plane,
        Err(e) => panic!("{e}"),
    };
    static REPORTED: Once = Once::new();
    REPORTED.call_once(|| {
        eprintln!(
            "control plane (etcd + kube-apiserver + kube-controller-manager) started in {:.1?}",
            plane.startup_duration()
        );
    });
    plane
}
