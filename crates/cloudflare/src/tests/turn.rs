//! A turn taken ahead of its call: the call spends it without waiting again, and a turn dropped
//! unspent gives its token back. Counted under paused time.
use std::time::Duration;

use serde_json::json;

use super::*;

fn slow_client(router: Router) -> CloudflareClient {
    builder(router)
        .rate_limit(RateLimit {
            per_second: 1,
            burst: 1,
        })
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_call_made_with_a_turn_spends_its_token_and_waits_no_more() {
    let (router, log) = fake(|_, _| ok(json!({"id": ZONE, "name": "example.com"})));
    let client = slow_client(router);
    let start = Instant::now();
    client.get_zone(ZONE).await.unwrap();
    // The burst is spent: the turn waits a second for the next token.
    let (turn, waited) = client.take_turn().await;
    assert_eq!(waited, Duration::from_secs(1));
    turn.get_zone(ZONE).await.unwrap();
    assert_eq!(
        Instant::now() - start,
        Duration::from_secs(1),
        "no second wait"
    );
    assert_eq!(log.count(), 2);
    // The token was spent: the next call waits its own second.
    turn.get_zone(ZONE).await.unwrap();
    assert_eq!(Instant::now() - start, Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_turn_dropped_unspent_gives_its_token_back() {
    let (router, log) = fake(|_, _| ok(json!({"id": ZONE, "name": "example.com"})));
    let client = slow_client(router);
    let (turn, _) = client.take_turn().await;
    assert_eq!(client.limiter().tokens().0, 0, "the turn holds the token");
    drop(turn);
    assert_eq!(client.limiter().tokens().0, 1, "given back");
    let start = Instant::now();
    client.get_zone(ZONE).await.unwrap();
    assert_eq!(Instant::now(), start, "the call found the token at once");
    assert_eq!(log.count(), 1);
}
