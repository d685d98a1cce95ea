// SPDX-License-Identifier: GPL-2.0

//! Owned socket buffers (`struct sk_buff`).

use super::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;

/// One reference to a socket buffer, freed (as a drop, visible to drop
/// monitors) when this value is dropped, or released as consumed with
/// [`SkBuff::consume`].
///
/// The buffer may be cloned (its data shared with another holder, e.g. a
/// packet tap): this type only reads the data. Writable buffers are
/// [`super::xmit::Datagram`]s.
///
/// # Invariants
///
/// Owns one reference to a live `sk_buff` that no one else frees.
pub(crate) struct SkBuff(NonNull<bindings::sk_buff>);

// SAFETY: an skb reference may be handed to and freed from any context
// (that is what queues of skbs do).
unsafe impl Send for SkBuff {}

impl SkBuff {
    /// Takes ownership of `skb`.
    ///
    /// # Safety
    ///
    /// `skb` must be a live skb whose reference the caller passes on.
    pub(super) unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: ownership is the caller's promise.
        Self(skb)
    }

    pub(super) fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// Gives up ownership without freeing (the caller passes it to C).
    pub(super) fn into_raw(self) -> *mut bindings::sk_buff {
        let p = self.0.as_ptr();
        core::mem::forget(self);
        p
    }

    /// Bytes from the data pointer to the end, linear part and fragments.
    pub(crate) fn len(&self) -> usize {
        // SAFETY: reads a field of a live skb we own.
        unsafe { (*self.as_raw()).len as usize }
    }

    /// Takes the skb out of the list the UDP layer is walking, if it is in
    /// one, and returns whether the next skb of that list is for the same
    /// destination QP: on receive, a piece of a UDP-segmented datagram (or
    /// of a list GRO made of one flow's datagrams) that more pieces
    /// follow, handed over one by one in the same call of the UDP layer
    /// (`udp_queue_rcv_skb` walks the list with its own next pointer). A
    /// hint only: nothing promises that the next piece passes the receive
    /// checks.
    pub(crate) fn unlink_followed_to_same_qp(&mut self) -> bool {
        // SAFETY: the helper reads fields and data of a live skb we own
        // and of the next skb of the list being walked, which the walker
        // owns and hands over only after this call; it clears our skb's
        // next pointer, which the walker no longer reads.
        unsafe { bindings::sroce_skb_unlink_followed_to_same_qp(self.as_raw()) }
    }

    /// The destination QP in a RoCEv2 datagram's BTH (the data starting at
    /// the UDP header), if the skb holds that far.
    pub(crate) fn bth_dest_qp(&self) -> Option<u32> {
        // SAFETY: the helper reads fields and data of a live skb we own.
        let qpn = unsafe { bindings::sroce_skb_bth_dest_qp(self.as_raw()) };
        u32::try_from(qpn).ok()
    }

    /// The linear part from the data pointer on (`skb_headlen` bytes).
    pub(crate) fn data(&self) -> &[u8] {
        // SAFETY: `data` is followed by `skb_headlen` initialised bytes in
        // the head buffer, which stays put while we own the skb and no
        // `&mut self` method runs.
        unsafe {
            let skb = self.as_raw();
            let n = bindings::sroce_skb_headlen(skb) as usize;
            core::slice::from_raw_parts((*skb).data, n)
        }
    }

    /// The bytes from the network header to the data pointer (on receive,
    /// when the data pointer is at the transport header: the IP header and
    /// any IPv6 extension headers). `None` if the network header is not set
    /// or not before the data pointer.
    pub(crate) fn network_header(&self) -> Option<&[u8]> {
        // SAFETY: both pointers are into the head buffer of a live skb
        // (the network header offset is relative to `head`); the range is
        // checked to lie between `head` and `data` before it is used.
        unsafe {
            let skb = self.as_raw();
            let head = (*skb).head;
            let data = (*skb).data;
            let nh = bindings::sroce_skb_network_header(skb);
            if nh < head || nh > data {
                return None;
            }
            let n = data.offset_from(nh) as usize;
            Some(core::slice::from_raw_parts(nh, n))
        }
    }

    /// Makes at least `n` bytes from the data pointer linear, so they show
    /// in [`Self::data`]. Fails with `EINVAL` if the skb is shorter and
    /// `ENOMEM` if the head could not be grown.
    pub(crate) fn pull_linear(&mut self, n: usize) -> Result {
        if n > self.len() {
            return Err(EINVAL);
        }
        let n = u32::try_from(n).map_err(|_| EINVAL)?;
        // SAFETY: a live skb we own; may reallocate the head, which is
        // fine since `&mut self` ends every borrow of the data.
        if unsafe { bindings::sroce_pskb_may_pull(self.as_raw(), n) } {
            Ok(())
        } else {
            Err(ENOMEM)
        }
    }

    /// Advances the data pointer past the first `n` bytes (a header that
    /// was read), making them linear first. Fails like
    /// [`Self::pull_linear`]. The skb's own pointers change, not its data,
    /// so this is fine on a clone.
    pub(crate) fn pull(&mut self, n: usize) -> Result {
        self.pull_linear(n)?;
        // SAFETY: the first `n` bytes are linear (just checked), so
        // `skb_pull` only moves `data` forward within the head.
        unsafe { bindings::skb_pull(self.as_raw(), n as u32) };
        Ok(())
    }

    /// Whether the frame was addressed to another host's MAC address (seen
    /// only by a device in promiscuous mode).
    pub(crate) fn is_for_other_host(&self) -> bool {
        // SAFETY: reads a field of a live skb we own.
        unsafe { bindings::sroce_skb_for_other_host(self.as_raw()) }
    }

    /// Feeds the bytes `from..to` (offsets from the data pointer), linear
    /// part and page fragments alike, to `f` in order, without copying.
    /// Returns how many bytes were fed: less than `to - from` if the skb is
    /// shorter or holds unreadable (device memory) fragments.
    ///
    /// `f` runs with fragment pages mapped atomically: it must not sleep.
    pub(crate) fn for_each_chunk(&self, from: usize, to: usize, mut f: impl FnMut(&[u8])) -> usize {
        let (Ok(from32), Ok(to32)) = (u32::try_from(from), u32::try_from(to)) else {
            return 0;
        };
        if from32 >= to32 {
            return 0;
        }
        let mut st = bindings::skb_seq_state::default();
        // SAFETY: `st` is a valid state on our stack; the skb is live and
        // not modified while we read (we hold `&self`).
        unsafe { bindings::skb_prepare_seq_read(self.as_raw(), from32, to32, &mut st) };
        let mut done: u32 = 0;
        loop {
            let mut p: *const u8 = core::ptr::null();
            // SAFETY: `st` was prepared above; on a nonzero return `p`
            // points to that many readable bytes, valid until the next
            // call on `st`.
            let n = unsafe { bindings::skb_seq_read(done, &mut p, &mut st) };
            if n == 0 || p.is_null() {
                break;
            }
            // `skb_seq_read` may return more than asked for at the end of a
            // block: never past `to`.
            let n = n.min(to32 - from32 - done);
            // SAFETY: see above; `n` does not exceed what was returned.
            f(unsafe { core::slice::from_raw_parts(p, n as usize) });
            done += n;
            if done >= to32 - from32 {
                break;
            }
        }
        // SAFETY: ends the read (unmaps any mapped fragment); harmless
        // after a read that ran to the end.
        unsafe { bindings::skb_abort_seq_read(&mut st) };
        done as usize
    }

    /// Copies `buf.len()` bytes at `offset` from the data pointer (linear
    /// part or fragments) into `buf`; `EFAULT` if the skb is too short.
    pub(crate) fn copy_to(&self, offset: usize, buf: &mut [u8]) -> Result {
        let off = i32::try_from(offset).map_err(|_| EINVAL)?;
        let len = i32::try_from(buf.len()).map_err(|_| EINVAL)?;
        // SAFETY: `buf` has `len` writable bytes; the call checks the
        // range against the skb and fails without writing past it.
        kernel::error::to_result(unsafe {
            bindings::skb_copy_bits(self.as_raw(), off, buf.as_mut_ptr().cast(), len)
        })
    }

    /// Releases the buffer as successfully consumed (not a drop).
    pub(crate) fn consume(self) {
        // SAFETY: we own the reference and give it up here.
        unsafe { bindings::sroce_consume_skb(self.into_raw()) };
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: we own the reference (type invariant).
        unsafe { bindings::sroce_kfree_skb(self.as_raw()) };
    }
}

/// Largest page block a paged [`TxBuffer`] asks for: order 3 (32 KiB with
/// 4 KiB pages), the largest the page allocator keeps per-CPU lists for.
const PAGED_MAX_ORDER: u32 = 3;

/// A private socket buffer being filled for sending: headroom reserved for
/// the headers to be pushed in front, then the data, a zeroed payload at
/// first. The payload is in the linear part, or (a paged buffer) in one
/// block of pages, the skb's only fragment, after a linear part that holds
/// only the headers pushed in front: the stack then segments it without
/// copying the payload (a UDP-segmented datagram's pieces share the page).
///
/// # Invariants
///
/// `skb` is not shared or cloned; its `len` bytes from `data` are
/// initialised. If `paged` is zero it is linear; else its one fragment is
/// a block of `paged` bytes of pages, its payload all of the fragment's
/// data, and nothing was added to the linear part but headers pushed.
pub(crate) struct TxBuffer {
    skb: SkBuff,
    paged: usize,
}

impl TxBuffer {
    /// A buffer with `headroom` bytes of headroom and a zeroed payload of
    /// `len` bytes. Allocates atomically (callable from any context):
    /// `ENOMEM` if that fails, `EMSGSIZE` if the sizes are absurd.
    pub(super) fn new(headroom: usize, len: usize) -> Result<Self> {
        let mut buf = Self::with_capacity(headroom, len)?;
        buf.append(len)?;
        Ok(buf)
    }

    /// A buffer with `headroom` bytes of headroom and room for `capacity`
    /// bytes of data, empty ([`Self::append`] adds them). Allocates
    /// atomically: `ENOMEM` if that fails, `EMSGSIZE` if the sizes are
    /// absurd.
    pub(super) fn with_capacity(headroom: usize, capacity: usize) -> Result<Self> {
        let size = headroom
            .checked_add(capacity)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n <= 0xffff + 256)
            .ok_or(EMSGSIZE)?;
        // SAFETY: plain allocation; GFP_ATOMIC never sleeps.
        let skb = unsafe { bindings::sroce_alloc_skb(size, kernel::bindings::GFP_ATOMIC) };
        let skb = NonNull::new(skb).ok_or(ENOMEM)?;
        // SAFETY: a fresh skb whose only reference is ours.
        let skb = unsafe { SkBuff::from_raw(skb) };
        // SAFETY: `size` bytes of room: the headroom is reserved, no data.
        unsafe { bindings::sroce_skb_reserve(skb.as_raw(), headroom as i32) };
        // INVARIANT: fresh, linear, private, no data yet.
        Ok(Self { skb, paged: 0 })
    }

    /// A paged buffer (see the type) with `headroom` bytes of headroom and
    /// room for `capacity` bytes of payload in pages, empty; a linear one
    /// ([`Self::with_capacity`]) if no block of pages that size is free.
    /// `EMSGSIZE` if `capacity` exceeds the largest block asked for (32
    /// KiB with 4 KiB pages).
    pub(super) fn with_paged_capacity(headroom: usize, capacity: usize) -> Result<Self> {
        let page = kernel::page::PAGE_SIZE;
        let order = (0..=PAGED_MAX_ORDER)
            .find(|&o| page << o >= capacity)
            .ok_or(EMSGSIZE)?;
        let mut buf = Self::with_capacity(headroom, 0)?;
        // SAFETY: a fresh private skb without fragments (just allocated).
        if unsafe { bindings::sroce_skb_add_page(buf.skb.as_raw(), order) } {
            // INVARIANT: one empty fragment of that many bytes, nothing
            // in the linear part.
            buf.paged = page << order;
            Ok(buf)
        } else {
            // Released as consumed: no packet was dropped.
            buf.skb.consume();
            Self::with_capacity(headroom, capacity)
        }
    }

    /// Bytes that can still be appended.
    pub(super) fn room(&self) -> usize {
        if self.paged != 0 {
            // SAFETY: reads a field of a live skb we own.
            return self.paged - unsafe { (*self.skb.as_raw()).data_len } as usize;
        }
        // SAFETY: reads the fields of a live skb we own.
        unsafe { bindings::sroce_skb_tailroom(self.skb.as_raw()) as usize }
    }

    /// Adds `len` zeroed bytes at the end of the data and returns them;
    /// `EMSGSIZE` if they do not fit.
    pub(super) fn append(&mut self, len: usize) -> Result<&mut [u8]> {
        if len > self.room() {
            return Err(EMSGSIZE);
        }
        let raw = self.skb.as_raw();
        // SAFETY: the linear tailroom or the fragment's block holds `len`
        // more bytes (checked above): putting them extends the data over
        // them, and they are zeroed before anything reads them. Pages are
        // not from high memory (atomic allocations never are), so the
        // fragment's address is mapped.
        unsafe {
            let p = if self.paged != 0 {
                bindings::sroce_skb_page_put(raw, len as u32)
            } else {
                bindings::skb_put(raw, len as u32)
            }
            .cast::<u8>();
            core::ptr::write_bytes(p, 0, len);
            Ok(core::slice::from_raw_parts_mut(p, len))
        }
    }

    /// The bytes from the data pointer to the end of the linear part, and
    /// those of the fragment (none for a linear buffer), to be written.
    pub(super) fn parts_mut(&mut self) -> (&mut [u8], &mut [u8]) {
        let skb = self.skb.as_raw();
        // SAFETY: a private skb: `data` has `skb_headlen` initialised bytes
        // and the fragment (of a paged buffer) `data_len` more, in a block
        // of pages we own and that is mapped (see `append`); no one else
        // reads or writes them while we hold `&mut self`, and the two
        // ranges are apart.
        unsafe {
            let linear = core::slice::from_raw_parts_mut(
                (*skb).data,
                bindings::sroce_skb_headlen(skb) as usize,
            );
            let paged = if self.paged != 0 {
                core::slice::from_raw_parts_mut(
                    bindings::sroce_skb_page_data(skb).cast::<u8>(),
                    (*skb).data_len as usize,
                )
            } else {
                &mut []
            };
            (linear, paged)
        }
    }

    /// The bytes from the data pointer to the end, to be written (the
    /// linear part; all of them in a linear buffer).
    pub(super) fn data_mut(&mut self) -> &mut [u8] {
        self.parts_mut().0
    }

    /// Whether the payload is in pages (see the type).
    pub(super) fn is_paged(&self) -> bool {
        self.paged != 0
    }

    /// Shortens the payload to `len` bytes (no-op if not shorter).
    pub(super) fn truncate(&mut self, len: usize) {
        if len >= self.skb.len() {
            return;
        }
        let raw = self.skb.as_raw();
        // SAFETY: a private skb, shortened (never lengthened): a paged
        // one in its fragment (the payload is all there), keeping the
        // fragment; a linear one at its tail.
        unsafe {
            if self.paged != 0 {
                let headlen = bindings::sroce_skb_headlen(raw) as usize;
                bindings::sroce_skb_page_trim(raw, len.saturating_sub(headlen) as u32);
            } else {
                bindings::skb_trim(raw, len as u32);
            }
        }
    }

    /// Bytes from the data pointer to the end.
    pub(super) fn len(&self) -> usize {
        self.skb.len()
    }

    /// The skb, for writing headers into its headroom (`skb_push`).
    pub(super) fn as_raw(&self) -> *mut bindings::sk_buff {
        self.skb.as_raw()
    }

    /// Gives up ownership without freeing (the caller passes it to C).
    pub(super) fn into_raw(self) -> *mut bindings::sk_buff {
        self.skb.into_raw()
    }
}
