//! The ledger keeps the group's per-session outstanding counts equal to
//! the messages they stand for, through go-back rounds, resends that reach
//! a message after it completed, and completions that lag a go-back.

use std::collections::VecDeque;

use proptest::prelude::*;
use sroce_proto::session::group::SessionSpec;
use sroce_proto::session::{GroupConfig, Ledger, Policy, SessionGroup, SessionId};

const W: usize = 8;
const N: u8 = 3;

#[derive(Clone, Debug)]
enum Op {
    /// A new message of this many bytes (if the window has room).
    New(u32),
    /// A go-back round begins, resending on this session.
    Round(u8),
    /// The next message of the round not resent yet goes out again (its
    /// first packet, then a second packet).
    Resend,
    /// The oldest message completes.
    Complete,
    /// A link goes down (the group may ask for a resend round).
    LinkDown(u8),
    /// A link comes back.
    LinkUp(u8),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0u32..70_000).prop_map(Op::New),
            1 => (0..N).prop_map(Op::Round),
            3 => Just(Op::Resend),
            3 => Just(Op::Complete),
            1 => (0..N).prop_map(Op::LinkDown),
            1 => (0..N).prop_map(Op::LinkUp),
        ],
        1..200,
    )
}

fn group() -> SessionGroup<{ N as usize }> {
    let specs: Vec<_> = (0..u16::from(N))
        .map(|i| SessionSpec {
            src_port: 61000 + i,
            local_addr: i as u8,
        })
        .collect();
    let mut cfg = GroupConfig::DEFAULT;
    cfg.policy = Policy::RoundRobin;
    cfg.reorder_guard = false;
    SessionGroup::new(&cfg, &specs, 0, Some(1000), 0).unwrap()
}

/// A message in flight as the model sees it.
struct Msg {
    tag: u32,
    /// The session whose count should hold it: where it was sent new, or
    /// the session of the go-back round that began since.
    counted_on: SessionId,
}

proptest! {
    #[test]
    fn counts_match_the_messages(ops in ops()) {
        let mut g = group();
        let mut l = Ledger::<W>::new();
        let mut flight: VecDeque<Msg> = VecDeque::new();
        let mut next = 0u32;
        let mut now = 0u64;
        let mut round_on = SessionId(0);
        // Messages in the current round, and those resent (a prefix).
        let (mut round_len, mut resent) = (0usize, 0usize);
        for op in ops {
            now += 10;
            match op {
                Op::New(bytes) if flight.len() < W => {
                    let on = l.on_packet(&mut g, next, false, bytes, bytes.div_ceil(1024).max(1), now);
                    flight.push_back(Msg { tag: next, counted_on: on });
                    next += 1;
                }
                Op::New(_) => {}
                Op::Round(s) => {
                    round_on = SessionId(s);
                    l.begin_round(&mut g, round_on, flight.front().map(|m| m.tag), now);
                    flight.iter_mut().for_each(|m| m.counted_on = round_on);
                    (round_len, resent) = (flight.len(), 0);
                }
                Op::Resend => {
                    // Go-back-N: in order, each message once per round.
                    if let Some(m) = flight.get(resent).filter(|_| resent < round_len) {
                        for _ in 0..2 {
                            prop_assert_eq!(l.on_packet(&mut g, m.tag, true, 4096, 4, now), round_on);
                        }
                        resent += 1;
                    }
                }
                Op::Complete => {
                    if let Some(m) = flight.pop_front() {
                        l.on_completed(&mut g, m.tag, now);
                        resent = resent.saturating_sub(1);
                        round_len = round_len.saturating_sub(1);
                    }
                }
                Op::LinkDown(a) | Op::LinkUp(a) => {
                    let up = matches!(op, Op::LinkUp(_));
                    let had = flight.iter().any(|m| m.counted_on == SessionId(a));
                    let r = g.on_link(a, up, now);
                    if !up && r.went_down != 0 && had {
                        prop_assert!(r.resend_on.is_some(), "session {} went down holding messages", a);
                    }
                    if let Some(on) = r.resend_on {
                        // The group resends everything on `on`.
                        round_on = on;
                        l.begin_round(&mut g, on, flight.front().map(|m| m.tag), now);
                        flight.iter_mut().for_each(|m| m.counted_on = on);
                        (round_len, resent) = (flight.len(), 0);
                    }
                }
            }
            for s in 0..N {
                let id = SessionId(s);
                let want = flight
                    .iter()
                    .filter(|m| m.counted_on == id)
                    .count();
                prop_assert_eq!(g.session(id).unwrap().outstanding_msgs() as usize, want, "session {}", s);
            }
        }
    }
}

/// A session holding a message counted on it is resent from when its
/// link goes down, whatever completions came before.
#[test]
fn link_down_resends_a_counted_message() {
    let mut g = group();
    let mut l = Ledger::<W>::new();
    // Messages 0, 1, 2 on sessions 0, 1, 2 (round-robin).
    for t in 0..3 {
        assert_eq!(l.on_packet(&mut g, t, false, 100, 1, 0), SessionId(t as u8));
    }
    // A round on session 0; message 0 is resent, then 0 and 1 complete
    // (1's first copy arrived after all, before its resend).
    l.begin_round(&mut g, SessionId(0), Some(0), 5);
    l.on_packet(&mut g, 0, true, 100, 1, 5);
    l.on_completed(&mut g, 0, 6);
    l.on_completed(&mut g, 1, 6);
    // Message 2 is resent on session 0, message 3 is new.
    l.on_packet(&mut g, 2, true, 100, 1, 7);
    let on3 = l.on_packet(&mut g, 3, false, 100, 1, 8);
    // Session 0 also carries message 2's resend.
    let want = 1 + u32::from(on3 == SessionId(0));
    assert_eq!(g.session(on3).unwrap().outstanding_msgs(), want);
    let r = g.on_link(on3.0, false, 9);
    assert!(r.resend_on.is_some(), "{r:?}");
}

/// A go-back round picks a session whose link goes down before any resend
/// went out (the round's session was chosen by a sequence NAK in the same
/// pass that saw the link event): the messages the round holds there are
/// moved to a live session.
#[test]
fn round_pending_on_a_dead_link_moves() {
    let mut g = group();
    let mut l = Ledger::<W>::new();
    for t in 0..2 {
        l.on_packet(&mut g, t, false, 65536, 64, 0);
    }
    let a = g.on_sequence_nak(SessionId(0), 10).unwrap();
    assert_eq!(a.resend_on, SessionId(0));
    l.begin_round(&mut g, a.resend_on, Some(0), 10);
    assert_eq!(g.session(SessionId(0)).unwrap().outstanding_msgs(), 2);
    let r = g.on_link(0, false, 11);
    let on = r
        .resend_on
        .expect("the round's messages move off the dead link");
    assert_ne!(on, SessionId(0));
    l.begin_round(&mut g, on, Some(0), 11);
    assert_eq!(l.on_packet(&mut g, 0, true, 65536, 64, 12), on);
}
