//! `cftunnel-demo`: the whole product on this machine, what `scripts/demo.sh` runs. A control
//! plane on loopback (binaries from scripts/build-control-plane.sh), the Cloudflare simulator
//! and cftunnel; the manifests of `examples/` applied, and a summary of what came of them.
mod demo;

use std::process::ExitCode;

use clap::Parser;

use cftunnel::telemetry::{self, LogFormat};

#[derive(Debug, Parser)]
#[command(
    name = "cftunnel-demo",
    version,
    about = "Run cftunnel end to end: a local control plane, the Cloudflare simulator and cftunnel"
)]
struct Cli {
    #[command(flatten)]
    args: demo::DemoArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let log_file = cli.args.log_path();
    if let Err(e) = telemetry::log_to_file(&log_file) {
        eprintln!("error: creating the log file {}: {e}", log_file.display());
        return ExitCode::FAILURE;
    }
    telemetry::init(LogFormat::Text);
    cftunnel_testenv::install_crypto_provider();
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
    match runtime.block_on(demo::run(cli.args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
