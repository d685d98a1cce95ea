//! Property tests: the transport engines never panic on arbitrary input
//! (the kernel builds with overflow checks) and keep their invariants.

use proptest::prelude::*;
use sroce_proto::aeth::Syndrome;
use sroce_proto::opcode::Position;
use sroce_proto::{
    Action, AtomicEth, Decision, MessagePlan, Mtu, Operation, Outcome, Psn, Reply, Request,
    RequesterConfig, Responder, ResponderConfig, Response, ResponseKind, Reth, SendQueue, SendWqe,
    WqeOp,
};

#[derive(Clone, Debug)]
enum ReqEvent {
    Post(WqeOp, u32, bool),
    Send(u8),
    Respond(i32, ResponseKind),
    Timeout,
    RnrTimer,
    Pop,
    /// The driver's probe for packets no ACK was asked for.
    AckRequest,
    /// The driver's wait for an ACK request ran out: the next new packet
    /// asks.
    AskWithNext,
}

fn response_kind() -> impl Strategy<Value = ResponseKind> {
    let syn = any::<u8>().prop_map(Syndrome::from_u8);
    prop_oneof![
        syn.clone().prop_map(ResponseKind::Ack),
        (
            prop::sample::select(vec![
                Position::First,
                Position::Middle,
                Position::Last,
                Position::Only
            ]),
            prop::option::of(syn.clone()),
            prop_oneof![0u32..300, Just(256u32), any::<u32>()],
        )
            .prop_map(
                |(position, syndrome, payload_len)| ResponseKind::ReadResponse {
                    position,
                    syndrome,
                    payload_len
                }
            ),
        (syn, any::<u64>()).prop_map(|(syndrome, orig)| ResponseKind::AtomicAck { syndrome, orig }),
    ]
}

fn req_event() -> impl Strategy<Value = ReqEvent> {
    prop_oneof![
        (
            prop::sample::select(WqeOp::ALL.to_vec()),
            prop_oneof![0u32..2000, Just(8u32)],
            any::<bool>()
        )
            .prop_map(|(op, len, fence)| ReqEvent::Post(op, len, fence)),
        (1u8..10).prop_map(ReqEvent::Send),
        (-20i32..40, response_kind()).prop_map(|(d, k)| ReqEvent::Respond(d, k)),
        (-20i32..40)
            .prop_map(|d| ReqEvent::Respond(d, ResponseKind::Ack(Syndrome::Ack { credits: 31 }))),
        Just(ReqEvent::Timeout),
        Just(ReqEvent::RnrTimer),
        Just(ReqEvent::Pop),
        Just(ReqEvent::AckRequest),
        Just(ReqEvent::AskWithNext),
    ]
}

fn mtu() -> impl Strategy<Value = Mtu> {
    prop::sample::select(Mtu::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn send_queue_survives_anything(
        events in prop::collection::vec(req_event(), 1..200),
        mtu in mtu(),
        first in prop_oneof![any::<u32>().prop_map(Psn::new), Just(Psn::MAX)],
        retry in 0u8..8, rnr in 0u8..8, max_rd in 0u8..4, window in 0u32..64,
        coalesce in 1u32..20,
    ) {
        let mut cfg = RequesterConfig::new(mtu);
        cfg.retry_cnt = retry;
        cfg.rnr_retry = rnr;
        cfg.max_rd_atomic = max_rd;
        cfg.max_unacked_psns = window;
        cfg.ack_interval = 3;
        cfg.ack_coalesce = coalesce;
        let mut sq = SendQueue::<8>::new(cfg, first);
        let mut tag = 0u32;
        let mut popped: Vec<u32> = Vec::new();
        for e in events {
            match e {
                ReqEvent::Post(op, len, fence) => {
                    let signaled = tag % 3 == 0;
                    if sq.post(SendWqe { tag, op, len, fence, signaled }).is_ok() {
                        tag += 1;
                    }
                }
                ReqEvent::Send(n) => {
                    for _ in 0..n {
                        let asks = sq.asks_with_next_packet();
                        let Some(p) = sq.next_packet() else {
                            break;
                        };
                        // A pending request rides on the first new packet.
                        if asks && !p.retransmit {
                            prop_assert!(p.ack_req && !sq.asks_with_next_packet());
                        }
                    }
                }
                ReqEvent::Respond(d, kind) => {
                    let psn = sq.una() + d as u32;
                    let a = sq.on_response(&Response { psn, kind });
                    if let Action::PlaceReadData { offset, len, .. } = a {
                        prop_assert!(len <= mtu.bytes());
                        prop_assert!(offset.checked_add(len).is_some());
                    }
                }
                ReqEvent::Timeout => {
                    sq.on_timeout();
                }
                ReqEvent::RnrTimer => {
                    sq.on_rnr_timer();
                }
                ReqEvent::Pop => {
                    while let Some(c) = sq.pop_completion() {
                        popped.push(c.tag);
                    }
                }
                ReqEvent::AskWithNext => {
                    let wanted = sq.wants_ack_request();
                    sq.ask_with_next_packet();
                    prop_assert_eq!(sq.asks_with_next_packet(), wanted);
                }
                ReqEvent::AckRequest => {
                    let wanted = sq.wants_ack_request();
                    let p = sq.ack_request_packet();
                    prop_assert!(wanted || p.is_none());
                    prop_assert!(!sq.asks_with_next_packet());
                    if let Some(p) = p {
                        // The newest packet sent, once more, asking.
                        prop_assert!(p.ack_req && p.retransmit);
                        prop_assert!(!matches!(
                            p.operation,
                            Operation::RdmaReadRequest
                                | Operation::CompareSwap
                                | Operation::FetchAdd
                                | Operation::AtomicWrite
                        ));
                        prop_assert!(!sq.wants_ack_request());
                    }
                }
            }
            // una never passes the next PSN to assign.
            prop_assert!(sq.una().distance_to(sq.next_psn()) < 1 << 23);
        }
        while let Some(c) = sq.pop_completion() {
            popped.push(c.tag);
        }
        // Completions come in posting order, each once.
        prop_assert!(popped.windows(2).all(|w| w[1] == w[0] + 1));
        prop_assert!(popped.first().map_or(true, |&t| t == 0));
        sq.set_error();
        while let Some(c) = sq.pop_completion() {
            popped.push(c.tag);
        }
        prop_assert_eq!(popped.len() as u32, tag);
        prop_assert!(sq.next_packet().is_none());
    }
}

fn operation() -> impl Strategy<Value = Operation> {
    prop::sample::select(Operation::ALL.to_vec())
}

#[derive(Clone, Debug)]
struct RandReq {
    d: i32,
    op: Operation,
    ack_req: bool,
    len: u32,
    reth: Option<Reth>,
    atomic: Option<AtomicEth>,
    recv_ready: bool,
    outcome: u8,
}

fn rand_req() -> impl Strategy<Value = RandReq> {
    (
        -5i32..5,
        operation(),
        any::<bool>(),
        prop_oneof![0u32..300, Just(256u32), Just(4096u32), any::<u32>()],
        prop::option::of((
            any::<u64>(),
            any::<u32>(),
            prop_oneof![0u32..2000, any::<u32>()],
        )),
        prop::option::of((any::<u64>(), any::<u64>())),
        any::<bool>(),
        0u8..6,
    )
        .prop_map(
            |(d, op, ack_req, len, reth, atomic, recv_ready, outcome)| RandReq {
                d,
                op,
                ack_req,
                len,
                reth: reth.map(|(va, rkey, dma_len)| Reth { va, rkey, dma_len }),
                atomic: atomic.map(|(va, x)| AtomicEth {
                    va,
                    rkey: 1,
                    swap_add: x,
                    compare: x,
                }),
                recv_ready,
                outcome,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn responder_survives_anything(
        reqs in prop::collection::vec(rand_req(), 1..200),
        mtu in mtu(),
        first in prop_oneof![any::<u32>().prop_map(Psn::new), Just(Psn::MAX)],
        max_dest in 0u8..6,
    ) {
        let cfg = ResponderConfig { mtu, max_dest_rd_atomic: max_dest, min_rnr_timer: 40, acknowledged: true };
        let mut r = Responder::<4>::new(cfg, first);
        for q in reqs {
            let before = r.epsn();
            let req = Request {
                psn: r.epsn() + q.d as u32,
                operation: q.op,
                ack_req: q.ack_req,
                payload_len: q.len,
                reth: q.reth,
                atomic: q.atomic,
            };
            match r.receive(&req, q.recv_ready) {
                Decision::Execute(w) => {
                    prop_assert_eq!(q.d, 0);
                    let outcome = match q.outcome {
                        0 => Outcome::Failed(sroce_proto::aeth::NakCode::RemoteAccessError),
                        1 => Outcome::Atomic(7),
                        _ => Outcome::Done,
                    };
                    let reply = r.commit(&w, outcome);
                    if reply == Reply::Read {
                        let mut total = 0u64;
                        let mut count = 0u32;
                        while let Some(p) = r.next_read_response() {
                            prop_assert!(p.len <= mtu.bytes());
                            total += u64::from(p.len);
                            count += 1;
                        }
                        prop_assert!(count >= 1);
                        prop_assert_eq!(Some(total), q.reth.map(|x| u64::from(x.dma_len)));
                    }
                    // The expected PSN only moves forward.
                    prop_assert!(r.is_error() || r.epsn() == before || before.is_before(r.epsn()));
                }
                Decision::Defer => prop_assert!(false, "deferred with nothing queued"),
                Decision::Reply(reply) => {
                    prop_assert!(r.epsn() == before);
                    // A replay: no more packets than the READ had.
                    let mut replayed = 0u32;
                    while r.next_read_response().is_some() {
                        replayed += 1;
                    }
                    prop_assert!(replayed <= MessagePlan::MAX_LEN / mtu.bytes() + 1);
                    if let Reply::Ack { aeth, .. } = reply {
                        if let Syndrome::RnrNak { timer } = aeth.syndrome {
                            prop_assert_eq!(timer, 40 & 0x1F);
                        }
                    }
                }
            }
            prop_assert!(r.msn() <= 0x00FF_FFFF);
            prop_assert!(r.resources().count() <= usize::from(max_dest).min(4));
        }
    }
}
