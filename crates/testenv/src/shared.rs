//! One control plane per process, started on first use and shared by every test of a test binary.
//!
//! Each `#[tokio::test]` has its own runtime and a `kube::Client` dies with the runtime that built
//! it, so the static holds only processes, paths and certificates; every test builds its own
//! client. The start runs on a dedicated thread and runtime so no task outlives a test.

use std::error::Error;

use tokio::sync::OnceCell;

use super::{ControlPlane, ControlPlaneOptions, TestEnvError};

/// The failure is kept as text so that every later caller fails fast with the same reason.
static SHARED: OnceCell<Result<ControlPlane, String>> = OnceCell::const_new();

/// The process-wide control plane, started with `options()` by the first caller.
///
/// Later callers' options are ignored. It is never dropped: its watchdog stops it once the
/// process has exited.
pub async fn shared(
    options: impl FnOnce() -> ControlPlaneOptions,
) -> Result<&'static ControlPlane, TestEnvError> {
    let started = SHARED
        .get_or_init(|| async move {
            let options = options();
            let (sender, receiver) = tokio::sync::oneshot::channel();
            let spawned = std::thread::Builder::new()
                .name("cftunnel-testenv-start".to_string())
                .spawn(move || {
                    let result = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(runtime) => runtime
                            .block_on(ControlPlane::start(options))
                            .map_err(|e| describe(&e)),
                        Err(e) => Err(format!("building a runtime: {e}")),
                    };
                    let _ = sender.send(result);
                });
            if let Err(e) = spawned {
                return Err(format!("spawning the start thread: {e}"));
            }
            receiver
                .await
                .unwrap_or_else(|_| Err("the start thread ended without a result".to_string()))
        })
        .await;
    started
        .as_ref()
        .map_err(|reason| TestEnvError::SharedStartFailed(reason.clone()))
}

/// The error and its sources on one line each.
fn describe(error: &TestEnvError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
