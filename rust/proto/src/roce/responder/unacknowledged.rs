//! The unacknowledged connected service (UC): the same opcode sequence and
//! length rules as RC, but nothing is sent back. A PSN gap means packets
//! were lost: the message in progress is abandoned and the responder
//! resynchronises on the packet that arrived, which starts a new message
//! if it is a First or Only packet and is dropped otherwise. A packet
//! behind the expected PSN (duplicated or reordered) is dropped. A request
//! that cannot be carried out (bad R_Key or access, no receive WQE, a
//! broken opcode sequence) drops its message and leaves the QP as it is;
//! only a local error (a receive WQE too small for the SEND) moves it to
//! the error state.

use super::super::opcode::Transport;
use super::{Decision, InMessage, NakCode, Reply, Request, ResourceStore, ResponderWith, Work};

impl<S: ResourceStore> ResponderWith<S> {
    /// [`ResponderWith::receive`] for the unacknowledged service.
    pub(super) fn receive_unacknowledged(&mut self, req: &Request, recv_ready: bool) -> Decision {
        let d = req.psn.diff(self.epsn);
        if d < 0 {
            return Decision::Reply(Reply::Dropped);
        }
        if d > 0 {
            self.msg = InMessage::Idle;
            self.epsn = req.psn;
        }
        if !req.operation.valid_for(Transport::Uc) {
            return Decision::Reply(self.drop_message());
        }
        let kind = match self.check(req) {
            Ok(kind) => kind,
            Err(_) => return Decision::Reply(self.drop_message()),
        };
        if kind.needs_recv() && !recv_ready {
            return Decision::Reply(self.drop_message());
        }
        Decision::Execute(Work {
            psn: req.psn,
            ack_req: false,
            kind,
        })
    }

    /// [`ResponderWith::commit`] of failed work for the unacknowledged
    /// service: a remote access error drops the message; anything else is
    /// the responder's local error.
    pub(super) fn unacknowledged_failure(&mut self, code: NakCode) -> Reply {
        if code == NakCode::RemoteAccessError {
            return self.drop_message();
        }
        self.error = true;
        Reply::Fatal
    }

    /// Drops the message the packet at the expected PSN belongs to; the
    /// next packet is expected after it.
    fn drop_message(&mut self) -> Reply {
        self.msg = InMessage::Idle;
        self.epsn = self.epsn.next();
        Reply::Dropped
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::reth::Reth;
    use super::super::super::{aeth::NakCode, opcode::Operation as O, psn::Psn, segment::Mtu};
    use super::super::{Decision, Outcome, Reply, Request, Responder, ResponderConfig, WorkKind};

    fn uc() -> Responder<1> {
        let mut cfg = ResponderConfig::new(Mtu::Mtu256);
        cfg.acknowledged = false;
        Responder::new(cfg, Psn::new(10))
    }

    fn req(psn: u32, operation: O, payload_len: u32) -> Request {
        Request {
            psn: Psn::new(psn),
            operation,
            ack_req: true,
            payload_len,
            reth: None,
            atomic: None,
        }
    }

    fn write_first(psn: u32, dma_len: u32) -> Request {
        let mut q = req(psn, O::RdmaWriteFirst, 256);
        q.reth = Some(Reth {
            va: 0x1000,
            rkey: 5,
            dma_len,
        });
        q
    }

    /// Receives and commits `q` as done; the reply.
    fn deliver(r: &mut Responder<1>, q: &Request) -> Reply {
        match r.receive(q, true) {
            Decision::Execute(w) => {
                assert!(!w.ack_req);
                r.commit(&w, Outcome::Done)
            }
            Decision::Reply(reply) => reply,
            Decision::Defer => panic!("deferred"),
        }
    }

    #[test]
    fn a_gap_abandons_the_message_and_the_next_one_is_taken() {
        let mut r = uc();
        assert_eq!(deliver(&mut r, &req(10, O::SendFirst, 256)), Reply::None);
        // 11 lost: the SEND's Last is dropped, and so is the message.
        assert_eq!(deliver(&mut r, &req(12, O::SendLast, 5)), Reply::Dropped);
        assert!(!r.send_in_progress());
        assert_eq!(r.epsn(), Psn::new(13));
        // The next message starts clean at a First.
        let Decision::Execute(w) = r.receive(&req(13, O::SendFirst, 256), true) else {
            panic!("not taken");
        };
        assert!(matches!(
            w.kind,
            WorkKind::Send {
                offset: 0,
                first: true,
                ..
            }
        ));
        assert_eq!(r.commit(&w, Outcome::Done), Reply::None);
        assert_eq!(deliver(&mut r, &req(14, O::SendLast, 1)), Reply::None);
        assert_eq!(r.msn(), 1);
        // A duplicate or late packet is dropped without moving anything.
        assert_eq!(deliver(&mut r, &req(13, O::SendFirst, 256)), Reply::Dropped);
        assert_eq!(r.epsn(), Psn::new(15));
        // A gap that lands on an Only starts a message there.
        assert_eq!(deliver(&mut r, &req(40, O::SendOnly, 3)), Reply::None);
        assert_eq!((r.epsn(), r.msn()), (Psn::new(41), 2));
    }

    #[test]
    fn failures_drop_the_message_and_only_local_errors_are_fatal() {
        let mut r = uc();
        // Bad R_Key on a WRITE First: its Middle and Last go too.
        let Decision::Execute(w) = r.receive(&write_first(10, 768), true) else {
            panic!("not taken");
        };
        assert_eq!(
            r.commit(&w, Outcome::Failed(NakCode::RemoteAccessError)),
            Reply::Dropped
        );
        assert_eq!(
            deliver(&mut r, &req(11, O::RdmaWriteMiddle, 256)),
            Reply::Dropped
        );
        assert_eq!(
            deliver(&mut r, &req(12, O::RdmaWriteLast, 256)),
            Reply::Dropped
        );
        // No receive WQE: dropped, no RNR NAK.
        assert_eq!(
            r.receive(&req(13, O::SendOnly, 8), false),
            Decision::Reply(Reply::Dropped)
        );
        // Operations UC does not carry are dropped, never executed.
        let mut read = req(14, O::RdmaReadRequest, 0);
        read.reth = Some(Reth {
            va: 0,
            rkey: 1,
            dma_len: 8,
        });
        assert_eq!(r.receive(&read, true), Decision::Reply(Reply::Dropped));
        assert!(!r.is_error());
        // A receive WQE too small: a local error, the QP's end.
        let Decision::Execute(w) = r.receive(&req(15, O::SendOnly, 200), true) else {
            panic!("not taken");
        };
        assert_eq!(
            r.commit(&w, Outcome::Failed(NakCode::InvalidRequest)),
            Reply::Fatal
        );
        assert!(r.is_error());
        assert_eq!(
            r.receive(&req(16, O::SendOnly, 1), true),
            Decision::Reply(Reply::None)
        );
    }
}
