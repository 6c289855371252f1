//! `cloudflare-sim`: the simulator as a process, announced by one JSON line on stdout.
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use serde_json::json;

use super::{RequestBudget, SimConfig, Simulator};

/// Options of the `cloudflare-sim` command.
#[derive(Clone, clap::Parser)]
#[command(
    name = "cloudflare-sim",
    version,
    about = "Run the Cloudflare API simulator on loopback"
)]
pub struct SimArgs {
    /// Loopback address to listen on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Zone to create (repeatable); defaults to example.com.
    #[arg(long = "zone", value_name = "NAME")]
    pub zones: Vec<String>,
    /// Zone to create with status `pending` (repeatable): in the account, not active yet.
    #[arg(long = "pending-zone", value_name = "NAME")]
    pub pending_zones: Vec<String>,
    /// API token to accept (repeatable); one random token is generated when none is given.
    #[arg(long = "token", value_name = "T")]
    pub tokens: Vec<String>,
    /// Name of the simulated account.
    #[arg(long, value_name = "NAME", default_value = "cftunnel-sim")]
    pub account_name: String,
    /// Request budget per token, e.g. 1200/300 (Cloudflare's): beyond it every call of the
    /// token is answered 429 for the block time.
    #[arg(long, value_name = "REQUESTS/SECONDS", value_parser = parse_budget)]
    pub budget: Option<BudgetArg>,
    /// Block time after the budget is exceeded; the budget's window when not given.
    #[arg(long, value_name = "SECONDS", requires = "budget", value_parser = parse_seconds)]
    pub budget_block: Option<u64>,
    /// Most records every zone may hold (Cloudflare: 200 on Free, 3,500 on paid plans).
    #[arg(long, value_name = "N", value_parser = parse_records)]
    pub zone_record_quota: Option<usize>,
    /// Most records one DNS batch may touch, whatever the zone's plan.
    #[arg(long, value_name = "N", value_parser = parse_records)]
    pub batch_limit: Option<usize>,
    /// Refuse every call of a token with 429 until the `retry-after` of its last 429 passed.
    #[arg(long)]
    pub block_on_rate_limit: bool,
    /// Zero Trust team of the account (its organization's auth domain is
    /// NAME.cloudflareaccess.com); without it the account has no Zero Trust and every Access
    /// call is refused.
    #[arg(long, value_name = "NAME", value_parser = parse_team)]
    pub access_team: Option<String>,
}

/// `--budget REQUESTS/SECONDS` as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetArg {
    pub requests: u32,
    pub window_secs: u64,
}

/// Parses `REQUESTS/SECONDS`, both whole numbers of at least 1.
fn parse_budget(text: &str) -> Result<BudgetArg, String> {
    let expected = "expected REQUESTS/SECONDS, two whole numbers of at least 1, e.g. 1200/300";
    let (requests, window) = text.split_once('/').ok_or(expected)?;
    let requests: u32 = requests.trim().parse().map_err(|_| expected)?;
    let window_secs: u64 = window.trim().parse().map_err(|_| expected)?;
    if requests == 0 || window_secs == 0 {
        return Err(expected.to_string());
    }
    Ok(BudgetArg {
        requests,
        window_secs,
    })
}

fn parse_seconds(text: &str) -> Result<u64, String> {
    text.trim()
        .parse()
        .map_err(|_| "expected whole seconds, e.g. 300".to_string())
}

/// A team name is the first label of its auth domain: letters, digits and inner hyphens.
fn parse_team(text: &str) -> Result<String, String> {
    let expected =
        "expected a team name of letters, digits and inner hyphens (at most 63), e.g. my-team";
    let team = text.trim();
    let label = !team.is_empty()
        && team.len() <= 63
        && team.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !team.starts_with('-')
        && !team.ends_with('-');
    if label {
        Ok(team.to_string())
    } else {
        Err(expected.to_string())
    }
}

fn parse_records(text: &str) -> Result<usize, String> {
    text.trim()
        .parse()
        .map_err(|_| "expected a whole number of records, e.g. 200".to_string())
}

/// Tokens are credentials, so Debug shows only how many there are.
impl std::fmt::Debug for SimArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimArgs")
            .field("listen", &self.listen)
            .field("zones", &self.zones)
            .field("pending_zones", &self.pending_zones)
            .field("tokens", &format_args!("<{} redacted>", self.tokens.len()))
            .field("account_name", &self.account_name)
            .field("budget", &self.budget)
            .field("budget_block", &self.budget_block)
            .field("zone_record_quota", &self.zone_record_quota)
            .field("batch_limit", &self.batch_limit)
            .field("block_on_rate_limit", &self.block_on_rate_limit)
            .field("access_team", &self.access_team)
            .finish()
    }
}

impl SimArgs {
    /// The simulator configuration these options describe (random token filled in).
    pub fn config(&self) -> SimConfig {
        let zones = if self.zones.is_empty() {
            vec!["example.com".to_string()]
        } else {
            self.zones.clone()
        };
        let tokens = if self.tokens.is_empty() {
            vec![random_token()]
        } else {
            self.tokens.clone()
        };
        SimConfig {
            account_name: self.account_name.clone(),
            account_id: None,
            zones,
            pending_zones: self.pending_zones.clone(),
            tokens,
            api_keys: Vec::new(),
            budget: self.request_budget(),
            zone_record_quota: self.zone_record_quota,
            access_team: self.access_team.clone(),
        }
    }

    /// The budget `--budget` and `--budget-block` describe.
    pub fn request_budget(&self) -> Option<RequestBudget> {
        let budget = self.budget?;
        let window = Duration::from_secs(budget.window_secs);
        Some(RequestBudget {
            requests: budget.requests,
            window,
            block: self.budget_block.map_or(window, Duration::from_secs),
        })
    }

    /// Sets the switches these options give that [`SimConfig`] does not hold.
    pub fn apply(&self, sim: &Simulator) {
        sim.set_batch_limit(self.batch_limit);
        sim.set_block_on_rate_limit(self.block_on_rate_limit);
    }
}

fn random_token() -> String {
    let mut bytes = [0u8; 30];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Runs the simulator until SIGINT or SIGTERM.
pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    if !args.listen.ip().is_loopback() {
        bail!(
            "--listen {} is not a loopback address; the simulator never listens off this machine",
            args.listen
        );
    }
    let config = args.config();
    let tokens = config.tokens.clone();
    let sim = Simulator::new(config);
    args.apply(&sim);
    let running = sim
        .serve(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let zones: serde_json::Map<String, serde_json::Value> = sim
        .zones()
        .into_iter()
        .map(|(name, id)| (name, json!(id)))
        .collect();
    let ready = json!({
        "url": running.url,
        "account_id": sim.account_id(),
        "account_name": sim.account_name(),
        "zones": zones,
        "tokens": tokens,
    });
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{ready}").context("writing the ready line")?;
    stdout.flush().context("flushing the ready line")?;
    drop(stdout);
    tracing::info!(url = %running.url, "cloudflare simulator ready");
    wait_for_signal().await?;
    tracing::info!("cloudflare simulator stopping");
    running.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result.context("waiting for SIGINT"),
        _ = term.recv() => Ok(()),
    }
}
