//! Bounds-checked big-endian field readers and writers used by the header
//! modules. Each header first takes a fixed-size array chunk (the only
//! length check), then reads or writes its fields from that array.

use super::error::Error;

/// Splits the first `N` bytes off `buf`, or fails with [`Error::Truncated`].
pub(super) fn take<const N: usize>(buf: &[u8]) -> Result<(&[u8; N], &[u8]), Error> {
    buf.split_first_chunk::<N>().ok_or(Error::Truncated)
}

/// The first `N` bytes of `buf` for writing, or [`Error::BufferTooSmall`].
pub(super) fn take_mut<const N: usize>(buf: &mut [u8]) -> Result<&mut [u8; N], Error> {
    buf.first_chunk_mut::<N>().ok_or(Error::BufferTooSmall)
}

/// Largest value of a 24-bit field.
pub(super) const U24_MAX: u32 = 0x00FF_FFFF;

/// Sequential big-endian reader over a header that was already taken whole.
pub(super) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader(buf)
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let (head, rest) = take::<N>(self.0)?;
        self.0 = rest;
        Ok(*head)
    }

    pub(super) fn u8(&mut self) -> Result<u8, Error> {
        let [b] = self.bytes::<1>()?;
        Ok(b)
    }

    pub(super) fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_be_bytes(self.bytes()?))
    }

    pub(super) fn u24(&mut self) -> Result<u32, Error> {
        let [a, b, c] = self.bytes::<3>()?;
        Ok(u32::from_be_bytes([0, a, b, c]))
    }

    pub(super) fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_be_bytes(self.bytes()?))
    }

    pub(super) fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_be_bytes(self.bytes()?))
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        self.bytes()
    }
}

/// Sequential big-endian writer over a header-sized output chunk.
pub(super) struct Writer<'a>(&'a mut [u8]);

impl<'a> Writer<'a> {
    pub(super) fn new(buf: &'a mut [u8]) -> Self {
        Writer(buf)
    }

    fn bytes<const N: usize>(&mut self, bytes: [u8; N]) -> Result<(), Error> {
        let buf = core::mem::take(&mut self.0);
        let (head, rest) = buf
            .split_first_chunk_mut::<N>()
            .ok_or(Error::BufferTooSmall)?;
        *head = bytes;
        self.0 = rest;
        Ok(())
    }

    pub(super) fn u8(&mut self, v: u8) -> Result<(), Error> {
        self.bytes([v])
    }

    pub(super) fn u16(&mut self, v: u16) -> Result<(), Error> {
        self.bytes(v.to_be_bytes())
    }

    /// Writes the low 24 bits; fails with [`Error::ValueOutOfRange`] if any
    /// of the top 8 bits is set.
    pub(super) fn u24(&mut self, v: u32) -> Result<(), Error> {
        if v > U24_MAX {
            return Err(Error::ValueOutOfRange);
        }
        let [_, a, b, c] = v.to_be_bytes();
        self.bytes([a, b, c])
    }

    pub(super) fn u32(&mut self, v: u32) -> Result<(), Error> {
        self.bytes(v.to_be_bytes())
    }

    pub(super) fn u64(&mut self, v: u64) -> Result<(), Error> {
        self.bytes(v.to_be_bytes())
    }

    pub(super) fn array<const N: usize>(&mut self, v: [u8; N]) -> Result<(), Error> {
        self.bytes(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_writer_round_trip() {
        let mut buf = [0u8; 18];
        let mut w = Writer::new(&mut buf);
        w.u8(0x12).unwrap();
        w.u16(0x3456).unwrap();
        w.u24(0x789abc).unwrap();
        w.u32(0xdef0_1234).unwrap();
        w.u64(0x0102_0304_0506_0708).unwrap();
        assert_eq!(w.u8(0), Err(Error::BufferTooSmall));
        let mut r = Reader::new(&buf);
        assert_eq!(r.u8().unwrap(), 0x12);
        assert_eq!(r.u16().unwrap(), 0x3456);
        assert_eq!(r.u24().unwrap(), 0x789abc);
        assert_eq!(r.u32().unwrap(), 0xdef0_1234);
        assert_eq!(r.u64().unwrap(), 0x0102_0304_0506_0708);
        assert_eq!(r.u8(), Err(Error::Truncated));
    }

    #[test]
    fn u24_rejects_wide_values() {
        let mut buf = [0u8; 3];
        assert_eq!(
            Writer::new(&mut buf).u24(0x0100_0000),
            Err(Error::ValueOutOfRange)
        );
        assert!(Writer::new(&mut buf).u24(U24_MAX).is_ok());
        assert_eq!(buf, [0xff; 3]);
    }

    #[test]
    fn take_bounds() {
        assert_eq!(take::<2>(&[1]), Err(Error::Truncated));
        let (h, r) = take::<2>(&[1, 2, 3]).unwrap();
        assert_eq!((h, r), (&[1, 2], &[3][..]));
        let mut small = [0u8; 1];
        assert_eq!(take_mut::<2>(&mut small), Err(Error::BufferTooSmall));
    }
}
