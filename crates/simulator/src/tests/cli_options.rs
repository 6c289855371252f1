//! The `cloudflare-sim` options for limits: parsing, errors, and the simulator they configure.
use std::time::Duration;

use clap::Parser;

use super::*;
use crate::RequestBudget;
use crate::cli::SimArgs;

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    args: SimArgs,
}

fn parse(args: &[&str]) -> Result<SimArgs, String> {
    Wrapper::try_parse_from(std::iter::once("sim").chain(args.iter().copied()))
        .map(|w| w.args)
        .map_err(|e| e.to_string())
}

#[test]
fn budget_takes_requests_per_seconds_and_blocks_for_the_window_by_default() {
    let args = parse(&["--budget", "1200/300"]).expect("parse");
    assert_eq!(
        args.config().budget,
        Some(RequestBudget {
            requests: 1200,
            window: Duration::from_secs(300),
            block: Duration::from_secs(300),
        })
    );
    let blocked_longer = parse(&["--budget", "3/60", "--budget-block", "600"]).expect("parse");
    assert_eq!(
        blocked_longer.request_budget(),
        Some(RequestBudget {
            requests: 3,
            window: Duration::from_secs(60),
            block: Duration::from_secs(600),
        })
    );
    assert_eq!(parse(&[]).expect("parse").config().budget, None);
}

#[test]
fn a_malformed_budget_names_the_option_and_the_expected_form() {
    for bad in [
        "1200", "1200/", "/300", "a/300", "0/300", "1200/0", "-1/300", "1.5/60",
    ] {
        let error = parse(&[&format!("--budget={bad}")]).expect_err(bad);
        assert!(
            error.contains("--budget <REQUESTS/SECONDS>")
                && error.contains(
                    "expected REQUESTS/SECONDS, two whole numbers of at least 1, e.g. 1200/300"
                ),
            "{bad}: {error}"
        );
    }
}

#[test]
fn budget_block_without_budget_is_refused() {
    let error = parse(&["--budget-block", "60"]).expect_err("refused");
    assert!(error.contains("--budget <REQUESTS/SECONDS>"), "{error}");
}

#[test]
fn a_malformed_number_names_its_option_and_what_is_expected() {
    let cases = [
        (
            "--zone-record-quota=many",
            "'--zone-record-quota <N>': expected a whole number of records, e.g. 200",
        ),
        (
            "--batch-limit=-3",
            "'--batch-limit <N>': expected a whole number of records, e.g. 200",
        ),
        (
            "--budget-block=soon",
            "'--budget-block <SECONDS>': expected whole seconds, e.g. 300",
        ),
    ];
    for (arg, expected) in cases {
        let error = parse(&["--budget", "3/60", arg]).expect_err(arg);
        assert!(error.contains(expected), "{arg}: {error}");
    }
}

#[tokio::test]
async fn the_options_configure_quota_batch_limit_and_block_enforcement() {
    let args = parse(&[
        "--token",
        TOKEN,
        "--zone-record-quota",
        "1",
        "--batch-limit",
        "7",
        "--block-on-rate-limit",
    ])
    .expect("parse");
    let config = args.config();
    assert_eq!(config.zone_record_quota, Some(1));
    let sim = Simulator::new(config);
    args.apply(&sim);
    create_record(
        &sim,
        "example.com",
        serde_json::json!({ "type": "A", "name": "a.example.com", "content": "192.0.2.1" }),
    )
    .await;
    let path = format!("{}/batch", records_path(&sim, "example.com"));
    let posts: Vec<_> = (0..8)
        .map(|i| serde_json::json!({ "type": "A", "name": format!("r{i}.example.com"), "content": "192.0.2.1" }))
        .collect();
    let batch = call(
        &sim,
        http::Method::POST,
        &path,
        Some(serde_json::json!({ "posts": posts })),
    )
    .await;
    assert_eq!(
        batch.body["errors"][0]["error_chain"][0]["message"],
        "a batch may change at most 7 records on this zone's plan, got 8"
    );
    sim.inject(
        crate::Operation::ListZones,
        crate::Fault::rate_limit_next(1, 30),
    );
    get(&sim, "/zones").await;
    assert_eq!(
        get(&sim, "/accounts").await.status,
        http::StatusCode::TOO_MANY_REQUESTS
    );
    let debug = format!("{args:?}");
    assert!(!debug.contains(TOKEN), "{debug}");
}

#[tokio::test]
async fn access_team_gives_the_account_its_zero_trust_organization() {
    let args = parse(&["--token", TOKEN, "--access-team", "acme-ops"]).expect("parse");
    let config = args.config();
    assert_eq!(config.access_team.as_deref(), Some("acme-ops"));
    let sim = Simulator::new(config);
    let path = format!("/accounts/{}/access/organizations", sim.account_id());
    assert_eq!(
        get(&sim, &path).await.result()["auth_domain"],
        "acme-ops.cloudflareaccess.com"
    );
    assert_eq!(parse(&[]).expect("parse").config().access_team, None);
    for bad in ["", "-acme", "acme-", "acme.ops", "a b", &"x".repeat(64)] {
        let error = parse(&[&format!("--access-team={bad}")]).expect_err(bad);
        assert!(
            error.contains("'--access-team <NAME>': expected a team name"),
            "{bad}: {error}"
        );
    }
}
