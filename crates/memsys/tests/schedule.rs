//! The timing model's answers, pinned: a hash of the full command schedule
//! (every PRE, ACT, RD, WR and REF with its cycle, bank and row) and of
//! every completion, for sequential, random, mixed and strided streams on
//! every preset, under the full model, the full model with closed pages
//! and the basic model. The hashes were recorded on the straightforward
//! model, so that work on its speed cannot change its answers; a change
//! that moves any command by one cycle changes them. A run without the
//! command log must complete every request exactly as the logged run
//! does (the log must not steer the model).

use nvmos_memsys::checker::CommandKind;
use nvmos_memsys::{
    AccessKind, Completion, Controller, ControllerConfig, Machine, MemRequest, PagePolicy,
    RowOutcome,
};

/// FNV-1a over 64-bit words: stable across Rust releases, unlike
/// `DefaultHasher`.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
    fn word(&mut self, x: u64) {
        for b in x.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

const N: u64 = 20_000;

/// The four streams over `size` bytes.
fn streams(size: u64) -> Vec<(&'static str, Vec<MemRequest>)> {
    let req = |paddr: u64, kind, core, arrival| MemRequest {
        paddr: (paddr % size) & !63,
        kind,
        core,
        arrival,
    };
    // Sequential reads, two per cycle (saturating).
    let seq = (0..N)
        .map(|i| req(i * 64, AccessKind::Read, 0, i / 2))
        .collect();
    // Uniform random reads from four cores, one every 3/2 cycles.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random = (0..N)
        .map(|i| {
            let a = xorshift(&mut x);
            req(a, AccessKind::Read, (i % 4) as u32, i * 3 / 2)
        })
        .collect();
    // Random, two reads to one write, one per cycle.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mixed = (0..N)
        .map(|i| {
            let a = xorshift(&mut x);
            let kind = if i % 3 == 2 {
                AccessKind::Write
            } else {
                AccessKind::Read
            };
            req(a, kind, (i % 2) as u32, i)
        })
        .collect();
    // Strided: one line every 8 KiB + 64 B, bursts of arrivals with gaps,
    // one write in eight.
    let strided = (0..N)
        .map(|i| {
            let kind = if i % 8 == 7 {
                AccessKind::Write
            } else {
                AccessKind::Read
            };
            req(i * (8192 + 64), kind, 0, (i / 16) * 40)
        })
        .collect();
    vec![
        ("seq", seq),
        ("random", random),
        ("mixed", mixed),
        ("strided", strided),
    ]
}

fn outcome_word(o: RowOutcome) -> u64 {
    match o {
        RowOutcome::Hit => 0,
        RowOutcome::Miss => 1,
        RowOutcome::Conflict => 2,
    }
}

fn kind_word(k: CommandKind) -> u64 {
    match k {
        CommandKind::Activate => 0,
        CommandKind::Precharge => 1,
        CommandKind::Read => 2,
        CommandKind::Write => 3,
        CommandKind::Refresh => 4,
    }
}

fn completions(
    m: &Machine,
    config: ControllerConfig,
    requests: &[MemRequest],
) -> (Controller, Vec<Completion>) {
    let mut mc = Controller::new(m, config).expect("builds");
    let mut done = Vec::new();
    for &r in requests {
        mc.submit(r, &mut done).expect("inside memory");
    }
    mc.drain(&mut done);
    (mc, done)
}

/// The hash of one run's schedule, completions and report.
fn schedule_hash(m: &Machine, config: ControllerConfig, requests: &[MemRequest]) -> u64 {
    let (logged, done) = completions(
        m,
        ControllerConfig {
            check: true,
            ..config
        },
        requests,
    );
    let (unlogged, plain) = completions(
        m,
        ControllerConfig {
            check: false,
            ..config
        },
        requests,
    );
    assert_eq!(
        done,
        plain,
        "{}: the command log changed the schedule",
        m.name()
    );
    assert_eq!(logged.report(), unlogged.report(), "{}", m.name());
    assert_eq!(done.len(), requests.len());
    let mut h = Fnv::new();
    for c in logged.commands().expect("check mode logs commands") {
        h.word(c.at);
        h.word(kind_word(c.kind));
        h.word(u64::from(c.bank));
        h.word(u64::from(c.row));
    }
    for c in &done {
        h.word(c.id);
        h.word(outcome_word(c.outcome));
        h.word(c.entered);
        h.word(c.done);
    }
    let r = logged.report();
    h.word(r.rows.hits);
    h.word(r.rows.misses);
    h.word(r.rows.conflicts);
    h.word(r.total_cycles);
    h.word(r.refreshes);
    h.word(r.blp.to_bits());
    h.0
}

/// (preset, stream, configuration, hash), recorded on the straightforward
/// model before it was optimised.
const EXPECTED: &[(&str, &str, &str, u64)] = &[
    ("xeon-3ch", "seq", "full", 0x99bda09670fb2005),
    ("xeon-3ch", "seq", "full-closed", 0x5078d9104084a993),
    ("xeon-3ch", "seq", "basic", 0x7d387230146b0679),
    ("xeon-3ch", "random", "full", 0xa50bc6a053d9c163),
    ("xeon-3ch", "random", "full-closed", 0x38fbc8d3a2f85a19),
    ("xeon-3ch", "random", "basic", 0x0ad3d978679475e4),
    ("xeon-3ch", "mixed", "full", 0xb920622b09db3410),
    ("xeon-3ch", "mixed", "full-closed", 0xc775d4b933b817ee),
    ("xeon-3ch", "mixed", "basic", 0x274adfd65e591011),
    ("xeon-3ch", "strided", "full", 0xdcf425e830e6aef7),
    ("xeon-3ch", "strided", "full-closed", 0xc0033bcadb9d5dda),
    ("xeon-3ch", "strided", "basic", 0x57f2a693e7fea419),
    ("ddr4-2400", "seq", "full", 0xe44467dab36fbc13),
    ("ddr4-2400", "seq", "full-closed", 0xa6bf9b56066f485e),
    ("ddr4-2400", "seq", "basic", 0x3ea5c67379bdcb1a),
    ("ddr4-2400", "random", "full", 0x4400b28dcda38553),
    ("ddr4-2400", "random", "full-closed", 0x32705f3377893a67),
    ("ddr4-2400", "random", "basic", 0xe786b9b5fc965559),
    ("ddr4-2400", "mixed", "full", 0x8fab7b1e172f4826),
    ("ddr4-2400", "mixed", "full-closed", 0xad997e470ee4fe48),
    ("ddr4-2400", "mixed", "basic", 0xf987f44e1e77fbbd),
    ("ddr4-2400", "strided", "full", 0x373d6150a42d49cb),
    ("ddr4-2400", "strided", "full-closed", 0xcf10b5514355bb3f),
    ("ddr4-2400", "strided", "basic", 0x64a75ce5175121f7),
    ("coffeelake-xor", "seq", "full", 0xfb8a932cb0f67798),
    ("coffeelake-xor", "seq", "full-closed", 0xca2380de50c03778),
    ("coffeelake-xor", "seq", "basic", 0x6db2a41356610583),
    ("coffeelake-xor", "random", "full", 0x695daf0ee9a83ac4),
    (
        "coffeelake-xor",
        "random",
        "full-closed",
        0x1a0d5964d8fa0fef,
    ),
    ("coffeelake-xor", "random", "basic", 0x27f489e878aeb8b3),
    ("coffeelake-xor", "mixed", "full", 0xe5dee823c0271bae),
    ("coffeelake-xor", "mixed", "full-closed", 0x5dcb709b71e84ab3),
    ("coffeelake-xor", "mixed", "basic", 0xb57a7f2e52e9e4c5),
    ("coffeelake-xor", "strided", "full", 0x1facddad5c3069b6),
    (
        "coffeelake-xor",
        "strided",
        "full-closed",
        0xa63ddf1971def222,
    ),
    ("coffeelake-xor", "strided", "basic", 0x7384cb5ba2750c01),
    ("pcm-lee2009", "seq", "full", 0x837cf1052384b588),
    ("pcm-lee2009", "seq", "full-closed", 0x7724b6942b5a8f2c),
    ("pcm-lee2009", "seq", "basic", 0xc93b192457cb3332),
    ("pcm-lee2009", "random", "full", 0xc5bf000aa795d98f),
    ("pcm-lee2009", "random", "full-closed", 0x152b57a39e6bc101),
    ("pcm-lee2009", "random", "basic", 0x676f7c2d2323ebfb),
    ("pcm-lee2009", "mixed", "full", 0x10565b0222e494c3),
    ("pcm-lee2009", "mixed", "full-closed", 0x79eb7c88298df756),
    ("pcm-lee2009", "mixed", "basic", 0x019a07e674c4a7bd),
    ("pcm-lee2009", "strided", "full", 0xfa38ce6662e7f3b3),
    ("pcm-lee2009", "strided", "full-closed", 0xdd6c41c0686587f1),
    ("pcm-lee2009", "strided", "basic", 0x4696a08405b4602e),
    ("ddr4-2400-dramsim3", "seq", "full", 0xdc12ea75a296cfdf),
    (
        "ddr4-2400-dramsim3",
        "seq",
        "full-closed",
        0xc896d74a73b70a6a,
    ),
    ("ddr4-2400-dramsim3", "seq", "basic", 0x1d26bbeb0d8a9f9a),
    ("ddr4-2400-dramsim3", "random", "full", 0x9c016ce54f5c04f3),
    (
        "ddr4-2400-dramsim3",
        "random",
        "full-closed",
        0xf208c18608075279,
    ),
    ("ddr4-2400-dramsim3", "random", "basic", 0xdec4a7a484397d7c),
    ("ddr4-2400-dramsim3", "mixed", "full", 0x8b41639666da992f),
    (
        "ddr4-2400-dramsim3",
        "mixed",
        "full-closed",
        0xf7eb2edcc7f9679b,
    ),
    ("ddr4-2400-dramsim3", "mixed", "basic", 0xb5118f186d899e2d),
    ("ddr4-2400-dramsim3", "strided", "full", 0x5205cf32f7cc0db7),
    (
        "ddr4-2400-dramsim3",
        "strided",
        "full-closed",
        0x4ec29e0054910a66,
    ),
    ("ddr4-2400-dramsim3", "strided", "basic", 0x86570ef8c07bbba9),
];

#[test]
fn every_command_lands_on_the_cycle_it_did_before() {
    let configs = [
        ("full", ControllerConfig::default()),
        (
            "full-closed",
            ControllerConfig {
                policy: PagePolicy::Closed,
                ..ControllerConfig::default()
            },
        ),
        ("basic", ControllerConfig::basic()),
    ];
    let mut got = Vec::new();
    for name in Machine::preset_names() {
        let m = Machine::preset(name).expect("presets load");
        for (stream, requests) in streams(m.memory_bytes()) {
            for (label, config) in configs {
                got.push((name, stream, label, schedule_hash(&m, config, &requests)));
            }
        }
    }
    let listing: String = got
        .iter()
        .map(|(p, s, c, h)| format!("    ({p:?}, {s:?}, {c:?}, {h:#018x}),\n"))
        .collect();
    assert_eq!(got.len(), EXPECTED.len(), "hashes now:\n{listing}");
    for (g, e) in got.iter().zip(EXPECTED) {
        assert_eq!(g, e, "the schedule moved; hashes now:\n{listing}");
    }
}
