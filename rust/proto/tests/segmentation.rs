//! Property tests: segmentation of messages into request packets, and PSN
//! assignment across work requests by the send queue.

use proptest::prelude::*;
use sroce_proto::opcode::Position;
use sroce_proto::{MessagePlan, Mtu, Operation, Psn, RequesterConfig, SendQueue, SendWqe, WqeOp};

const M: u32 = 1 << 24;

fn mtu() -> impl Strategy<Value = Mtu> {
    prop::sample::select(Mtu::ALL.to_vec())
}

fn len() -> impl Strategy<Value = u32> {
    prop_oneof![
        0u32..=(1 << 20) + 4097,
        // Around MTU multiples.
        (0u32..=256, -2i32..=2).prop_map(|(k, d)| (k * 4096).saturating_add_signed(d)),
        Just(0u32),
    ]
}

fn data_op() -> impl Strategy<Value = WqeOp> {
    prop::sample::select(vec![
        WqeOp::Send,
        WqeOp::SendWithImm,
        WqeOp::SendWithInv,
        WqeOp::Write,
        WqeOp::WriteWithImm,
    ])
}

fn start_psn() -> impl Strategy<Value = Psn> {
    prop_oneof![
        (0u32..M).prop_map(Psn::new),
        (0u32..4096).prop_map(|d| Psn::new(M - 2048 + d)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn send_write_segments_cover_message(op in data_op(), len in len(), mtu in mtu(),
                                         first in start_psn(), ack_interval in 0u32..100) {
        let plan = MessagePlan::new(op, len, mtu).unwrap();
        let segs: Vec<_> = plan.segments(ack_interval).collect();
        let m = mtu.bytes();
        prop_assert_eq!(segs.len() as u32, plan.packet_count());
        prop_assert_eq!(plan.psn_count(), len.div_ceil(m).max(1));
        let mut covered = 0u32;
        for (i, s) in segs.iter().enumerate() {
            let i = i as u32;
            prop_assert_eq!(s.index, i);
            // PSNs are consecutive modulo 2^24.
            let psn = first + s.index;
            prop_assert_eq!(psn.value(), (first.value() + i) % M);
            // Payload ranges tile the message in order.
            prop_assert_eq!(s.offset, covered);
            prop_assert!(s.payload_len <= m);
            covered += s.payload_len;
            let pos = s.operation.position();
            let n = segs.len() as u32;
            let expect = match (n, i) {
                (1, _) => Position::Only,
                (_, 0) => Position::First,
                _ if i == n - 1 => Position::Last,
                _ => Position::Middle,
            };
            prop_assert_eq!(pos, expect);
            if matches!(pos, Position::First | Position::Middle) {
                prop_assert_eq!(s.payload_len, m);
            }
            if matches!(pos, Position::Last) {
                prop_assert!(s.payload_len > 0);
            }
            // Opcode family matches the operation.
            let code = s.operation.code();
            if op.is_send() {
                prop_assert!(code <= Operation::SendOnlyWithImmediate.code()
                    || s.operation == Operation::SendLastWithInvalidate
                    || s.operation == Operation::SendOnlyWithInvalidate);
            } else {
                prop_assert!((Operation::RdmaWriteFirst.code()..=Operation::RdmaWriteOnlyWithImmediate.code()).contains(&code));
            }
            // RETH only on the first packet of a WRITE, with the full length.
            if op.is_write() && pos.starts_message() {
                let r = s.reth.unwrap();
                prop_assert_eq!((r.offset, r.dma_len), (0, len));
            } else {
                prop_assert!(s.reth.is_none());
            }
            let periodic = ack_interval != 0 && (i + 1) % ack_interval == 0;
            prop_assert_eq!(s.ack_req, pos.ends_message() || periodic);
        }
        prop_assert_eq!(covered, len);
    }

    #[test]
    fn read_requests_cover_remainder(len in len(), mtu in mtu(), k in any::<u32>()) {
        let plan = MessagePlan::new(WqeOp::Read, len, mtu).unwrap();
        let n = plan.psn_count();
        prop_assert_eq!(n, len.div_ceil(mtu.bytes()).max(1));
        prop_assert_eq!(plan.packet_count(), 1);
        let i = k % n;
        let s = plan.segment(i, 0).unwrap();
        let r = s.reth.unwrap();
        prop_assert_eq!(s.operation, Operation::RdmaReadRequest);
        prop_assert_eq!(r.offset, (i * mtu.bytes()).min(len));
        prop_assert_eq!(r.offset + r.dma_len, len);
        prop_assert!(s.ack_req);
        prop_assert_eq!(plan.segment(n, 0), None);
        prop_assert_eq!(plan.next_index(i), n);
    }

    #[test]
    fn send_queue_assigns_psns_consecutively(
        ops in prop::collection::vec((prop::sample::select(WqeOp::ALL.to_vec()), 0u32..20_000), 1..20),
        mtu in mtu(), first in start_psn())
    {
        let mut cfg = RequesterConfig::new(mtu);
        // Room for every READ and atomic of `ops` at once: none waits
        // for an acknowledgement (this test sends no responses).
        cfg.max_rd_atomic = ops.len() as u8;
        cfg.max_unacked_psns = 1 << 20;
        let mut sq = SendQueue::<32>::new(cfg, first);
        let mut expect = first;
        let mut firsts = Vec::new();
        for (tag, &(op, len)) in ops.iter().enumerate() {
            let len = if op.has_8_byte_operand() { 8 } else { len };
            sq.post(SendWqe { tag: tag as u32, op, len, fence: false , signaled: true}).unwrap();
            firsts.push(expect);
            expect += MessagePlan::new(op, len, mtu).unwrap().psn_count();
        }
        let mut last_tag = None;
        let mut prev_end = first;
        while let Some(p) = sq.next_packet() {
            prop_assert!(!p.retransmit);
            if last_tag != Some(p.tag) {
                prop_assert_eq!(p.psn, firsts[p.tag as usize]);
                prop_assert_eq!(p.psn, prev_end);
                last_tag = Some(p.tag);
            } else {
                prop_assert_eq!(p.psn, prev_end);
            }
            let (op, _) = ops[p.tag as usize];
            prev_end = if op == WqeOp::Read {
                p.psn + MessagePlan::new(op, ops[p.tag as usize].1, mtu).unwrap().psn_count()
            } else {
                p.psn + 1
            };
        }
        prop_assert_eq!(last_tag, Some(ops.len() as u32 - 1));
        prop_assert_eq!(prev_end, expect);
        prop_assert_eq!(sq.next_psn(), expect);
    }
}
