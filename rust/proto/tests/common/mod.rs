//! Shared proptest strategies and a seeded generator (included with
//! `mod common;`).
#![allow(dead_code)]

use proptest::prelude::*;
use sroce_proto::aeth::{NakCode, Syndrome};
use sroce_proto::{
    Aeth, AtomicAckEth, AtomicEth, Bth, Deth, ExtHeader, Feth, Headers, Ieth, ImmDt, Opcode, Psn,
    Reth,
};

pub fn valid_opcodes() -> Vec<Opcode> {
    Opcode::all_valid().collect()
}

pub fn syndrome() -> impl Strategy<Value = Syndrome> {
    prop_oneof![
        (0u8..32).prop_map(|credits| Syndrome::Ack { credits }),
        (0u8..32).prop_map(|timer| Syndrome::RnrNak { timer }),
        prop::sample::select(vec![
            NakCode::PsnSequenceError,
            NakCode::InvalidRequest,
            NakCode::RemoteAccessError,
            NakCode::RemoteOperationalError,
            NakCode::InvalidRdRequest,
        ])
        .prop_map(Syndrome::Nak),
        // Reserved encodings: type 10, reserved bit, reserved NAK codes.
        prop_oneof![0x40u8..0x60, 0x80u8..=0xff, 0x65u8..0x80].prop_map(Syndrome::Reserved),
    ]
}

prop_compose! {
    pub fn bth_for(opcode: Opcode)(
        solicited in any::<bool>(),
        mig_req in any::<bool>(),
        pkey in any::<u16>(),
        fecn in any::<bool>(),
        becn in any::<bool>(),
        dest_qp in 0u32..(1 << 24),
        ack_req in any::<bool>(),
        psn in 0u32..(1 << 24),
    ) -> Bth {
        Bth {
            opcode,
            solicited,
            mig_req,
            pad_count: 0,
            pkey,
            fecn,
            becn,
            dest_qp,
            ack_req,
            psn: Psn::new(psn),
        }
    }
}

prop_compose! {
    /// Headers for `opcode` with exactly the extension headers it needs.
    pub fn headers_for(opcode: Opcode)(
        bth in bth_for(opcode),
        deth in (any::<u32>(), 0u32..(1 << 24)).prop_map(|(qkey, src_qp)| Deth { qkey, src_qp }),
        feth in (0u8..16, 0u8..4).prop_map(|(placement_type, selectivity_level)| Feth {
            placement_type,
            selectivity_level,
        }),
        reth in (any::<u64>(), any::<u32>(), any::<u32>())
            .prop_map(|(va, rkey, dma_len)| Reth { va, rkey, dma_len }),
        atomic in (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
            |(va, rkey, swap_add, compare)| AtomicEth { va, rkey, swap_add, compare }
        ),
        aeth in (syndrome(), 0u32..(1 << 24)).prop_map(|(syndrome, msn)| Aeth { syndrome, msn }),
        ack in any::<u64>().prop_map(|orig| AtomicAckEth { orig }),
        imm in any::<[u8; 4]>().prop_map(ImmDt),
        ieth in any::<u32>().prop_map(|rkey| Ieth { rkey }),
    ) -> Headers {
        let need = opcode.ext_headers();
        let pick = |h: ExtHeader| need.contains(h);
        Headers {
            bth,
            deth: pick(ExtHeader::Deth).then_some(deth),
            feth: pick(ExtHeader::Feth).then_some(feth),
            reth: pick(ExtHeader::Reth).then_some(reth),
            atomic_eth: pick(ExtHeader::AtomicEth).then_some(atomic),
            aeth: pick(ExtHeader::Aeth).then_some(aeth),
            atomic_ack_eth: pick(ExtHeader::AtomicAckEth).then_some(ack),
            immdt: pick(ExtHeader::ImmDt).then_some(imm),
            ieth: pick(ExtHeader::Ieth).then_some(ieth),
        }
    }
}

/// Any valid opcode with matching headers and a payload it may carry.
pub fn packet_parts() -> impl Strategy<Value = (Headers, Vec<u8>)> {
    prop::sample::select(valid_opcodes()).prop_flat_map(|op| {
        let max = if op.operation().has_payload() { 80 } else { 0 };
        (headers_for(op), prop::collection::vec(any::<u8>(), 0..=max))
    })
}

/// A plausible IPv4 header (version 4, IHL 5, random other fields).
pub fn ipv4_header() -> impl Strategy<Value = Vec<u8>> {
    any::<[u8; 19]>().prop_map(|rest| {
        let mut h = vec![0x45];
        h.extend_from_slice(&rest);
        h
    })
}

/// A plausible IPv6 header (version 6, random other fields).
pub fn ipv6_header() -> impl Strategy<Value = Vec<u8>> {
    (0u8..16, any::<[u8; 39]>()).prop_map(|(tc_hi, rest)| {
        let mut h = vec![0x60 | tc_hi];
        h.extend_from_slice(&rest);
        h
    })
}

/// Independent reference ICRC straight from the spec text, using the
/// `crc32fast` crate: CRC-32 of 8 x 0xFF, the masked IP, UDP and BTH
/// headers and the rest of the packet (trailer excluded).
pub fn reference_icrc(ip: &[u8], udp: &[u8], transport: &[u8]) -> u32 {
    let mut pseudo = vec![0xFFu8; 8];
    let mut ip = ip.to_vec();
    match ip.len() {
        20 => {
            ip[1] = 0xFF; // TOS
            ip[8] = 0xFF; // TTL
            ip[10] = 0xFF; // checksum
            ip[11] = 0xFF;
        }
        40 => {
            ip[0] |= 0x0F; // traffic class
            ip[1] = 0xFF; // traffic class + flow label
            ip[2] = 0xFF;
            ip[3] = 0xFF;
            ip[7] = 0xFF; // hop limit
        }
        _ => panic!("bad ip header"),
    }
    pseudo.extend_from_slice(&ip);
    pseudo.extend_from_slice(&udp[..6]);
    pseudo.extend_from_slice(&[0xFF, 0xFF]); // UDP checksum
    let mut t = transport.to_vec();
    t[4] = 0xFF; // BTH resv8a (FECN/BECN)
    pseudo.extend_from_slice(&t);
    crc32fast::hash(&pseudo)
}

/// SplitMix64: a small seeded generator for reproducible simulations.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True `per_mille` times in 1000.
    pub fn chance(&mut self, per_mille: u32) -> bool {
        self.below(1000) < u64::from(per_mille)
    }
}
