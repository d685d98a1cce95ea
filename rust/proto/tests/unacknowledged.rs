//! The unacknowledged connected service (UC) end to end: a requester
//! (`SendQueue` with `acknowledged = false`) and a responder exchanging
//! real UC packets (built with `packet::build`, parsed with
//! `Packet::parse`) over a seeded lossy, reordering and duplicating
//! channel; and the UC responder under arbitrary requests.
//!
//! Checked: every work request completes successfully, in order, once its
//! last packet is out (nothing waits for an acknowledgement, nothing is
//! resent); the responder never answers; the messages delivered are a
//! subsequence of those sent, in order, each exactly once and byte for
//! byte (a message missing a packet is never delivered); with no loss
//! every message is delivered.

use proptest::prelude::*;
use sroce_proto::packet::{build, packet_len};
use sroce_proto::{
    Bth, Decision, ExtHeader, Headers, ImmDt, Mtu, Opcode, Operation, Outcome, Packet, Psn, Reply,
    Request, RequesterConfig, Responder, ResponderConfig, Reth, SendQueue, SendWqe, Transport,
    WcStatus, WorkKind, WqeOp,
};

mod common;
use common::Rng;

const MTU: Mtu = Mtu::Mtu256;

/// A message: SEND with immediate (the immediate is its index) or WRITE
/// with immediate to its own region.
struct Message {
    op: WqeOp,
    data: Vec<u8>,
}

fn packet_bytes(m: &Message, index: u32, p: &sroce_proto::RequestPacket) -> Vec<u8> {
    let opcode = Opcode::new(Transport::Uc, p.operation);
    let mut h = Headers::new(Bth::new(opcode, 0x12, p.psn));
    h.bth.ack_req = p.ack_req;
    if let Some(r) = p.reth {
        h.reth = Some(Reth {
            va: u64::from(index) * 4096 + u64::from(r.offset),
            rkey: 7,
            dma_len: r.dma_len,
        });
    }
    if opcode.ext_headers().contains(ExtHeader::ImmDt) {
        h.immdt = Some(ImmDt(index.to_be_bytes()));
    }
    let (o, l) = (p.offset as usize, p.payload_len as usize);
    let payload = &m.data[o..o + l];
    let mut buf = vec![0u8; packet_len(opcode, payload.len()).unwrap()];
    build(&h, payload, &mut buf).unwrap();
    buf
}

/// The receiving side: one receive buffer at a time, remote memory for
/// the WRITEs.
#[derive(Default)]
struct Receiver {
    buf: Vec<u8>,
    mem: Vec<u8>,
    delivered: Vec<(u32, Vec<u8>)>,
}

impl Receiver {
    fn take(&mut self, resp: &mut Responder<1>, bytes: &[u8]) {
        let p = Packet::parse(bytes).expect("a packet the requester built");
        assert_eq!(p.headers.bth.opcode.transport(), Transport::Uc);
        let req = Request::from_headers(&p.headers, p.payload.len()).unwrap();
        assert!(!req.ack_req || req.operation.position().ends_message());
        let w = match resp.receive(&req, true) {
            Decision::Execute(w) => w,
            Decision::Reply(r) => {
                assert!(matches!(r, Reply::Dropped), "UC replied {r:?}");
                return;
            }
            Decision::Defer => panic!("UC deferred"),
        };
        let imm = p.headers.immdt.map(|i| u32::from_be_bytes(i.0));
        match w.kind {
            WorkKind::Send {
                offset,
                first,
                last,
                ..
            } => {
                if first {
                    self.buf.clear();
                }
                assert_eq!(self.buf.len(), offset as usize);
                self.buf.extend_from_slice(p.payload);
                assert_eq!(resp.commit(&w, Outcome::Done), Reply::None);
                if last {
                    self.delivered.push((imm.unwrap(), self.buf.clone()));
                }
            }
            WorkKind::Write {
                va,
                len,
                dma_len,
                imm: with_imm,
                ..
            } => {
                let at = va as usize;
                if self.mem.len() < at + len as usize {
                    self.mem.resize(at + len as usize, 0);
                }
                self.mem[at..at + len as usize].copy_from_slice(p.payload);
                assert_eq!(resp.commit(&w, Outcome::Done), Reply::None);
                if with_imm {
                    let index = imm.unwrap();
                    let start = index as usize * 4096;
                    let data = self.mem[start..start + dma_len as usize].to_vec();
                    self.delivered.push((index, data));
                }
            }
            k => panic!("UC executed {k:?}"),
        }
    }
}

/// Sends `n` messages over a channel losing, duplicating and reordering
/// packets (per mille), the requester finding a packet's data absent (a
/// page fault) at the rate `faults` and holding it until the next round;
/// returns the messages and what was delivered.
fn run(
    seed: u64,
    n: u32,
    (loss, dup, reorder): (u32, u32, u32),
    faults: u32,
) -> (Vec<Message>, Receiver) {
    let mut rng = Rng(seed);
    let mut cfg = RequesterConfig::new(MTU);
    cfg.acknowledged = false;
    let mut sq = SendQueue::<4>::new(cfg, Psn::new(0xFF_FFF0));
    let mut rcfg = ResponderConfig::new(MTU);
    rcfg.acknowledged = false;
    let mut resp = Responder::<1>::new(rcfg, Psn::new(0xFF_FFF0));
    let mut rx = Receiver::default();
    let msgs: Vec<Message> = (0..n)
        .map(|i| {
            let len = 1 + rng.below(4 * 256) as usize;
            Message {
                op: if rng.chance(500) {
                    WqeOp::SendWithImm
                } else {
                    WqeOp::WriteWithImm
                },
                data: (0..len).map(|b| (b as u32 * 31 + i * 7) as u8).collect(),
            }
        })
        .collect();
    let mut next = 0u32;
    let mut completed = 0u32;
    // Packets in flight, in the order they will arrive.
    let mut wire: Vec<Vec<u8>> = Vec::new();
    while completed < n {
        while next < n && sq.has_room() {
            let m = &msgs[next as usize];
            sq.post(SendWqe {
                tag: next,
                op: m.op,
                len: m.data.len() as u32,
                fence: false,
                signaled: true,
            })
            .unwrap();
            next += 1;
        }
        if sq.is_held() {
            sq.resume();
        }
        while let Some(p) = sq.next_packet() {
            assert!(!p.retransmit);
            if p.payload_len > 0 && rng.chance(faults) {
                assert!(sq.hold(&p), "a UC queue holds the packet it handed out");
                break;
            }
            let bytes = packet_bytes(&msgs[p.tag as usize], p.tag, &p);
            if rng.chance(loss) {
                continue;
            }
            let copies = if rng.chance(dup) { 2 } else { 1 };
            for _ in 0..copies {
                let at = if rng.chance(reorder) && !wire.is_empty() {
                    wire.len() - 1 - rng.below(wire.len().min(3) as u64) as usize
                } else {
                    wire.len()
                };
                wire.insert(at, bytes.clone());
            }
        }
        // Nothing is ever unacknowledged: no timer, no resend.
        assert!(!sq.has_unacked() || sq.is_held());
        while let Some(c) = sq.pop_completion() {
            assert_eq!((c.tag, c.status), (completed, WcStatus::Success));
            completed += 1;
        }
        for bytes in wire.drain(..) {
            rx.take(&mut resp, &bytes);
        }
    }
    assert!(!resp.is_error());
    (msgs, rx)
}

/// Delivered messages are distinct, increasing and intact.
fn check(msgs: &[Message], rx: &Receiver) {
    let mut last = None;
    for (index, data) in &rx.delivered {
        assert!(last.map_or(true, |l| l < *index), "out of order or twice");
        last = Some(*index);
        assert_eq!(data, &msgs[*index as usize].data, "message {index}");
    }
}

#[test]
fn a_clean_channel_delivers_everything() {
    let (msgs, rx) = run(1, 200, (0, 0, 0), 0);
    check(&msgs, &rx);
    assert_eq!(rx.delivered.len(), 200);
}

#[test]
fn packets_held_for_page_faults_lose_nothing() {
    for seed in 0..20 {
        let (msgs, rx) = run(seed, 200, (0, 0, 0), 100 + seed as u32 * 20);
        check(&msgs, &rx);
        assert_eq!(rx.delivered.len(), 200, "seed {seed}");
    }
}

#[test]
fn a_lossy_reordering_duplicating_channel_delivers_intact_messages_in_order() {
    for seed in 0..40 {
        let (msgs, rx) = run(seed, 150, (30, 20, 50), 0);
        check(&msgs, &rx);
        // Most messages still arrive.
        assert!(
            rx.delivered.len() > 40,
            "seed {seed}: {}",
            rx.delivered.len()
        );
    }
}

#[test]
fn unacknowledged_queue_refuses_reads_and_atomics() {
    let mut cfg = RequesterConfig::new(MTU);
    cfg.acknowledged = false;
    let mut sq = SendQueue::<4>::new(cfg, Psn::ZERO);
    for op in [
        WqeOp::Read,
        WqeOp::CompareSwap,
        WqeOp::FetchAdd,
        WqeOp::SendWithInv,
    ] {
        let len = if op.is_atomic() { 8 } else { 16 };
        let wqe = SendWqe {
            tag: 1,
            op,
            len,
            fence: false,
            signaled: true,
        };
        assert_eq!(sq.post(wqe), Err(sroce_proto::Error::InvalidForTransport));
    }
    assert!(sq.is_empty());
}

fn operation() -> impl Strategy<Value = Operation> {
    prop::sample::select(Operation::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever arrives, a UC responder never answers, never executes a
    /// READ or atomic, and only moves its expected PSN forward (by at most
    /// the jump the packet made).
    #[test]
    fn responder_never_answers(
        reqs in prop::collection::vec(
            (-3i32..6, operation(), 0u32..600, any::<bool>(), any::<bool>(), any::<bool>()),
            1..200,
        ),
    ) {
        let mut cfg = ResponderConfig::new(MTU);
        cfg.acknowledged = false;
        let mut r = Responder::<1>::new(cfg, Psn::new(5));
        for (d, operation, len, reth, ready, fail) in reqs {
            let before = r.epsn();
            let req = Request {
                psn: before.wrapping_add(d as u32),
                operation,
                ack_req: true,
                payload_len: len,
                reth: reth.then_some(Reth { va: 0x10, rkey: 3, dma_len: len }),
                atomic: None,
            };
            let reply = match r.receive(&req, ready) {
                Decision::Execute(w) => {
                    let read_or_atomic =
                        matches!(w.kind, WorkKind::Read { .. } | WorkKind::Atomic { .. });
                    prop_assert!(!read_or_atomic);
                    prop_assert!(!w.ack_req);
                    let outcome = if fail {
                        Outcome::Failed(sroce_proto::aeth::NakCode::RemoteAccessError)
                    } else {
                        Outcome::Done
                    };
                    r.commit(&w, outcome)
                }
                Decision::Reply(reply) => reply,
                Decision::Defer => return Err(TestCaseError::fail("deferred")),
            };
            let silent = matches!(reply, Reply::None | Reply::Dropped);
            prop_assert!(silent, "answered {:?}", reply);
            if d >= 0 {
                prop_assert_eq!(r.epsn(), req.psn.next());
            } else {
                prop_assert_eq!(r.epsn(), before);
            }
            prop_assert!(!r.is_error());
        }
    }
}
