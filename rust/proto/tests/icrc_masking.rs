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

/// A RoCE v1 GRH (IPVer 6, NxtHdr 0x1B) with arbitrary other fields.
fn grh() -> impl Strategy<Value = Vec<u8>> {
    common::ipv6_header().prop_map(|mut h| {
        h[6] = 0x1B;
        h
    })
}

/// Independent RoCE v1 reference from annex A16: CRC-32 of 8 x 0xFF (the
/// masked LRH), the GRH with traffic class, flow label and hop limit set
/// to ones, the BTH with resv8a set to ones, and the rest.
fn reference_roce_v1(grh: &[u8], transport: &[u8]) -> u32 {
    let mut pseudo = vec![0xFFu8; 8];
    let mut g = grh.to_vec();
    g[0] |= 0x0F;
    g[1] = 0xFF;
    g[2] = 0xFF;
    g[3] = 0xFF;
    g[7] = 0xFF;
    pseudo.extend_from_slice(&g);
    let mut t = transport.to_vec();
    t[4] = 0xFF;
    pseudo.extend_from_slice(&t);
    crc32fast::hash(&pseudo)
}

fn roce_v1(grh: &[u8], transport: &[u8]) -> u32 {
    let mut c = icrc::Icrc::new_roce_v1(SoftCrc32, grh).unwrap();
    c.update(transport);
    c.finish().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn roce_v1_matches_reference(g in grh(), t in transport(), cut in 0usize..80) {
        prop_assert_eq!(roce_v1(&g, &t), reference_roce_v1(&g, &t));
        // Fed in two pieces, wherever the cut falls (resv8a included).
        let cut = cut.min(t.len());
        let mut c = icrc::Icrc::new_roce_v1(SoftCrc32, &g).unwrap();
        c.update(&t[..cut]);
        c.update(&t[cut..]);
        prop_assert_eq!(c.finish().unwrap(), reference_roce_v1(&g, &t));
    }

    #[test]
    fn roce_v1_masked_fields_ignored(g in grh(), t in transport(), junk in any::<[u8; 6]>()) {
        let base = roce_v1(&g, &t);
        let mut g2 = g.clone();
        g2[0] = 0x60 | (junk[0] & 0x0F);
        for (i, j) in V6_MASKED.iter().zip(&junk[1..]) {
            g2[*i] = *j;
        }
        let mut t2 = t.clone();
        t2[4] = junk[5];
        prop_assert_eq!(roce_v1(&g2, &t2), base);
    }

    #[test]
    fn roce_v1_unmasked_fields_matter(g in grh(), t in transport(), flip in 1u8..=255) {
        let base = roce_v1(&g, &t);
        // Payload length and the GIDs (NxtHdr and IPVer are fixed).
        for i in (4..6).chain(8..40) {
            let mut g2 = g.clone();
            g2[i] ^= flip;
            prop_assert_ne!(roce_v1(&g2, &t), base, "GRH byte {}", i);
        }
        for i in (0..t.len()).filter(|&i| i != 4) {
            let mut t2 = t.clone();
            t2[i] ^= flip;
            prop_assert_ne!(roce_v1(&g, &t2), base, "transport byte {}", i);
        }
    }

}

#[test]
fn roce_v1_refuses_other_headers() {
    let mut g = [0u8; 40];
    g[0] = 0x60;
    g[6] = 17;
    assert_eq!(
        icrc::Icrc::new_roce_v1(SoftCrc32, &g).err(),
        Some(sroce_proto::Error::BadGrh)
    );
    g[6] = 0x1B;
    assert!(icrc::Icrc::new_roce_v1(SoftCrc32, &g).is_ok());
    assert_eq!(
        icrc::Icrc::new_roce_v1(SoftCrc32, &g[..39]).err(),
        Some(sroce_proto::Error::Truncated)
    );
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
