//! The diagnostics of `cftunnel render`'s route table (its world is built by
//! [`cftunnel_policy::validate::world::WorldBuilder`], as `cftunnel validate` builds its own).
use std::io::Write;

use cftunnel_policy::routes::{RouteReason, RouteTable};

/// One stderr line per route source that is not served as declared:
/// `warning: <Kind> <ns>/<name>: <reason>: <message>`.
pub(super) fn report(table: &RouteTable, err: &mut dyn Write) -> std::io::Result<()> {
    for (source, status) in &table.sources {
        if status.reason != RouteReason::Routed {
            writeln!(
                err,
                "warning: {source}: {}: {}",
                status.reason.as_str(),
                status.message
            )?;
        }
    }
    Ok(())
}
