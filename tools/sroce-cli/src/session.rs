//! `sroce session show`: one line per session of every connected RC queue
//! pair, from the kernel's `SESSION_GET` dump.

use crate::json;
use crate::nl;
use sroce_proto::roce::session::ctl as abi;
use std::net::{IpAddr, Ipv6Addr};

/// A session as `SESSION_GET` reports it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SessionInfo {
    pub dev: String,
    pub qpn: u32,
    pub policy: u8,
    pub id: u8,
    pub sport: u16,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub state: u8,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    pub acked: u64,
    pub srtt_us: u32,
    /// A RoCE v1 connection's session (Ethernet and GRH, no UDP port).
    pub roce_v1: bool,
    /// Times its 5-tuple was replaced (congestion).
    pub replacements: u64,
    /// In a replacement event: the port it left from before.
    pub replaced_sport: Option<u16>,
    /// Its congestion window (packets) and how often it was cut, while
    /// the multipath transport is in use.
    pub window: Option<(u32, u32)>,
}

pub(crate) fn u64_of(a: &nl::Attr<'_>) -> Result<u64, nl::DecodeError> {
    let b: [u8; 8] = a
        .payload
        .try_into()
        .map_err(|_| nl::DecodeError::BadAttr(a.ty))?;
    Ok(u64::from_ne_bytes(b))
}

pub(crate) fn addr_of(a: &nl::Attr<'_>) -> Result<[u8; 16], nl::DecodeError> {
    a.payload
        .try_into()
        .map_err(|_| nl::DecodeError::BadAttr(a.ty))
}

/// An IPv4-mapped address as IPv4, others as IPv6.
pub(crate) fn addr(a: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(a);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// An address as in `ADDR:PORT` (IPv6 in brackets).
pub(crate) fn show_addr(a: [u8; 16]) -> String {
    match addr(a) {
        IpAddr::V6(v6) => format!("[{v6}]"),
        v4 => v4.to_string(),
    }
}

impl SessionInfo {
    /// Decodes one dump entry.
    pub fn parse(payload: &[u8]) -> Result<Self, nl::DecodeError> {
        let mut s = SessionInfo::default();
        for a in nl::attrs(nl::genl(payload)?.attrs) {
            let a = a?;
            match a.ty {
                abi::ATTR_DEV_NAME => s.dev = a.str()?.to_owned(),
                abi::ATTR_QPN => s.qpn = a.u32()?,
                abi::ATTR_POLICY => s.policy = a.u8()?,
                abi::ATTR_SESSION_ID => s.id = a.u8()?,
                abi::ATTR_SPORT => s.sport = a.u16()?,
                abi::ATTR_SRC_ADDR => s.src = addr_of(&a)?,
                abi::ATTR_DST_ADDR => s.dst = addr_of(&a)?,
                abi::ATTR_STATE => s.state = a.u8()?,
                abi::ATTR_TX_PACKETS => s.tx_packets = u64_of(&a)?,
                abi::ATTR_TX_BYTES => s.tx_bytes = u64_of(&a)?,
                abi::ATTR_RETRANSMITS => s.retransmits = u64_of(&a)?,
                abi::ATTR_TIMEOUTS => s.timeouts = u64_of(&a)?,
                abi::ATTR_ACKED => s.acked = u64_of(&a)?,
                abi::ATTR_SRTT_US => s.srtt_us = a.u32()?,
                abi::ATTR_ROCE_V1 => s.roce_v1 = a.u8()? != 0,
                abi::ATTR_REPLACEMENTS => s.replacements = u64_of(&a)?,
                abi::ATTR_REPLACED_SPORT => s.replaced_sport = Some(a.u16()?),
                abi::ATTR_CWND => {
                    s.window = Some((a.u32()?, s.window.map_or(0, |w| w.1)));
                }
                abi::ATTR_WINDOW_CUTS => {
                    s.window = Some((s.window.map_or(0, |w| w.0), a.u32()?));
                }
                // Newer kernels may add attributes.
                _ => {}
            }
        }
        Ok(s)
    }

    fn policy_name(&self) -> &'static str {
        abi::policy_from_u8(self.policy).map_or("unknown", abi::policy_name)
    }

    /// The object `session show -j` prints (a RoCE v1 session has no
    /// ports: `encap` says which).
    pub fn json(&self) -> String {
        let o = json::Object::new()
            .str("dev", &self.dev)
            .num("qpn", self.qpn.into())
            .num("session", self.id.into());
        let o = if self.roce_v1 {
            o.str("encap", "roce-v1")
                .str("src", &addr(self.src).to_string())
                .str("dst", &addr(self.dst).to_string())
        } else {
            o.str("encap", "roce-v2")
                .str("src", &addr(self.src).to_string())
                .num("sport", self.sport.into())
                .str("dst", &addr(self.dst).to_string())
                .num("dport", 4791)
        };
        let o = o
            .str("state", abi::state_name(self.state))
            .str("policy", self.policy_name())
            .num("tx_packets", self.tx_packets)
            .num("tx_bytes", self.tx_bytes)
            .num("acked", self.acked)
            .num("retransmits", self.retransmits)
            .num("timeouts", self.timeouts)
            .num("srtt_us", self.srtt_us.into())
            .num("replacements", self.replacements);
        let o = match self.window {
            Some((cwnd, cuts)) => o.num("cwnd", cwnd.into()).num("window_cuts", cuts.into()),
            None => o,
        };
        match self.replaced_sport {
            Some(p) => o.num("replaced_sport", p.into()).finish(),
            None => o.finish(),
        }
    }

    /// The line `session show` prints: the 5-tuple, or for a RoCE v1
    /// session `roce-v1 SRC -> DST` (the GIDs' addresses).
    pub fn line(&self) -> String {
        let policy = self.policy_name();
        let path = if self.roce_v1 {
            format!("roce-v1 {} -> {}", addr(self.src), addr(self.dst))
        } else {
            format!(
                "{}:{} -> {}:4791",
                show_addr(self.src),
                self.sport,
                show_addr(self.dst)
            )
        };
        let replaced = match self.replaced_sport {
            Some(p) => format!(" (replaces port {p})"),
            None => String::new(),
        };
        let window = match self.window {
            Some((cwnd, cuts)) => format!(" cwnd {cwnd} cuts {cuts}"),
            None => String::new(),
        };
        format!(
            "{} qp {} session {} {} {} policy {} tx {} pkts {} bytes acked {} retx {} timeouts {} srtt {}us replaced {}{}{}",
            self.dev,
            self.qpn,
            self.id,
            path,
            abi::state_name(self.state),
            policy,
            self.tx_packets,
            self.tx_bytes,
            self.acked,
            self.retransmits,
            self.timeouts,
            self.srtt_us,
            self.replacements,
            window,
            replaced,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format() {
        let mut src = [0u8; 16];
        src[10] = 0xff;
        src[11] = 0xff;
        src[12..].copy_from_slice(&[10, 77, 9, 1]);
        let s = SessionInfo {
            dev: "sroce1".into(),
            qpn: 17,
            policy: 1,
            id: 1,
            sport: 61234,
            src,
            dst: Ipv6Addr::LOCALHOST.octets(),
            state: 0,
            tx_packets: 5,
            tx_bytes: 500,
            retransmits: 0,
            timeouts: 1,
            acked: 4,
            srtt_us: 120,
            roce_v1: false,
            replacements: 0,
            replaced_sport: None,
            window: None,
        };
        assert_eq!(
            s.line(),
            "sroce1 qp 17 session 1 10.77.9.1:61234 -> [::1]:4791 up policy round-robin \
             tx 5 pkts 500 bytes acked 4 retx 0 timeouts 1 srtt 120us replaced 0"
        );
        let moved = SessionInfo {
            replacements: 2,
            replaced_sport: Some(61000),
            dev: s.dev.clone(),
            ..s
        };
        assert!(moved
            .line()
            .ends_with("srtt 120us replaced 2 (replaces port 61000)"));
        assert!(moved
            .json()
            .ends_with(r#""srtt_us":120,"replacements":2,"replaced_sport":61000}"#));
        let windowed = SessionInfo {
            window: Some((24, 3)),
            dev: s.dev.clone(),
            ..moved
        };
        assert!(windowed
            .line()
            .ends_with("replaced 2 cwnd 24 cuts 3 (replaces port 61000)"));
        assert!(windowed
            .json()
            .ends_with(r#""replacements":2,"cwnd":24,"window_cuts":3,"replaced_sport":61000}"#));
        let v1 = SessionInfo {
            roce_v1: true,
            dev: s.dev.clone(),
            ..s
        };
        assert_eq!(
            v1.line(),
            "sroce1 qp 17 session 1 roce-v1 10.77.9.1 -> ::1 up policy round-robin \
             tx 5 pkts 500 bytes acked 4 retx 0 timeouts 1 srtt 120us replaced 0"
        );
        assert_eq!(
            v1.json(),
            r#"{"dev":"sroce1","qpn":17,"session":1,"encap":"roce-v1","src":"10.77.9.1","dst":"::1","state":"up","policy":"round-robin","tx_packets":5,"tx_bytes":500,"acked":4,"retransmits":0,"timeouts":1,"srtt_us":120,"replacements":0}"#
        );
        assert_eq!(
            s.json(),
            r#"{"dev":"sroce1","qpn":17,"session":1,"encap":"roce-v2","src":"10.77.9.1","sport":61234,"dst":"::1","dport":4791,"state":"up","policy":"round-robin","tx_packets":5,"tx_bytes":500,"acked":4,"retransmits":0,"timeouts":1,"srtt_us":120,"replacements":0}"#
        );
    }
}
