//! ICRC masking: variant fields do not affect the ICRC, everything else
//! does; cross-checked against an independent `crc32fast` reference.

mod common;

use proptest::prelude::*;
use sroce_proto::icrc::{self, IpHeader};
use sroce_proto::SoftCrc32;

fn transport() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 12..80)
}

fn hdr(v6: bool, ip: &[u8]) -> IpHeader<'_> {
    if v6 {
        IpHeader::V6(ip)
    } else {
        IpHeader::V4(ip)
    }
}

const V4_MASKED: [usize; 4] = [1, 8, 10, 11];
const V6_MASKED: [usize; 4] = [1, 2, 3, 7];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn ipv4_matches_reference(ip in common::ipv4_header(), udp in any::<[u8; 8]>(), t in transport()) {
        let v = icrc::icrc_ipv4(SoftCrc32, &ip, &udp, &t).unwrap();
        prop_assert_eq!(v, common::reference_icrc(&ip, &udp, &t));
    }

    #[test]
    fn ipv6_matches_reference(ip in common::ipv6_header(), udp in any::<[u8; 8]>(), t in transport()) {
        let v = icrc::icrc_ipv6(SoftCrc32, &ip, &udp, &t).unwrap();
        prop_assert_eq!(v, common::reference_icrc(&ip, &udp, &t));
    }

    #[test]
    fn ipv4_masked_fields_ignored(
        ip in common::ipv4_header(),
        udp in any::<[u8; 8]>(),
        t in transport(),
        junk in any::<[u8; 8]>(),
    ) {
        let base = icrc::icrc_ipv4(SoftCrc32, &ip, &udp, &t).unwrap();
        let mut ip2 = ip.clone();
        for (i, j) in V4_MASKED.iter().zip(junk) {
            ip2[*i] = j;
        }
        let mut udp2 = udp;
        udp2[6] = junk[4];
        udp2[7] = junk[5];
        let mut t2 = t.clone();
        t2[4] = junk[6];
        prop_assert_eq!(icrc::icrc_ipv4(SoftCrc32, &ip2, &udp2, &t2).unwrap(), base);
    }

    #[test]
    fn ipv6_masked_fields_ignored(
        ip in common::ipv6_header(),
        udp in any::<[u8; 8]>(),
        t in transport(),
        junk in any::<[u8; 8]>(),
    ) {
        let base = icrc::icrc_ipv6(SoftCrc32, &ip, &udp, &t).unwrap();
        let mut ip2 = ip.clone();
        ip2[0] = 0x60 | (junk[7] & 0x0F); // traffic class high nibble
        for (i, j) in V6_MASKED.iter().zip(junk) {
            ip2[*i] = j;
        }
        let mut udp2 = udp;
        udp2[6] = junk[4];
        udp2[7] = junk[5];
        let mut t2 = t.clone();
        t2[4] = junk[6];
        prop_assert_eq!(icrc::icrc_ipv6(SoftCrc32, &ip2, &udp2, &t2).unwrap(), base);
    }

    #[test]
    fn unmasked_fields_matter(
        v6 in any::<bool>(),
        ip4 in common::ipv4_header(),
        ip6 in common::ipv6_header(),
        udp in any::<[u8; 8]>(),
        t in transport(),
        flip in 1u8..=255,
    ) {
        let (ip, masked): (&[u8], &[usize]) = if v6 { (&ip6, &V6_MASKED) } else { (&ip4, &V4_MASKED) };
        let base = icrc::compute(SoftCrc32, hdr(v6, ip), &udp, &t).unwrap();
        // Byte 0 holds the version (and for IPv6 masked TC bits): skip it.
        for i in (1..ip.len()).filter(|i| !masked.contains(i)) {
            let mut ip2 = ip.to_vec();
            ip2[i] ^= flip;
            prop_assert_ne!(icrc::compute(SoftCrc32, hdr(v6, &ip2), &udp, &t).unwrap(), base, "ip byte {}", i);
        }
        for i in 0..6 {
            let mut udp2 = udp;
            udp2[i] ^= flip;
            prop_assert_ne!(icrc::compute(SoftCrc32, hdr(v6, ip), &udp2, &t).unwrap(), base, "udp byte {}", i);
        }
        for i in (0..t.len()).filter(|&i| i != 4) {
            let mut t2 = t.clone();
            t2[i] ^= flip;
            prop_assert_ne!(icrc::compute(SoftCrc32, hdr(v6, ip), &udp, &t2).unwrap(), base, "transport byte {}", i);
        }
    }
}

/// scapy's RoCE example (UC SEND Only over IPv4), whose expected trailer is
/// `78 f3 53 f3`: full headers given, ICRC recomputed.
#[test]
fn known_answer_scapy_uc_send_only() {
    let ip = [
        0x45, 0x01, 0x00, 0x40, 0x04, 0x78, 0x40, 0x00, 0x40, 0x11, 0xb4, 0xd5, 0xc0, 0xa8, 0x00,
        0x07, 0xc0, 0xa8, 0x00, 0x07,
    ];
    let udp = [0xc0, 0x00, 0x12, 0xb7, 0x00, 0x2c, 0xac, 0xa2];
    let transport = [
        0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10, 0x46, 0x30, 0x81,
        0x8b, 0xe2, 0x89, 0x35, 0xd9, 0x0e, 0x9a, 0x95, 0x50, 0x54, 0x01, 0xbe, 0x88, 0x5e, 0x50,
        0x00, 0x00, 0x78, 0xf3, 0x53, 0xf3,
    ];
    assert_eq!(
        icrc::verify(SoftCrc32, IpHeader::V4(&ip), &udp, &transport),
        Ok(())
    );
    let (covered, v) = icrc::split_icrc(&transport).unwrap();
    assert_eq!(icrc::icrc_ipv4(SoftCrc32, &ip, &udp, covered), Ok(v));
    assert_eq!(v.to_le_bytes(), [0x78, 0xf3, 0x53, 0xf3]);
}
