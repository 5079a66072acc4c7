//! Any bytes as perf text: events or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvmos_trace::{EventSource, Format, TextReader, TraceInfo};

fuzz_target!(|data: &[u8]| {
    let mut reader = TextReader::new(data, "fuzz.txt", Format::Perf);
    // TraceInfo drives the reader to its end or its first error.
    let _ = TraceInfo::from_source(&mut reader);
    let _ = reader.counts();
    let _ = nvmos_trace::detect(data);
});
