//! `cloudflare-sim`: the Cloudflare API simulator as a process on loopback. Its first stdout
//! line is a JSON object with the API base URL (for `cftunnel run --cloudflare-api-url`), the
//! account, the zones and the tokens; logs go to stderr.
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use cftunnel_sim::cli::SimArgs;

#[tokio::main]
async fn main() -> ExitCode {
    let args = SimArgs::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    cftunnel_sim::install_crypto_provider();
    match cftunnel_sim::cli::run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
