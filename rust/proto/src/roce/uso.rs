//! RoCEv2 packets sent as one UDP segmentation (USO) datagram.
//!
//! A sender may hand the network stack one UDP datagram whose payload is
//! several whole RoCEv2 transport packets back to back, each `gso_size`
//! bytes (the last may be shorter), marked for UDP segmentation: the stack
//! (or the NIC, or the receiving host's UDP layer) cuts it at those
//! boundaries into ordinary datagrams, so every receiver sees plain RoCEv2.
//! Segment `i` carries copies of the datagram's IP and UDP headers with
//! only the lengths made its own (IPv4 total length, IPv6 payload length,
//! UDP length), the IPv4 identification advanced by `i` (Linux's
//! `inet_gso_segment()` without the fixed-ID flag, and what NICs do), and
//! its own UDP checksum.
//!
//! The ICRC covers the IPv4 total length and identification and the UDP
//! length, so each packet's ICRC must be computed over the headers its
//! segment will carry, before any of it is sent: [`SegmentHeaders`] builds
//! them. Every other field the ICRC covers is the same in all segments;
//! the checksums are masked.

use super::error::Error;
use super::icrc::{IpHeader, IPV4_HEADER_LEN, IPV6_HEADER_LEN, UDP_HEADER_LEN};

/// The IP and UDP headers one segment of a segmented datagram carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeaders {
    ip: [u8; IPV6_HEADER_LEN],
    v6: bool,
    udp: [u8; UDP_HEADER_LEN],
}

impl SegmentHeaders {
    /// The headers of segment `index` (from 0), whose UDP payload (one
    /// transport packet, ICRC included) is `payload_len` bytes, of the
    /// datagram with headers `ip` (IPv4 without options, or IPv6 without
    /// extension headers) and `udp`.
    ///
    /// Fails with [`Error::BadIpHeader`], [`Error::BadUdpHeader`], or
    /// [`Error::BufferTooSmall`] if the segment's lengths do not fit their
    /// fields.
    pub fn of(ip: IpHeader<'_>, udp: &[u8], index: u16, payload_len: usize) -> Result<Self, Error> {
        let mut udp: [u8; UDP_HEADER_LEN] = udp.try_into().map_err(|_| Error::BadUdpHeader)?;
        let udp_len = payload_len
            .checked_add(UDP_HEADER_LEN)
            .and_then(|n| u16::try_from(n).ok())
            .ok_or(Error::BufferTooSmall)?;
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        let mut out = [0u8; IPV6_HEADER_LEN];
        let v6 = match ip {
            IpHeader::V4(h) => {
                let h: [u8; IPV4_HEADER_LEN] = h.try_into().map_err(|_| Error::BadIpHeader)?;
                if h[0] != 0x45 {
                    return Err(Error::BadIpHeader);
                }
                let total = usize::from(udp_len)
                    .checked_add(IPV4_HEADER_LEN)
                    .and_then(|n| u16::try_from(n).ok())
                    .ok_or(Error::BufferTooSmall)?;
                let id = u16::from_be_bytes([h[4], h[5]]).wrapping_add(index);
                out[..IPV4_HEADER_LEN].copy_from_slice(&h);
                out[2..4].copy_from_slice(&total.to_be_bytes());
                out[4..6].copy_from_slice(&id.to_be_bytes());
                false
            }
            IpHeader::V6(h) => {
                let h: [u8; IPV6_HEADER_LEN] = h.try_into().map_err(|_| Error::BadIpHeader)?;
                if h[0] >> 4 != 6 {
                    return Err(Error::BadIpHeader);
                }
                out.copy_from_slice(&h);
                out[4..6].copy_from_slice(&udp_len.to_be_bytes());
                true
            }
        };
        Ok(Self { ip: out, v6, udp })
    }

    /// The segment's IP header.
    pub fn ip(&self) -> IpHeader<'_> {
        if self.v6 {
            IpHeader::V6(&self.ip)
        } else {
            IpHeader::V4(&self.ip[..IPV4_HEADER_LEN])
        }
    }

    /// The segment's UDP header (the datagram's checksum field unchanged:
    /// the ICRC masks it).
    pub fn udp(&self) -> &[u8] {
        &self.udp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4() -> [u8; 20] {
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&3000u16.to_be_bytes());
        h[4..6].copy_from_slice(&0xfffeu16.to_be_bytes());
        h[6] = 0x40;
        h[8] = 64;
        h[9] = 17;
        h
    }

    #[test]
    fn ipv4_lengths_and_id() {
        let ip = v4();
        let udp = [0xc0, 0, 0x12, 0xb7, 0x0b, 0xa4, 0x12, 0x34];
        let s = SegmentHeaders::of(IpHeader::V4(&ip), &udp, 3, 1040).unwrap();
        let IpHeader::V4(h) = s.ip() else { panic!() };
        assert_eq!(u16::from_be_bytes([h[2], h[3]]), 20 + 8 + 1040);
        assert_eq!(u16::from_be_bytes([h[4], h[5]]), 1); // 0xfffe + 3 wraps
        assert_eq!(&h[6..], &ip[6..]);
        assert_eq!(u16::from_be_bytes([s.udp()[4], s.udp()[5]]), 8 + 1040);
        assert_eq!(&s.udp()[..4], &udp[..4]);
    }

    #[test]
    fn ipv6_payload_length() {
        let mut ip = [0u8; 40];
        ip[0] = 0x60;
        ip[6] = 17;
        ip[8] = 0xfe;
        let s = SegmentHeaders::of(IpHeader::V6(&ip), &[0; 8], 9, 100).unwrap();
        let IpHeader::V6(h) = s.ip() else { panic!() };
        assert_eq!(u16::from_be_bytes([h[4], h[5]]), 108);
        assert_eq!(h[8], 0xfe);
    }

    #[test]
    fn refuses_bad_headers_and_lengths() {
        let mut ip = v4();
        assert_eq!(
            SegmentHeaders::of(IpHeader::V4(&ip), &[0; 8], 0, 65_600),
            Err(Error::BufferTooSmall)
        );
        ip[0] = 0x46;
        assert_eq!(
            SegmentHeaders::of(IpHeader::V4(&ip), &[0; 8], 0, 10),
            Err(Error::BadIpHeader)
        );
        assert_eq!(
            SegmentHeaders::of(IpHeader::V4(&v4()), &[0; 7], 0, 10),
            Err(Error::BadUdpHeader)
        );
    }
}
