// SPDX-License-Identifier: GPL-2.0

//! Heap storage for the protocol engines' tables.
//!
//! The engines of `roce` keep their per-request tables (the requester's
//! work requests, the responder's READ/atomic resources, the session
//! ledger) in storage the caller provides. On the host that is an array;
//! here it is a heap buffer, since an engine holding its table inline is
//! built by value on the stack (a 128-deep requester alone is 4 KiB, and a
//! kernel stack is 16).

use kernel::{alloc::Flags, prelude::*};

/// A fixed-length table of `T` on the heap.
pub(crate) struct EngineStore<T>(KVVec<T>);

impl<T: Clone> EngineStore<T> {
    /// `n` copies of `empty`. Process context (may sleep).
    pub(crate) fn filled(n: usize, empty: T) -> Result<Self> {
        Ok(Self(KVVec::from_elem(empty, n, GFP_KERNEL)?))
    }
}

impl<T> EngineStore<T> {
    /// `n` values made by `make` (for elements that cannot be copied),
    /// allocated with `flags`.
    pub(crate) fn from_fn(n: usize, flags: Flags, mut make: impl FnMut() -> T) -> Result<Self> {
        let mut v = KVVec::with_capacity(n, flags)?;
        for _ in 0..n {
            v.push_within_capacity(make()).map_err(|_| ENOMEM)?;
        }
        Ok(Self(v))
    }
}

/// No entries: what an engine's storage is while the engine is rebuilt
/// around it (see `SendQueueWith::restart`).
impl<T> Default for EngineStore<T> {
    fn default() -> Self {
        Self(KVVec::new())
    }
}

impl<T> AsRef<[T]> for EngineStore<T> {
    fn as_ref(&self) -> &[T] {
        &self.0
    }
}

impl<T> AsMut<[T]> for EngineStore<T> {
    fn as_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}
