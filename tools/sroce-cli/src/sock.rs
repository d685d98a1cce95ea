//! A generic netlink socket and the request/reply exchange.

use crate::nl::{self, MsgBuilder, NLMSG_DONE, NLMSG_ERROR, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SOL_NETLINK: libc::c_int = 270;
const NETLINK_EXT_ACK: libc::c_int = 11;
const NETLINK_CAP_ACK: libc::c_int = 10;
const NETLINK_ADD_MEMBERSHIP: libc::c_int = 1;

/// A family's multicast groups: (name, id).
pub type Groups = Vec<(String, u32)>;

/// What went wrong with a request.
#[derive(Debug)]
pub enum Error {
    /// The socket calls failed.
    Io(io::Error),
    /// The kernel answered with an error.
    Kernel(nl::NlError),
    /// The kernel's answer was not valid netlink.
    Decode(nl::DecodeError),
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<nl::DecodeError> for Error {
    fn from(e: nl::DecodeError) -> Self {
        Error::Decode(e)
    }
}

/// A bound `NETLINK_GENERIC` socket with extended acks.
pub struct Socket {
    fd: OwnedFd,
    seq: u32,
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Socket {
    /// Opens and binds the socket.
    pub fn open() -> io::Result<Self> {
        // SAFETY: plain system call; the result is checked.
        let fd = check(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_GENERIC,
            )
        })?;
        // SAFETY: `fd` is a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        for opt in [NETLINK_EXT_ACK, NETLINK_CAP_ACK] {
            let one: libc::c_int = 1;
            // SAFETY: `one` is a valid c_int for the option's size.
            check(unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    SOL_NETLINK,
                    opt,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            })?;
        }
        // SAFETY: an all-zero sockaddr_nl is valid (kernel picks the port id).
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `addr` is a sockaddr_nl of the size given.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        })?;
        Ok(Socket { fd, seq: 1 })
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        // SAFETY: `msg` is a valid buffer of its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// Sends a request of command `cmd` to family `family` whose attributes
    /// `attrs` adds, and returns the generic netlink payloads of the replies
    /// (every entry of a dump). Errors carry the kernel's extended ack.
    pub fn request(
        &mut self,
        family: u16,
        version: u8,
        cmd: u8,
        dump: bool,
        attrs: impl FnOnce(&mut MsgBuilder) -> Result<(), nl::TooLong>,
    ) -> Result<Vec<Vec<u8>>, Error> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let flags = NLM_F_REQUEST | NLM_F_ACK | if dump { NLM_F_DUMP } else { 0 };
        let mut b = MsgBuilder::new(family, flags, seq, cmd, version);
        attrs(&mut b).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
        self.send(&b.finish())?;

        let mut out = Vec::new();
        let mut buf = vec![0u8; 32768];
        loop {
            let n = self.recv(&mut buf)?;
            for m in nl::messages(&buf[..n]) {
                let m = m?;
                if m.seq != seq {
                    continue;
                }
                match m.ty {
                    NLMSG_ERROR | NLMSG_DONE => {
                        let e = nl::error(m.payload, m.flags, m.ty)?;
                        if e.errno != 0 {
                            return Err(Error::Kernel(e));
                        }
                        // An ack ends a request; DONE ends a dump (its
                        // ack follows, and is not needed).
                        return Ok(out);
                    }
                    t if t == family => out.push(m.payload.to_vec()),
                    _ => {}
                }
            }
        }
    }

    /// The id of generic netlink family `name` and its multicast groups
    /// (name, id).
    pub fn family(&mut self, name: &str) -> Result<(u16, Groups), Error> {
        let replies = self.request(nl::GENL_ID_CTRL, 1, nl::CTRL_CMD_GETFAMILY, false, |b| {
            b.str(nl::CTRL_ATTR_FAMILY_NAME, name).map(drop)
        })?;
        let mut id = None;
        let mut groups = Vec::new();
        for r in &replies {
            for a in nl::attrs(nl::genl(r)?.attrs) {
                let a = a?;
                match a.ty {
                    nl::CTRL_ATTR_FAMILY_ID => id = Some(a.u16()?),
                    nl::CTRL_ATTR_MCAST_GROUPS => {
                        for g in nl::attrs(a.payload) {
                            let (mut gname, mut gid) = (None, None);
                            for f in nl::attrs(g?.payload) {
                                let f = f?;
                                match f.ty {
                                    nl::CTRL_ATTR_MCAST_GRP_NAME => gname = Some(f.str()?),
                                    nl::CTRL_ATTR_MCAST_GRP_ID => gid = Some(f.u32()?),
                                    _ => {}
                                }
                            }
                            if let (Some(n), Some(i)) = (gname, gid) {
                                groups.push((n.to_owned(), i));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        id.map(|id| (id, groups))
            .ok_or(Error::Decode(nl::DecodeError::Truncated))
    }

    /// Joins multicast group `group` (its id).
    pub fn join(&self, group: u32) -> io::Result<()> {
        // SAFETY: `group` is a valid u32 for the option's size.
        check(unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                SOL_NETLINK,
                NETLINK_ADD_MEMBERSHIP,
                (&group as *const u32).cast(),
                std::mem::size_of::<u32>() as libc::socklen_t,
            )
        })
        .map(drop)
    }

    /// Waits for the next multicast messages of family `family` and returns
    /// their generic netlink payloads.
    pub fn next_events(&self, family: u16) -> Result<Vec<Vec<u8>>, Error> {
        let mut buf = vec![0u8; 32768];
        loop {
            let n = self.recv(&mut buf)?;
            let mut out = Vec::new();
            for m in nl::messages(&buf[..n]) {
                let m = m?;
                if m.ty == family && m.seq == 0 {
                    out.push(m.payload.to_vec());
                }
            }
            if !out.is_empty() {
                return Ok(out);
            }
        }
    }
}
