// SPDX-License-Identifier: GPL-2.0

//! Node GUIDs derived from MAC addresses.

/// The modified EUI-64 of a MAC address (RFC 4291 appendix A): the
/// universal/local bit flipped and `ff:fe` inserted in the middle. The same
/// rule IPv6 link-local addresses and rxe use, so GUIDs are unique per NIC
/// and recognisable. Returned in wire (big-endian) byte order.
pub(crate) fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}
