//! Units, once: sizes are bytes and times are nanoseconds everywhere in a
//! stream; these turn them into what people read (MiB, ms).

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// `MIB` for floating-point arithmetic.
pub const MIB_F64: f64 = MIB as f64;
/// `GIB` for floating-point arithmetic.
pub const GIB_F64: f64 = GIB as f64;

pub const NS_PER_MS: f64 = 1e6;
pub const NS_PER_S: u64 = 1_000_000_000;

/// Bytes as MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB_F64
}

/// A difference of bytes (which may be negative) as MiB.
pub fn signed_mib(bytes: i64) -> f64 {
    bytes as f64 / MIB_F64
}

/// MiB (as a user writes them) as whole bytes.
pub fn bytes_from_mib(mib: f64) -> u64 {
    (mib * MIB_F64) as u64
}

/// Nanoseconds as milliseconds.
pub fn ms(ns: u64) -> f64 {
    ns as f64 / NS_PER_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        assert_eq!(mib(64 * MIB), 64.0);
        assert_eq!(signed_mib(-(MIB as i64) / 2), -0.5);
        assert_eq!(bytes_from_mib(1.5), MIB + MIB / 2);
        assert_eq!(ms(2_500_000), 2.5);
        assert_eq!(GIB, 1024 * MIB);
        assert_eq!(KIB * 1024, MIB);
    }
}
