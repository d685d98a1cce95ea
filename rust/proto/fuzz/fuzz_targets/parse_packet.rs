//! Parse arbitrary bytes as a transport packet; whatever parses must
//! rebuild to a packet that parses to the same headers and payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sroce_proto::packet::build;
use sroce_proto::{Headers, Packet};

fuzz_target!(|data: &[u8]| {
    let _ = Headers::parse(data);
    let Ok(p) = Packet::parse(data) else {
        return;
    };
    let mut buf = vec![0u8; data.len() + 8];
    let n = build(&p.headers, p.payload, &mut buf).expect("parsed packet must rebuild");
    let q = Packet::parse(&buf[..n]).expect("rebuilt packet must parse");
    assert_eq!(q.payload, p.payload);
    let mut expected = p.headers;
    expected.bth.pad_count = q.headers.bth.pad_count;
    assert_eq!(q.headers, expected);
});
