//! The RoCEv2 invariant CRC (ICRC).
//!
//! The ICRC is the IEEE 802.3 CRC-32 (reflected polynomial 0xEDB88320, seed
//! all ones, final inversion: the function Linux computes as
//! `~crc32_le(~0, ...)`) over a pseudo packet made of:
//!
//! 1. 8 bytes of 0xFF standing for the masked InfiniBand LRH (folded into
//!    [`ICRC_SEED`]);
//! 2. the IP header with its variant fields set to all ones: IPv4 TOS
//!    (DSCP+ECN), TTL and header checksum; IPv6 traffic class, flow label
//!    and hop limit;
//! 3. the UDP header with its checksum set to all ones;
//! 4. the BTH with its resv8a byte (RoCEv2 FECN/BECN, byte 4) set to all
//!    ones;
//! 5. the rest of the transport packet (extension headers, payload, pad) up
//!    to, not including, the 4-byte ICRC trailer.
//!
//! This is the masking of IBTA annex A17 as implemented by Linux rxe
//! (`rxe_icrc.c`) and by scapy's RoCE layer.
//!
//! RoCE v1 (annex A16, no IP or UDP header) is the native InfiniBand ICRC
//! with the LRH masked: items 1, 4 and 5 with the GRH in place of items 2
//! and 3, its traffic class, flow label and hop limit masked exactly like
//! the same fields of an IPv6 header ([`Icrc::new_roce_v1`]).
//!
//! # Byte order
//!
//! Unlike every other RoCE field, the ICRC is **little-endian** on the
//! wire: the inverted CRC register is stored with its least significant
//! byte first (the Ethernet FCS convention). The spec defines ICRC
//! transmission in terms of polynomial coefficients (x^31 first), which
//! with the reflected bit mapping is exactly a `__le32`. Linux rxe stores
//! `cpu_to_le32(~crc)` (since the 2025 fix "RDMA/rxe: handle ICRC correctly
//! on big endian systems"; before it rxe stored the CPU-native value, i.e.
//! the same bytes on x86), and a ConnectX-4 Lx capture (bytes `82 fd 00 2a`
//! for CRC value 0x2A00FD82) confirms it; see the known-answer tests. Use
//! [`put_icrc`] / [`split_icrc`], which handle this.
//!
//! # Engine
//!
//! The CRC itself is computed by a [`Crc32`] engine so the kernel can use
//! its (possibly accelerated) `crc32_le()`; [`SoftCrc32`] is a portable
//! software engine.
//!
//! [`SoftCrc32`]: super::soft_crc32::SoftCrc32

use super::bth::{BTH_LEN, BTH_RESV8A_OFFSET};
use super::error::Error;
use super::soft_crc32;

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// Length of an IPv4 header without options (the only IPv4 form accepted).
pub const IPV4_HEADER_LEN: usize = 20;

/// Length of the fixed IPv6 header (extension headers are not supported).
pub const IPV6_HEADER_LEN: usize = 40;

/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;

/// CRC register after the all-ones seed and the 8 all-ones bytes of the
/// masked pseudo LRH: every ICRC computation starts from this value.
pub const ICRC_SEED: u32 = soft_crc32::update_bitwise(!0, &[0xFF; 8]);

// The constant Linux rxe hard-codes for the same thing.
const _: () = assert!(ICRC_SEED == 0xDEBB_20E3);

/// A CRC-32 engine: the reflected IEEE polynomial 0xEDB88320, updated
/// without any inversion, exactly like Linux `crc32_le(crc, data, len)`.
///
/// The kernel driver implements this with the kernel's `crc32_le()`; the
/// host uses [`SoftCrc32`](super::soft_crc32::SoftCrc32).
pub trait Crc32 {
    /// Feeds `data` into the CRC register `crc` and returns the new
    /// register value (no seed handling, no final inversion).
    fn update(&mut self, crc: u32, data: &[u8]) -> u32;
}

impl<C: Crc32 + ?Sized> Crc32 for &mut C {
    fn update(&mut self, crc: u32, data: &[u8]) -> u32 {
        (**self).update(crc, data)
    }
}

/// The IP header of a RoCEv2 packet, as it is on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpHeader<'a> {
    /// An IPv4 header; must be exactly 20 bytes (IHL 5, no options).
    V4(&'a [u8]),
    /// A fixed IPv6 header; must be exactly 40 bytes.
    V6(&'a [u8]),
}

impl<'a> IpHeader<'a> {
    /// Classifies `ip` by its version nibble (4 or 6). Lengths are checked
    /// later, when the header is fed into an [`Icrc`].
    pub fn from_bytes(ip: &'a [u8]) -> Result<Self, Error> {
        match ip.first().map(|b| b >> 4) {
            Some(4) => Ok(IpHeader::V4(ip)),
            Some(6) => Ok(IpHeader::V6(ip)),
            _ => Err(Error::BadIpHeader),
        }
    }
}

/// Masks the variant fields of an IPv4 header (TOS, TTL, checksum).
fn masked_ipv4(ip: &[u8]) -> Result<[u8; IPV4_HEADER_LEN], Error> {
    let h: [u8; IPV4_HEADER_LEN] = ip.try_into().map_err(|_| Error::BadIpHeader)?;
    // Version 4, IHL 5 (20 bytes, no options).
    if h[0] != 0x45 {
        return Err(Error::BadIpHeader);
    }
    let mut m = h;
    m[1] = 0xFF; // TOS: DSCP + ECN
    m[8] = 0xFF; // TTL
    m[10] = 0xFF; // header checksum
    m[11] = 0xFF;
    Ok(m)
}

/// Masks the variant fields of an IPv6 header (traffic class, flow label,
/// hop limit).
fn masked_ipv6(ip: &[u8]) -> Result<[u8; IPV6_HEADER_LEN], Error> {
    let h: [u8; IPV6_HEADER_LEN] = ip.try_into().map_err(|_| Error::BadIpHeader)?;
    if h[0] >> 4 != 6 {
        return Err(Error::BadIpHeader);
    }
    let mut m = h;
    m[0] |= 0x0F; // traffic class, high nibble
    m[1] = 0xFF; // traffic class low nibble, flow label
    m[2] = 0xFF; // flow label
    m[3] = 0xFF; // flow label
    m[7] = 0xFF; // hop limit
    Ok(m)
}

/// Masks the UDP checksum.
fn masked_udp(udp: &[u8]) -> Result<[u8; UDP_HEADER_LEN], Error> {
    let mut m: [u8; UDP_HEADER_LEN] = udp.try_into().map_err(|_| Error::BadUdpHeader)?;
    m[6] = 0xFF;
    m[7] = 0xFF;
    Ok(m)
}

/// An ICRC computation in progress.
///
/// Create it with the IP and UDP headers, feed it the transport packet
/// (BTH onward, excluding the ICRC trailer) with [`Icrc::update`] in as
/// many pieces as convenient (e.g. skb fragments), then [`Icrc::finish`].
/// The BTH resv8a byte is masked automatically wherever it falls.
#[derive(Debug)]
pub struct Icrc<C: Crc32> {
    engine: C,
    crc: u32,
    /// Transport bytes fed so far (saturating).
    fed: usize,
}

impl<C: Crc32> Icrc<C> {
    /// Starts an ICRC over the given IP and UDP headers.
    ///
    /// Fails with [`Error::BadIpHeader`] or [`Error::BadUdpHeader`].
    pub fn new(mut engine: C, ip: IpHeader<'_>, udp: &[u8]) -> Result<Self, Error> {
        let udp = masked_udp(udp)?;
        let crc = match ip {
            IpHeader::V4(h) => engine.update(ICRC_SEED, &masked_ipv4(h)?),
            IpHeader::V6(h) => engine.update(ICRC_SEED, &masked_ipv6(h)?),
        };
        let crc = engine.update(crc, &udp);
        Ok(Icrc {
            engine,
            crc,
            fed: 0,
        })
    }

    /// Starts a RoCE v1 ICRC over the packet's GRH (40 bytes, IPVer 6,
    /// NxtHdr 0x1B; else [`Error::BadGrh`]).
    pub fn new_roce_v1(mut engine: C, grh: &[u8]) -> Result<Self, Error> {
        super::grh::Grh::parse(grh)?;
        let masked = masked_ipv6(grh).map_err(|_| Error::BadGrh)?;
        let crc = engine.update(ICRC_SEED, &masked);
        Ok(Icrc {
            engine,
            crc,
            fed: 0,
        })
    }

    /// Feeds the next piece of the transport packet.
    pub fn update(&mut self, data: &[u8]) {
        let start = self.fed;
        self.fed = self.fed.saturating_add(data.len());
        // Does this piece contain the BTH resv8a byte?
        let split = BTH_RESV8A_OFFSET
            .checked_sub(start)
            .and_then(|at| data.split_at_checked(at));
        match split {
            Some((head, [_, tail @ ..])) => {
                self.crc = self.engine.update(self.crc, head);
                self.crc = self.engine.update(self.crc, &[0xFF]);
                self.crc = self.engine.update(self.crc, tail);
            }
            _ => self.crc = self.engine.update(self.crc, data),
        }
    }

    /// Finishes and returns the ICRC value (already inverted). Store it
    /// with [`put_icrc`] (little-endian).
    ///
    /// Fails with [`Error::Truncated`] if less than a whole BTH was fed.
    pub fn finish(self) -> Result<u32, Error> {
        if self.fed < BTH_LEN {
            return Err(Error::Truncated);
        }
        Ok(!self.crc)
    }
}

/// Computes the ICRC of a packet: `transport` is the UDP payload from the
/// BTH up to, not including, the ICRC trailer.
pub fn compute<C: Crc32>(
    engine: C,
    ip: IpHeader<'_>,
    udp: &[u8],
    transport: &[u8],
) -> Result<u32, Error> {
    let mut icrc = Icrc::new(engine, ip, udp)?;
    icrc.update(transport);
    icrc.finish()
}

/// [`compute`] for an IPv4 packet.
pub fn icrc_ipv4<C: Crc32>(
    engine: C,
    ip_header: &[u8],
    udp_header: &[u8],
    transport: &[u8],
) -> Result<u32, Error> {
    compute(engine, IpHeader::V4(ip_header), udp_header, transport)
}

/// [`compute`] for an IPv6 packet.
pub fn icrc_ipv6<C: Crc32>(
    engine: C,
    ip_header: &[u8],
    udp_header: &[u8],
    transport: &[u8],
) -> Result<u32, Error> {
    compute(engine, IpHeader::V6(ip_header), udp_header, transport)
}

/// Splits the ICRC trailer off a whole transport packet (the UDP payload),
/// returning the covered bytes and the ICRC value read little-endian.
pub fn split_icrc(transport_with_icrc: &[u8]) -> Result<(&[u8], u32), Error> {
    let (covered, trailer) = transport_with_icrc
        .split_last_chunk::<ICRC_LEN>()
        .ok_or(Error::Truncated)?;
    Ok((covered, u32::from_le_bytes(*trailer)))
}

/// Stores `icrc` little-endian in the last [`ICRC_LEN`] bytes of
/// `transport_with_icrc` (the whole UDP payload, trailer included).
pub fn put_icrc(transport_with_icrc: &mut [u8], icrc: u32) -> Result<(), Error> {
    let trailer = transport_with_icrc
        .last_chunk_mut::<ICRC_LEN>()
        .ok_or(Error::BufferTooSmall)?;
    *trailer = icrc.to_le_bytes();
    Ok(())
}

/// Computes the ICRC of a whole transport packet (trailer included) and
/// compares it with the trailer; fails with [`Error::BadIcrc`] on mismatch.
pub fn verify<C: Crc32>(
    engine: C,
    ip: IpHeader<'_>,
    udp: &[u8],
    transport_with_icrc: &[u8],
) -> Result<(), Error> {
    let (covered, expected) = split_icrc(transport_with_icrc)?;
    if compute(engine, ip, udp, covered)? == expected {
        Ok(())
    } else {
        Err(Error::BadIcrc)
    }
}

/// Computes the ICRC over a transport packet whose last [`ICRC_LEN`] bytes
/// are the (reserved) trailer, and stores it there.
pub fn generate<C: Crc32>(
    engine: C,
    ip: IpHeader<'_>,
    udp: &[u8],
    transport_with_icrc: &mut [u8],
) -> Result<u32, Error> {
    let (covered, _) = split_icrc(transport_with_icrc)?;
    let icrc = compute(engine, ip, udp, covered)?;
    put_icrc(transport_with_icrc, icrc)?;
    Ok(icrc)
}

#[cfg(test)]
mod tests {
    use super::super::soft_crc32::SoftCrc32;
    use super::*;
    use std::vec::Vec;

    fn hex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        s.chunks(2)
            .map(|c| u8::from_str_radix(core::str::from_utf8(c).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn seed_matches_rxe() {
        assert_eq!(ICRC_SEED, 0xDEBB_20E3);
        assert_eq!(soft_crc32::update(!0, &[0xFF; 8]), ICRC_SEED);
    }

    /// RoCEv2 CNP captured on a ConnectX-4 Lx (from scapy's RoCE tests):
    /// the hardware-generated trailer is `82 fd 00 2a`.
    #[test]
    fn known_answer_connectx4_cnp() {
        let frame = hex("e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2
             003c 718c 4000 4011 9161 0a00 1101 0a00
             1201 0000 12b7 0028 0000 8100 ffff 4000
             0118 0000 0000 0000 0000 0000 0000 0000
             0000 0000 0000 82fd 002a");
        let (ip, rest) = frame[14..].split_at(IPV4_HEADER_LEN);
        let (udp, transport) = rest.split_at(UDP_HEADER_LEN);
        let (covered, trailer) = split_icrc(transport).unwrap();
        assert_eq!(trailer.to_le_bytes(), [0x82, 0xfd, 0x00, 0x2a]);
        assert_eq!(icrc_ipv4(SoftCrc32, ip, udp, covered), Ok(0x2A00_FD82));
        assert_eq!(verify(SoftCrc32, IpHeader::V4(ip), udp, transport), Ok(()));
        let mut regenerated = transport.to_vec();
        regenerated[transport.len() - 1] ^= 1;
        assert_eq!(
            verify(SoftCrc32, IpHeader::V4(ip), udp, &regenerated),
            Err(Error::BadIcrc)
        );
        generate(SoftCrc32, IpHeader::V4(ip), udp, &mut regenerated).unwrap();
        assert_eq!(regenerated, transport);
    }

    #[test]
    fn chunked_update_masks_resv8a_anywhere() {
        let ip = hex("4500 0030 0000 4000 4011 0000 0a00 0001 0a00 0002");
        let udp = hex("c000 12b7 001c 0000");
        let transport: Vec<u8> = (0u8..24).collect();
        let whole = icrc_ipv4(SoftCrc32, &ip, &udp, &transport).unwrap();
        for cut1 in 0..=transport.len() {
            for cut2 in cut1..=transport.len() {
                let mut c = Icrc::new(SoftCrc32, IpHeader::V4(&ip), &udp).unwrap();
                c.update(&transport[..cut1]);
                c.update(&transport[cut1..cut2]);
                c.update(&transport[cut2..]);
                assert_eq!(c.finish(), Ok(whole), "cuts {cut1} {cut2}");
            }
        }
    }

    #[test]
    fn header_validation() {
        let ip4 = [0x45u8; 20];
        let ip6 = [0x60u8; 40];
        let udp = [0u8; 8];
        let bth = [0u8; 12];
        assert!(icrc_ipv4(SoftCrc32, &ip4, &udp, &bth).is_ok());
        assert!(icrc_ipv6(SoftCrc32, &ip6, &udp, &bth).is_ok());
        assert_eq!(
            icrc_ipv4(SoftCrc32, &ip4[..19], &udp, &bth),
            Err(Error::BadIpHeader)
        );
        let mut opts = [0u8; 24];
        opts[0] = 0x46;
        assert_eq!(
            icrc_ipv4(SoftCrc32, &opts, &udp, &bth),
            Err(Error::BadIpHeader)
        );
        assert_eq!(
            icrc_ipv4(SoftCrc32, &ip6[..20], &udp, &bth),
            Err(Error::BadIpHeader)
        );
        assert_eq!(
            icrc_ipv6(SoftCrc32, &[0x45; 40], &udp, &bth),
            Err(Error::BadIpHeader)
        );
        assert_eq!(
            icrc_ipv4(SoftCrc32, &ip4, &udp[..7], &bth),
            Err(Error::BadUdpHeader)
        );
        assert_eq!(
            icrc_ipv4(SoftCrc32, &ip4, &udp, &bth[..11]),
            Err(Error::Truncated)
        );
        assert_eq!(IpHeader::from_bytes(&ip4), Ok(IpHeader::V4(&ip4)));
        assert_eq!(IpHeader::from_bytes(&ip6), Ok(IpHeader::V6(&ip6)));
        assert_eq!(IpHeader::from_bytes(&[]), Err(Error::BadIpHeader));
        assert_eq!(split_icrc(&[1, 2, 3]), Err(Error::Truncated));
        assert_eq!(put_icrc(&mut [0; 3], 0), Err(Error::BufferTooSmall));
    }

    #[test]
    fn engine_by_mut_ref() {
        let mut engine = SoftCrc32;
        let ip4 = [0x45u8; 20];
        let a = icrc_ipv4(&mut engine, &ip4, &[0; 8], &[0; 12]).unwrap();
        let b = icrc_ipv4(SoftCrc32, &ip4, &[0; 8], &[0; 12]).unwrap();
        assert_eq!(a, b);
    }
}
