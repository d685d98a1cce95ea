//! A small netlink / generic netlink message codec (no I/O).
//!
//! Building: [`MsgBuilder`] writes one `nlmsghdr` + `genlmsghdr` message
//! with attributes, each padded to 4 bytes. Parsing: [`messages`] splits a
//! received buffer into messages, [`genl`] and [`attrs`] decode a generic
//! netlink payload, [`error`] decodes an `NLMSG_ERROR` (with its extended
//! ack message). Parsers never panic: malformed input gives [`DecodeError`].

use std::fmt;

/// `struct nlmsghdr` size.
pub const NLMSG_HDRLEN: usize = 16;
/// `struct genlmsghdr` size.
pub const GENL_HDRLEN: usize = 4;
/// `struct nlattr` size.
pub const NLA_HDRLEN: usize = 4;

/// `NLMSG_ERROR`: an error or an ack.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: end of a dump.
pub const NLMSG_DONE: u16 = 3;
/// `NLM_F_REQUEST`.
pub const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_ACK`.
pub const NLM_F_ACK: u16 = 0x4;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`).
pub const NLM_F_DUMP: u16 = 0x300;
/// `NLM_F_CAPPED` on an error: the original request is cut to its header.
pub const NLM_F_CAPPED: u16 = 0x100;
/// `NLM_F_ACK_TLVS` on an error: extended ack attributes follow.
pub const NLM_F_ACK_TLVS: u16 = 0x200;
/// `NLMSGERR_ATTR_MSG`: the extended ack's message (string).
pub const NLMSGERR_ATTR_MSG: u16 = 1;

/// The generic netlink controller's family id (`GENL_ID_CTRL`).
pub const GENL_ID_CTRL: u16 = 0x10;
/// `CTRL_CMD_GETFAMILY`.
pub const CTRL_CMD_GETFAMILY: u8 = 3;
/// `CTRL_ATTR_FAMILY_ID` (u16).
pub const CTRL_ATTR_FAMILY_ID: u16 = 1;
/// `CTRL_ATTR_FAMILY_NAME` (string).
pub const CTRL_ATTR_FAMILY_NAME: u16 = 2;
/// `CTRL_ATTR_MCAST_GROUPS` (nested: one nest per group).
pub const CTRL_ATTR_MCAST_GROUPS: u16 = 7;
/// `CTRL_ATTR_MCAST_GRP_NAME` (string, in a group's nest).
pub const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
/// `CTRL_ATTR_MCAST_GRP_ID` (u32, in a group's nest).
pub const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;

/// Attribute type bits that are flags, not the type (`NLA_TYPE_MASK`).
const NLA_FLAGS: u16 = 0xC000;

/// Rounds up to the netlink alignment (4).
pub const fn align(len: usize) -> usize {
    (len + 3) & !3
}

/// Why a buffer is not a valid message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the header or the length it declares.
    Truncated,
    /// A length field smaller than its own header.
    BadLength,
    /// An attribute's payload has the wrong size for its type.
    BadAttr(u16),
    /// A string attribute without its NUL or not UTF-8.
    BadString(u16),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "truncated netlink message"),
            DecodeError::BadLength => write!(f, "bad netlink length field"),
            DecodeError::BadAttr(t) => write!(f, "bad size of attribute {t}"),
            DecodeError::BadString(t) => write!(f, "bad string in attribute {t}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// An attribute payload too long for a netlink attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong;

/// Builds one generic netlink request.
#[derive(Clone, Debug)]
pub struct MsgBuilder {
    buf: Vec<u8>,
}

impl MsgBuilder {
    /// A message of netlink type `ty` (the family id) with `flags`,
    /// sequence number `seq`, generic netlink command `cmd` and `version`.
    pub fn new(ty: u16, flags: u16, seq: u32, cmd: u8, version: u8) -> Self {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish
        buf.extend_from_slice(&ty.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
        buf.extend_from_slice(&[cmd, version, 0, 0]);
        MsgBuilder { buf }
    }

    /// Appends attribute `ty` with `payload`, padded to 4 bytes.
    pub fn attr(&mut self, ty: u16, payload: &[u8]) -> Result<&mut Self, TooLong> {
        let len = u16::try_from(NLA_HDRLEN + payload.len()).map_err(|_| TooLong)?;
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        self.buf.resize(align(self.buf.len()), 0);
        Ok(self)
    }

    /// Appends a `u8` attribute.
    pub fn u8(&mut self, ty: u16, v: u8) -> &mut Self {
        self.attr(ty, &[v]).expect("1 byte fits")
    }

    /// Appends a `u16` attribute (host byte order).
    pub fn u16(&mut self, ty: u16, v: u16) -> &mut Self {
        self.attr(ty, &v.to_ne_bytes()).expect("2 bytes fit")
    }

    /// Appends a NUL-terminated string attribute.
    pub fn str(&mut self, ty: u16, s: &str) -> Result<&mut Self, TooLong> {
        let mut b = Vec::with_capacity(s.len() + 1);
        b.extend_from_slice(s.as_bytes());
        b.push(0);
        self.attr(ty, &b)
    }

    /// The finished message.
    pub fn finish(mut self) -> Vec<u8> {
        let len = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

/// One netlink message of a received buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg<'a> {
    /// `nlmsg_type`.
    pub ty: u16,
    /// `nlmsg_flags`.
    pub flags: u16,
    /// `nlmsg_seq`.
    pub seq: u32,
    /// Everything after the header, up to the declared length.
    pub payload: &'a [u8],
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Splits `buf` into its netlink messages.
pub fn messages(buf: &[u8]) -> Messages<'_> {
    Messages { rest: buf }
}

/// Iterator of [`messages`]; stops after the first error.
#[derive(Clone, Debug)]
pub struct Messages<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<Msg<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = parse_one(self.rest);
        match r {
            Ok((msg, used)) => {
                self.rest = self.rest.get(used..).unwrap_or(&[]);
                Some(Ok(msg))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

fn parse_one(b: &[u8]) -> Result<(Msg<'_>, usize), DecodeError> {
    let len = u32_at(b, 0).ok_or(DecodeError::Truncated)? as usize;
    if len < NLMSG_HDRLEN {
        return Err(DecodeError::BadLength);
    }
    let whole = b.get(..len).ok_or(DecodeError::Truncated)?;
    let msg = Msg {
        ty: u16_at(whole, 4).ok_or(DecodeError::Truncated)?,
        flags: u16_at(whole, 6).ok_or(DecodeError::Truncated)?,
        seq: u32_at(whole, 8).ok_or(DecodeError::Truncated)?,
        payload: whole.get(NLMSG_HDRLEN..).ok_or(DecodeError::Truncated)?,
    };
    Ok((msg, align(len).min(b.len())))
}

/// A generic netlink payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Genl<'a> {
    /// The command.
    pub cmd: u8,
    /// The family version.
    pub version: u8,
    /// The attributes (see [`attrs`]).
    pub attrs: &'a [u8],
}

/// Decodes the generic netlink header of a message payload.
pub fn genl(payload: &[u8]) -> Result<Genl<'_>, DecodeError> {
    let h = payload.get(..GENL_HDRLEN).ok_or(DecodeError::Truncated)?;
    Ok(Genl {
        cmd: h[0],
        version: h[1],
        attrs: &payload[GENL_HDRLEN..],
    })
}

/// One attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr<'a> {
    /// The type, without the nested / byte-order flags.
    pub ty: u16,
    /// The payload (without padding).
    pub payload: &'a [u8],
}

impl<'a> Attr<'a> {
    /// The payload as a `u8`.
    pub fn u8(&self) -> Result<u8, DecodeError> {
        match self.payload {
            [v] => Ok(*v),
            _ => Err(DecodeError::BadAttr(self.ty)),
        }
    }

    /// The payload as a `u16` (host byte order).
    pub fn u16(&self) -> Result<u16, DecodeError> {
        let b: [u8; 2] = self
            .payload
            .try_into()
            .map_err(|_| DecodeError::BadAttr(self.ty))?;
        Ok(u16::from_ne_bytes(b))
    }

    /// The payload as a `u32` (host byte order).
    pub fn u32(&self) -> Result<u32, DecodeError> {
        let b: [u8; 4] = self
            .payload
            .try_into()
            .map_err(|_| DecodeError::BadAttr(self.ty))?;
        Ok(u32::from_ne_bytes(b))
    }

    /// The payload as a NUL-terminated UTF-8 string.
    pub fn str(&self) -> Result<&'a str, DecodeError> {
        let bad = DecodeError::BadString(self.ty);
        let (last, s) = self.payload.split_last().ok_or(bad)?;
        if *last != 0 || s.contains(&0) {
            return Err(bad);
        }
        std::str::from_utf8(s).map_err(|_| bad)
    }
}

/// Splits an attribute area into attributes.
pub fn attrs(buf: &[u8]) -> Attrs<'_> {
    Attrs { rest: buf }
}

/// Iterator of [`attrs`]; stops after the first error.
#[derive(Clone, Debug)]
pub struct Attrs<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<Attr<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let b = self.rest;
        let r = (|| {
            let len = usize::from(u16_at(b, 0).ok_or(DecodeError::Truncated)?);
            let ty = u16_at(b, 2).ok_or(DecodeError::Truncated)? & !NLA_FLAGS;
            if len < NLA_HDRLEN {
                return Err(DecodeError::BadLength);
            }
            let payload = b.get(NLA_HDRLEN..len).ok_or(DecodeError::Truncated)?;
            Ok((Attr { ty, payload }, align(len).min(b.len())))
        })();
        match r {
            Ok((a, used)) => {
                self.rest = &b[used..];
                Some(Ok(a))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// A decoded `NLMSG_ERROR`: an ack (`errno` 0) or an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NlError {
    /// The positive errno, 0 for an ack.
    pub errno: i32,
    /// The extended ack message, if the kernel gave one.
    pub msg: Option<String>,
}

/// Decodes the payload of an `NLMSG_ERROR` (or `NLMSG_DONE`, which has the
/// same leading error code) message with flags `flags`.
pub fn error(payload: &[u8], flags: u16, ty: u16) -> Result<NlError, DecodeError> {
    let code = u32_at(payload, 0).ok_or(DecodeError::Truncated)? as i32;
    let errno = code.checked_neg().ok_or(DecodeError::BadLength)?.max(0);
    let mut msg = None;
    if flags & NLM_F_ACK_TLVS != 0 {
        let tlvs_at = if ty == NLMSG_DONE {
            4
        } else {
            // The original request's header, and its payload unless capped.
            let orig = payload.get(4..).ok_or(DecodeError::Truncated)?;
            let orig_len = if flags & NLM_F_CAPPED != 0 {
                NLMSG_HDRLEN
            } else {
                u32_at(orig, 0).ok_or(DecodeError::Truncated)? as usize
            };
            4 + align(orig_len)
        };
        let tlvs = payload.get(tlvs_at..).ok_or(DecodeError::Truncated)?;
        for a in attrs(tlvs) {
            let a = a?;
            if a.ty == NLMSGERR_ATTR_MSG {
                msg = Some(a.str()?.to_owned());
            }
        }
    }
    Ok(NlError { errno, msg })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_then_parse_round_trip() {
        let mut b = MsgBuilder::new(0x1a, NLM_F_REQUEST | NLM_F_ACK, 7, 2, 1);
        b.str(1, "sroce1").unwrap().u8(3, 8).u16(5, 61000);
        let bytes = b.finish();
        assert_eq!(bytes.len() % 4, 0);
        assert_eq!(u32_at(&bytes, 0), Some(bytes.len() as u32));
        let msgs: Vec<_> = messages(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(msgs.len(), 1);
        let m = msgs[0];
        assert_eq!((m.ty, m.flags, m.seq), (0x1a, NLM_F_REQUEST | NLM_F_ACK, 7));
        let g = genl(m.payload).unwrap();
        assert_eq!((g.cmd, g.version), (2, 1));
        let a: Vec<_> = attrs(g.attrs).collect::<Result<_, _>>().unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!((a[0].ty, a[0].str().unwrap()), (1, "sroce1"));
        assert_eq!((a[1].ty, a[1].u8().unwrap()), (3, 8));
        assert_eq!((a[2].ty, a[2].u16().unwrap()), (5, 61000));
    }

    #[test]
    fn attributes_are_padded_to_four_bytes() {
        for n in 0..9usize {
            let mut b = MsgBuilder::new(1, 0, 0, 0, 0);
            b.attr(9, &vec![0xAB; n]).unwrap().u8(4, 1);
            let bytes = b.finish();
            let attr_area = &bytes[NLMSG_HDRLEN + GENL_HDRLEN..];
            // Declared length excludes padding, the next attribute is aligned.
            assert_eq!(u16_at(attr_area, 0), Some((NLA_HDRLEN + n) as u16));
            let next = align(NLA_HDRLEN + n);
            assert_eq!(u16_at(attr_area, next + 2), Some(4));
            assert!(attr_area[NLA_HDRLEN + n..next].iter().all(|b| *b == 0));
            let a: Vec<_> = attrs(attr_area).collect::<Result<_, _>>().unwrap();
            assert_eq!(a[0].payload.len(), n);
            assert_eq!(a[1].u8(), Ok(1));
        }
    }

    #[test]
    fn several_messages_in_one_buffer() {
        let mut buf = Vec::new();
        for seq in 0..3 {
            let mut b = MsgBuilder::new(20, 0, seq, 1, 1);
            b.u8(1, seq as u8);
            buf.extend(b.finish());
        }
        let seqs: Vec<u32> = messages(&buf).map(|m| m.unwrap().seq).collect();
        assert_eq!(seqs, [0, 1, 2]);
    }

    #[test]
    fn flag_bits_are_not_part_of_the_type() {
        let buf = [8u8, 0, 0x05, 0x80, 1, 2, 3, 4];
        let a = attrs(&buf).next().unwrap().unwrap();
        assert_eq!(a.ty, 5);
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert_eq!(
            messages(&[1, 2, 3]).next(),
            Some(Err(DecodeError::Truncated))
        );
        let mut short = 8u32.to_ne_bytes().to_vec();
        short.resize(16, 0);
        assert_eq!(messages(&short).next(), Some(Err(DecodeError::BadLength)));
        let mut long = 64u32.to_ne_bytes().to_vec();
        long.resize(16, 0);
        assert_eq!(messages(&long).next(), Some(Err(DecodeError::Truncated)));
        assert_eq!(genl(&[1, 2]), Err(DecodeError::Truncated));
        assert_eq!(
            attrs(&[2, 0, 1, 0]).next(),
            Some(Err(DecodeError::BadLength))
        );
        assert_eq!(
            attrs(&[9, 0, 1, 0, 1]).next(),
            Some(Err(DecodeError::Truncated))
        );
        let a = Attr {
            ty: 3,
            payload: &[1, 2, 3],
        };
        assert_eq!(a.u8(), Err(DecodeError::BadAttr(3)));
        assert_eq!(a.u16(), Err(DecodeError::BadAttr(3)));
        assert_eq!(a.u32(), Err(DecodeError::BadAttr(3)));
        assert_eq!(a.str(), Err(DecodeError::BadString(3)));
        let a = Attr {
            ty: 1,
            payload: b"a\0b\0",
        };
        assert_eq!(a.str(), Err(DecodeError::BadString(1)));
        assert_eq!(
            Attr {
                ty: 1,
                payload: b""
            }
            .str(),
            Err(DecodeError::BadString(1))
        );
    }

    #[test]
    fn no_panics_on_any_short_or_corrupt_buffer() {
        let mut b = MsgBuilder::new(0x1a, 0, 1, 1, 1);
        b.str(1, "dev").unwrap().u16(5, 1).u8(3, 2);
        let good = b.finish();
        for cut in 0..=good.len() {
            for m in messages(&good[..cut]).flatten() {
                if let Ok(g) = genl(m.payload) {
                    attrs(g.attrs).for_each(drop);
                }
                let _ = error(m.payload, 0xFFFF, m.ty);
            }
        }
        // Every single-byte corruption.
        for i in 0..good.len() {
            for v in [0u8, 1, 3, 0x7F, 0xFF] {
                let mut bad = good.clone();
                bad[i] = v;
                for m in messages(&bad).flatten() {
                    if let Ok(g) = genl(m.payload) {
                        attrs(g.attrs).for_each(drop);
                    }
                    let _ = error(m.payload, NLM_F_ACK_TLVS, m.ty);
                    let _ = error(m.payload, NLM_F_ACK_TLVS | NLM_F_CAPPED, m.ty);
                }
            }
        }
    }

    fn error_message(errno: i32, capped: bool, msg: Option<&str>) -> Vec<u8> {
        let mut orig = MsgBuilder::new(0x1a, NLM_F_REQUEST, 5, 2, 1);
        orig.u8(3, 0);
        let orig = orig.finish();
        let mut p = (-errno).to_ne_bytes().to_vec();
        p.extend_from_slice(if capped { &orig[..NLMSG_HDRLEN] } else { &orig });
        let mut flags = if capped { NLM_F_CAPPED } else { 0 };
        if let Some(m) = msg {
            flags |= NLM_F_ACK_TLVS;
            let mut s = m.as_bytes().to_vec();
            s.push(0);
            p.extend_from_slice(&((NLA_HDRLEN + s.len()) as u16).to_ne_bytes());
            p.extend_from_slice(&NLMSGERR_ATTR_MSG.to_ne_bytes());
            p.extend_from_slice(&s);
            p.resize(align(p.len()), 0);
        }
        let mut m = ((NLMSG_HDRLEN + p.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m.extend_from_slice(&flags.to_ne_bytes());
        m.extend_from_slice(&5u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend(p);
        m
    }

    #[test]
    fn errors_and_acks() {
        for capped in [false, true] {
            let buf = error_message(34, capped, Some("bad range"));
            let m = messages(&buf).next().unwrap().unwrap();
            assert_eq!(m.ty, NLMSG_ERROR);
            let e = error(m.payload, m.flags, m.ty).unwrap();
            assert_eq!(
                e,
                NlError {
                    errno: 34,
                    msg: Some("bad range".into())
                }
            );
            let buf = error_message(0, capped, None);
            let m = messages(&buf).next().unwrap().unwrap();
            assert_eq!(
                error(m.payload, m.flags, m.ty).unwrap(),
                NlError {
                    errno: 0,
                    msg: None
                }
            );
        }
        // i32::MIN cannot be negated.
        assert!(error(&i32::MIN.to_ne_bytes(), 0, NLMSG_ERROR).is_err());
        // NLMSG_DONE with an error and extack right after the code.
        let mut p = (-22i32).to_ne_bytes().to_vec();
        p.extend_from_slice(&[7, 0, 1, 0, b'x', b'y', 0, 0]);
        let e = error(&p, NLM_F_ACK_TLVS, NLMSG_DONE).unwrap();
        assert_eq!(
            e,
            NlError {
                errno: 22,
                msg: Some("xy".into())
            }
        );
    }

    #[test]
    fn oversized_attribute_is_refused() {
        let mut b = MsgBuilder::new(1, 0, 0, 0, 0);
        assert_eq!(b.attr(1, &vec![0; 70000]).err(), Some(TooLong));
    }
}
