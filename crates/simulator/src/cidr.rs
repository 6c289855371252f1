//! IP ranges in CIDR notation, as private-network routes hold them: parsed, compared and
//! written back in one canonical text.
use std::fmt;
use std::net::IpAddr;

/// An IPv4 or IPv6 range whose address has no bit set right of the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `10.0.0.0/8`, `fd00::/8`. A bare address, a prefix longer than the family allows and an
    /// address with host bits set (`10.0.0.1/8`) are refused, as a database `cidr` column
    /// refuses them (the API's own answer to such a range is not documented).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (addr, prefix) = text
            .trim()
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not in CIDR notation (address/prefix)"))?;
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{text:?}: {addr:?} is not an IP address"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= bits(addr))
            .ok_or_else(|| format!("{text:?}: {prefix:?} is not a prefix length of the family"))?;
        let cidr = Cidr { addr, prefix };
        if masked(addr, prefix) != addr {
            return Err(format!(
                "{text:?} has host bits set; the range is {}",
                Cidr {
                    addr: masked(addr, prefix),
                    prefix
                }
            ));
        }
        Ok(cidr)
    }

    /// Whether every address of `other` is in this range (a range contains itself).
    pub fn contains(&self, other: &Cidr) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4()
            && self.prefix <= other.prefix
            && masked(other.addr, self.prefix) == self.addr
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn bits(addr: IpAddr) -> u8 {
    if addr.is_ipv4() { 32 } else { 128 }
}

/// `addr` with every bit right of `prefix` cleared.
fn masked(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).expect(text)
    }

    #[test]
    fn ranges_parse_into_one_canonical_text() {
        assert_eq!(cidr("10.0.0.0/8").to_string(), "10.0.0.0/8");
        assert_eq!(cidr(" FD00:0::/8 ").to_string(), "fd00::/8");
        assert_eq!(cidr("0.0.0.0/0").to_string(), "0.0.0.0/0");
        assert_eq!(cidr("10.1.2.3/32").to_string(), "10.1.2.3/32");
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0/8",
            "x/8",
            "10.0.0.0/-1",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
        let host_bits = Cidr::parse("10.0.0.1/8").expect_err("host bits");
        assert!(host_bits.contains("10.0.0.0/8"), "{host_bits}");
    }

    #[test]
    fn containment_is_by_family_prefix_and_address() {
        assert!(cidr("10.0.0.0/8").contains(&cidr("10.1.0.0/16")));
        assert!(cidr("10.0.0.0/8").contains(&cidr("10.0.0.0/8")));
        assert!(!cidr("10.1.0.0/16").contains(&cidr("10.0.0.0/8")));
        assert!(!cidr("10.0.0.0/8").contains(&cidr("11.0.0.0/16")));
        assert!(cidr("0.0.0.0/0").contains(&cidr("192.168.1.0/24")));
        assert!(!cidr("0.0.0.0/0").contains(&cidr("fd00::/8")));
        assert!(cidr("fd00::/8").contains(&cidr("fd12:3456::/32")));
    }
}
