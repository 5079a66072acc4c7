//! Nothing to build: cargo reads `[build-dependencies]` (see Cargo.toml:
//! features shared with the Python module's build) only for a package
//! with a build script.

fn main() {}
