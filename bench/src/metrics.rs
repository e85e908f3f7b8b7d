//! Measuring: a counting allocator for peak memory (only the threads that opt in), thread CPU
//! time, HDR histograms, and the interleaved rounds every section runs its contenders in.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

// ---------------------------------------------------------------------------------------------
// Peak memory: a counting allocator that counts only the threads that opted in (the client
// thread while an M4 call runs), so the servers' own copies of the payload are not counted.

pub(crate) struct Counting;

pub(crate) static CURRENT: AtomicIsize = AtomicIsize::new(0);
pub(crate) static PEAK: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    static TRACKED: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn tracked() -> bool {
    TRACKED.try_with(Cell::get).unwrap_or(false)
}

pub(crate) fn count(delta: isize) {
    let now = CURRENT.fetch_add(delta, Ordering::Relaxed) + delta;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: forwards every call to `System` unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && tracked() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if tracked() {
            count(-(layout.size() as isize));
        }
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && tracked() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && tracked() {
            // Net change: glibc grows large (mmap'd) blocks with mremap, without a second copy.
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` with this thread's allocations counted; returns its output and the peak number of
/// bytes live above the level at the start.
pub(crate) async fn peak_bytes<T>(f: impl Future<Output = T>) -> (T, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    TRACKED.with(|t| t.set(true));
    let out = f.await;
    TRACKED.with(|t| t.set(false));
    let peak = PEAK.load(Ordering::Relaxed) - base;
    (out, peak.max(0) as usize)
}

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`), in nanoseconds.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

// ---------------------------------------------------------------------------------------------
// Statistics.

pub(crate) fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).unwrap()
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub(crate) fn median_u64(v: &[u64]) -> f64 {
    let mut f: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    median(&mut f)
}

/// One contender's samples over the kept rounds.
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) hist: Histogram<u64>,
    /// Median per kept round (ns).
    pub(crate) round_medians: Vec<f64>,
    /// CPU ns per op, per kept round.
    pub(crate) round_cpu: Vec<f64>,
    /// Peak bytes, max over ops.
    pub(crate) peak: usize,
}

impl Series {
    pub(crate) fn new(name: impl Into<String>) -> Series {
        Series {
            name: name.into(),
            hist: hist(),
            round_medians: vec![],
            round_cpu: vec![],
            peak: 0,
        }
    }

    pub(crate) fn keep(&mut self, block: &Block) {
        for &s in &block.samples {
            self.hist.record(s.max(1)).unwrap();
        }
        self.round_medians.push(median_u64(&block.samples));
        if !block.samples.is_empty() {
            self.round_cpu
                .push(block.cpu_ns as f64 / block.samples.len() as f64);
        }
        self.peak = self.peak.max(block.peak);
    }

    pub(crate) fn p50_us(&self) -> f64 {
        self.hist.value_at_quantile(0.5) as f64 / 1e3
    }
    pub(crate) fn p99_us(&self) -> f64 {
        self.hist.value_at_quantile(0.99) as f64 / 1e3
    }
    pub(crate) fn cpu_us(&self) -> f64 {
        median(&mut self.round_cpu.clone()) / 1e3
    }
}

/// Median over rounds of `a`'s round median ÷ `b`'s round median.
pub(crate) fn ratio(a: &Series, b: &Series) -> f64 {
    median_of_ratios(&a.round_medians, &b.round_medians)
}

/// Median over rounds of `a`'s round CPU time ÷ `b`'s.
pub(crate) fn cpu_ratio(a: &Series, b: &Series) -> f64 {
    median_of_ratios(&a.round_cpu, &b.round_cpu)
}

fn median_of_ratios(a: &[f64], b: &[f64]) -> f64 {
    let mut r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    median(&mut r)
}

#[derive(Default)]
pub(crate) struct Block {
    pub(crate) samples: Vec<u64>,
    pub(crate) cpu_ns: u64,
    pub(crate) peak: usize,
}

/// Runs `op` up to `n` times (stopping early at `deadline`), timing each.
pub(crate) async fn block<F, Fut>(
    n: usize,
    deadline: Instant,
    track_memory: bool,
    mut op: F,
) -> Block
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut out = Block::default();
    let cpu = thread_cpu_ns();
    for _ in 0..n {
        let fut = op();
        let start = Instant::now();
        if track_memory {
            let ((), peak) = peak_bytes(fut).await;
            out.peak = out.peak.max(peak);
        } else {
            fut.await;
        }
        out.samples.push(start.elapsed().as_nanos() as u64);
        if Instant::now() > deadline {
            break;
        }
    }
    out.cpu_ns = thread_cpu_ns() - cpu;
    out
}

/// Rounds of interleaved blocks: round `r` runs every contender once, starting at contender
/// `r % k`. Round 0 is discarded. Stops at `rounds` or at `budget`.
pub(crate) async fn rounds<const K: usize>(
    series: &mut [Series; K],
    rounds: usize,
    budget: Duration,
    mut run: impl AsyncFnMut(usize, Instant) -> Block,
) -> usize {
    let deadline = Instant::now() + budget;
    let mut kept = 0;
    for r in 0..rounds {
        let mut blocks: Vec<Option<Block>> = (0..K).map(|_| None).collect();
        for k in 0..K {
            let c = (r + k) % K;
            blocks[c] = Some(run(c, deadline).await);
        }
        if r > 0 {
            for (s, b) in series.iter_mut().zip(blocks) {
                s.keep(&b.unwrap());
            }
            kept += 1;
        }
        if Instant::now() > deadline && r >= 2 {
            break;
        }
    }
    kept
}
