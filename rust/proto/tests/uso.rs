//! RoCEv2 packets sent as one UDP-segmented datagram: each packet's ICRC,
//! computed over `SegmentHeaders`, is what a receiver of the segment the
//! network stack cuts out computes (an independent `crc32fast` reference
//! over headers rewritten the way Linux's UDP segmentation does).

mod common;

use proptest::prelude::*;
use sroce_proto::icrc::{self, IpHeader};
use sroce_proto::uso::SegmentHeaders;
use sroce_proto::SoftCrc32;

/// What a sender does: packets back to back, each with the ICRC of the
/// segment it will become.
fn build(ip: &[u8], udp: &[u8], packets: &[Vec<u8>]) -> Vec<u8> {
    let hdr = IpHeader::from_bytes(ip).unwrap();
    let mut out = Vec::new();
    for (i, p) in packets.iter().enumerate() {
        let mut t = p.clone();
        t.extend_from_slice(&[0; 4]);
        let s = SegmentHeaders::of(hdr, udp, i as u16, t.len()).unwrap();
        icrc::generate(SoftCrc32, s.ip(), s.udp(), &mut t).unwrap();
        out.extend_from_slice(&t);
    }
    out
}

/// What Linux's `inet_gso_segment()` / `ipv6_gso_segment()` and
/// `__udp_gso_segment()` make of segment `i`: the headers copied, lengths
/// its own, IPv4 ID advanced by `i`, checksums recomputed (anything: the
/// ICRC masks them), plus what routers may change on the way (TTL, TOS).
fn segment(ip: &[u8], udp: &[u8], i: usize, len: usize, junk: u8) -> (Vec<u8>, Vec<u8>) {
    let mut ip = ip.to_vec();
    let mut udp = udp.to_vec();
    let udp_len = (len + 8) as u16;
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6] = junk;
    udp[7] = junk.wrapping_mul(3);
    if ip.len() == 20 {
        let tot = udp_len + 20;
        ip[2..4].copy_from_slice(&tot.to_be_bytes());
        let id = u16::from_be_bytes([ip[4], ip[5]]).wrapping_add(i as u16);
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        ip[8] = ip[8].wrapping_sub(junk);
        ip[10] = junk;
    } else {
        ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
        ip[7] = ip[7].wrapping_sub(junk);
    }
    (ip, udp)
}

fn packets() -> impl Strategy<Value = Vec<Vec<u8>>> {
    // Equal lengths but the last, which may be shorter (what segmentation
    // requires); at least a BTH each.
    (12usize..300, 1usize..20, 0usize..300).prop_flat_map(|(size, n, last)| {
        let last = last.min(size).max(12);
        let mut lens = vec![size; n];
        lens.push(last);
        lens.into_iter()
            .map(|l| prop::collection::vec(any::<u8>(), l))
            .collect::<Vec<_>>()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_segment_has_a_valid_icrc(
        v6 in any::<bool>(),
        ip4 in common::ipv4_header(),
        ip6 in common::ipv6_header(),
        udp in any::<[u8; 8]>(),
        pkts in packets(),
        junk in any::<u8>(),
    ) {
        let ip = if v6 { ip6 } else { ip4 };
        let dgram = build(&ip, &udp, &pkts);
        let mut at = 0;
        for (i, p) in pkts.iter().enumerate() {
            let len = p.len() + 4;
            let t = &dgram[at..at + len];
            at += len;
            let (sip, sudp) = segment(&ip, &udp, i, len, junk);
            let (covered, value) = icrc::split_icrc(t).unwrap();
            prop_assert_eq!(value, common::reference_icrc(&sip, &sudp, covered));
            prop_assert_eq!(covered, &p[..]);
        }
        prop_assert_eq!(at, dgram.len());
    }

    #[test]
    fn a_segment_checked_against_the_datagram_headers_fails(
        ip in common::ipv4_header(),
        udp in any::<[u8; 8]>(),
        pkts in packets(),
    ) {
        // The lengths (and the ID past the first) are covered: the
        // datagram's own headers do not validate a segment of several.
        prop_assume!(pkts.len() > 1);
        let dgram = build(&ip, &udp, &pkts);
        let len = pkts[1].len() + 4;
        let t = &dgram[pkts[0].len() + 4..][..len];
        let (covered, value) = icrc::split_icrc(t).unwrap();
        prop_assert_ne!(value, common::reference_icrc(&ip, &udp, covered));
    }
}
