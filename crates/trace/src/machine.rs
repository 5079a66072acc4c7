//! What the recording machine looks like: `/proc/zoneinfo`, `/proc/meminfo`
//! and a few system calls, read into [`MachineInfo`].

use std::path::Path;

use crate::event::{MachineInfo, ZoneInfo};
use crate::TraceError;

/// Parses `/proc/zoneinfo` text: the zones with frames (`spanned > 0`),
/// ascending by start pfn.
///
/// Each zone starts with `Node N, zone NAME`; its `spanned`, `present` and
/// `start_pfn:` lines follow (the `per-node stats` block between them has
/// none of those names). Zones without frames print no `start_pfn:`.
pub fn parse_zoneinfo(text: &str) -> Result<Vec<ZoneInfo>, String> {
    let mut zones: Vec<ZoneInfo> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Node ") {
            let (node, zone) = rest
                .split_once(',')
                .ok_or_else(|| format!("line {lineno}: {t:?} is not `Node N, zone NAME`"))?;
            let node = node
                .trim()
                .parse()
                .map_err(|_| format!("line {lineno}: bad node number in {t:?}"))?;
            let name = zone
                .trim()
                .strip_prefix("zone")
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| format!("line {lineno}: {t:?} is not `Node N, zone NAME`"))?;
            zones.push(ZoneInfo {
                node,
                name: name.to_owned(),
                start_pfn: 0,
                spanned: 0,
                present: 0,
            });
            continue;
        }
        let mut words = t.split_whitespace();
        let (Some(key), Some(value)) = (words.next(), words.next()) else {
            continue;
        };
        let field = match key {
            "spanned" | "present" | "start_pfn:" => key,
            _ => continue,
        };
        let zone = zones
            .last_mut()
            .ok_or_else(|| format!("line {lineno}: {field} before any `Node N, zone NAME`"))?;
        let value: u64 = value
            .parse()
            .map_err(|_| format!("line {lineno}: {field} {value:?} is not a number"))?;
        match field {
            "spanned" => zone.spanned = value,
            "present" => zone.present = value,
            _ => zone.start_pfn = value,
        }
    }
    zones.retain(|z| z.spanned > 0);
    zones.sort_by_key(|z| (z.start_pfn, z.node));
    Ok(zones)
}

/// `MemTotal` from `/proc/meminfo` text, in bytes.
pub fn parse_meminfo_total(text: &str) -> Result<u64, String> {
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("MemTotal:") {
            let mut words = rest.split_whitespace();
            let n: u64 = words
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("MemTotal line {line:?} has no number"))?;
            let scale = match words.next() {
                Some("kB") => 1024,
                None => 1,
                Some(unit) => return Err(format!("MemTotal in unknown unit {unit:?}")),
            };
            return n
                .checked_mul(scale)
                .ok_or_else(|| format!("MemTotal {n} {scale} overflows"));
        }
    }
    Err("no MemTotal line".into())
}

/// The `System RAM` ranges of `/proc/iomem` text as pfn ranges
/// `[start, end)` for `page_size`, ascending, partial pages left out.
/// Without root the kernel shows every address as 0: then the ranges are
/// unknown and the answer is empty.
pub fn parse_iomem_ram(text: &str, page_size: u64) -> Result<Vec<(u64, u64)>, String> {
    let mut ram = Vec::new();
    for (n, line) in text.lines().enumerate() {
        // Top-level resources only: nested ones are indented.
        if line.starts_with(' ') || !line.ends_with(": System RAM") {
            continue;
        }
        let range = line.split(" : ").next().unwrap_or("");
        let (start, end) = range
            .split_once('-')
            .and_then(|(a, b)| {
                Some((
                    u64::from_str_radix(a.trim(), 16).ok()?,
                    u64::from_str_radix(b.trim(), 16).ok()?,
                ))
            })
            .ok_or_else(|| format!("line {}: {line:?} is not a hex address range", n + 1))?;
        if end < start {
            return Err(format!("line {}: {line:?} ends before it starts", n + 1));
        }
        // `end` is inclusive.
        let (first, last) = (start.div_ceil(page_size), (end + 1) / page_size);
        if first < last {
            ram.push((first, last));
        }
    }
    if ram.iter().all(|&(a, b)| a == 0 && b == 0)
        || ram.iter().all(|&(a, _)| a == 0) && ram.len() > 1
    {
        return Ok(Vec::new());
    }
    ram.sort_unstable();
    Ok(ram)
}

fn read(path: &str) -> Result<String, TraceError> {
    std::fs::read_to_string(path).map_err(|e| TraceError::io(Path::new(path), e))
}

fn parse_err(path: &str, message: String) -> TraceError {
    TraceError::Parse {
        path: path.into(),
        line: 0,
        message,
    }
}

/// Describes this machine: page size, memory, online CPUs, zones, kernel.
#[cfg(target_os = "linux")]
pub fn current() -> Result<MachineInfo, TraceError> {
    // SAFETY: sysconf has no preconditions.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    // SAFETY: as above.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let zones =
        parse_zoneinfo(&read("/proc/zoneinfo")?).map_err(|m| parse_err("/proc/zoneinfo", m))?;
    let memory_bytes =
        parse_meminfo_total(&read("/proc/meminfo")?).map_err(|m| parse_err("/proc/meminfo", m))?;
    let kernel = read("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let page = u64::try_from(page_size).unwrap_or(4096);
    let ram = match read("/proc/iomem") {
        Ok(text) => parse_iomem_ram(&text, page).map_err(|m| parse_err("/proc/iomem", m))?,
        // Some kernels hide it; the zones alone still describe the machine.
        Err(_) => Vec::new(),
    };
    Ok(MachineInfo {
        page_size: u64::try_from(page_size).unwrap_or(4096),
        memory_bytes,
        cpus: u32::try_from(cpus).unwrap_or(1).max(1),
        zones,
        kernel,
        ram,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iomem_ram_ranges_become_whole_pages() {
        let text = "\
00000000-00000fff : Reserved
00001000-0009fbff : System RAM
000a0000-000fffff : Reserved
  000a0000-000bffff : PCI Bus 0000:00
00100000-bfffffff : System RAM
  01000000-01ffffff : Kernel code
c0000000-febfffff : PCI Bus 0000:00
100000000-63fffffff : System RAM
";
        let ram = parse_iomem_ram(text, 4096).unwrap();
        assert_eq!(
            ram,
            vec![(0x1, 0x9f), (0x100, 0xc0000), (0x100000, 0x640000)]
        );
        // What a user without root sees.
        let hidden = "00000000-00000000 : System RAM\n00000000-00000000 : System RAM\n";
        assert_eq!(parse_iomem_ram(hidden, 4096).unwrap(), vec![]);
        assert!(parse_iomem_ram("zz-10 : System RAM\n", 4096)
            .unwrap_err()
            .contains("line 1"));
    }

    const ZONEINFO: &str = "\
Node 0, zone      DMA
  per-node stats
      nr_inactive_anon 0
  pages free     3840
        spanned  4095
        present  3998
        managed  3840
  start_pfn:           1
Node 0, zone    DMA32
        spanned  1044480
        present  782336
  start_pfn:           4096
Node 0, zone  Movable
  pages free     0
        spanned  0
        present  0
";

    #[test]
    fn zoneinfo() {
        let zones = parse_zoneinfo(ZONEINFO).unwrap();
        assert_eq!(zones.len(), 2, "Movable has no frames");
        assert_eq!(zones[0].name, "DMA");
        assert_eq!(
            (zones[0].start_pfn, zones[0].spanned, zones[0].present),
            (1, 4095, 3998)
        );
        assert_eq!(zones[1].name, "DMA32");
        assert_eq!(zones[1].start_pfn, 4096);
        assert!(parse_zoneinfo("        spanned  4095\n").is_err());
        assert!(parse_zoneinfo("Node x, zone DMA\n").is_err());
    }

    #[test]
    fn meminfo() {
        assert_eq!(
            parse_meminfo_total("MemFree: 1 kB\nMemTotal:       24682416 kB\n").unwrap(),
            24682416 * 1024
        );
        assert!(parse_meminfo_total("MemFree: 1 kB\n").is_err());
        assert!(parse_meminfo_total("MemTotal: lots kB\n").is_err());
    }
}
