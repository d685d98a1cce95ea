//! Property tests: build -> parse round trips for every valid opcode.

mod common;

use common::{headers_for, packet_parts, valid_opcodes};
use proptest::prelude::*;
use sroce_proto::icrc::{self, IpHeader, ICRC_LEN};
use sroce_proto::packet::{build, packet_len, pad_len};
use sroce_proto::{Bth, Error, Headers, Opcode, Packet, SoftCrc32};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn build_parse_round_trip((headers, payload) in packet_parts()) {
        let mut buf = [0x5Au8; 256];
        let n = build(&headers, &payload, &mut buf).unwrap();
        prop_assert_eq!(n, packet_len(headers.bth.opcode, payload.len()).unwrap());
        prop_assert_eq!(n % 4, 0, "packets are 4-byte aligned");
        prop_assert_eq!(&buf[n - ICRC_LEN..n], &[0u8; ICRC_LEN][..]);

        let p = Packet::parse(&buf[..n]).unwrap();
        let expected = Headers {
            bth: Bth { pad_count: pad_len(payload.len()), ..headers.bth },
            ..headers
        };
        prop_assert_eq!(p.headers, expected);
        prop_assert_eq!(p.payload, &payload[..]);
        prop_assert_eq!(p.icrc, 0);

        // Header-only write agrees with the full build.
        let mut hdr = [0u8; 64];
        let hl = headers.write(payload.len(), &mut hdr).unwrap();
        prop_assert_eq!(hl, headers.bth.opcode.header_len());
        prop_assert_eq!(&hdr[..hl], &buf[..hl]);

        // Parsing the written bytes and writing again is the identity.
        let mut again = [0u8; 256];
        let m = build(&p.headers, p.payload, &mut again).unwrap();
        prop_assert_eq!(&again[..m], &buf[..n]);
    }

    #[test]
    fn every_prefix_is_rejected_cleanly((headers, payload) in packet_parts()) {
        let mut buf = [0u8; 256];
        let n = build(&headers, &payload, &mut buf).unwrap();
        let hl = headers.bth.opcode.header_len();
        for cut in 0..n {
            match Packet::parse(&buf[..cut]) {
                // Only a payload-carrying opcode can lose payload bytes and
                // still be well-formed; never below headers + ICRC.
                Ok(p) => {
                    prop_assert!(headers.bth.opcode.operation().has_payload());
                    prop_assert!(cut >= hl + ICRC_LEN);
                    prop_assert!(p.payload.len() < payload.len().max(1));
                }
                Err(e) => prop_assert!(matches!(e, Error::Truncated | Error::BadPad)),
            }
        }
    }

    #[test]
    fn too_small_output_never_panics((headers, payload) in packet_parts(), cut in 0usize..200) {
        let mut buf = vec![0u8; cut];
        let n = packet_len(headers.bth.opcode, payload.len()).unwrap();
        let r = build(&headers, &payload, &mut buf);
        if cut < n {
            prop_assert_eq!(r, Err(Error::BufferTooSmall));
        } else {
            prop_assert_eq!(r, Ok(n));
        }
    }

    #[test]
    fn icrc_generate_verify(
        (headers, payload) in packet_parts(),
        v6 in any::<bool>(),
        ip4 in common::ipv4_header(),
        ip6 in common::ipv6_header(),
        udp in any::<[u8; 8]>(),
    ) {
        let mut buf = [0u8; 256];
        let n = build(&headers, &payload, &mut buf).unwrap();
        let ip = if v6 { IpHeader::V6(&ip6) } else { IpHeader::V4(&ip4) };
        let value = icrc::generate(SoftCrc32, ip, &udp, &mut buf[..n]).unwrap();
        let ip_bytes: &[u8] = if v6 { &ip6 } else { &ip4 };
        prop_assert_eq!(value, common::reference_icrc(ip_bytes, &udp, &buf[..n - 4]));
        prop_assert_eq!(icrc::verify(SoftCrc32, ip, &udp, &buf[..n]), Ok(()));
        let p = Packet::parse(&buf[..n]).unwrap();
        prop_assert_eq!(p.icrc, value);
        // Any single-bit flip in the covered region or trailer is detected,
        // except in the masked BTH resv8a byte.
        for i in (0..n).filter(|&i| i != 4) {
            let mut bad = buf;
            bad[i] ^= 0x10;
            prop_assert_eq!(icrc::verify(SoftCrc32, ip, &udp, &bad[..n]), Err(Error::BadIcrc));
        }
        let mut ecn = buf;
        ecn[4] ^= 0xC0; // FECN/BECN change in flight
        prop_assert_eq!(icrc::verify(SoftCrc32, ip, &udp, &ecn[..n]), Ok(()));
    }
}

#[test]
fn every_valid_opcode_round_trips_with_fixed_values() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let ops = valid_opcodes();
    assert_eq!(ops.len(), 39);
    for op in ops {
        let headers = headers_for(op).new_tree(&mut runner).unwrap().current();
        let payload: &[u8] = if op.operation().has_payload() {
            b"abcdefg"
        } else {
            b""
        };
        let mut buf = [0u8; 128];
        let n = build(&headers, payload, &mut buf).unwrap();
        let p = Packet::parse(&buf[..n]).unwrap();
        assert_eq!(p.headers.bth.opcode, op);
        assert_eq!(p.payload, payload);
        assert_eq!(Opcode::from_u8(buf[0]), Ok(op));
    }
}
