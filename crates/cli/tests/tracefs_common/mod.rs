//! What the recorder tests (`record`, `record-swap`) share: getting tracefs
//! ready as root, and reading the tracing files a recorder must put back.

use std::path::Path;
use std::process::Command;

pub const TRACEFS: &str = "/sys/kernel/tracing";

pub fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
}

/// Tracefs mounted and usable by a test that needs root: `None` (the reason
/// printed) when the test cannot run here, else whether this call mounted
/// tracefs (the test unmounts it at the end, see [`unmount_if`]).
pub fn ready(what: &str) -> Option<bool> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: {what} needs root");
        return None;
    }
    if !Path::new(TRACEFS).is_dir() {
        println!("skipped: no {TRACEFS}");
        return None;
    }
    let mounted_here = !tracefs_mounted();
    if mounted_here {
        let ok = Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting tracefs");
    }
    Some(mounted_here)
}

/// Unmount tracefs if [`ready`] mounted it.
pub fn unmount_if(mounted_here: bool) {
    if mounted_here {
        let _ = Command::new("umount").arg(TRACEFS).status();
    }
}

/// The trimmed contents of tracing files (relative to tracefs); a file the
/// kernel lacks reads as `<missing>`, so its appearing is a change too. A never-used buffer size reads "7 (expanded:
/// 1408)" and comes back as 1408, so both are given as 1408.
pub fn snapshot(files: &[&str]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|f| {
            let v = std::fs::read_to_string(Path::new(TRACEFS).join(f))
                .unwrap_or_else(|_| "<missing>".into());
            let v = v.trim();
            let v = v
                .split("expanded:")
                .nth(1)
                .map_or(v, |s| s.trim().trim_end_matches(')'));
            (f.to_string(), v.to_owned())
        })
        .collect()
}
