//! Validation of a request at the expected PSN: the opcode sequence of
//! the message in progress, payload lengths against the path MTU and the
//! RETH's DMA length, and what the request asks the driver to do.

use super::super::opcode::{Operation, Position};
use super::super::segment::{MessagePlan, WqeOp};
use super::{InMessage, NakCode, Reject, Request, ResourceStore, ResponderWith, WorkKind};

impl<S: ResourceStore> ResponderWith<S> {
    /// Validates a request at the expected PSN against the message in
    /// progress and the length rules, and describes its work.
    pub(super) fn check(&self, req: &Request) -> Result<WorkKind, Reject> {
        use Operation as O;
        let mtu = self.cfg.mtu.bytes();
        let len = req.payload_len;
        let pos = req.operation.position();
        match (self.msg, req.operation) {
            (
                InMessage::Idle,
                O::SendFirst | O::SendOnly | O::SendOnlyWithImmediate | O::SendOnlyWithInvalidate,
            )
            | (
                InMessage::Send { .. },
                O::SendMiddle | O::SendLast | O::SendLastWithImmediate | O::SendLastWithInvalidate,
            ) => {
                let offset = match self.msg {
                    InMessage::Send { offset } => offset,
                    _ => 0,
                };
                check_payload(pos, len, mtu)?;
                match offset.checked_add(len) {
                    Some(total) if total <= MessagePlan::MAX_LEN => {}
                    _ => return Err(NakCode::InvalidRequest),
                }
                Ok(WorkKind::Send {
                    offset,
                    len,
                    first: pos.starts_message(),
                    last: pos.ends_message(),
                })
            }
            (
                InMessage::Idle,
                O::RdmaWriteFirst | O::RdmaWriteOnly | O::RdmaWriteOnlyWithImmediate,
            )
            | (
                InMessage::Write { .. },
                O::RdmaWriteMiddle | O::RdmaWriteLast | O::RdmaWriteLastWithImmediate,
            ) => {
                check_payload(pos, len, mtu)?;
                let (base, rkey, dma_len, offset) = match (self.msg, req.reth) {
                    (
                        InMessage::Write {
                            va,
                            rkey,
                            dma_len,
                            offset,
                        },
                        _,
                    ) => (va, rkey, dma_len, offset),
                    (_, Some(r)) => (r.va, r.rkey, r.dma_len, 0),
                    _ => return Err(NakCode::InvalidRequest),
                };
                let end = offset.checked_add(len).ok_or(NakCode::InvalidRequest)?;
                let fits = if pos.ends_message() {
                    end == dma_len
                } else {
                    end < dma_len
                };
                if !fits || dma_len > MessagePlan::MAX_LEN {
                    return Err(NakCode::InvalidRequest);
                }
                let va = base
                    .checked_add(u64::from(offset))
                    .ok_or(NakCode::RemoteAccessError)?;
                Ok(WorkKind::Write {
                    va,
                    rkey,
                    len,
                    first: pos.starts_message(),
                    dma_len,
                    imm: matches!(
                        req.operation,
                        O::RdmaWriteLastWithImmediate | O::RdmaWriteOnlyWithImmediate
                    ),
                })
            }
            (InMessage::Idle, O::RdmaReadRequest) => {
                let r = req.reth.ok_or(NakCode::InvalidRequest)?;
                if self.res_limit() == 0
                    || MessagePlan::new(WqeOp::Read, r.dma_len, self.cfg.mtu).is_err()
                {
                    return Err(NakCode::InvalidRequest);
                }
                Ok(WorkKind::Read {
                    va: r.va,
                    rkey: r.rkey,
                    len: r.dma_len,
                })
            }
            (InMessage::Idle, O::AtomicWrite) => {
                let r = req.reth.ok_or(NakCode::InvalidRequest)?;
                if self.res_limit() == 0
                    || r.dma_len != MessagePlan::ATOMIC_LEN
                    || len != MessagePlan::ATOMIC_LEN
                    || r.va & 7 != 0
                {
                    return Err(NakCode::InvalidRequest);
                }
                Ok(WorkKind::AtomicWrite {
                    va: r.va,
                    rkey: r.rkey,
                })
            }
            (InMessage::Idle, O::CompareSwap | O::FetchAdd) => {
                let a = req.atomic.ok_or(NakCode::InvalidRequest)?;
                if self.res_limit() == 0 || a.va & 7 != 0 {
                    return Err(NakCode::InvalidRequest);
                }
                Ok(WorkKind::Atomic {
                    va: a.va,
                    rkey: a.rkey,
                    compare_swap: req.operation == O::CompareSwap,
                    swap_add: a.swap_add,
                    compare: a.compare,
                })
            }
            // Missing First/Last, unsupported (FLUSH) or response
            // opcodes.
            _ => Err(NakCode::InvalidRequest),
        }
    }
}

/// Payload length rules: First and Middle carry exactly one MTU, Last
/// 1..=MTU bytes, Only 0..=MTU bytes.
fn check_payload(pos: Position, len: u32, mtu: u32) -> Result<(), Reject> {
    let ok = match pos {
        Position::First | Position::Middle => len == mtu,
        Position::Last => len != 0 && len <= mtu,
        Position::Only => len <= mtu,
    };
    if ok {
        Ok(())
    } else {
        Err(NakCode::InvalidRequest)
    }
}
