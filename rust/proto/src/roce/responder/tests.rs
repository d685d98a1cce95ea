//! Unit tests of the responder: sequencing, lengths, duplicates and
//! replays, READ response queueing, failures.

use super::*;
use std::vec::Vec;
use Operation as O;

const MTU: Mtu = Mtu::Mtu256;

fn resp() -> Responder<4> {
    Responder::new(
        ResponderConfig {
            mtu: MTU,
            max_dest_rd_atomic: 2,
            min_rnr_timer: 12,
            acknowledged: true,
        },
        Psn::new(100),
    )
}

fn req(psn: u32, operation: Operation, payload_len: u32) -> Request {
    Request {
        psn: Psn::new(psn),
        operation,
        ack_req: operation.position().ends_message(),
        payload_len,
        reth: None,
        atomic: None,
    }
}

/// `q` with a RETH for `len` bytes at `va` under rkey 1.
fn with_reth(mut q: Request, va: u64, len: u32) -> Request {
    q.reth = Some(Reth {
        va,
        rkey: 1,
        dma_len: len,
    });
    q
}

fn exec(r: &mut Responder<4>, q: &Request) -> Reply {
    match r.receive(q, true) {
        Decision::Execute(w) => {
            let o = match w.kind {
                WorkKind::Atomic { swap_add, .. } => Outcome::Atomic(swap_add * 10),
                _ => Outcome::Done,
            };
            r.commit(&w, o)
        }
        d => panic!("not executed: {d:?}"),
    }
}

/// Every queued READ response, in the order they go out.
fn drain(r: &mut Responder<4>) -> Vec<ReadResponsePacket> {
    let mut out = Vec::new();
    while let Some(p) = r.next_read_response() {
        out.push(p);
    }
    assert!(!r.read_responses_queued());
    out
}

fn read_req(psn: u32, va: u64, len: u32) -> Request {
    let mut q = req(psn, O::RdmaReadRequest, 0);
    q.reth = Some(Reth {
        va,
        rkey: 9,
        dma_len: len,
    });
    q
}

#[test]
fn read_responses_are_taken_one_at_a_time_and_later_requests_wait() {
    let mut r = resp();
    // 10 packets of 256 bytes.
    assert_eq!(exec(&mut r, &read_req(100, 0x1000, 2560)), Reply::Read);
    assert_eq!(r.epsn(), Psn::new(110));
    let first = r.next_read_response().unwrap();
    assert_eq!(
        (first.psn, first.va, first.rkey),
        (Psn::new(100), 0x1000, 9)
    );
    // A new request, an out-of-sequence one and a duplicate SEND wait
    // until the responses are out: no reply may overtake them.
    for q in [
        req(110, O::SendOnly, 1),
        req(115, O::SendOnly, 1),
        req(99, O::SendOnly, 1),
    ] {
        assert_eq!(r.receive(&q, true), Decision::Defer);
    }
    let rest = drain(&mut r);
    assert_eq!(rest.len(), 9);
    assert_eq!(rest[8].psn, Psn::new(109));
    assert_eq!(exec(&mut r, &req(110, O::SendOnly, 1)), acked(110, 2));
}

#[test]
fn read_responses_fit_counts_what_is_left_of_every_queued_read() {
    let mut r = resp();
    assert!(r.read_responses_fit(0), "nothing queued");
    // 10 packets of 256 bytes.
    assert_eq!(exec(&mut r, &read_req(100, 0x1000, 2560)), Reply::Read);
    assert!(r.read_responses_fit(10));
    assert!(!r.read_responses_fit(9));
    for left in (0..10).rev() {
        r.next_read_response().unwrap();
        assert!(r.read_responses_fit(left), "{left} left");
        assert!(left == 0 || !r.read_responses_fit(left - 1), "{left} left");
    }
    // Replays of two READs queued together count both.
    assert_eq!(exec(&mut r, &read_req(110, 0x2000, 512)), Reply::Read);
    drain(&mut r);
    r.receive(&read_req(100, 0x1000, 2560), true);
    r.receive(&read_req(110, 0x2000, 512), true);
    assert!(r.read_responses_fit(12));
    assert!(!r.read_responses_fit(11));
    assert_eq!(drain(&mut r).len(), 12);
}

#[test]
fn duplicate_reads_coalesce_with_queued_responses() {
    let mut r = resp();
    assert_eq!(exec(&mut r, &read_req(100, 0x1000, 2560)), Reply::Read);
    let mut sent = drain(&mut r).len();
    assert_eq!(sent, 10);
    // A hundred duplicates of the whole READ arriving together: one
    // replay.
    for _ in 0..100 {
        assert_eq!(
            r.receive(&read_req(100, 0x1000, 2560), true),
            Decision::Reply(Reply::Read)
        );
    }
    sent += drain(&mut r).len();
    assert_eq!(sent, 20);
    // A duplicate for a later PSN while the replay is queued: no
    // second stream.
    r.receive(&read_req(100, 0x1000, 2560), true);
    for _ in 0..4 {
        r.next_read_response();
    }
    r.receive(&read_req(107, 0x1000 + 7 * 256, 768), true);
    assert_eq!(drain(&mut r).len(), 6);
    // One for an earlier PSN restarts the queued stream there.
    r.receive(&read_req(100, 0x1000, 2560), true);
    for _ in 0..6 {
        r.next_read_response();
    }
    r.receive(&read_req(102, 0x1000 + 2 * 256, 2048), true);
    let p = drain(&mut r);
    assert_eq!(p.len(), 8);
    assert_eq!(p[0].psn, Psn::new(102));
    assert_eq!(p[0].operation, O::RdmaReadResponseMiddle);
}

#[test]
fn queued_replays_are_bounded_by_the_resources_and_go_oldest_first() {
    let mut r = resp();
    assert_eq!(exec(&mut r, &read_req(100, 0x1000, 512)), Reply::Read);
    drain(&mut r);
    assert_eq!(exec(&mut r, &read_req(102, 0x2000, 512)), Reply::Read);
    drain(&mut r);
    // Duplicates for the newer READ, then the older, many times over.
    for _ in 0..50 {
        r.receive(&read_req(102, 0x2000, 512), true);
        r.receive(&read_req(100, 0x1000, 512), true);
    }
    let p = drain(&mut r);
    let psns: Vec<u32> = p.iter().map(|p| p.psn.value()).collect();
    assert_eq!(psns, [100, 101, 102, 103]);
    // No new READ is taken while responses are queued, so none can
    // push a queued one out of the ring.
    r.receive(&read_req(100, 0x1000, 512), true);
    assert_eq!(r.receive(&read_req(104, 0x3000, 0), true), Decision::Defer);
    drain(&mut r);
    assert_eq!(exec(&mut r, &read_req(104, 0x3000, 0)), Reply::Read);
    let p: Vec<u32> = drain(&mut r).iter().map(|p| p.psn.value()).collect();
    assert_eq!(p, [104]);
    // The error state drops what is queued.
    r.receive(&read_req(102, 0x2000, 512), true);
    r.set_error();
    assert_eq!(r.next_read_response(), None);
}

fn acked(psn: u32, msn: u32) -> Reply {
    Reply::Ack {
        psn: Psn::new(psn),
        aeth: ack_aeth(msn),
    }
}

#[test]
fn multi_packet_send_and_coalescing() {
    let mut r = resp();
    assert_eq!(exec(&mut r, &req(100, O::SendFirst, 256)), Reply::None);
    assert!(r.send_in_progress());
    assert_eq!(exec(&mut r, &req(101, O::SendMiddle, 256)), Reply::None);
    assert_eq!(exec(&mut r, &req(102, O::SendLast, 3)), acked(102, 1));
    assert_eq!(r.epsn(), Psn::new(103));
    // AckReq on a middle packet gets an ACK with the old MSN.
    let mut q = req(103, O::SendFirst, 256);
    q.ack_req = true;
    assert_eq!(exec(&mut r, &q), acked(103, 1));
}

#[test]
fn sequence_errors_are_naked_once() {
    let mut r = resp();
    let nak = Reply::Ack {
        psn: Psn::new(100),
        aeth: Aeth {
            syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
            msn: 0,
        },
    };
    assert_eq!(
        r.receive(&req(101, O::SendOnly, 1), true),
        Decision::Reply(nak)
    );
    assert_eq!(
        r.receive(&req(102, O::SendOnly, 1), true),
        Decision::Reply(Reply::None)
    );
    assert_eq!(exec(&mut r, &req(100, O::SendOnly, 1)), acked(100, 1));
    assert_eq!(exec(&mut r, &req(101, O::SendOnly, 1)), acked(101, 2));
    // The latch was released by the expected PSN.
    assert!(matches!(
        r.receive(&req(105, O::SendOnly, 1), true),
        Decision::Reply(Reply::Ack { .. })
    ));
    // Duplicates are re-ACKed with their own PSN, never beyond it.
    assert_eq!(
        r.receive(&req(100, O::SendOnly, 1), true),
        Decision::Reply(acked(100, 2))
    );
}

#[test]
fn opcode_sequence_and_lengths() {
    let cases: [(&[(Operation, u32)], bool); 9] = [
        (&[(O::SendMiddle, 256)], false),
        (&[(O::SendLast, 1)], false),
        (&[(O::SendFirst, 255)], false),
        (&[(O::SendOnly, 257)], false),
        (&[(O::SendFirst, 256), (O::SendLast, 0)], false),
        (&[(O::SendFirst, 256), (O::SendOnly, 1)], false),
        (&[(O::SendFirst, 256), (O::RdmaWriteMiddle, 256)], false),
        (
            &[(O::SendFirst, 256), (O::SendLastWithInvalidate, 256)],
            true,
        ),
        (&[(O::Flush, 0)], false),
    ];
    for (seq, ok) in cases {
        let mut r = resp();
        let mut last = None;
        for (i, &(op, len)) in seq.iter().enumerate() {
            last = Some(match r.receive(&req(100 + i as u32, op, len), true) {
                Decision::Execute(w) => r.commit(&w, Outcome::Done),
                Decision::Reply(rep) => rep,
                Decision::Defer => panic!("no READ queued"),
            });
        }
        let fatal = matches!(
            last,
            Some(Reply::FatalNak {
                aeth: Aeth {
                    syndrome: Syndrome::Nak(NakCode::InvalidRequest),
                    ..
                },
                ..
            })
        );
        assert_eq!(!fatal, ok, "{seq:?}");
        assert_eq!(r.is_error(), !ok);
    }
}

#[test]
fn write_length_must_match_reth() {
    let write = |ops: &[(Operation, u32)], dma_len: u32| -> bool {
        let mut r = resp();
        for (i, &(op, len)) in ops.iter().enumerate() {
            let mut q = req(100 + i as u32, op, len);
            if i == 0 {
                q.reth = Some(Reth {
                    va: 0x1000,
                    rkey: 7,
                    dma_len,
                });
            }
            match r.receive(&q, true) {
                Decision::Execute(w) => {
                    r.commit(&w, Outcome::Done);
                }
                Decision::Reply(_) | Decision::Defer => return false,
            }
        }
        !r.is_error()
    };
    assert!(write(&[(O::RdmaWriteOnly, 10)], 10));
    assert!(!write(&[(O::RdmaWriteOnly, 10)], 11));
    assert!(write(&[(O::RdmaWriteOnly, 0)], 0));
    assert!(write(
        &[(O::RdmaWriteFirst, 256), (O::RdmaWriteLast, 5)],
        261
    ));
    assert!(!write(
        &[(O::RdmaWriteFirst, 256), (O::RdmaWriteLast, 5)],
        262
    ));
    assert!(!write(&[(O::RdmaWriteFirst, 256)], 256));
    assert!(!write(
        &[(O::RdmaWriteFirst, 256), (O::RdmaWriteMiddle, 256)],
        512
    ));
    // Address of a middle packet.
    let mut r = resp();
    let mut q = req(100, O::RdmaWriteFirst, 256);
    q.reth = Some(Reth {
        va: 0x1000,
        rkey: 7,
        dma_len: 600,
    });
    exec(&mut r, &q);
    let Decision::Execute(w) = r.receive(&req(101, O::RdmaWriteMiddle, 256), true) else {
        panic!()
    };
    assert_eq!(
        w.kind,
        WorkKind::Write {
            va: 0x1100,
            rkey: 7,
            len: 256,
            first: false,
            dma_len: 600,
            imm: false
        }
    );
}

#[test]
fn rnr_when_no_receive_wqe() {
    let mut r = resp();
    let d = r.receive(&req(100, O::SendOnly, 1), false);
    assert_eq!(
        d,
        Decision::Reply(Reply::Ack {
            psn: Psn::new(100),
            aeth: Aeth {
                syndrome: Syndrome::RnrNak { timer: 12 },
                msn: 0
            }
        })
    );
    // Packets after it are dropped silently until PSN 100 comes back.
    assert_eq!(
        r.receive(&req(101, O::SendOnly, 1), false),
        Decision::Reply(Reply::None)
    );
    // WRITE without immediate needs no receive WQE.
    let mut q = req(100, O::RdmaWriteOnly, 1);
    q.reth = Some(Reth {
        va: 0,
        rkey: 1,
        dma_len: 1,
    });
    assert!(matches!(r.receive(&q, false), Decision::Execute(_)));
    let mut q = req(100, O::RdmaWriteOnlyWithImmediate, 1);
    q.reth = Some(Reth {
        va: 0,
        rkey: 1,
        dma_len: 1,
    });
    assert!(matches!(
        r.receive(&q, false),
        Decision::Reply(Reply::Ack { .. })
    ));
}

#[test]
fn read_and_replay() {
    let mut r = resp();
    let mut q = req(100, O::RdmaReadRequest, 0);
    q.reth = Some(Reth {
        va: 0x2000,
        rkey: 9,
        dma_len: 600,
    });
    assert_eq!(exec(&mut r, &q), Reply::Read);
    assert_eq!(r.epsn(), Psn::new(103));
    let p = drain(&mut r);
    assert_eq!(p.len(), 3);
    assert_eq!(
        p.iter().map(|p| p.operation).collect::<Vec<_>>(),
        [
            O::RdmaReadResponseFirst,
            O::RdmaReadResponseMiddle,
            O::RdmaReadResponseLast
        ]
    );
    assert_eq!((p[2].psn, p[2].va, p[2].len), (Psn::new(102), 0x2200, 88));
    // Each tells how many of its READ's responses follow it.
    assert_eq!(p.iter().map(|p| p.following).collect::<Vec<_>>(), [2, 1, 0]);
    assert_eq!(p[1].aeth, None);
    assert_eq!(p[0].aeth.unwrap().msn, 1);
    // Replay of the whole READ, and from its middle.
    assert_eq!(r.receive(&q, true), Decision::Reply(Reply::Read));
    assert_eq!(drain(&mut r), p);
    let mut mid = req(101, O::RdmaReadRequest, 0);
    mid.reth = Some(Reth {
        va: 0x2100,
        rkey: 9,
        dma_len: 344,
    });
    assert_eq!(r.receive(&mid, true), Decision::Reply(Reply::Read));
    assert_eq!(drain(&mut r), p[1..]);
    // Inconsistent duplicates are dropped.
    mid.reth = Some(Reth {
        va: 0x2100,
        rkey: 9,
        dma_len: 345,
    });
    assert_eq!(r.receive(&mid, true), Decision::Reply(Reply::None));
    // Zero-length READ: one Only response.
    let mut z = req(103, O::RdmaReadRequest, 0);
    z.reth = Some(Reth {
        va: 0,
        rkey: 9,
        dma_len: 0,
    });
    assert_eq!(exec(&mut r, &z), Reply::Read);
    let zp = drain(&mut r);
    assert_eq!(zp.len(), 1);
    assert_eq!(
        (zp[0].operation, zp[0].len, zp[0].following),
        (O::RdmaReadResponseOnly, 0, 0)
    );
}

#[test]
fn duplicate_write_before_a_later_atomic_is_not_acked() {
    let mut r = resp();
    let w = with_reth(req(100, O::RdmaWriteOnly, 8), 0x3000, 8);
    exec(&mut r, &w);
    let mut a = req(101, O::FetchAdd, 0);
    a.atomic = Some(AtomicEth {
        va: 0x3000,
        rkey: 1,
        swap_add: 1,
        compare: 0,
    });
    exec(&mut r, &a);
    exec(&mut r, &req(102, O::SendOnly, 1));
    // The WRITE again: no plain ACK, neither over the atomic (whose
    // response the requester may have lost) nor from before it (stale
    // for a requester already taking later responses); the atomic's
    // replay acknowledges the WRITE.
    assert_eq!(r.receive(&w, true), Decision::Reply(Reply::None));
    // The SEND after the atomic again: everything.
    let Decision::Reply(Reply::Ack { psn, .. }) = r.receive(&req(102, O::SendOnly, 1), true) else {
        panic!()
    };
    assert_eq!(psn, Psn::new(102));
}

#[test]
fn duplicate_write_before_a_later_read_is_not_acked() {
    // WRITE 100, READ 101..=104, SEND 105; the WRITE comes again (the
    // requester went back): no plain ACK, which rxe could take while
    // it receives the READ's responses; the READ's replay acks it.
    let mut r = resp();
    let w = with_reth(req(100, O::RdmaWriteOnly, 8), 0x3000, 8);
    exec(&mut r, &w);
    let rd = with_reth(req(101, O::RdmaReadRequest, 0), 0x1000, 4 * 256);
    assert_eq!(exec(&mut r, &rd), Reply::Read);
    drain(&mut r);
    exec(&mut r, &req(105, O::SendOnly, 1));
    assert_eq!(r.receive(&w, true), Decision::Reply(Reply::None));
    // The READ again: replayed.
    assert_eq!(r.receive(&rd, true), Decision::Reply(Reply::Read));
}

#[test]
fn atomics_are_not_executed_twice() {
    let mut r = resp();
    let mut q = req(100, O::FetchAdd, 0);
    q.atomic = Some(AtomicEth {
        va: 0x3000,
        rkey: 1,
        swap_add: 5,
        compare: 0,
    });
    assert_eq!(
        exec(&mut r, &q),
        Reply::AtomicAck {
            psn: Psn::new(100),
            aeth: ack_aeth(1),
            orig: 50
        }
    );
    // The duplicate is answered from the resource.
    assert_eq!(
        r.receive(&q, true),
        Decision::Reply(Reply::AtomicAck {
            psn: Psn::new(100),
            aeth: ack_aeth(1),
            orig: 50
        })
    );
    // Two more atomics push it out of the ring (max_dest_rd_atomic 2).
    for psn in [101, 102] {
        let mut a = q;
        a.psn = Psn::new(psn);
        exec(&mut r, &a);
    }
    assert_eq!(r.resources().count(), 2);
    assert_eq!(r.receive(&q, true), Decision::Reply(Reply::None));
    // Misaligned atomics are invalid requests.
    let mut m = q;
    m.psn = Psn::new(103);
    m.atomic = Some(AtomicEth {
        va: 0x3004,
        rkey: 1,
        swap_add: 5,
        compare: 0,
    });
    assert!(matches!(
        r.receive(&m, true),
        Decision::Reply(Reply::FatalNak { .. })
    ));
}

#[test]
fn failures_are_fatal() {
    let mut r = resp();
    let mut q = req(100, O::RdmaWriteOnly, 4);
    q.reth = Some(Reth {
        va: 0,
        rkey: 1,
        dma_len: 4,
    });
    let Decision::Execute(w) = r.receive(&q, true) else {
        panic!()
    };
    assert_eq!(
        r.commit(&w, Outcome::Failed(NakCode::RemoteAccessError)),
        Reply::FatalNak {
            psn: Psn::new(100),
            aeth: Aeth {
                syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
                msn: 0
            }
        }
    );
    assert!(r.is_error());
    assert_eq!(r.receive(&q, true), Decision::Reply(Reply::None));
    assert_eq!(r.commit(&w, Outcome::Done), Reply::None);
    // Committing twice does nothing the second time.
    let mut r = resp();
    let Decision::Execute(w) = r.receive(&req(100, O::SendOnly, 0), true) else {
        panic!()
    };
    assert_ne!(r.commit(&w, Outcome::Done), Reply::None);
    assert_eq!(r.commit(&w, Outcome::Done), Reply::None);
    assert_eq!(r.epsn(), Psn::new(101));
}

/// An ATOMIC WRITE request: 8 bytes for `va` under rkey 1.
fn atomic_write_req(psn: u32, va: u64) -> Request {
    with_reth(req(psn, O::AtomicWrite, 8), va, 8)
}

#[test]
fn atomic_write_is_answered_by_an_empty_read_response_and_never_redone() {
    let mut r = resp();
    let Decision::Execute(w) = r.receive(&atomic_write_req(100, 0x1000), true) else {
        panic!("not executed");
    };
    assert_eq!(
        w.kind,
        WorkKind::AtomicWrite {
            va: 0x1000,
            rkey: 1
        }
    );
    assert_eq!(r.commit(&w, Outcome::Done), Reply::Read);
    let p = drain(&mut r);
    assert_eq!(p.len(), 1);
    assert_eq!(
        (p[0].psn, p[0].operation, p[0].len),
        (Psn::new(100), O::RdmaReadResponseOnly, 0)
    );
    assert!(p[0].aeth.is_some_and(|a| a.syndrome.is_ack()));
    assert_eq!((r.epsn(), r.msn()), (Psn::new(101), 1));
    // A duplicate gets the response again, with nothing to execute.
    assert_eq!(
        r.receive(&atomic_write_req(100, 0x1000), true),
        Decision::Reply(Reply::Read)
    );
    assert_eq!(drain(&mut r).len(), 1);
    // Misaligned, or not exactly 8 bytes: invalid.
    let mut r = resp();
    assert!(matches!(
        r.receive(&atomic_write_req(100, 0x1004), true),
        Decision::Reply(Reply::FatalNak { .. })
    ));
    let mut r = resp();
    let q = with_reth(req(100, O::AtomicWrite, 8), 0x1000, 16);
    assert!(matches!(
        r.receive(&q, true),
        Decision::Reply(Reply::FatalNak { .. })
    ));
}

#[test]
fn a_resent_message_is_acknowledged_no_further_than_resent() {
    // A three-packet SEND and a SEND Only arrive whole; the requester
    // goes back to the first packet (its ACKs were lost). No re-ACK may
    // reach past the packet being resent: an ACK for the whole message
    // while the requester is still in it completes the message under its
    // feet (rxe's requester then stalls).
    let mut r = resp();
    exec(&mut r, &req(100, O::SendFirst, 256));
    exec(&mut r, &req(101, O::SendMiddle, 256));
    assert_eq!(exec(&mut r, &req(102, O::SendLast, 1)), acked(102, 1));
    assert_eq!(exec(&mut r, &req(103, O::SendOnly, 1)), acked(103, 2));
    for (psn, op) in [
        (100, O::SendFirst),
        (101, O::SendMiddle),
        (102, O::SendLast),
        (103, O::SendOnly),
    ] {
        assert_eq!(
            r.receive(
                &req(psn, op, if op == O::SendMiddle { 256 } else { 1 }),
                true
            ),
            Decision::Reply(acked(psn, 2)),
            "duplicate {psn}"
        );
    }
    // Nothing was executed again: the next new PSN is still 104.
    assert_eq!(exec(&mut r, &req(104, O::SendOnly, 1)), acked(104, 3));
}

#[test]
fn page_fault_pauses_until_resume_then_the_same_request_executes() {
    let mut r = resp();
    let q = with_reth(req(100, O::RdmaWriteOnly, 64), 0x1000, 64);
    let Decision::Execute(w) = r.receive(&q, true) else {
        panic!("not executed");
    };
    assert_eq!(r.commit(&w, Outcome::PageFault), Reply::Paused);
    assert!(r.is_paused());
    assert_eq!(r.epsn(), Psn::new(100), "nothing was taken");
    // Everything waits, the faulted request and those after it alike.
    assert_eq!(r.receive(&q, true), Decision::Defer);
    let next = req(101, O::SendOnly, 8);
    assert_eq!(r.receive(&next, true), Decision::Defer);
    r.resume();
    assert!(!r.is_paused());
    assert!(matches!(exec(&mut r, &q), Reply::Ack { .. }));
    assert!(matches!(exec(&mut r, &next), Reply::Ack { .. }));
    assert_eq!(r.epsn(), Psn::new(102));
}

#[test]
fn a_read_response_that_faults_is_held_and_sent_again_first() {
    let mut r = resp();
    // 4 packets of 256 bytes.
    assert_eq!(exec(&mut r, &read_req(100, 0x1000, 1024)), Reply::Read);
    let first = r.next_read_response().unwrap();
    let second = r.next_read_response().unwrap();
    r.hold_read_response(&second);
    assert!(r.is_paused());
    assert_eq!(r.next_read_response(), None, "nothing while paused");
    assert!(r.read_responses_queued());
    r.resume();
    let rest = drain(&mut r);
    assert_eq!(rest.first(), Some(&second));
    let psns: Vec<u32> = core::iter::once(first)
        .chain(rest)
        .map(|p| p.psn.value())
        .collect();
    assert_eq!(psns, [100, 101, 102, 103]);
}
