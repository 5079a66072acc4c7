//! Sizes as users write them (the CLI, the Python package, sweep grids):
//! memory as bytes with a unit, or as a count of 4 KiB frames spelled out.

/// The frame size every nvmos allocator manages.
pub const FRAME_BYTES: u64 = 4096;

/// Parse a memory size into 4 KiB frames.
///
/// Every size carries its unit, because a bare `4` is ambiguous (4 bytes?
/// 4 GiB? 4 frames?) and each reading gives a plausible-looking result:
///
/// - binary (IEC) units: `KiB`, `MiB`, `GiB`, `TiB`, and Linux `memparse`'s
///   `K`, `M`, `G`, `T` (also binary); `B` for bytes. These must come to a
///   whole number of frames.
/// - decimal (SI) units: `kB`/`KB`, `MB`, `GB`, `TB` (`1GB` = 10^9 bytes).
///   A decimal size is rarely a whole number of 4 KiB frames; it is rounded
///   down to whole frames (at most 4095 bytes less), never up.
/// - frames: `4096frames`, `4096 frames` (or `frame`).
///
/// Zero is refused, and so is a bare number, with a message that shows
/// both spellings.
pub fn parse_memory(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit() && c != '_')
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    let number: u64 = digits.replace('_', "").parse().map_err(|_| {
        format!("'{text}' is not a memory size: expected e.g. 4GiB, 512MiB, 4GB or 4096frames")
    })?;
    let unit = unit.trim();
    enum Scale {
        Binary(u32),
        Decimal(u32),
    }
    // Units are case-insensitive: `kb`, `KB` and `kB` are all 10^3 bytes,
    // `kib` and `KiB` 2^10 (nobody sizes memory in bits).
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" => {
            return Err(format!(
                "memory '{text}' has no unit: for {number} frames of 4 KiB write {number}frames; for a size write e.g. {number}GiB or {number}GB"
            ))
        }
        "b" => Scale::Binary(0),
        "k" | "kib" => Scale::Binary(10),
        "m" | "mib" => Scale::Binary(20),
        "g" | "gib" => Scale::Binary(30),
        "t" | "tib" => Scale::Binary(40),
        "kb" => Scale::Decimal(3),
        "mb" => Scale::Decimal(6),
        "gb" => Scale::Decimal(9),
        "tb" => Scale::Decimal(12),
        "frames" | "frame" => {
            return match number {
                0 => Err(format!("memory '{text}' is zero frames")),
                frames => Ok(frames),
            };
        }
        _ => {
            return Err(format!(
                "'{text}' has an unknown unit '{unit}': use B, KiB, MiB, GiB, TiB (binary), kB, MB, GB, TB (decimal) or frames"
            ))
        }
    };
    let too_large = || format!("memory '{text}' is too large");
    let frames = match scale {
        Scale::Binary(shift) => {
            let bytes = number.checked_mul(1 << shift).ok_or_else(too_large)?;
            if bytes % FRAME_BYTES != 0 {
                return Err(format!(
                    "memory '{text}' is not a whole number of {FRAME_BYTES}-byte frames"
                ));
            }
            bytes / FRAME_BYTES
        }
        Scale::Decimal(exp) => {
            let bytes = number.checked_mul(10u64.pow(exp)).ok_or_else(too_large)?;
            bytes / FRAME_BYTES
        }
    };
    if frames == 0 {
        return Err(format!(
            "memory '{text}' is less than one {FRAME_BYTES}-byte frame"
        ));
    }
    Ok(frames)
}

/// A frame count as a human size, in the largest binary unit that divides
/// it exactly (`4 GiB`, `1536 MiB`).
pub fn format_frames(frames: u64) -> String {
    let bytes = frames * FRAME_BYTES;
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20)] {
        if bytes >= 1 << shift && bytes.trailing_zeros() >= shift {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{} KiB", bytes >> 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_units_become_frames() {
        assert_eq!(parse_memory("4GiB"), Ok(1 << 20));
        assert_eq!(parse_memory("4gib"), Ok(1 << 20));
        assert_eq!(parse_memory("512MiB"), Ok(128 * 1024));
        assert_eq!(parse_memory("16M"), Ok(4096));
        assert_eq!(parse_memory("64KiB"), Ok(16));
        assert_eq!(parse_memory("1TiB"), Ok(1 << 28));
        assert_eq!(parse_memory("8192B"), Ok(2));
        assert_eq!(parse_memory(" 1_024 MiB "), Ok(1 << 18));
    }

    #[test]
    fn frames_are_spelled_out_and_bare_numbers_refused() {
        assert_eq!(parse_memory("7frames"), Ok(7));
        assert_eq!(parse_memory("7 frames"), Ok(7));
        assert_eq!(parse_memory("1 frame"), Ok(1));
        let e = parse_memory("4").unwrap_err();
        assert!(
            e.contains("no unit") && e.contains("4frames") && e.contains("4GiB"),
            "{e}"
        );
        assert!(parse_memory("1048576").is_err());
    }

    #[test]
    fn decimal_units_are_powers_of_ten_rounded_down_to_frames() {
        assert_eq!(parse_memory("4GB"), Ok(4_000_000_000 / 4096));
        assert_eq!(parse_memory("1MB"), Ok(244));
        assert_eq!(parse_memory("8kB"), Ok(1));
        assert_eq!(parse_memory("1TB"), Ok(1_000_000_000_000 / 4096));
        assert!(parse_memory("4kB").unwrap_err().contains("less than one"));
    }

    #[test]
    fn bad_sizes_name_the_value() {
        for bad in [
            "lots",
            "",
            "GiB",
            "4 parsecs",
            "0",
            "0frames",
            "0GiB",
            "16",
            "1000B",
            "99999999999999TiB",
            "-4GiB",
        ] {
            let err = parse_memory(bad).expect_err(bad);
            assert!(err.contains(&format!("'{bad}'")), "{bad}: {err}");
        }
    }

    #[test]
    fn formats_in_the_largest_exact_unit() {
        assert_eq!(format_frames(1 << 20), "4 GiB");
        assert_eq!(format_frames(3 << 16), "768 MiB");
        assert_eq!(format_frames(3), "12 KiB");
    }
}
