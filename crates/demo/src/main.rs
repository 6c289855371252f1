//! `cftunnel-demo`: the whole product on this machine, what `scripts/demo.sh` runs. A control
//! plane on loopback (binaries from scripts/build-control-plane.sh), the Cloudflare simulator
//! and cftunnel; the manifests of `examples/` applied, and a summary of what came of them.
mod access;
mod cloudflare;
mod demo;
mod deployment;
mod gateway_api;
mod go_era;
mod tunnels;

use std::process::ExitCode;

use clap::Parser;

use cftunnel::telemetry::{self, LogFormat};

#[tokio::main]
async fn main() -> ExitCode {
    let args = demo::DemoArgs::parse();
    let log_file = args.log_path();
    if let Err(e) = telemetry::log_to_file(&log_file) {
        eprintln!("error: creating the log file {}: {e}", log_file.display());
        return ExitCode::FAILURE;
    }
    telemetry::init(LogFormat::Text);
    cftunnel_testenv::install_crypto_provider();
    match demo::run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
