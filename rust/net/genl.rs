// SPDX-License-Identifier: GPL-2.0

//! Generic netlink families: registration, requests, replies and dumps.
//!
//! C header: `include/net/genetlink.h`.
//!
//! A [`Family`] describes its attributes (an [`AttrPolicy`] per attribute
//! type, which the generic netlink core validates strictly before calling
//! the family) and its commands; [`FamilyRegistration`] registers it. Only
//! [`Op::admin`] commands need `CAP_NET_ADMIN` (`GENL_ADMIN_PERM`, checked
//! by the core). Operations are serialised by the core's `genl_mutex` (the
//! family is not `parallel_ops`). A family may have multicast groups
//! ([`Family::MCGRPS`]), to which [`multicast`] sends events from any
//! context.

use super::netns::Net;
use super::{bindings, netns::NetKey};
use crate::rdma::context_slot::ContextSlot;
use core::{
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{AtomicPtr, Ordering},
};
use kernel::{error::from_result, prelude::*, str::CStr, sync::Arc, types::Opaque};

/// How the core validates one attribute type.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AttrPolicy {
    /// Not an attribute of this family: rejected.
    Reject,
    /// A `u8` in `min..=max`.
    U8 { min: u8, max: u8 },
    /// Any `u16`.
    U16,
    /// Any `u32`.
    U32,
    /// A NUL-terminated string of at most `max_len` bytes before the NUL.
    String { max_len: u16 },
}

/// One command of a family.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op {
    /// The command number (`genlmsghdr.cmd`).
    pub(crate) cmd: u8,
    /// Has a `doit` (one request, one reply or an ack).
    pub(crate) doit: bool,
    /// Has a `dumpit` (`NLM_F_DUMP`).
    pub(crate) dump: bool,
    /// Needs `CAP_NET_ADMIN` in the initial user namespace.
    pub(crate) admin: bool,
}

/// A generic netlink family.
pub(crate) trait Family: Send + Sync + 'static {
    /// Family name, at most `GENL_NAMSIZ - 1` bytes.
    const NAME: &'static CStr;
    /// Family version.
    const VERSION: u32;
    /// Policy by attribute type; index 0 is unused (`Reject`).
    const POLICY: &'static [AttrPolicy];
    /// The commands.
    const OPS: &'static [Op];
    /// Names of the multicast groups (at most `GENL_NAMSIZ - 1` bytes
    /// each), addressed by index in [`multicast`].
    const MCGRPS: &'static [&'static CStr] = &[];

    /// Handles a request for `cmd` (an [`Op`] with `doit`), whose
    /// attributes passed the policy. Returning `Ok` without sending a reply
    /// gives the caller an ack (if asked for).
    fn doit(&self, cmd: u8, req: &Request<'_>) -> Result;

    /// Adds the dump entries of `cmd` from `*cursor` on, advancing
    /// `*cursor` past each entry written. The entry that does not fit
    /// fails with `EMSGSIZE`; the dump then continues from `*cursor` in the
    /// next message.
    fn dump(&self, cmd: u8, cursor: &mut usize, out: &mut Dump<'_>) -> Result;
}

/// An attribute payload the reply builders can write.
pub(crate) trait AttrValue {
    /// The bytes of the attribute's payload.
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R;
}

impl AttrValue for u8 {
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&[*self])
    }
}

impl AttrValue for u16 {
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.to_ne_bytes())
    }
}

impl AttrValue for u32 {
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.to_ne_bytes())
    }
}

impl AttrValue for u64 {
    // 4-byte aligned, as `nla_put_u64` would; readers copy it out.
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&self.to_ne_bytes())
    }
}

impl AttrValue for [u8] {
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(self)
    }
}

impl AttrValue for CStr {
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(self.to_bytes_with_nul())
    }
}

/// A generic netlink message being built in an skb.
///
/// # Invariants
///
/// `skb` is a live skb owned by the caller of the builder, and `hdr` the
/// user header `genlmsg_put` returned for the message being built in it.
pub(crate) struct Message<'a> {
    skb: NonNull<bindings::sk_buff>,
    hdr: NonNull<core::ffi::c_void>,
    _skb: PhantomData<&'a mut bindings::sk_buff>,
}

impl Message<'_> {
    /// Appends attribute `ty` with `value`; `EMSGSIZE` if it does not fit.
    pub(crate) fn put<V: AttrValue + ?Sized>(&mut self, ty: u16, value: &V) -> Result {
        value.with_bytes(|b| {
            let len = i32::try_from(b.len()).map_err(|_| EMSGSIZE)?;
            // SAFETY: `skb` is live (type invariant); `nla_put` copies
            // `len` bytes from `b` and fails if they do not fit.
            kernel::error::to_result(unsafe {
                bindings::nla_put(self.skb.as_ptr(), ty.into(), len, b.as_ptr().cast())
            })
        })
    }
}

/// A request being handled by [`Family::doit`].
pub(crate) struct Request<'a> {
    info: NonNull<bindings::genl_info>,
    maxattr: u16,
    _info: PhantomData<&'a mut bindings::genl_info>,
}

impl Request<'_> {
    fn attr(&self, ty: u16) -> Option<NonNull<bindings::nlattr>> {
        if ty == 0 || ty > self.maxattr {
            return None;
        }
        // SAFETY: `info` is live for the call; the core parsed the request
        // into `attrs`, an array of `maxattr + 1` entries (NULL if absent).
        let attrs = unsafe { (*self.info.as_ptr()).attrs };
        if attrs.is_null() {
            return None;
        }
        // SAFETY: `ty <= maxattr`, within the array (see above).
        NonNull::new(unsafe { *attrs.add(ty.into()) })
    }

    fn payload(&self, ty: u16) -> Option<&[u8]> {
        let nla = self.attr(ty)?;
        // SAFETY: `nla` is a validated attribute of the request, which
        // outlives `self`.
        let (data, len) = unsafe {
            (
                bindings::sroce_nla_data(nla.as_ptr()),
                bindings::sroce_nla_len(nla.as_ptr()),
            )
        };
        let len = usize::try_from(len).ok()?;
        // SAFETY: `len` bytes of payload follow the attribute header
        // inside the request message.
        Some(unsafe { core::slice::from_raw_parts(data.cast::<u8>(), len) })
    }

    /// Attribute `ty` as a `u8` (its policy must be [`AttrPolicy::U8`]).
    pub(crate) fn u8(&self, ty: u16) -> Option<u8> {
        self.payload(ty)?.first().copied()
    }

    /// Attribute `ty` as a `u16` (its policy must be [`AttrPolicy::U16`]).
    pub(crate) fn u16(&self, ty: u16) -> Option<u16> {
        let b = self.payload(ty)?.get(..2)?;
        Some(u16::from_ne_bytes([b[0], b[1]]))
    }

    /// Attribute `ty` as a `u32` (its policy must be [`AttrPolicy::U32`]).
    pub(crate) fn u32(&self, ty: u16) -> Option<u32> {
        let b = self.payload(ty)?.get(..4)?;
        Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Attribute `ty` as a string (its policy must be
    /// [`AttrPolicy::String`], which guarantees the NUL).
    pub(crate) fn str(&self, ty: u16) -> Option<&CStr> {
        CStr::from_bytes_with_nul(self.payload(ty)?).ok()
    }

    /// Sets the extended ack message returned with an error, pointing at
    /// attribute `ty` if it is present (0 for none).
    pub(crate) fn set_err(&self, ty: u16, msg: &'static CStr) {
        let attr = self
            .attr(ty)
            .map_or(core::ptr::null(), |a| a.as_ptr().cast_const());
        // SAFETY: `info` is live; `msg` is static, as extack requires.
        unsafe { bindings::sroce_genl_set_err_msg(self.info.as_ptr(), attr, msg.as_char_ptr()) };
    }

    /// Sends a reply of command `cmd` that `fill` fills in.
    pub(crate) fn reply(&self, cmd: u8, fill: impl FnOnce(&mut Message<'_>) -> Result) -> Result {
        // SAFETY: allocates an skb or returns NULL.
        let skb = NonNull::new(unsafe { bindings::sroce_genlmsg_new_default() }).ok_or(ENOMEM)?;
        // SAFETY: `skb` is ours; `info` is live.
        let hdr =
            unsafe { bindings::sroce_genlmsg_put_reply(skb.as_ptr(), self.info.as_ptr(), cmd) };
        let filled = match NonNull::new(hdr) {
            None => Err(EMSGSIZE),
            Some(hdr) => {
                // INVARIANT: `skb` is ours, `hdr` its header.
                let mut msg = Message {
                    skb,
                    hdr,
                    _skb: PhantomData,
                };
                fill(&mut msg)
            }
        };
        if let Err(e) = filled {
            // SAFETY: the skb is ours and not sent.
            unsafe { bindings::sroce_kfree_skb(skb.as_ptr()) };
            return Err(e);
        }
        // SAFETY: `hdr` is non-NULL here; `genlmsg_reply` consumes the skb.
        unsafe {
            bindings::sroce_genlmsg_end(skb.as_ptr(), hdr);
            kernel::error::to_result(bindings::sroce_genlmsg_reply(
                skb.as_ptr(),
                self.info.as_ptr(),
            ))
        }
    }
}

/// The message a dump is filling.
pub(crate) struct Dump<'a> {
    skb: NonNull<bindings::sk_buff>,
    cb: NonNull<bindings::netlink_callback>,
    _skb: PhantomData<&'a mut bindings::sk_buff>,
}

impl Dump<'_> {
    /// Adds one entry of command `cmd` that `fill` fills in; on failure
    /// (`EMSGSIZE` when it does not fit) the entry is removed again.
    pub(crate) fn entry(
        &mut self,
        cmd: u8,
        fill: impl FnOnce(&mut Message<'_>) -> Result,
    ) -> Result {
        // SAFETY: `skb` and `cb` are the live dump skb and callback state.
        let hdr =
            unsafe { bindings::sroce_genlmsg_put_dump(self.skb.as_ptr(), self.cb.as_ptr(), cmd) };
        let hdr = NonNull::new(hdr).ok_or(EMSGSIZE)?;
        // INVARIANT: `hdr` is the header just put in `skb`.
        let mut msg = Message {
            skb: self.skb,
            hdr,
            _skb: PhantomData,
        };
        let r = fill(&mut msg);
        // SAFETY: `hdr` is the last message's header in `skb`.
        unsafe {
            if r.is_ok() {
                bindings::sroce_genlmsg_end(self.skb.as_ptr(), msg.hdr.as_ptr());
            } else {
                bindings::sroce_genlmsg_cancel(self.skb.as_ptr(), msg.hdr.as_ptr());
            }
        }
        r
    }

    /// The network namespace of the socket that asked for the dump: what
    /// a dump shows of other namespaces is up to the family.
    pub(crate) fn requester_net(&self) -> NetKey {
        // SAFETY: `cb` is the live dump state; its skb's socket is the
        // requester's, alive while the dump runs.
        NetKey::of_raw(unsafe { bindings::sroce_genl_dump_net(self.cb.as_ptr()) })
    }

    fn len(&self) -> u32 {
        // SAFETY: `skb` is live.
        unsafe { bindings::sroce_skb_len(self.skb.as_ptr()) }
    }
}

/// The context of the one [`FamilyRegistration`] (the callbacks carry no
/// context argument). Set while the registration exists.
static CONTEXT: ContextSlot = ContextSlot::new();

/// The registered family, for [`multicast`]: published once registered,
/// cleared (and an RCU grace period waited for) before unregistration.
static PUBLISHED: AtomicPtr<bindings::genl_family> = AtomicPtr::new(core::ptr::null_mut());

/// The C structures of a registered family, which must not move.
struct Tables {
    family: Opaque<bindings::genl_family>,
    _ops: KVec<bindings::genl_small_ops>,
    _policy: KVec<bindings::nla_policy>,
    _mcgrps: KVec<bindings::genl_multicast_group>,
}

/// Sends a message for command `cmd`, its attributes written by `fill`, to
/// the listeners of multicast group `group` (an index in
/// [`Family::MCGRPS`]) of the registered family in namespace `net`.
/// Nothing is built when no one there listens, or no family is
/// registered. Any context (allocates atomically); `ENOMEM`, or `fill`'s
/// error.
pub(crate) fn multicast(
    net: &Net,
    group: u32,
    cmd: u8,
    fill: impl FnOnce(&mut Message<'_>) -> Result,
) -> Result {
    let _rcu = kernel::sync::rcu::read_lock();
    let family = PUBLISHED.load(Ordering::Acquire);
    if family.is_null() {
        return Ok(());
    }
    // SAFETY: a published family is live until after our read section
    // (see below); `n_mcgrps` is fixed at registration.
    if group >= u32::from(unsafe { (*family).n_mcgrps }) {
        return Err(EINVAL);
    }
    // SAFETY: a published family stays registered, with its tables, until
    // an RCU grace period after it was cleared: past our read section.
    if !unsafe { bindings::sroce_genl_has_listeners(family, net.as_raw(), group) } {
        return Ok(());
    }
    // SAFETY: plain allocation (GFP_ATOMIC).
    let skb = NonNull::new(unsafe { bindings::sroce_genlmsg_new_atomic() }).ok_or(ENOMEM)?;
    // SAFETY: a fresh skb and the registered family (see above).
    let hdr = unsafe { bindings::genlmsg_put(skb.as_ptr(), 0, 0, family, 0, cmd) };
    let Some(hdr) = NonNull::new(hdr) else {
        // SAFETY: our skb, never handed on.
        unsafe { bindings::sroce_kfree_skb(skb.as_ptr()) };
        return Err(EMSGSIZE);
    };
    // INVARIANT: `skb` is ours and `hdr` its message's header.
    let mut m = Message {
        skb,
        hdr,
        _skb: PhantomData,
    };
    if let Err(e) = fill(&mut m) {
        // SAFETY: our skb, never handed on.
        unsafe { bindings::sroce_kfree_skb(skb.as_ptr()) };
        return Err(e);
    }
    // SAFETY: finishes the message in our skb, then hands the skb over
    // (consumed whatever the result) to the family's group in `net`.
    let r = unsafe {
        bindings::sroce_genlmsg_end(skb.as_ptr(), hdr.as_ptr());
        bindings::sroce_genlmsg_multicast_netns(family, net.as_raw(), skb.as_ptr(), group)
    };
    match r {
        // ESRCH: the last listener left meanwhile.
        0 => Ok(()),
        e if e == ESRCH.to_errno() => Ok(()),
        e => Err(Error::from_errno(e)),
    }
}

/// A registered generic netlink family; unregistered on drop.
///
/// # Invariants
///
/// `tables.family` is registered with the generic netlink core, its `ops`
/// and `policy` point into `tables`, and [`CONTEXT`] holds a pointer from
/// `Arc::into_raw` of this registration's context.
pub(crate) struct FamilyRegistration<F: Family> {
    tables: Pin<KBox<Tables>>,
    _family: PhantomData<F>,
}

// SAFETY: the tables are only read by the C side after registration, under
// its own locks; the context is `Send + Sync`.
unsafe impl<F: Family> Send for FamilyRegistration<F> {}
// SAFETY: no method takes `&self`; see `Send`.
unsafe impl<F: Family> Sync for FamilyRegistration<F> {}

fn nla_policy(p: AttrPolicy) -> bindings::nla_policy {
    let mut n = bindings::nla_policy::default();
    match p {
        AttrPolicy::Reject => n.type_ = bindings::NLA_REJECT as u8,
        AttrPolicy::U8 { min, max } => {
            n.type_ = bindings::NLA_U8 as u8;
            n.validation_type = bindings::nla_policy_validation_NLA_VALIDATE_RANGE as u8;
            n.__bindgen_anon_1.__bindgen_anon_1.min = min.into();
            n.__bindgen_anon_1.__bindgen_anon_1.max = max.into();
        }
        AttrPolicy::U16 => n.type_ = bindings::NLA_U16 as u8,
        AttrPolicy::U32 => n.type_ = bindings::NLA_U32 as u8,
        AttrPolicy::String { max_len } => {
            n.type_ = bindings::NLA_NUL_STRING as u8;
            n.len = max_len;
        }
    }
    n
}

impl<F: Family> FamilyRegistration<F> {
    /// Registers `F` for `module`; at most one family registration may
    /// exist at a time.
    pub(crate) fn new(ctx: Arc<F>, module: &'static kernel::ThisModule) -> Result<Self> {
        let name = F::NAME.to_bytes_with_nul();
        if name.len() > bindings::GENL_NAMSIZ as usize
            || F::POLICY.len() < 2
            || F::OPS.is_empty()
            || F::OPS.len() > u8::MAX as usize
        {
            return Err(EINVAL);
        }
        let maxattr = u16::try_from(F::POLICY.len() - 1).map_err(|_| EINVAL)?;

        let mut policy = KVec::with_capacity(F::POLICY.len(), GFP_KERNEL)?;
        for p in F::POLICY {
            policy.push(nla_policy(*p), GFP_KERNEL)?;
        }
        let mut ops = KVec::with_capacity(F::OPS.len(), GFP_KERNEL)?;
        for op in F::OPS {
            ops.push(
                bindings::genl_small_ops {
                    doit: if op.doit {
                        Some(Self::doit_callback)
                    } else {
                        None
                    },
                    dumpit: if op.dump {
                        Some(Self::dumpit_callback)
                    } else {
                        None
                    },
                    cmd: op.cmd,
                    flags: if op.admin {
                        bindings::GENL_ADMIN_PERM as u8
                    } else {
                        0
                    },
                    // Strict validation: no GENL_DONT_VALIDATE_* flags.
                    validate: 0,
                    ..Default::default()
                },
                GFP_KERNEL,
            )?;
        }
        let last_cmd = F::OPS.iter().map(|o| o.cmd).max().unwrap_or(0);
        let mut mcgrps = KVec::with_capacity(F::MCGRPS.len(), GFP_KERNEL)?;
        for g in F::MCGRPS {
            let name = g.to_bytes_with_nul();
            if name.len() > bindings::GENL_NAMSIZ as usize {
                return Err(EINVAL);
            }
            let mut grp = bindings::genl_multicast_group::default();
            for (d, s) in grp.name.iter_mut().zip(name) {
                *d = *s as kernel::ffi::c_char;
            }
            mcgrps.push(grp, GFP_KERNEL)?;
        }

        let mut family = bindings::genl_family {
            version: F::VERSION,
            maxattr: maxattr.into(),
            n_small_ops: F::OPS.len() as u8,
            // Every command is new: strict header and attribute checks.
            resv_start_op: last_cmd.checked_add(1).ok_or(EINVAL)?,
            policy: policy.as_ptr(),
            small_ops: ops.as_ptr(),
            mcgrps: if mcgrps.is_empty() {
                core::ptr::null()
            } else {
                mcgrps.as_ptr()
            },
            n_mcgrps: u8::try_from(mcgrps.len()).map_err(|_| EINVAL)?,
            module: module.as_ptr().cast(),
            ..Default::default()
        };
        for (d, s) in family.name.iter_mut().zip(name) {
            *d = *s as kernel::ffi::c_char;
        }
        // Usable from every network namespace (RDMA devices are shared
        // between namespaces by default).
        family.set_netnsok(1);

        let tables = KBox::pin(
            Tables {
                family: Opaque::new(family),
                _ops: ops,
                _policy: policy,
                _mcgrps: mcgrps,
            },
            GFP_KERNEL,
        )?;

        CONTEXT.install(ctx)?;
        // SAFETY: the tables are pinned on the heap and outlive the
        // registration (dropped after `genl_unregister_family`).
        let r = kernel::error::to_result(unsafe {
            bindings::genl_register_family(tables.family.get())
        });
        if let Err(e) = r {
            // SAFETY: installed above as `F`; registration failed, so no
            // operation borrows it.
            unsafe { CONTEXT.release::<F>() };
            return Err(e);
        }
        PUBLISHED.store(tables.family.get(), Ordering::Release);
        Ok(Self {
            tables,
            _family: PhantomData,
        })
    }

    fn context<'a>() -> Option<&'a F> {
        // SAFETY: installed as `F`; it is released only after
        // `genl_unregister_family`, which waits for running operations
        // (they hold `genl_mutex`), and a dump in progress holds a module
        // reference, so the context outlives every callback.
        unsafe { CONTEXT.get::<F>() }
    }

    /// # Safety
    ///
    /// Called by the generic netlink core with a validated request.
    unsafe extern "C" fn doit_callback(
        _skb: *mut bindings::sk_buff,
        info: *mut bindings::genl_info,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            let ctx = Self::context().ok_or(ENODEV)?;
            let info = NonNull::new(info).ok_or(EINVAL)?;
            // SAFETY: `info` is live for the call.
            let cmd = unsafe { bindings::sroce_genl_cmd(info.as_ptr()) };
            let req = Request {
                info,
                maxattr: (F::POLICY.len() - 1) as u16,
                _info: PhantomData,
            };
            ctx.doit(cmd, &req)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by the generic netlink core for each message of a dump.
    unsafe extern "C" fn dumpit_callback(
        skb: *mut bindings::sk_buff,
        cb: *mut bindings::netlink_callback,
    ) -> kernel::ffi::c_int {
        from_result(|| {
            let ctx = Self::context().ok_or(ENODEV)?;
            let skb = NonNull::new(skb).ok_or(EINVAL)?;
            let cb = NonNull::new(cb).ok_or(EINVAL)?;
            // SAFETY: `cb` is the live dump state; `args[0]` is ours.
            let (cmd, cursor) = unsafe {
                (
                    bindings::sroce_genl_dump_cmd(cb.as_ptr()),
                    &mut *bindings::sroce_genl_dump_cursor(cb.as_ptr()),
                )
            };
            let mut pos = *cursor;
            let mut out = Dump {
                skb,
                cb,
                _skb: PhantomData,
            };
            let r = ctx.dump(cmd, &mut pos, &mut out);
            *cursor = pos;
            let len = out.len();
            match r {
                // A full message: more to come if anything was written.
                Err(e) if e == EMSGSIZE && len > 0 => Ok(len as i32),
                Err(e) => Err(e),
                // Done when a call writes nothing.
                Ok(()) => Ok(len as i32),
            }
        })
    }
}

impl<F: Family> Drop for FamilyRegistration<F> {
    fn drop(&mut self) {
        // No new multicast sender finds the family; those that did are done
        // after the grace period.
        PUBLISHED.store(core::ptr::null_mut(), Ordering::Release);
        // SAFETY: no locks held; may sleep (drop runs in process context).
        unsafe { kernel::bindings::synchronize_rcu() };
        // SAFETY: registered in `new` (type invariant); waits for running
        // operations and keeps new ones from starting.
        unsafe { bindings::genl_unregister_family(self.tables.family.get()) };
        // SAFETY: installed by `new` as `F`; no operation runs any more.
        unsafe { CONTEXT.release::<F>() };
    }
}
