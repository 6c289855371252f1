//! The Access invariant on every configuration a tunnel is given, not only at the end of a test
//! (docs/design.md §3.7): while a test holds a hostname protected, every version of every
//! config.yaml of its namespace (watched as the API server stores them) and every remote
//! configuration pushed to the simulator (its request log) must answer that hostname with
//! `http_status:503` or check Access.
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;

use crate::harness::Harness;

/// A protected hostname's span, in the API server's revisions: `(from, to)`, `to` open while
/// held. Revisions are etcd's, which this test's single API server hands out in order.
type Spans = BTreeMap<String, Vec<(u64, Option<u64>)>>;

#[derive(Default)]
struct Seen {
    spans: Spans,
    versions: usize,
    broken: Vec<String>,
}

/// Watches the test namespace's ConfigMaps until dropped.
pub(crate) struct RenderWatch {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
    admin: kube::Client,
    ns: String,
}

impl Drop for RenderWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A rule that answers its hostname without Access checking the caller.
fn open_without_access(rule: &Value) -> bool {
    !rule["service"]
        .as_str()
        .is_some_and(|s| s.starts_with("http_status:"))
        && rule["originRequest"]["access"].is_null()
}

/// The hostnames `config` (a cloudflared configuration) serves without Access.
fn open_hostnames(config: &Value) -> Vec<String> {
    config["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| open_without_access(r))
        .filter_map(|r| r["hostname"].as_str().map(str::to_ascii_lowercase))
        .collect()
}

fn revision(cm: &ConfigMap) -> u64 {
    cm.metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn held_at(spans: &Spans, host: &str, rev: u64) -> bool {
    spans
        .get(host)
        .into_iter()
        .flatten()
        .any(|(from, to)| rev > *from && to.is_none_or(|to| rev <= to))
}

impl RenderWatch {
    pub(crate) fn start(h: &Harness) -> RenderWatch {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let api: Api<ConfigMap> = Api::namespaced(h.admin.clone(), &h.ns);
        let into = seen.clone();
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let (Ok(Event::Apply(cm)) | Ok(Event::InitApply(cm))) = event else {
                    continue;
                };
                let Some(text) = cm.data.as_ref().and_then(|d| d.get("config.yaml")) else {
                    continue;
                };
                let config: Value = serde_yaml_ng::from_str(text).unwrap_or(Value::Null);
                let rev = revision(&cm);
                let mut seen = into.lock().unwrap_or_else(|p| p.into_inner());
                seen.versions += 1;
                for host in open_hostnames(&config) {
                    if held_at(&seen.spans, &host, rev) {
                        let name = cm.metadata.name.clone().unwrap_or_default();
                        seen.broken.push(format!(
                            "ConfigMap {name} at revision {rev} serves the protected {host} without Access"
                        ));
                    }
                }
            }
        });
        RenderWatch {
            seen,
            task,
            admin: h.admin.clone(),
            ns: h.ns.clone(),
        }
    }

    /// The newest revision of the namespace's ConfigMaps.
    async fn now(&self) -> u64 {
        let api: Api<ConfigMap> = Api::namespaced(self.admin.clone(), &self.ns);
        api.list(&Default::default())
            .await
            .ok()
            .and_then(|l| l.metadata.resource_version)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// From now on (every ConfigMap version stored after this call), `host` must not be open.
    /// Call it once a render with `host` protected was seen.
    pub(crate) async fn protect(&self, host: &str) {
        let from = self.now().await;
        self.protect_from(host, from);
    }

    /// `host` is protected in every version stored after revision `from` (0: from the start,
    /// for a policy created before its route).
    pub(crate) fn protect_from(&self, host: &str, from: u64) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.spans
            .entry(host.to_ascii_lowercase())
            .or_default()
            .push((from, None));
    }

    /// From now on `host` may be public again (the test is about to make it so).
    pub(crate) async fn release(&self, host: &str) {
        let to = self.now().await;
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for span in seen
            .spans
            .get_mut(&host.to_ascii_lowercase())
            .into_iter()
            .flatten()
        {
            span.1.get_or_insert(to);
        }
    }

    /// Panics with every version that broke the invariant; checks that versions were seen.
    pub(crate) fn assert_held(&self) {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        assert!(
            seen.versions > 0,
            "no config.yaml was seen: the watch checked nothing"
        );
        assert!(seen.broken.is_empty(), "{}", seen.broken.join("\n"));
    }
}

/// Every remote configuration the simulator accepted must keep `hosts` closed or behind
/// Access; returns how many were checked.
pub(crate) fn assert_pushed_protected(h: &Harness, hosts: &[&str]) -> usize {
    let mut checked = 0;
    for request in h.sim.request_log() {
        let is_push = request.method == "PUT" && request.path.ends_with("/configurations");
        if !is_push || !(200..300).contains(&request.status) {
            continue;
        }
        let config = request
            .request_body
            .as_ref()
            .map(|b| b["config"].clone())
            .unwrap_or(Value::Null);
        checked += 1;
        for host in open_hostnames(&config) {
            assert!(
                !hosts.contains(&host.as_str()),
                "a pushed configuration serves the protected {host} without Access: {config}"
            );
        }
    }
    checked
}
