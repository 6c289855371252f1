//! Logging set-up. Logs go to stderr so that stdout stays free for machine-readable output,
//! or to a file once [`log_to_file`] is called (the demo keeps its terminal for the story).
use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use tracing_subscriber::{EnvFilter, fmt};

/// Where log lines go: stderr until a file is named.
static LOG_FILE: Mutex<Option<File>> = Mutex::new(None);

/// Sends every later log line to `path` (created or truncated) instead of stderr; call it
/// before [`init`], so the file gets no terminal colours.
pub fn log_to_file(path: &Path) -> std::io::Result<()> {
    let file = File::create(path)?;
    *LOG_FILE.lock().unwrap_or_else(PoisonError::into_inner) = Some(file);
    Ok(())
}

/// One log line at a time (the formatter writes each event once) to the file or stderr.
struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match LOG_FILE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            Some(file) => file.write(buf),
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match LOG_FILE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            Some(file) => file.flush(),
            None => std::io::stderr().flush(),
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The filter when `RUST_LOG` is not set. kube's HTTP trace layer logs every 5xx answer and
/// failed connection at ERROR, the ones its own retries (429, 503, 504) and our watches' backoff
/// then get past included, and without saying which request failed; a failure that stays is
/// returned to the caller, which logs it with its context. So that layer is off unless asked for.
pub(crate) const DEFAULT_FILTER: &str = "info,kube_client::client::builder=off";

/// Installs the global subscriber once; later calls are ignored (tests call it repeatedly).
/// Colours only on a terminal: a pod's log, a CI log and the demo's log file get plain text.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let to_file = LOG_FILE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .is_some();
    let ansi = std::io::stderr().is_terminal() && !to_file;
    let builder = fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(|| LogWriter);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Installs ring as the process-wide rustls crypto provider; idempotent.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
