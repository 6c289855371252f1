//! `cloudflare-sim`: the simulator as a process, announced by one JSON line on stdout.
use std::io::Write;
use std::net::SocketAddr;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use serde_json::json;

use super::{SimConfig, Simulator};

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
        }
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
