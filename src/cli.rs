//! Command-line interface.
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::telemetry::{self, LogFormat};

#[derive(Debug, Parser)]
#[command(
    name = "cftunnel",
    version,
    about = "Expose Kubernetes Services through Cloudflare Tunnels"
)]
pub struct Cli {
    /// Log format (logs go to stderr).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "CFTUNNEL_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log_format);
    telemetry::install_crypto_provider();
    match cli.command {}
}
