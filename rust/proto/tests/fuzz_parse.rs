//! Property tests: parsers and ICRC helpers never panic on arbitrary input.

mod common;

use common::packet_parts;
use proptest::prelude::*;
use sroce_proto::icrc::{self, IpHeader};
use sroce_proto::packet::build;
use sroce_proto::{
    Aeth, AtomicAckEth, AtomicEth, Bth, Deth, Feth, Headers, Ieth, ImmDt, Packet, Reth, SoftCrc32,
};

fn parse_everything(data: &[u8]) {
    let _ = Packet::parse(data);
    let _ = Headers::parse(data);
    let _ = Bth::parse(data);
    let _ = Deth::parse(data);
    let _ = Feth::parse(data);
    let _ = Reth::parse(data);
    let _ = AtomicEth::parse(data);
    let _ = Aeth::parse(data);
    let _ = AtomicAckEth::parse(data);
    let _ = ImmDt::parse(data);
    let _ = Ieth::parse(data);
    let _ = icrc::split_icrc(data);
}

/// Whatever `Packet::parse` accepts is self-consistent.
fn check_accepted(data: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(p) = Packet::parse(data) {
        let op = p.headers.bth.opcode;
        prop_assert!(op.is_valid());
        let hl = op.header_len();
        let pad = usize::from(p.headers.bth.pad_count);
        prop_assert_eq!(hl + p.payload.len() + pad + 4, data.len());
        prop_assert_eq!(p.payload, &data[hl..hl + p.payload.len()]);
        if !op.operation().has_payload() {
            prop_assert_eq!(data.len(), hl + 4);
        }
        for h in sroce_proto::ExtHeader::WIRE_ORDER {
            prop_assert_eq!(p.headers.has(h), op.ext_headers().contains(h));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..128)) {
        parse_everything(&data);
        check_accepted(&data)?;
    }

    /// Arbitrary bytes behind a plausible BTH (version 0, any opcode), so
    /// the extension header and pad logic is reached often.
    #[test]
    fn arbitrary_after_bth(
        opcode in any::<u8>(),
        flags in any::<u8>(),
        data in prop::collection::vec(any::<u8>(), 10..100),
    ) {
        let mut v = vec![opcode, flags & 0xF0];
        v.extend_from_slice(&data);
        parse_everything(&v);
        check_accepted(&v)?;
    }

    /// Valid packets with random byte corruptions and truncations.
    #[test]
    fn mutated_valid_packets(
        (headers, payload) in packet_parts(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut buf = [0u8; 256];
        let n = build(&headers, &payload, &mut buf).unwrap();
        for (i, b) in &edits {
            buf[i.index(n)] = *b;
        }
        let len = cut.index(n + 1);
        parse_everything(&buf[..len]);
        check_accepted(&buf[..len])?;
    }

    #[test]
    fn icrc_never_panics(
        ip in prop::collection::vec(any::<u8>(), 0..64),
        udp in prop::collection::vec(any::<u8>(), 0..12),
        transport in prop::collection::vec(any::<u8>(), 0..64),
        chunks in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
    ) {
        if let Ok(h) = IpHeader::from_bytes(&ip) {
            let _ = icrc::compute(SoftCrc32, h, &udp, &transport);
            let _ = icrc::verify(SoftCrc32, h, &udp, &transport);
            let mut t = transport.clone();
            let _ = icrc::generate(SoftCrc32, h, &udp, &mut t);
            if let Ok(mut c) = icrc::Icrc::new(SoftCrc32, h, &udp) {
                let mut cuts: Vec<usize> = chunks.iter().map(|i| i.index(transport.len() + 1)).collect();
                cuts.sort_unstable();
                let mut at = 0;
                for cut in cuts {
                    c.update(&transport[at..cut]);
                    at = cut;
                }
                c.update(&transport[at..]);
                let whole = icrc::compute(SoftCrc32, h, &udp, &transport);
                prop_assert_eq!(c.finish(), whole);
            }
        }
        let _ = icrc::compute(SoftCrc32, IpHeader::V4(&ip), &udp, &transport);
        let _ = icrc::compute(SoftCrc32, IpHeader::V6(&ip), &udp, &transport);
    }
}
