//! Any bytes as an `.nvt` file: events or an error, never a panic or an
//! allocation beyond the format's limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvmos_trace::{NvtReader, TraceInfo};

fuzz_target!(|data: &[u8]| {
    if let Ok(mut reader) = NvtReader::new(std::io::Cursor::new(data), "fuzz.nvt") {
        let _ = TraceInfo::from_source(&mut reader);
    }
});
