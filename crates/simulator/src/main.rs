//! `cloudflare-sim`: the Cloudflare API simulator as a process on loopback. Its first stdout
//! line is a JSON object with the API base URL (for `cftunnel run --cloudflare-api-url`), the
//! account, the zones and the tokens; logs go to stderr.
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use cftunnel_sim::cli::SimArgs;

#[derive(Debug, Parser)]
#[command(
    name = "cloudflare-sim",
    version,
    about = "Run the Cloudflare API simulator on loopback"
)]
struct Cli {
    #[command(flatten)]
    args: SimArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    cftunnel_sim::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cftunnel_sim::cli::run(cli.args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
