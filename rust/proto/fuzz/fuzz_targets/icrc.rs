//! Feed arbitrary IP/UDP/transport splits to the ICRC code; chunked and
//! one-shot computation must agree and nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sroce_proto::icrc::{self, Icrc, IpHeader};
use sroce_proto::SoftCrc32;

fuzz_target!(|input: (u8, u8, u8, &[u8])| {
    let (ip_len, udp_len, cut, data) = input;
    let Some((ip, rest)) = data.split_at_checked(usize::from(ip_len % 64)) else {
        return;
    };
    let Some((udp, transport)) = rest.split_at_checked(usize::from(udp_len % 12)) else {
        return;
    };
    let Ok(hdr) = IpHeader::from_bytes(ip) else {
        return;
    };
    let whole = icrc::compute(SoftCrc32, hdr, udp, transport);
    let _ = icrc::verify(SoftCrc32, hdr, udp, transport);
    if let Ok(mut c) = Icrc::new(SoftCrc32, hdr, udp) {
        let (a, b) = transport.split_at(usize::from(cut).min(transport.len()));
        c.update(a);
        c.update(b);
        assert_eq!(c.finish(), whole);
    }
});
