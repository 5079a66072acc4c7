//! Sizes as users write them (the CLI, the Python package, sweep grids): memory as bytes with a binary unit, or as a
//! plain count of 4 KiB frames.

/// The frame size every nvmos allocator manages.
pub const FRAME_BYTES: u64 = 4096;

/// Parse a memory size into 4 KiB frames.
///
/// `4GiB`, `512MiB`, `64KiB`, `1TiB` (also `4G`, `512M`: binary, as
/// Linux's `memparse`), `123B` for bytes, or a bare number of frames. Byte
/// sizes must be a whole number of frames; zero is refused.
pub fn parse_memory(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit() && c != '_')
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    let number: u64 = digits.replace('_', "").parse().map_err(|_| {
        format!("'{text}' is not a memory size: expected e.g. 4GiB, 512MiB, or a number of 4 KiB frames")
    })?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "frames" => {
            return match number {
                0 => Err(format!("memory '{text}' is zero frames")),
                frames => Ok(frames),
            };
        }
        "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        other => {
            return Err(format!(
                "'{text}' has an unknown unit '{other}': use B, KiB, MiB, GiB, TiB or a bare frame count"
            ))
        }
    };
    let bytes = number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("memory '{text}' is too large"))?;
    if bytes == 0 {
        return Err(format!("memory '{text}' is zero bytes"));
    }
    if bytes % FRAME_BYTES != 0 {
        return Err(format!(
            "memory '{text}' is not a whole number of {FRAME_BYTES}-byte frames"
        ));
    }
    Ok(bytes / FRAME_BYTES)
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
    fn bare_numbers_are_frames() {
        assert_eq!(parse_memory("1048576"), Ok(1 << 20));
        assert_eq!(parse_memory("7frames"), Ok(7));
    }

    #[test]
    fn bad_sizes_name_the_value() {
        for bad in [
            "lots",
            "",
            "GiB",
            "4 parsecs",
            "0",
            "0GiB",
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
