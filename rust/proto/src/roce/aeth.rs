//! ACK Extended Transport Header (AETH), 4 bytes: syndrome and MSN.
//!
//! ```text
//! byte 0     syndrome: reserved(7) type(6..5) value(4..0)
//!            type 00 ACK (value = credit count)
//!            type 01 RNR NAK (value = RNR timer)
//!            type 10 reserved
//!            type 11 NAK (value = NAK code)
//! bytes 1-3  message sequence number (MSN)
//! ```

use super::error::Error;
use super::wire::{take, take_mut, Reader, Writer};

/// Length of the AETH on the wire.
pub const AETH_LEN: usize = 4;

/// Largest 24-bit MSN.
pub const MSN_MAX: u32 = 0x00FF_FFFF;

/// The ACK credit count value meaning "no credit information" (invalid).
pub const CREDITS_INVALID: u8 = 0x1F;

const TYPE_MASK: u8 = 0xE0; // includes the reserved bit 7
const VALUE_MASK: u8 = 0x1F;
const TYPE_ACK: u8 = 0x00;
const TYPE_RNR_NAK: u8 = 0x20;
const TYPE_NAK: u8 = 0x60;

/// NAK codes (AETH syndrome type 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NakCode {
    /// PSN sequence error.
    PsnSequenceError = 0,
    /// Invalid request.
    InvalidRequest = 1,
    /// Remote access error.
    RemoteAccessError = 2,
    /// Remote operational error.
    RemoteOperationalError = 3,
    /// Invalid RD request.
    InvalidRdRequest = 4,
}

impl NakCode {
    /// Decodes a 5-bit NAK code; codes 5..=31 are reserved (`None`).
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(NakCode::PsnSequenceError),
            1 => Some(NakCode::InvalidRequest),
            2 => Some(NakCode::RemoteAccessError),
            3 => Some(NakCode::RemoteOperationalError),
            4 => Some(NakCode::InvalidRdRequest),
            _ => None,
        }
    }

    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self as u8
    }
}

/// A decoded AETH syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with a 5-bit encoded credit count
    /// ([`CREDITS_INVALID`] = no credit information).
    Ack {
        /// Encoded credit count, 0..=31.
        credits: u8,
    },
    /// Receiver-not-ready NAK with a 5-bit encoded RNR timer value.
    RnrNak {
        /// Encoded minimum RNR NAK timer, 0..=31.
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
    /// A reserved syndrome (reserved bit set, type 10, or a reserved NAK
    /// code), kept raw so that it round-trips.
    Reserved(u8),
}

impl Syndrome {
    /// Decodes a raw syndrome byte; never fails (see [`Syndrome::Reserved`]).
    pub const fn from_u8(raw: u8) -> Self {
        let value = raw & VALUE_MASK;
        match raw & TYPE_MASK {
            TYPE_ACK => Syndrome::Ack { credits: value },
            TYPE_RNR_NAK => Syndrome::RnrNak { timer: value },
            TYPE_NAK => match NakCode::from_code(value) {
                Some(code) => Syndrome::Nak(code),
                None => Syndrome::Reserved(raw),
            },
            _ => Syndrome::Reserved(raw),
        }
    }

    /// Encodes the syndrome byte; a credit count or timer above 31 gives
    /// [`Error::ValueOutOfRange`].
    pub const fn to_u8(self) -> Result<u8, Error> {
        match self {
            Syndrome::Ack { credits: v } | Syndrome::RnrNak { timer: v } if v > VALUE_MASK => {
                Err(Error::ValueOutOfRange)
            }
            Syndrome::Ack { credits } => Ok(TYPE_ACK | credits),
            Syndrome::RnrNak { timer } => Ok(TYPE_RNR_NAK | timer),
            Syndrome::Nak(code) => Ok(TYPE_NAK | code.code()),
            Syndrome::Reserved(raw) => Ok(raw),
        }
    }

    /// Whether this is a positive ACK.
    pub const fn is_ack(self) -> bool {
        matches!(self, Syndrome::Ack { .. })
    }
}

/// A decoded AETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Aeth {
    /// Syndrome.
    pub syndrome: Syndrome,
    /// Message sequence number, 24 bits.
    pub msn: u32,
}

impl Aeth {
    /// Length of the AETH on the wire.
    pub const LEN: usize = AETH_LEN;

    /// Parses an AETH from the front of `buf`, returning it and the rest.
    pub fn parse(buf: &[u8]) -> Result<(Self, &[u8]), Error> {
        let (h, rest) = take::<AETH_LEN>(buf)?;
        let mut r = Reader::new(h);
        let syndrome = Syndrome::from_u8(r.u8()?);
        let msn = r.u24()?;
        Ok((Aeth { syndrome, msn }, rest))
    }

    /// Writes the AETH to the front of `buf`, returning [`AETH_LEN`].
    /// `msn` must fit in 24 bits ([`Error::ValueOutOfRange`]).
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let syndrome = self.syndrome.to_u8()?;
        let mut w = Writer::new(take_mut::<AETH_LEN>(buf)?);
        w.u8(syndrome)?;
        w.u24(self.msn)?;
        Ok(AETH_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndrome_decoding() {
        assert_eq!(Syndrome::from_u8(0x1f), Syndrome::Ack { credits: 31 });
        assert_eq!(Syndrome::from_u8(0x2e), Syndrome::RnrNak { timer: 14 });
        assert_eq!(
            Syndrome::from_u8(0x60),
            Syndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            Syndrome::from_u8(0x61),
            Syndrome::Nak(NakCode::InvalidRequest)
        );
        assert_eq!(
            Syndrome::from_u8(0x62),
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            Syndrome::from_u8(0x63),
            Syndrome::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            Syndrome::from_u8(0x64),
            Syndrome::Nak(NakCode::InvalidRdRequest)
        );
        assert_eq!(Syndrome::from_u8(0x65), Syndrome::Reserved(0x65));
        assert_eq!(Syndrome::from_u8(0x40), Syndrome::Reserved(0x40));
        assert_eq!(Syndrome::from_u8(0x80), Syndrome::Reserved(0x80));
        for raw in 0..=255u8 {
            assert_eq!(Syndrome::from_u8(raw).to_u8(), Ok(raw));
        }
        assert_eq!(
            Syndrome::Ack { credits: 32 }.to_u8(),
            Err(Error::ValueOutOfRange)
        );
        assert_eq!(
            Syndrome::RnrNak { timer: 0xff }.to_u8(),
            Err(Error::ValueOutOfRange)
        );
    }

    #[test]
    fn round_trip() {
        let a = Aeth {
            syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
            msn: 0x12_3456,
        };
        let mut buf = [0u8; AETH_LEN];
        assert_eq!(a.write(&mut buf), Ok(AETH_LEN));
        assert_eq!(buf, [0x62, 0x12, 0x34, 0x56]);
        assert_eq!(Aeth::parse(&buf), Ok((a, &[][..])));
        assert_eq!(Aeth::parse(&buf[..3]), Err(Error::Truncated));
        let bad = Aeth {
            msn: MSN_MAX + 1,
            ..a
        };
        assert_eq!(bad.write(&mut buf), Err(Error::ValueOutOfRange));
    }
}
