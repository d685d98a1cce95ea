// SPDX-License-Identifier: GPL-2.0

//! Queues shared with userspace through `mmap`, in the layout of rxe's
//! userspace ABI (`struct rxe_queue_buf` in `rdma_user_rxe.h`): a header with
//! the element size, the index mask and the producer and consumer indices
//! (each on its own cache line), then a power-of-two number of slots of a
//! power-of-two size. One slot always stays empty, so `producer ==
//! consumer` means empty and `producer + 1 == consumer` means full.
//!
//! The side that produces keeps its own copy of its index and only reads
//! the other side's index from shared memory, masked, so a misbehaving
//! process can corrupt its own queue but never make the kernel read or
//! write outside it.

use super::{bindings, device::Driver, ucontext::UContext};
use core::{
    mem::{offset_of, size_of},
    ptr::NonNull,
    sync::atomic::{AtomicU32, Ordering},
};
use kernel::{error::from_result, prelude::*, sync::Arc, types::Opaque};

const HEADER_LEN: usize = size_of::<bindings::rxe_queue_buf>();
const PRODUCER_OFFSET: usize = offset_of!(bindings::rxe_queue_buf, producer_index);
const CONSUMER_OFFSET: usize = offset_of!(bindings::rxe_queue_buf, consumer_index);

/// Where userspace finds a queue: pass to `mmap` on the verbs file
/// (`struct mminfo` of the rxe ABI).
#[derive(Clone, Copy, Default)]
pub(crate) struct MmapInfo {
    /// The `mmap` offset.
    pub(crate) offset: u64,
    /// Bytes to map.
    pub(crate) size: u32,
}

/// The memory of one queue.
///
/// # Invariants
///
/// `buf` is a zeroed `vmalloc_user` allocation of `len` bytes (a multiple of
/// the page size) holding the header and `mask + 1` slots of
/// `1 << log2_elem` bytes; the header's size fields are set.
struct QueueMem {
    buf: NonNull<u8>,
    len: usize,
    log2_elem: u32,
    mask: u32,
}

impl QueueMem {
    fn new(min_elems: u32, elem_size: usize) -> Result<Self> {
        let slots = min_elems
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .ok_or(EINVAL)?;
        let elem = elem_size.checked_next_power_of_two().ok_or(EINVAL)?;
        let log2_elem = elem.trailing_zeros();
        let len = (slots as usize)
            .checked_mul(elem)
            .and_then(|n| n.checked_add(HEADER_LEN))
            .and_then(|n| n.checked_next_multiple_of(1usize << bindings::PAGE_SHIFT))
            .filter(|n| u32::try_from(*n).is_ok())
            .ok_or(EINVAL)?;
        // SAFETY: plain allocation; NULL is handled.
        let buf = NonNull::new(
            unsafe { bindings::sroce_vmalloc_user(len as kernel::ffi::c_ulong) }.cast::<u8>(),
        )
        .ok_or(ENOMEM)?;
        let this = Self {
            buf,
            len,
            log2_elem,
            mask: slots - 1,
        };
        // SAFETY: the header lies within the fresh allocation; nothing else
        // can see it yet.
        unsafe {
            let hdr = buf.as_ptr().cast::<bindings::rxe_queue_buf>();
            (*hdr).log2_elem_size = log2_elem;
            (*hdr).index_mask = slots - 1;
        }
        Ok(this)
    }

    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: `offset` is one of the two index fields, 4-byte aligned
        // inside the live buffer; userspace also accesses them atomically.
        unsafe { AtomicU32::from_ptr(self.buf.as_ptr().add(offset).cast::<u32>()) }
    }

    fn slot(&self, index: u32) -> *mut u8 {
        let i = (index & self.mask) as usize;
        // SAFETY: `i <= mask`, so the slot lies inside the buffer.
        unsafe { self.buf.as_ptr().add(HEADER_LEN + (i << self.log2_elem)) }
    }
}

impl Drop for QueueMem {
    fn drop(&mut self) {
        // SAFETY: allocated by `vmalloc_user`; pages userspace still maps keep
        // their own references, so the memory stays valid for them.
        unsafe { bindings::vfree(self.buf.as_ptr().cast()) };
    }
}

// SAFETY: the buffer is plain memory; concurrent access is by atomics on the
// indices and by the single-producer discipline of its owner.
unsafe impl Send for QueueMem {}
// SAFETY: see `Send`.
unsafe impl Sync for QueueMem {}

/// Pages of a process's queue charged to its pinned memory (see
/// `sroce_charge_pinned`); uncharged when the memory is freed.
///
/// # Invariants
///
/// `mm` is held (`mmgrab`) and carries `pages` pages of this charge.
struct PinnedCharge {
    mm: NonNull<bindings::mm_struct>,
    pages: usize,
}

impl PinnedCharge {
    /// Charges `len` bytes to the calling process; `ENOMEM` over its
    /// `RLIMIT_MEMLOCK`.
    fn new(len: usize) -> Result<Self> {
        let pages = len.div_ceil(1usize << bindings::PAGE_SHIFT);
        // SAFETY: charges the current process's mm (NULL-safe in C).
        let mm = kernel::error::from_err_ptr(unsafe {
            bindings::sroce_charge_pinned(pages as kernel::ffi::c_ulong)
        })?;
        // INVARIANT: a held mm carrying the charge.
        Ok(Self {
            mm: NonNull::new(mm).ok_or(EINVAL)?,
            pages,
        })
    }
}

impl Drop for PinnedCharge {
    fn drop(&mut self) {
        // SAFETY: gives back the charge and the reference (type invariant).
        unsafe {
            bindings::sroce_uncharge_pinned(self.mm.as_ptr(), self.pages as kernel::ffi::c_ulong)
        };
    }
}

// SAFETY: the mm reference and counter may be dropped from any thread.
unsafe impl Send for PinnedCharge {}
// SAFETY: no shared access at all.
unsafe impl Sync for PinnedCharge {}

/// The core's mmap entry for a queue; owns the queue memory (and its
/// charge) once inserted.
#[repr(C)]
struct MmapEntry {
    entry: Opaque<bindings::rdma_user_mmap_entry>,
    mem: QueueMem,
    _charge: PinnedCharge,
}

/// Who owns a queue's memory.
enum Backing {
    /// A kernel consumer's queue; shared with its [`KernelRingProducer`].
    Kernel(Arc<QueueMem>),
    /// Mapped into a process: the core's mmap entry owns the memory and
    /// frees it (`mmap_free`) after `remove` and the last `mmap` lookup.
    User(NonNull<MmapEntry>),
}

/// A queue's memory and, for a process's queue, its mapping.
///
/// # Invariants
///
/// For [`Backing::User`], the entry stays inserted (and the memory alive)
/// until `drop` removes it.
struct Ring {
    backing: Backing,
}

// SAFETY: the entry pointer is only used to reach the memory, which is
// `Send + Sync`, and to remove the entry once.
unsafe impl Send for Ring {}
// SAFETY: see `Send`.
unsafe impl Sync for Ring {}

impl Ring {
    fn new<T: Driver>(
        min_elems: u32,
        elem_size: usize,
        uctx: Option<&UContext<T>>,
    ) -> Result<(Self, MmapInfo)> {
        let mem = QueueMem::new(min_elems, elem_size)?;
        let Some(uctx) = uctx else {
            return Ok((
                Self {
                    backing: Backing::Kernel(Arc::new(mem, GFP_KERNEL)?),
                },
                MmapInfo::default(),
            ));
        };
        let len = mem.len;
        let charge = PinnedCharge::new(len)?;
        let entry = KBox::new(
            MmapEntry {
                entry: Opaque::new(bindings::rdma_user_mmap_entry::default()),
                mem,
                _charge: charge,
            },
            GFP_KERNEL,
        )?;
        let raw = KBox::into_raw(entry);
        // SAFETY: `raw` is a live entry; `uctx` is a live user context. On
        // success the core keeps a reference until `remove`.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert(uctx.core_ptr(), (*raw).entry.get(), len)
        };
        if ret != 0 {
            // SAFETY: insertion failed, so the core does not know `raw`.
            drop(unsafe { KBox::from_raw(raw) });
            return Err(Error::from_errno(ret));
        }
        // SAFETY: inserted entries have their page offset set.
        let pgoff = unsafe { (*(*raw).entry.get()).start_pgoff };
        let info = MmapInfo {
            offset: (pgoff as u64) << bindings::PAGE_SHIFT,
            size: u32::try_from(len).map_err(|_| EINVAL)?,
        };
        // SAFETY: `raw` came from `KBox::into_raw` and is not NULL.
        let entry = unsafe { NonNull::new_unchecked(raw) };
        Ok((
            Self {
                backing: Backing::User(entry),
            },
            info,
        ))
    }

    fn mem(&self) -> &QueueMem {
        match &self.backing {
            Backing::Kernel(m) => m,
            // SAFETY: the entry is inserted until `drop` (type invariant).
            Backing::User(e) => unsafe { &(*e.as_ptr()).mem },
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if let Backing::User(e) = self.backing {
            // SAFETY: inserted (type invariant); after this the core frees the
            // entry through `mmap_free` and we never touch it again.
            unsafe { bindings::rdma_user_mmap_entry_remove((*e.as_ptr()).entry.get()) };
        }
    }
}

/// A queue the kernel produces into (a completion queue).
///
/// # Invariants
///
/// `producer` is the kernel's own producer index, masked.
pub(crate) struct KernelProducerQueue {
    ring: Ring,
    producer: u32,
}

impl KernelProducerQueue {
    /// A queue of at least `min_elems` usable slots of `elem_size` bytes,
    /// mapped for `uctx` when given.
    pub(crate) fn new<T: Driver>(
        min_elems: u32,
        elem_size: usize,
        uctx: Option<&UContext<T>>,
    ) -> Result<(Self, MmapInfo)> {
        let (ring, info) = Ring::new(min_elems, elem_size, uctx)?;
        Ok((Self { ring, producer: 0 }, info))
    }

    /// Usable slots.
    pub(crate) fn capacity(&self) -> u32 {
        self.ring.mem().mask
    }

    /// Entries the consumer has not taken yet.
    pub(crate) fn len(&self) -> u32 {
        let mem = self.ring.mem();
        let consumer = mem.index(CONSUMER_OFFSET).load(Ordering::Acquire);
        self.producer.wrapping_sub(consumer) & mem.mask
    }

    /// Appends one element (its bytes, at most the slot size); `ENOSPC` when
    /// the queue is full.
    pub(crate) fn push(&mut self, elem: &[u8]) -> Result {
        let mem = self.ring.mem();
        if elem.len() > 1 << mem.log2_elem {
            return Err(EINVAL);
        }
        let consumer = mem.index(CONSUMER_OFFSET).load(Ordering::Acquire) & mem.mask;
        let next = self.producer.wrapping_add(1) & mem.mask;
        if next == consumer {
            return Err(ENOSPC);
        }
        // SAFETY: the slot at `producer` is inside the buffer (length checked
        // above) and not handed to the consumer until the index moves.
        unsafe {
            bindings::sroce_memcpy_shared(
                mem.slot(self.producer).cast(),
                elem.as_ptr().cast(),
                elem.len(),
            )
        };
        mem.index(PRODUCER_OFFSET).store(next, Ordering::Release);
        self.producer = next;
        Ok(())
    }

    /// Moves the entries not yet consumed into `other` (for a resize);
    /// `EINVAL` if they do not fit.
    pub(crate) fn move_pending_into(&self, other: &mut Self) -> Result {
        let mem = self.ring.mem();
        let pending = self.len();
        if pending > other.capacity() {
            return Err(EINVAL);
        }
        let mut index = mem.index(CONSUMER_OFFSET).load(Ordering::Acquire) & mem.mask;
        let elem = 1usize << mem.log2_elem;
        let mut tmp = [0u8; 128];
        let chunk = elem.min(tmp.len());
        for _ in 0..pending {
            // SAFETY: the slot is inside the buffer and `chunk` bytes fit both.
            unsafe {
                bindings::sroce_memcpy_shared(
                    tmp.as_mut_ptr().cast(),
                    mem.slot(index).cast(),
                    chunk,
                )
            };
            other.push(&tmp[..chunk])?;
            index = index.wrapping_add(1) & mem.mask;
        }
        Ok(())
    }
}

/// A queue a process produces into and the kernel consumes from (send,
/// receive and shared receive queues).
///
/// # Invariants
///
/// `consumer` is the kernel's own consumer index, masked.
pub(crate) struct UserProducerQueue {
    ring: Ring,
    consumer: u32,
}

impl UserProducerQueue {
    /// A queue of at least `min_elems` usable slots of `elem_size` bytes,
    /// mapped for `uctx` when given.
    pub(crate) fn new<T: Driver>(
        min_elems: u32,
        elem_size: usize,
        uctx: Option<&UContext<T>>,
    ) -> Result<(Self, MmapInfo)> {
        let (ring, info) = Ring::new(min_elems, elem_size, uctx)?;
        Ok((Self { ring, consumer: 0 }, info))
    }

    /// Usable slots.
    pub(crate) fn capacity(&self) -> u32 {
        self.ring.mem().mask
    }

    /// The producer side of a kernel consumer's queue (`None` for a
    /// process's queue). Only one producer may exist per queue.
    pub(crate) fn kernel_producer(&self) -> Option<KernelRingProducer> {
        match &self.ring.backing {
            Backing::Kernel(mem) => Some(KernelRingProducer {
                mem: mem.clone(),
                producer: mem.index(PRODUCER_OFFSET).load(Ordering::Acquire) & mem.mask,
            }),
            Backing::User(_) => None,
        }
    }

    /// Bytes per slot.
    pub(crate) fn elem_size(&self) -> usize {
        1 << self.ring.mem().log2_elem
    }

    /// Entries posted and not yet consumed by the kernel. The producer index
    /// comes from the process and is masked before use.
    pub(crate) fn pending(&self) -> u32 {
        let mem = self.ring.mem();
        let producer = mem.index(PRODUCER_OFFSET).load(Ordering::Acquire);
        producer.wrapping_sub(self.consumer) & mem.mask
    }

    /// Copies the oldest pending entry into `out`, at most one slot;
    /// returns the bytes copied. The copy, not the ring, is what the kernel
    /// then parses and acts on.
    pub(crate) fn copy_oldest(&self, out: &mut [u8]) -> Result<usize> {
        if self.pending() == 0 {
            return Err(ENOENT);
        }
        let mem = self.ring.mem();
        let n = out.len().min(1 << mem.log2_elem);
        // SAFETY: the slot is inside the buffer and `n` bytes fit both sides.
        unsafe {
            bindings::sroce_memcpy_shared(
                out.as_mut_ptr().cast(),
                mem.slot(self.consumer).cast(),
                n,
            )
        };
        Ok(n)
    }

    /// Copies the `nth` pending entry (0 = the oldest) into `out`, at most
    /// one slot; returns the bytes copied. Entries stay in the ring, owned
    /// by the kernel, until [`Self::retire`].
    pub(crate) fn copy_pending(&self, nth: u32, out: &mut [u8]) -> Result<usize> {
        if nth >= self.pending() {
            return Err(ENOENT);
        }
        let mem = self.ring.mem();
        let n = out.len().min(1 << mem.log2_elem);
        // SAFETY: the slot is inside the buffer (the index is masked) and
        // `n` bytes fit both sides.
        unsafe {
            bindings::sroce_memcpy_shared(
                out.as_mut_ptr().cast(),
                mem.slot(self.consumer.wrapping_add(nth)).cast(),
                n,
            )
        };
        Ok(n)
    }

    /// Moves the entries not yet consumed, oldest first, into the empty
    /// queue `other` as if produced there (for a resize; slots of `other`
    /// are at least as large); `EINVAL` if they do not fit. Neither side may
    /// produce meanwhile (the caller excludes a kernel producer; a process
    /// that posts during its own resize only garbles its own queue).
    pub(crate) fn move_pending_into(&self, other: &mut Self) -> Result {
        let pending = self.pending();
        if pending > other.capacity() || other.pending() != 0 {
            return Err(EINVAL);
        }
        let src = self.ring.mem();
        let dst = other.ring.mem();
        if dst.log2_elem < src.log2_elem {
            return Err(EINVAL);
        }
        let len = 1usize << src.log2_elem;
        let mut producer = other.consumer;
        for nth in 0..pending {
            // SAFETY: both slots lie inside their buffers (indices are
            // masked) and `len` bytes fit both (checked above).
            unsafe {
                bindings::sroce_memcpy_shared(
                    dst.slot(producer).cast(),
                    src.slot(self.consumer.wrapping_add(nth)).cast(),
                    len,
                )
            };
            producer = producer.wrapping_add(1) & dst.mask;
        }
        dst.index(PRODUCER_OFFSET)
            .store(producer, Ordering::Release);
        Ok(())
    }

    /// Hands the oldest pending entry's slot back to the process.
    pub(crate) fn retire(&mut self) {
        if self.pending() == 0 {
            return;
        }
        let mem = self.ring.mem();
        self.consumer = self.consumer.wrapping_add(1) & mem.mask;
        mem.index(CONSUMER_OFFSET)
            .store(self.consumer, Ordering::Release);
    }
}

/// The producing side of a kernel consumer's send, receive or shared
/// receive queue: kernel work requests are written into the ring in the
/// layout a process would use, so the data path consumes both alike. The
/// ring is never mapped to a process, so the slot can be written in place.
///
/// # Invariants
///
/// `producer` is this producer's own index, masked; `mem` belongs to a
/// [`Backing::Kernel`] ring that has no other producer.
pub(crate) struct KernelRingProducer {
    mem: Arc<QueueMem>,
    producer: u32,
}

impl KernelRingProducer {
    /// Fills the next free slot (zeroed first) with `fill` and hands it to
    /// the consumer; `ENOMEM` when the ring is full (what verbs answer for
    /// a full queue). Nothing is published if `fill` fails.
    pub(crate) fn push_with(&mut self, fill: impl FnOnce(&mut [u8]) -> Result) -> Result {
        let mem = &*self.mem;
        let consumer = mem.index(CONSUMER_OFFSET).load(Ordering::Acquire) & mem.mask;
        let next = self.producer.wrapping_add(1) & mem.mask;
        if next == consumer {
            return Err(ENOMEM);
        }
        let len = 1usize << mem.log2_elem;
        // SAFETY: the slot lies inside the buffer; it is free (not between
        // consumer and producer), so the consumer does not read it until the
        // producer index moves, and there is no other producer (type
        // invariant). The kernel-only ring is never mapped to a process.
        let slot = unsafe { core::slice::from_raw_parts_mut(mem.slot(self.producer), len) };
        slot.fill(0);
        fill(slot)?;
        mem.index(PRODUCER_OFFSET).store(next, Ordering::Release);
        self.producer = next;
        Ok(())
    }
}

/// `ib_device_ops.mmap`: maps the queue whose entry matches the offset.
///
/// # Safety
///
/// Called by the core with a live user context and VMA.
pub(super) unsafe extern "C" fn mmap(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> kernel::ffi::c_int {
    from_result(|| {
        // SAFETY: valid arguments (function contract); the lookup checks the
        // VMA's size and flags and returns a referenced entry or NULL.
        let entry = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
        if entry.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: every entry sroce inserts is the first field of an
        // `MmapEntry`; our reference keeps it alive across the remap.
        let ret = unsafe {
            let mem = &(*entry.cast::<MmapEntry>()).mem;
            let r = bindings::remap_vmalloc_range(vma, mem.buf.as_ptr().cast(), 0);
            bindings::rdma_user_mmap_entry_put(entry);
            r
        };
        kernel::error::to_result(ret)?;
        Ok(0)
    })
}

/// `ib_device_ops.mmap_free`: the last reference to an entry is gone.
///
/// # Safety
///
/// Called once by the core per removed entry.
pub(super) unsafe extern "C" fn mmap_free(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: the entry came from `KBox::into_raw` of an `MmapEntry` whose
    // first field it is; dropping frees the queue memory too.
    drop(unsafe { KBox::from_raw(entry.cast::<MmapEntry>()) });
}
