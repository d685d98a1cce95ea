//! RoCEv2 protocol core for sroce.
//!
//! Bounds-checked parsing and building of the InfiniBand transport headers
//! carried by RoCEv2 (BTH and its extension headers), 24-bit PSN arithmetic,
//! opcode facts, the RoCEv2 invariant CRC (ICRC), and the RC transport
//! engines (requester, completer, responder) as pure state machines.
//!
//! This crate is `no_std`, allocation-free and free of `unsafe`. All code
//! lives in [`roce`]; the kernel driver compiles that directory as a plain
//! module (`#[path = ".../roce/mod.rs"] mod roce;`), so this file only holds
//! crate-level attributes and the re-export.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs, rust_2018_idioms, unreachable_pub)]
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::todo,
        clippy::unimplemented,
        clippy::unreachable,
        clippy::arithmetic_side_effects,
        clippy::float_arithmetic,
        clippy::cast_lossless,
        clippy::as_underscore
    )
)]

#[cfg(test)]
extern crate std;

pub mod roce;

pub use roce::*;
