use nvmos_frames::*;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::time::Instant;
type L = nvmos_frames::sync::SpinYield;
fn run(name: &str, a: &dyn FrameAllocator, frames: u64) {
    let n = (frames / 2) as usize;
    let mut v = Vec::with_capacity(n);
    let r = Request::single(0);
    for round in 0..2 {
        let t = Instant::now();
        for _ in 0..n {
            v.push(a.alloc(r).unwrap());
        }
        let ta = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        for &p in &v {
            a.free(p, r).unwrap();
        }
        let tf = t.elapsed().as_nanos() as f64 / n as f64;
        v.clear();
        for _ in 0..n {
            v.push(a.alloc(r).unwrap());
        }
        v.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(1));
        let t = Instant::now();
        for &p in &v {
            a.free(p, r).unwrap();
        }
        let tr = t.elapsed().as_nanos() as f64 / n as f64;
        v.clear();
        let t = Instant::now();
        for _ in 0..n {
            let p = a.alloc(r).unwrap();
            a.free(p, r).unwrap();
        }
        let trep = t.elapsed().as_nanos() as f64 / n as f64;
        if round == 1 {
            println!("{name:8} bulk alloc {ta:6.1} free {tf:6.1} | rand free {tr:6.1} | repeat pair {trep:6.1}");
        }
    }
}
fn main() {
    let frames: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1 << 20);
    let z = [Zone::new(0, frames)];
    run("buddy", &Buddy::<L>::new(&z, 1).unwrap(), frames);
    run(
        "LBS-31",
        &PerCpu::<_, L>::new(Buddy::<L>::new(&z, 1).unwrap(), PcpPolicy::LBS_31).unwrap(),
        frames,
    );
    run("iBuddy", &IBuddy::<L>::new(&z, 1).unwrap(), frames);
    run(
        "LiS-31",
        &PerCpu::<_, L>::new(IBuddy::<L>::new(&z, 1).unwrap(), PcpPolicy::LIS_31).unwrap(),
        frames,
    );
}
