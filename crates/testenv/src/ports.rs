//! Loopback ports for processes that are told their port rather than binding port 0.
//!
//! A port found free is free only until its process binds it. The kernel hands out ports from
//! its ephemeral range (`net.ipv4.ip_local_port_range`, 32768–60999 by default) for every
//! port-0 bind and every outbound connection, and a machine running several test binaries
//! opens thousands of those a minute: CI saw kube-apiserver and etcd exit with `bind: address
//! already in use` on a port picked a moment before. So ports are picked below that range,
//! where only another explicit pick can land; callers that start a process still try again on
//! a fresh port when it was taken.

use std::net::TcpListener;

use super::TestEnvError;

/// The lowest port picked: above the well-known ports a node's components listen on
/// (10248–10259) and the usual development servers.
const LOWEST: u16 = 20000;

/// Above the highest port picked: Kubernetes' NodePort range (30000–32767) starts here.
const HIGHEST_EXCLUSIVE: u16 = 30000;

/// Picks among this many random ports before falling back to the kernel's choice.
const TRIES: usize = 64;

/// The kernel's default ephemeral range, used when `/proc` cannot be read.
const DEFAULT_EPHEMERAL: (u16, u16) = (32768, 60999);

/// A loopback port that was free a moment ago: from 20000 up to the ephemeral range or the
/// NodePort range, whichever starts first, or the kernel's pick when there is no room.
pub fn free_port() -> Result<u16, TestEnvError> {
    let end = ephemeral_range().0.min(HIGHEST_EXCLUSIVE);
    if end > LOWEST {
        let span = u128::from(end - LOWEST);
        for _ in 0..TRIES {
            let offset = uuid::Uuid::new_v4().as_u128() % span;
            let port = LOWEST + u16::try_from(offset).unwrap_or(0);
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    kernel_port()
}

/// A port the kernel picked for a port-0 bind, released at once.
fn kernel_port() -> Result<u16, TestEnvError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| TestEnvError::io("reserving a loopback port", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| TestEnvError::io("reading a reserved port", e))?
        .port();
    Ok(port)
}

/// The kernel's ephemeral port range, as `/proc/sys/net/ipv4/ip_local_port_range` gives it.
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| parse_range(&text))
        .unwrap_or(DEFAULT_EPHEMERAL)
}

fn parse_range(text: &str) -> Option<(u16, u16)> {
    let mut parts = text.split_whitespace().map(|p| p.parse::<u16>().ok());
    let low = parts.next()??;
    let high = parts.next()??;
    (low <= high).then_some((low, high))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_read_as_the_kernel_writes_it() {
        assert_eq!(parse_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_range("1024 65535"), Some((1024, 65535)));
        assert_eq!(parse_range("60999 32768"), None);
        assert_eq!(parse_range("32768"), None);
        assert_eq!(parse_range("a b"), None);
    }

    #[test]
    fn picked_ports_are_bindable_and_below_the_ephemeral_and_node_port_ranges() {
        let end = ephemeral_range().0.min(HIGHEST_EXCLUSIVE);
        for _ in 0..20 {
            let port = free_port().expect("a port");
            TcpListener::bind(("127.0.0.1", port)).expect("the picked port binds");
            if end > LOWEST {
                assert!((LOWEST..end).contains(&port), "{port} is not below {end}");
            }
        }
    }
}
