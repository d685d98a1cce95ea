//! RoCEv2 transport headers, opcode facts, PSN arithmetic and ICRC, and
//! the RC transport engines.
//!
//! The engines are pure state machines: they take parsed headers and
//! queue facts and return decisions, leaving memory copies, timers and
//! packet I/O to the driver.
//! - [`segment`]: cutting a work request into request packets;
//! - [`requester`]: the send queue window, PSN assignment, what to send
//!   next ([`SendQueue`]);
//! - [`completer`]: ACKs, NAKs, READ responses, atomic ACKs and timeouts
//!   at the requester ([`SendQueue::on_response`]);
//! - [`responder`]: PSN and opcode sequence checks, duplicates, ACKs and
//!   READ/atomic resources at the receiver ([`Responder`]);
//! - [`wc`] and [`timer`]: completion statuses and timer values.
//!
//! Everything here is `no_std`, allocation-free, `unsafe`-free and never
//! panics on input: every parser returns [`Error`] instead. The directory is
//! compiled both as the body of the `sroce-proto` crate (host tests) and as a
//! plain module inside the kernel driver, so files in it refer to each other
//! only through `super::`, never through `crate::`.
//!
//! Wire layout of a RoCEv2 transport packet (the UDP payload, port 4791):
//!
//! ```text
//! BTH (12) | extension headers (per opcode) | payload | pad (0..=3) | ICRC (4)
//! ```
//!
//! All header fields are big-endian; the ICRC is the one exception (see
//! [`icrc`]).

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod completer;
pub mod deth;
pub mod error;
pub mod feth;
pub mod grh;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod multipath;
pub mod opcode;
pub mod packet;
pub mod psn;
pub mod requester;
pub mod responder;
pub mod reth;
pub mod segment;
pub mod session;
pub mod soft_crc32;
pub mod timer;
pub mod uso;
pub mod wc;
mod wire;

pub use aeth::{Aeth, NakCode, Syndrome};
pub use atomic_ack_eth::AtomicAckEth;
pub use atomic_eth::AtomicEth;
pub use bth::Bth;
pub use completer::{Action, Response, ResponseKind};
pub use deth::Deth;
pub use error::Error;
pub use feth::Feth;
pub use grh::Grh;
pub use icrc::{Crc32, Icrc, IpHeader};
pub use ieth::Ieth;
pub use immdt::ImmDt;
pub use opcode::{ExtHeader, ExtHeaders, Opcode, OpcodeInfo, Operation, Position, Transport};
pub use packet::{Headers, Packet};
pub use psn::Psn;
pub use requester::{
    Completion, RequestPacket, RequesterConfig, SendQueue, SendQueueWith, SendWqe, Slot, SlotStore,
};
pub use responder::{
    Decision, Outcome, ReadReply, ReadResponsePacket, Reply, Request, Responder, ResponderConfig,
    Work, WorkKind,
};
pub use reth::Reth;
pub use segment::{MessagePlan, Mtu, RethSpan, Segment, WqeOp};
pub use soft_crc32::SoftCrc32;
pub use wc::WcStatus;
