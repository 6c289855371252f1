//! Probes on cloudflared's metrics server (reference C.6): `/ready` for readiness and startup,
//! `/healthcheck` for liveness, added only when the metrics port can be read from the pod spec.
//!
//! Liveness uses `/healthcheck` with failureThreshold 3 because `/ready` as liveness restarts
//! pods during edge reconnects. A probe the user already set is theirs and is never changed,
//! even a liveness probe on `/ready` with failureThreshold 1.
use serde_json::{Map, Value, json};

use super::fill::{fill_value, str_field};

const METRICS_FLAG: &str = "metrics";
const METRICS_ENV: &str = "TUNNEL_METRICS";

/// The metrics port of a container, from `--metrics ADDR` / `--metrics=ADDR` in its command
/// and args (the flag wins, as in cloudflared) or else the `TUNNEL_METRICS` env var. None when
/// unknown, unparseable or bound to loopback: the kubelet probes the pod IP, so a probe of a
/// loopback-only server would always fail and the startup probe would kill the pod.
pub(super) fn metrics_port(container: &Map<String, Value>) -> Option<u16> {
    match metrics_flag(container) {
        Some(addr) => probe_port(&addr),
        None => metrics_env(container).and_then(|addr| probe_port(&addr)),
    }
}

/// The last value given to the metrics flag (a repeated flag keeps its last value).
fn metrics_flag(container: &Map<String, Value>) -> Option<String> {
    let argv: Vec<&str> = ["command", "args"]
        .iter()
        .filter_map(|k| container.get(*k).and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut found = None;
    let mut tokens = argv.iter();
    while let Some(token) = tokens.next() {
        if *token == "--" {
            break;
        }
        let Some(flag) = token.strip_prefix("--").or_else(|| token.strip_prefix('-')) else {
            continue;
        };
        if flag == METRICS_FLAG {
            found = tokens.next().map(|v| v.to_string());
        } else if let Some(value) = flag
            .strip_prefix(METRICS_FLAG)
            .and_then(|rest| rest.strip_prefix('='))
        {
            found = Some(value.to_string());
        }
    }
    found
}

/// The value of `TUNNEL_METRICS`; of duplicate entries the last one wins, as in Kubernetes.
fn metrics_env(container: &Map<String, Value>) -> Option<String> {
    container
        .get("env")
        .and_then(Value::as_array)?
        .iter()
        .rev()
        .filter_map(Value::as_object)
        .find(|e| str_field(e, "name") == Some(METRICS_ENV))
        .and_then(|e| str_field(e, "value"))
        .map(str::to_string)
}

/// The port of `host:port` / `:port` / `[v6]:port`, unless the host is loopback.
fn probe_port(addr: &str) -> Option<u16> {
    let (host, port) = addr.trim().rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.starts_with("127.") || host == "::1";
    (!loopback).then_some(port)
}

/// Adds each probe that is unset.
pub(super) fn fill_probes(container: &mut Map<String, Value>, port: u16) {
    fill_value(
        container,
        "readinessProbe",
        json!({"httpGet": {"path": "/ready", "port": port}, "periodSeconds": 10, "failureThreshold": 3}),
    );
    // Up to five minutes to reach the edge before the kubelet restarts the container.
    fill_value(
        container,
        "startupProbe",
        json!({"httpGet": {"path": "/ready", "port": port}, "periodSeconds": 5, "failureThreshold": 60}),
    );
    fill_value(
        container,
        "livenessProbe",
        json!({"httpGet": {"path": "/healthcheck", "port": port}, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3}),
    );
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn port_of(container: Value) -> Option<u16> {
        container.as_object().and_then(metrics_port)
    }

    #[test]
    fn reads_the_port_from_each_address_form() {
        for (addr, port) in [
            ("0.0.0.0:2000", Some(2000)),
            (":2000", Some(2000)),
            ("[::]:44483", Some(44483)),
            ("cloudflared.ns.svc:2001", Some(2001)),
            ("localhost:2000", None),
            ("127.0.0.1:2000", None),
            ("[::1]:2000", None),
            ("0.0.0.0:0", None),
            ("0.0.0.0:http", None),
            ("2000", None),
            ("$(METRICS_ADDR)", None),
        ] {
            assert_eq!(probe_port(addr), port, "{addr}");
        }
    }

    #[test]
    fn the_flag_wins_over_the_env_and_the_last_flag_wins() {
        let env = json!([{"name": "TUNNEL_METRICS", "value": "0.0.0.0:3000"}]);
        assert_eq!(
            port_of(json!({"args": ["tunnel", "--metrics", ":2000", "run"], "env": env})),
            Some(2000)
        );
        assert_eq!(
            port_of(json!({"args": ["tunnel", "run"], "env": env})),
            Some(3000)
        );
        assert_eq!(
            port_of(json!({"command": ["cloudflared", "-metrics=:1"], "args": ["--metrics=:2"]})),
            Some(2)
        );
        // An unreadable flag hides the env var, as it does for cloudflared itself.
        assert_eq!(
            port_of(json!({"args": ["--metrics", "$(ADDR)"], "env": env})),
            None
        );
        assert_eq!(port_of(json!({"args": ["--", "--metrics", ":2000"]})), None);
        assert_eq!(port_of(json!({"args": ["--metrics"]})), None);
        assert_eq!(port_of(json!({"args": ["--metricsx=:2000"]})), None);
        assert_eq!(
            port_of(
                json!({"env": [{"name": "TUNNEL_METRICS", "valueFrom": {"configMapKeyRef": {"name": "a", "key": "b"}}}]})
            ),
            None
        );
    }
}
