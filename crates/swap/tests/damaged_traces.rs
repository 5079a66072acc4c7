//! Damaged swap traces (`.swt.zst`) are refused, never read as a different
//! trace: a flipped bit, a file cut short, a zstd frame without a content
//! checksum; and the events a recording lost are kept as a count.

use std::path::{Path, PathBuf};

use nvmos_swap::{Dir, SwapRequest, SwapTrace};

/// A small trace with enough requests that its compressed form has room
/// for damage in every part of the frame.
fn sample() -> SwapTrace {
    let mut t = SwapTrace::default();
    t.header.insert("command".into(), "python3 churn.py".into());
    t.header
        .insert("swap_bytes".into(), (64u64 << 20).to_string());
    t.header.insert("lost_events".into(), "0".into());
    for i in 0..200u64 {
        t.requests.push(SwapRequest {
            time_ns: i * 1_000 + (i * 7919) % 997,
            dir: if i % 3 == 0 { Dir::Read } else { Dir::Write },
            offset: 4096 * (1 + (i * 37) % 4000),
            size: 4096 * (1 + i % 8),
        });
        t.tasks
            .push(if i % 2 == 0 { "kswapd0" } else { "python3" }.into());
    }
    t.phases.push((0, "clean".into()));
    t
}

fn write_sample(dir: &Path, name: &str) -> (PathBuf, Vec<u8>) {
    let path = dir.join(name);
    sample().write(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn written_traces_carry_a_checksum_and_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = write_sample(dir.path(), "t.swt.zst");
    // Frame header descriptor (the byte after the 4-byte magic): bit 2 is
    // zstd's Content_Checksum_flag.
    assert_eq!(&bytes[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
    assert_ne!(bytes[4] & 0x04, 0, "no content checksum in the frame");
    assert_eq!(SwapTrace::read(&path).unwrap(), sample());
}

/// Every single-bit flip anywhere in the file is an error naming the file,
/// never a trace with other numbers in it, and never a panic. (A few bits
/// of a zstd frame do not change what it decodes to, such as a larger
/// window size than needed: those read as the same trace.)
#[test]
fn every_flipped_bit_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bytes) = write_sample(dir.path(), "good.swt.zst");
    let bad = dir.path().join("flipped.swt.zst");
    let mut accepted = Vec::new();
    for i in 0..bytes.len() {
        for bit in [0u8, 3, 7] {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            std::fs::write(&bad, &b).unwrap();
            match SwapTrace::read(&bad) {
                Ok(t) if t == sample() => {}
                Ok(_) => accepted.push((i, bit)),
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.contains("flipped.swt.zst"), "byte {i} bit {bit}: {e}");
                }
            }
        }
    }
    assert!(
        accepted.is_empty(),
        "{} of {} flips were read as a different trace, e.g. (byte, bit) {:?}",
        accepted.len(),
        bytes.len() * 3,
        &accepted[..accepted.len().min(8)]
    );
}

/// Damage inside the compressed data is reported with where it is.
#[test]
fn a_checksum_mismatch_names_the_frame_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut bytes) = write_sample(dir.path(), "good.swt.zst");
    // The last 4 bytes are the checksum itself.
    let n = bytes.len();
    bytes[n - 2] ^= 0x10;
    let bad = dir.path().join("sum.swt.zst");
    std::fs::write(&bad, &bytes).unwrap();
    let e = SwapTrace::read(&bad).unwrap_err().to_string();
    assert!(
        e.contains("sum.swt.zst") && e.contains("checksum") && e.contains("offset 0"),
        "{e}"
    );
}

/// A file cut anywhere is an error naming the file: inside the zstd frame
/// (compressed) or inside the last record (plain text).
#[test]
fn a_truncated_trace_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, bytes) = write_sample(dir.path(), "good.swt.zst");
    let cut = dir.path().join("cut.swt.zst");
    for len in 1..bytes.len() {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        let e = match SwapTrace::read(&cut) {
            Ok(t) => panic!(
                "cut at {len} of {} read as {} requests",
                bytes.len(),
                t.requests.len()
            ),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("cut.swt.zst"), "cut at {len}: {e}");
    }
    // Plain text whose last record lost its end: `W 2 8192 40` would be
    // a request of 40 bytes instead of 4096.
    let mut text = Vec::new();
    sample().write_text(&mut text).unwrap();
    let plain = dir.path().join("plain.swt");
    let last_newline = text[..text.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap();
    for end in [text.len() - 1, text.len() - 3, last_newline + 6] {
        std::fs::write(&plain, &text[..end]).unwrap();
        let e = match SwapTrace::read(&plain) {
            Ok(t) => panic!("cut at {end}: read as {} requests", t.requests.len()),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("plain.swt:") && e.contains("truncated"),
            "cut at {end}: {e}"
        );
    }
    // The whole text reads.
    std::fs::write(&plain, &text).unwrap();
    assert_eq!(SwapTrace::read(&plain).unwrap(), sample());
}

/// A zstd frame written without a content checksum cannot show damage, so
/// it is refused with how to re-encode it.
#[test]
fn a_frame_without_a_checksum_is_refused_with_how_to_re_encode() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = Vec::new();
    sample().write_text(&mut text).unwrap();
    let path = dir.path().join("old.swt.zst");
    std::fs::write(&path, zstd::encode_all(&text[..], 19).unwrap()).unwrap();
    let e = match SwapTrace::read(&path) {
        Ok(t) => panic!("read as {} requests", t.requests.len()),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("old.swt.zst") && e.contains("no content checksum") && e.contains("zstd -dc"),
        "{e}"
    );
}

/// `# lost_events:` is read as a number, and a bad one is an error naming
/// its line.
#[test]
fn lost_events_from_the_header() {
    let parse = |text: &str| SwapTrace::parse(text.as_bytes(), Path::new("l.swt"));
    let t = parse("# nvmos swap trace 1\n# lost_events: 12\nW 5 4096 4096 x\n").unwrap();
    assert_eq!(t.lost_events(), 12);
    let t = parse("# nvmos swap trace 1\nW 5 4096 4096 x\n").unwrap();
    assert_eq!(t.lost_events(), 0);
    let e = match parse("# nvmos swap trace 1\n# lost_events: many\nW 5 4096 4096 x\n") {
        Ok(t) => panic!("read with {} lost events", t.lost_events()),
        Err(e) => e.to_string(),
    };
    assert!(
        e.starts_with("l.swt:2: ") && e.contains("lost_events"),
        "{e}"
    );
}

/// The shipped recording is checksummed.
#[test]
fn shipped_swap_traces_are_checksummed() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces/swap");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".swt.zst") {
            let bytes = std::fs::read(&path).unwrap();
            assert_ne!(bytes[4] & 0x04, 0, "{}: no checksum", path.display());
            SwapTrace::read(&path).unwrap();
        }
    }
}
