//! The write permit of a leadership term: once it has expired or its term was cancelled, no
//! write leaves the client; reads still do.
use axum::http::Method;
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use super::*;
use crate::{CloudflareError, NewDnsRecord, WriteGate};

/// The permit of a leadership term under a process, as the operator's scopes make them.
fn term_gate() -> (CancellationToken, WriteGate) {
    let process = CancellationToken::new();
    let term = process.child_token();
    let process_gate = WriteGate::cancelled_with(process, None);
    (
        term.clone(),
        WriteGate::cancelled_with(term, Some(&process_gate)),
    )
}

#[tokio::test(start_paused = true)]
async fn no_write_is_sent_once_the_terms_permit_expired() {
    let (router, log) = fake(|_, _| ok(record_json("r1", "app.example.com")));
    let (_term, gate) = term_gate();
    gate.renew_until(Instant::now() + Duration::from_secs(10));
    let client = builder(router).write_gate(gate).build().unwrap();
    let cname = NewDnsRecord::tunnel_cname("app.example.com", TUNNEL, None);
    client.create_dns_record(ZONE, &cname).await.unwrap();
    // The process was paused past its renew deadline: it wakes with the permit expired,
    // before the elector has noticed anything.
    tokio::time::advance(Duration::from_secs(11)).await;
    let refused = client.create_dns_record(ZONE, &cname).await.unwrap_err();
    assert!(
        matches!(
            refused,
            CloudflareError::NotLeading {
                operation: "dns.create"
            }
        ),
        "{refused:?}"
    );
    client.delete_dns_record(ZONE, "r1").await.unwrap_err();
    client.get_dns_record(ZONE, "r1").await.unwrap();
    let methods: Vec<Method> = log.all().into_iter().map(|s| s.method).collect();
    assert_eq!(methods, [Method::POST, Method::GET]);
}

#[tokio::test(start_paused = true)]
async fn no_write_is_sent_after_the_term_was_cancelled() {
    let (router, log) = fake(|_, _| ok(record_json("r1", "app.example.com")));
    let (term, gate) = term_gate();
    let client = builder(router).write_gate(gate).build().unwrap();
    term.cancel();
    let cname = NewDnsRecord::tunnel_cname("app.example.com", TUNNEL, None);
    let refused = client
        .update_dns_record(ZONE, "r1", &cname)
        .await
        .unwrap_err();
    assert_eq!(refused.metric_label(), "not_leading");
    assert_eq!(log.count(), 0);
}
