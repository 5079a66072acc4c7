//! A persistent linked list in a PMO that survives restarts.
//!
//! ```sh
//! echo -n 'a long passphrase' > key
//! cargo run -p nvmos-pmo --example plist -- /dev/shm/plist.pool key push 1
//! cargo run -p nvmos-pmo --example plist -- /dev/shm/plist.pool key push 2
//! cargo run -p nvmos-pmo --example plist -- /dev/shm/plist.pool key list   # 2 1
//! ```
//!
//! The first run creates the pool and an encrypted object `list`. The
//! object is attached at the same virtual address in every process, so the
//! nodes link to each other with absolute pointers ([`PPtr`]) stored in the
//! object as they are; each push is made durable with one psync.

use std::path::Path;

use nvmos_pmo::{Access, Attachment, Mode, PPtr, Perm, Pool};

/// The object's first bytes.
#[derive(Clone, Copy)]
#[repr(C)]
struct Header {
    magic: u64,
    head: PPtr<Node>,
    /// Bump allocator: the offset of the next free node.
    next_free: u64,
    len: u64,
}

#[derive(Clone, Copy)]
#[repr(C)]
struct Node {
    value: u64,
    next: PPtr<Node>,
}

const MAGIC: u64 = 0x6e766d6f_73706c73; // "nvmosplst"
const OBJECT_SIZE: u64 = 1 << 20;

fn main() {
    if let Err(e) = run() {
        eprintln!("plist: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: plist POOL KEY_FILE (push VALUE | list)";
    let (pool_path, key_file, command) = match args.as_slice() {
        [p, k, c, ..] => (Path::new(p), Path::new(k), c.as_str()),
        _ => return Err(usage.into()),
    };
    // The one key-file rule every entry point shares (the CLI's too): one
    // trailing newline dropped, at least 8 bytes, zeroized when dropped.
    let key = nvmos_pmo::read_key_file(key_file)?;
    let pool = if pool_path.exists() {
        Pool::open(pool_path, Access::ReadWrite)?
    } else {
        let pool = Pool::create(pool_path, 16 << 20)?;
        pool.pcreate("list", OBJECT_SIZE, Some(&key[..]))?;
        pool
    };
    let mut list = pool.attach("list", Perm::Write, Some(&key[..]), Mode::DramCache)?;
    let header_ptr: PPtr<Header> = list.pptr(0);
    let mut header = list
        .get(header_ptr)
        .ok_or("object too small for the header")?;
    if header.magic != MAGIC {
        header = Header {
            magic: MAGIC,
            head: PPtr::null(),
            next_free: size_of::<Header>() as u64,
            len: 0,
        };
    }
    match (command, args.get(3)) {
        ("push", Some(value)) => {
            let value: u64 = value.parse().map_err(|e| format!("{value}: {e}"))?;
            let node_ptr: PPtr<Node> = list.pptr(header.next_free as usize);
            let node = Node {
                value,
                next: header.head,
            };
            if !list.set(node_ptr, node) {
                return Err("the object is full".into());
            }
            header.head = node_ptr;
            header.next_free += size_of::<Node>() as u64;
            header.len += 1;
            list.set(header_ptr, header);
            list.psync()?;
            println!(
                "pushed {value}; {} nodes, head at {:#x}",
                header.len,
                node_ptr.addr()
            );
        }
        ("list", None) => print_list(&list, header)?,
        _ => return Err(usage.into()),
    }
    list.detach()?;
    Ok(())
}

fn print_list(list: &Attachment, header: Header) -> Result<(), Box<dyn std::error::Error>> {
    let mut values = Vec::new();
    let mut p = header.head;
    while !p.is_null() {
        let node = list
            .get(p)
            .ok_or_else(|| format!("dangling pointer {p:?} in the list"))?;
        values.push(node.value.to_string());
        p = node.next;
        if values.len() as u64 > header.len {
            return Err("the list has a cycle".into());
        }
    }
    println!("{}", values.join(" "));
    Ok(())
}
