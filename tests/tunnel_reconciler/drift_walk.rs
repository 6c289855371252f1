//! Drift checks of one credential share a walk of the account's tunnels: twenty tunnels
//! checked every few seconds cost a list call per quarter interval, not a GET each; a tunnel
//! deleted on Cloudflare is still found (and recreated) at its next check.
use std::time::Duration;

use cftunnel_sim::Operation;
use cftunnel_testenv::poll_until;
use serde_json::json;

use crate::harness::{Harness, POLL, TOKEN, WAIT};

const MANY: usize = 20;
const INTERVAL: Duration = Duration::from_secs(4);

#[tokio::test]
async fn drift_checks_of_many_tunnels_share_one_walk_and_still_find_a_deleted_tunnel() {
    let h = Harness::start_with("tr-drift-walk", |o| {
        o.drift_interval = INTERVAL;
    })
    .await;
    h.create_api_secret("api", &[("CLOUDFLARE_API_TOKEN", TOKEN)])
        .await;
    for i in 0..MANY {
        let name = format!("w{i}");
        h.create_tunnel(&name, h.spec("api", json!({"newTunnel": {"name": name}})))
            .await;
    }
    let mut ids = Vec::new();
    for i in 0..MANY {
        let t = h.wait_reason(&h.tunnels(), &format!("w{i}"), "Ready").await;
        ids.push(t.status.and_then(|s| s.tunnel_id).expect("tunnel id"));
    }
    h.sim.reset_counters();
    // Three intervals: every tunnel is checked about three times.
    tokio::time::sleep(INTERVAL * 3).await;
    let gets = h.sim.calls(Operation::GetTunnel);
    let walks = h.sim.calls(Operation::ListTunnels);
    eprintln!("in three intervals: {walks} walks, {gets} tunnel GETs");
    assert_eq!(gets, 0, "a GET per tunnel");
    assert!(walks >= 1, "no drift check ran");
    // At most one walk per quarter interval (plus one at each edge), where a GET each would
    // have been about 3 × 20.
    assert!(walks <= 14, "{walks} walks");
    // A tunnel deleted on Cloudflare is not listed: looked up, found gone, recreated.
    let deleted = ids[7].clone();
    assert!(h.sim.delete_tunnel_out_of_band(&deleted));
    poll_until("w7 on a new tunnel", WAIT, POLL, || async {
        let status = h.tunnels().get("w7").await.ok()?.status?;
        let id = status.tunnel_id?;
        (id != deleted).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(h.live_tunnels().len(), MANY);
}
