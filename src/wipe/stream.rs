//! The random data stream: ChaCha8 keyed with 32 bytes from getrandom, addressable by byte
//! offset so that worker threads generate their blocks independently and `--verify` regenerates
//! exactly what was written.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A 256-bit key for [`fill`]. Kept in memory only for the job's life (for `--verify`); its
/// `Debug` does not print the key.
#[derive(Clone, PartialEq, Eq)]
pub struct Seed(pub [u8; 32]);

impl Seed {
    /// A fresh key from the kernel's CSPRNG (getrandom(2)).
    pub fn from_os() -> std::io::Result<Seed> {
        let mut k = [0u8; 32];
        getrandom::getrandom(&mut k).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Seed(k))
    }
}

impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seed(<redacted>)")
    }
}

/// Fills `buf` with the stream's bytes at `[offset, offset + buf.len())`. `offset` must be a
/// multiple of 4 (the stream is addressed in 32-bit words); block offsets always are.
pub fn fill(seed: &Seed, offset: u64, buf: &mut [u8]) {
    debug_assert_eq!(offset % 4, 0);
    let mut rng = ChaCha8Rng::from_seed(seed.0);
    rng.set_word_pos(u128::from(offset / 4));
    rng.fill_bytes(buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_is_seekable() {
        let s = Seed([7; 32]);
        let mut whole = vec![0u8; 1 << 16];
        fill(&s, 0, &mut whole);
        let mut part = vec![0u8; 4096];
        fill(&s, 8192, &mut part);
        assert_eq!(&whole[8192..8192 + 4096], &part[..]);
        assert_ne!(&whole[..4096], &part[..]);
    }

    #[test]
    fn different_seeds_differ() {
        let mut a = vec![0u8; 64];
        let mut b = vec![0u8; 64];
        fill(&Seed([1; 32]), 0, &mut a);
        fill(&Seed([2; 32]), 0, &mut b);
        assert_ne!(a, b);
    }
}
