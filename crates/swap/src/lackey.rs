//! Valgrind lackey page-reference importer (`valgrind --tool=lackey
//! --trace-mem=yes`).
//!
//! Lackey prints one line per memory access: `I  addr,size` for an
//! instruction fetch, ` L addr,size` a load, ` S addr,size` a store,
//! ` M addr,size` a modify (load and store); addresses in hex, sizes in
//! decimal. Lines starting `==pid==` are valgrind's own messages. Each
//! access becomes one reference per 4 KiB page it touches; pages get
//! dense ids in order of first touch. A page first touched by an
//! instruction fetch is program text, file-backed (the page cache holds
//! it; reclaim drops it instead of swapping it).
//!
//! Input may be plain text or zstd-compressed.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::workload::{Workload, REF_WRITE};
use crate::SwapError;

/// Reads a lackey trace file (plain or zstd) into a workload.
pub fn read_lackey(path: &Path) -> Result<Workload, SwapError> {
    let mut file = std::fs::File::open(path).map_err(|e| SwapError::io(path, e))?;
    let mut magic = [0u8; 4];
    let n = file.read(&mut magic).map_err(|e| SwapError::io(path, e))?;
    let file = std::fs::File::open(path).map_err(|e| SwapError::io(path, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".zst").to_owned())
        .unwrap_or_default();
    if n == 4 && magic == [0x28, 0xb5, 0x2f, 0xfd] {
        let dec = zstd::Decoder::new(file).map_err(|e| SwapError::io(path, e))?;
        parse_lackey(BufReader::new(dec), path, &name)
    } else {
        parse_lackey(BufReader::new(file), path, &name)
    }
}

/// Parses lackey output; `path` names the source in errors.
pub fn parse_lackey(input: impl BufRead, path: &Path, name: &str) -> Result<Workload, SwapError> {
    let mut ids: HashMap<u64, u32> = HashMap::new();
    let mut file = Vec::new();
    let mut refs = Vec::new();
    let mut line_no = 0u64;
    let mut buf = String::new();
    let mut input = input;
    loop {
        buf.clear();
        line_no += 1;
        let read = input.read_line(&mut buf).map_err(|e| SwapError::Parse {
            path: path.to_owned(),
            line: line_no,
            message: format!("unreadable: {e}"),
        })?;
        if read == 0 {
            break;
        }
        let line = buf.trim_end_matches(['\n', '\r']);
        if line.starts_with("==") || line.trim().is_empty() {
            continue;
        }
        let err = |message: String| SwapError::Parse {
            path: path.to_owned(),
            line: line_no,
            message,
        };
        let trimmed = line.trim_start();
        let (kind, rest) = trimmed.split_at(1);
        let (instr, write) = match kind {
            "I" => (true, false),
            "L" => (false, false),
            "S" | "M" => (false, true),
            _ => {
                return Err(err(format!(
                    "field `kind`: '{}' is not I, L, S or M",
                    trimmed.chars().next().unwrap_or(' ')
                )))
            }
        };
        let (addr, size) = rest
            .trim()
            .split_once(',')
            .ok_or_else(|| err("expected `address,size`".into()))?;
        let addr = u64::from_str_radix(addr.trim(), 16).map_err(|_| {
            err(format!(
                "field `address`: '{}' is not hexadecimal",
                addr.trim()
            ))
        })?;
        let size: u64 = size.trim().parse().map_err(|_| {
            err(format!(
                "field `size`: '{}' is not a whole number",
                size.trim()
            ))
        })?;
        if size == 0 || size > 4096 {
            return Err(err(format!("field `size`: {size} is not 1..=4096 bytes")));
        }
        let first = addr >> 12;
        let last = addr
            .checked_add(size - 1)
            .ok_or_else(|| err("field `address`: access runs past the address space".into()))?
            >> 12;
        for vpn in first..=last {
            let next = ids.len() as u32;
            let id = *ids.entry(vpn).or_insert_with(|| {
                file.push(instr);
                next
            });
            if id >= crate::workload::PAGE_MASK {
                return Err(err("more than 2^30 distinct pages".into()));
            }
            refs.push(id | if write { REF_WRITE } else { 0 });
        }
    }
    let pages = ids.len() as u32;
    Ok(Workload::from_refs(name, refs, pages, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Workload, SwapError> {
        parse_lackey(text.as_bytes(), Path::new("l.txt"), "l")
    }

    #[test]
    fn pages_writes_and_text() {
        let w =
            parse("==1== Lackey\nI  00400000,4\n L 7ff000ffc,8\n S 00601000,4\n M 00601004,4\n")
                .unwrap();
        // The load at ...ffc of 8 bytes crosses a page: two references.
        assert_eq!(w.refs.len(), 5);
        assert_eq!(w.pages, 4);
        assert_eq!(w.file, vec![true, false, false, false]);
        assert_eq!(w.refs[3], 3 | REF_WRITE);
        assert_eq!(w.refs[4], 3 | REF_WRITE);
    }

    #[test]
    fn malformed_lines_name_the_line_and_field() {
        let e = parse("I  00400000,4\n X 1,2\n").unwrap_err().to_string();
        assert!(e.contains("l.txt:2") && e.contains("`kind`"), "{e}");
        let e = parse(" L zz,4\n").unwrap_err().to_string();
        assert!(e.contains(":1:") && e.contains("`address`"), "{e}");
        let e = parse(" L 10,x\n").unwrap_err().to_string();
        assert!(e.contains("`size`"), "{e}");
        let e = parse(" L 10\n").unwrap_err().to_string();
        assert!(e.contains("address,size"), "{e}");
        let e = parse(" S 10,0\n").unwrap_err().to_string();
        assert!(e.contains("`size`"), "{e}");
    }
}
