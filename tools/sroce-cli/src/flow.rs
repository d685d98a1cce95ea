//! `sroce flow show`: what each connected queue pair received, per flow it
//! came on (the peer's UDP source port: a sroce peer's sessions), from the
//! kernel's `RX_FLOW_GET` dump.

use crate::json;
use crate::nl;
use crate::session::{addr, addr_of, show_addr, u64_of};
use sroce_proto::roce::session::ctl as abi;

/// A received flow as `RX_FLOW_GET` reports it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FlowInfo {
    pub dev: String,
    pub qpn: u32,
    pub id: u8,
    pub sport: u16,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub roce_v1: bool,
}

impl FlowInfo {
    /// Decodes one dump entry.
    pub fn parse(payload: &[u8]) -> Result<Self, nl::DecodeError> {
        let mut f = FlowInfo::default();
        for a in nl::attrs(nl::genl(payload)?.attrs) {
            let a = a?;
            match a.ty {
                abi::ATTR_DEV_NAME => f.dev = a.str()?.to_owned(),
                abi::ATTR_QPN => f.qpn = a.u32()?,
                abi::ATTR_RX_FLOW => f.id = a.u8()?,
                abi::ATTR_SPORT => f.sport = a.u16()?,
                abi::ATTR_SRC_ADDR => f.src = addr_of(&a)?,
                abi::ATTR_DST_ADDR => f.dst = addr_of(&a)?,
                abi::ATTR_RX_PACKETS => f.rx_packets = u64_of(&a)?,
                abi::ATTR_RX_BYTES => f.rx_bytes = u64_of(&a)?,
                abi::ATTR_ROCE_V1 => f.roce_v1 = a.u8()? != 0,
                // Newer kernels may add attributes.
                _ => {}
            }
        }
        Ok(f)
    }

    fn is_others(&self) -> bool {
        self.id == abi::RX_FLOW_OTHERS
    }

    /// The object `flow show -j` prints.
    pub fn json(&self) -> String {
        let o = json::Object::new()
            .str("dev", &self.dev)
            .num("qpn", self.qpn.into());
        let o = if self.is_others() {
            o.str("rx_flow", "others")
        } else if self.roce_v1 {
            o.num("rx_flow", self.id.into())
                .str("encap", "roce-v1")
                .str("src", &addr(self.src).to_string())
                .str("dst", &addr(self.dst).to_string())
        } else {
            o.num("rx_flow", self.id.into())
                .str("encap", "roce-v2")
                .str("src", &addr(self.src).to_string())
                .num("sport", self.sport.into())
                .str("dst", &addr(self.dst).to_string())
                .num("dport", 4791)
        };
        o.num("rx_packets", self.rx_packets)
            .num("rx_bytes", self.rx_bytes)
            .finish()
    }

    /// The line `flow show` prints.
    pub fn line(&self) -> String {
        let path = if self.is_others() {
            "others".to_owned()
        } else if self.roce_v1 {
            format!(
                "{} roce-v1 {} -> {}",
                self.id,
                addr(self.src),
                addr(self.dst)
            )
        } else {
            format!(
                "{} {}:{} -> {}:4791",
                self.id,
                show_addr(self.src),
                self.sport,
                show_addr(self.dst)
            )
        };
        format!(
            "{} qp {} rx-flow {} rx {} pkts {} bytes",
            self.dev, self.qpn, path, self.rx_packets, self.rx_bytes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    #[test]
    fn line_format() {
        let mut src = [0u8; 16];
        src[10] = 0xff;
        src[11] = 0xff;
        src[12..].copy_from_slice(&[10, 77, 9, 2]);
        let f = FlowInfo {
            dev: "sroce1".into(),
            qpn: 17,
            id: 1,
            sport: 63769,
            src,
            dst: Ipv6Addr::LOCALHOST.octets(),
            rx_packets: 5,
            rx_bytes: 500,
            roce_v1: false,
        };
        assert_eq!(
            f.line(),
            "sroce1 qp 17 rx-flow 1 10.77.9.2:63769 -> [::1]:4791 rx 5 pkts 500 bytes"
        );
        assert_eq!(
            f.json(),
            r#"{"dev":"sroce1","qpn":17,"rx_flow":1,"encap":"roce-v2","src":"10.77.9.2","sport":63769,"dst":"::1","dport":4791,"rx_packets":5,"rx_bytes":500}"#
        );
        let others = FlowInfo {
            id: abi::RX_FLOW_OTHERS,
            dev: f.dev.clone(),
            ..f
        };
        assert_eq!(
            others.line(),
            "sroce1 qp 17 rx-flow others rx 5 pkts 500 bytes"
        );
        assert_eq!(
            others.json(),
            r#"{"dev":"sroce1","qpn":17,"rx_flow":"others","rx_packets":5,"rx_bytes":500}"#
        );
    }
}
