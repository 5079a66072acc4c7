//! A persistent linked list in a PMO that survives restarts, its nodes
//! allocated from the object's own heap and linked with relocatable
//! pointers.
//!
//! ```sh
//! echo -n 'a long passphrase' > key
//! cargo run -p nvmos-pmo --example plist -- /dev/shm/plist.pool key push 1
//! cargo run -p nvmos-pmo --example plist -- /dev/shm/plist.pool key push 2
//! cargo run -p nvmos-pmo --example plist -- /dev/shm/plist.pool key list   # 2 1
//! cargo run -p nvmos-pmo --example plist -- /dev/shm/plist.pool key pop    # 2
//! ```
//!
//! The first run creates the pool and an encrypted object `list` and
//! formats a heap in it ([`nvmos_pmo::heap`]). The list's header lives in
//! the heap's root block; every node is a `palloc`ed block of type
//! [`NODE`], and nodes link with [`POff`] (object id + offset), so the
//! list stays valid wherever the object is attached. Each push or pop is
//! made durable, heap metadata included, by one psync.

use std::path::Path;

use nvmos_pmo::heap::Heap;
use nvmos_pmo::{Access, Attachment, Mode, POff, Perm, Pool};

/// The root block.
#[derive(Clone, Copy)]
#[repr(C)]
struct Header {
    head: POff<Node>,
    len: u64,
}

#[derive(Clone, Copy)]
#[repr(C)]
struct Node {
    value: u64,
    next: POff<Node>,
}

/// The heap type number of list nodes.
const NODE: u32 = 1;
const OBJECT_SIZE: u64 = 1 << 20;

fn main() {
    if let Err(e) = run() {
        eprintln!("plist: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: plist POOL KEY_FILE (push VALUE | pop | list)";
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
    let root = {
        let slice = list.as_mut_slice().ok_or("the object is not writable")?;
        let mut heap = Heap::open_or_format(slice)?;
        heap.root(size_of::<Header>() as u64)? as usize
    };
    // A fresh root block is zeroed: an empty list (a zero POff is null).
    let header_at: POff<Header> = list.poff(root);
    let mut header = list.get_off(header_at)?;
    match (command, args.get(3)) {
        ("push", Some(value)) => {
            let value: u64 = value.parse().map_err(|e| format!("{value}: {e}"))?;
            let slice = list.as_mut_slice().ok_or("the object is not writable")?;
            let node_at = Heap::open(slice)?.palloc(size_of::<Node>() as u64, NODE)?;
            let node_at: POff<Node> = list.poff(node_at as usize);
            list.set_off(
                node_at,
                Node {
                    value,
                    next: header.head,
                },
            )?;
            header.head = node_at;
            header.len += 1;
            list.set_off(header_at, header)?;
            list.psync()?;
            println!("pushed {value}; {} nodes", header.len);
        }
        ("pop", None) => {
            if header.head.is_null() {
                return Err("the list is empty".into());
            }
            let node = list.get_off(header.head)?;
            let freed = header.head.offset();
            header.head = node.next;
            header.len -= 1;
            list.set_off(header_at, header)?;
            let slice = list.as_mut_slice().ok_or("the object is not writable")?;
            Heap::open(slice)?.pfree(freed)?;
            list.psync()?;
            println!("{}", node.value);
        }
        ("list", None) => print_list(&list, header)?,
        _ => return Err(usage.into()),
    }
    list.detach()?;
    Ok(())
}

fn print_list(list: &Attachment, header: Header) -> Result<(), Box<dyn std::error::Error>> {
    // The heap knows how many nodes exist: a list longer than that has a
    // cycle.
    let nodes = Heap::open(list.as_slice())?.blocks_of_type(NODE).count() as u64;
    let mut values = Vec::new();
    let mut p = header.head;
    while !p.is_null() {
        let node = list.get_off(p)?;
        values.push(node.value.to_string());
        p = node.next;
        if values.len() as u64 > nodes {
            return Err("the list has a cycle".into());
        }
    }
    println!("{}", values.join(" "));
    Ok(())
}
