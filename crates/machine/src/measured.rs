//! A machine file from this machine's measured memory hierarchy (`pagelab machines --measure`).
//!
//! A preset's caches are what the CPU's documents and CPUID say. What a core really gets can
//! be less: a guest shares the socket's last-level cache with its neighbours, and a chase on
//! this project's Emerald Rapids guest found a 3-4M L3 where CPUID says 300M
//! (`docs/cost.md`, "A second machine"). This module turns a dependent pointer chase's time
//! per step at each footprint, with data on 2M pages so that the TLB stays out of it, into
//! the `[caches]` of a machine file:
//!
//! - the curve is cut into one flat stretch per cache level and one for memory, the cut
//!   that leaves the least squared error in log-latency ([`segment`]; exact, by dynamic
//!   programming);
//! - each level's latency is the median of its stretch, memory's that of the last;
//! - a level's size is the nominal one (CPUID's, through sysfs), except the last level's
//!   when the curve leaves it before half of it: then it is where the latency crosses the
//!   geometric middle of its stretch's and memory's latencies (log-linear between the two
//!   points around the crossing), rounded to whole sets of the nominal ways. The levels
//!   before the last are the core's own; the last is shared with other cores, and in a
//!   guest with other guests, which can leave a core a part of it. Such a part is written
//!   `index = "hashed"`: a capacity for any pattern of addresses, as the slices' hash
//!   spreads a page stride over the whole cache (by address, the set count's factors of
//!   two would decide how much of it lines a page apart reach);
//! - nanoseconds become cycles at the clock the first level implies: the base preset's L1
//!   latency in cycles (the vendor's figure) over the measured L1 time.
//!
//! The `[overlap]` comes from a second measurement where one was made ([`overlap_spec`]):
//! the misses and the walks a core keeps in flight, each the time of a dependent load over
//! that of an independent one (`pagelab_lab::probe::overlap` says how).
//!
//! Everything else (TLBs, walk caches, nested paging, costs) is the base preset's.

pub use pagelab_cache::overlap::{OverlapSpec, WalkClock, MAX_IN_FLIGHT, MAX_WALK_INTERVAL};
use pagelab_core::PageSize;
use serde::Serialize;

/// One footprint of the chase: bytes of nodes visited in one random cycle, time per step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencyPoint {
    /// Bytes the chase's nodes cover.
    pub bytes: u64,
    /// Nanoseconds per dependent step.
    pub ns: f64,
}

/// A data cache as the system reports it (sysfs, from CPUID) or a preset gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct NominalCache {
    /// 1 for the L1D, 2, 3.
    pub level: u8,
    /// Bytes.
    pub size: u64,
    /// Associativity.
    pub ways: u32,
    /// Line bytes.
    pub line: u32,
}

/// One cache level as measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MeasuredLevel {
    /// What the system says.
    pub nominal: NominalCache,
    /// Bytes of it this core gets (whole sets of the nominal ways).
    pub size: u64,
    /// Nanoseconds to a hit.
    pub ns: f64,
}

/// The hierarchy a chase measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hierarchy {
    /// The cache levels, nearest first.
    pub levels: Vec<MeasuredLevel>,
    /// Nanoseconds to memory.
    pub memory_ns: f64,
}

/// Cuts `ys` into `k` consecutive non-empty stretches with the least total squared error
/// from each stretch's mean; returns the index where each stretch starts.
///
/// # Panics
/// Never: `k` is clamped to 1..=ys.len() (an empty input gives no stretch).
pub fn segment(ys: &[f64], k: usize) -> Vec<usize> {
    let n = ys.len();
    if n == 0 {
        return Vec::new();
    }
    let k = k.clamp(1, n);
    // Prefix sums give any stretch's error in O(1).
    let mut s = vec![0.0; n + 1];
    let mut q = vec![0.0; n + 1];
    for (i, y) in ys.iter().enumerate() {
        s[i + 1] = s[i] + y;
        q[i + 1] = q[i] + y * y;
    }
    let err = |a: usize, b: usize| {
        let m = (b - a) as f64;
        let sum = s[b] - s[a];
        (q[b] - q[a]) - sum * sum / m
    };
    // best[j][i]: least error of the first i points in j stretches; from[j][i]: where the
    // last of them starts.
    let mut best = vec![vec![f64::INFINITY; n + 1]; k + 1];
    let mut from = vec![vec![0usize; n + 1]; k + 1];
    best[0][0] = 0.0;
    for j in 1..=k {
        for i in j..=n {
            for a in (j - 1)..i {
                let e = best[j - 1][a] + err(a, i);
                if e < best[j][i] {
                    best[j][i] = e;
                    from[j][i] = a;
                }
            }
        }
    }
    let mut starts = vec![0; k];
    let mut i = n;
    for j in (1..=k).rev() {
        starts[j - 1] = from[j][i];
        i = from[j][i];
    }
    starts
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The hierarchy behind a chase's curve, given the caches the system names.
///
/// # Errors
/// Fewer points than levels and memory, a footprint or time that is not positive, points
/// out of order, or no cache named.
pub fn analyse(points: &[LatencyPoint], nominal: &[NominalCache]) -> Result<Hierarchy, String> {
    if nominal.is_empty() {
        return Err("no cache level is known to measure".into());
    }
    let k = nominal.len() + 1;
    if points.len() < 2 * k {
        return Err(format!(
            "{} footprints cannot show {} cache levels and memory: measure at least {} (a larger --max)",
            points.len(),
            nominal.len(),
            2 * k
        ));
    }
    for (i, p) in points.iter().enumerate() {
        if p.bytes == 0 || !(p.ns.is_finite() && p.ns > 0.0) {
            return Err(format!(
                "footprint {i} ({} bytes, {} ns) is not a measurement",
                p.bytes, p.ns
            ));
        }
        if i > 0 && p.bytes <= points[i - 1].bytes {
            return Err(format!(
                "footprint {i} ({} bytes) is not larger than the one before",
                p.bytes
            ));
        }
    }
    let logs: Vec<f64> = points.iter().map(|p| p.ns.ln()).collect();
    let starts = segment(&logs, k);
    let stretch = |j: usize| starts[j]..starts.get(j + 1).copied().unwrap_or(points.len());
    let ns_of = |j: usize| median(&mut points[stretch(j)].iter().map(|p| p.ns).collect::<Vec<_>>());
    let mut levels: Vec<MeasuredLevel> = nominal
        .iter()
        .enumerate()
        .map(|(j, c)| MeasuredLevel {
            nominal: *c,
            size: c.size,
            ns: ns_of(j),
        })
        .collect();
    let memory_ns = ns_of(nominal.len());
    // Only the last level is shared (with other cores, and in a guest with other guests);
    // the levels before it are the core's own whatever a noisy curve says. Its size is
    // where the curve crosses the middle of its and memory's latencies, log-linear
    // between the two footprints around the crossing.
    let j = nominal.len() - 1;
    let last = &mut levels[j];
    let mid = (last.ns * memory_ns).sqrt().ln();
    let cross = (stretch(j).start.max(1)..points.len())
        .find(|&i| logs[i] >= mid && logs[i - 1] < mid)
        .unwrap_or(stretch(j + 1).start);
    let (p0, p1) = (points[cross - 1], points[cross]);
    let t = ((mid - p0.ns.ln()) / (p1.ns.ln() - p0.ns.ln())).clamp(0.0, 1.0);
    let at = ((p0.bytes as f64).ln() + t * ((p1.bytes as f64).ln() - (p0.bytes as f64).ln())).exp();
    if at < last.nominal.size as f64 / 2.0 {
        let set_bytes = last.nominal.ways as u64 * last.nominal.line as u64;
        last.size = ((at / set_bytes as f64).round() as u64).max(1) * set_bytes;
    }
    Ok(Hierarchy { levels, memory_ns })
}

/// The data caches `/sys/devices/system/cpu/cpu0/cache` names (Data and Unified, by
/// level), or an empty list where sysfs has none.
pub fn sysfs_caches() -> Vec<NominalCache> {
    let mut out: Vec<NominalCache> = Vec::new();
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let read =
            |f: &str| std::fs::read_to_string(e.path().join(f)).map(|s| s.trim().to_string());
        let (Ok(kind), Ok(level), Ok(size), Ok(ways), Ok(line)) = (
            read("type"),
            read("level"),
            read("size"),
            read("ways_of_associativity"),
            read("coherency_line_size"),
        ) else {
            continue;
        };
        if kind == "Instruction" {
            continue;
        }
        let (Ok(level), Ok(size), Ok(ways), Ok(line)) = (
            level.parse::<u8>(),
            pagelab_core::parse_bytes(&size),
            ways.parse::<u32>(),
            line.parse::<u32>(),
        ) else {
            continue;
        };
        out.push(NominalCache {
            level,
            size,
            ways,
            line,
        });
    }
    out.sort_by_key(|c| c.level);
    out.dedup_by_key(|c| c.level);
    out
}

/// The `[overlap]` of misses and walks measured in flight (dependent time over independent
/// time, [`OverlapSpec`]'s meaning; measured walkers are read as [`WalkClock::Additive`],
/// since the probe divides a walk's latency by what it adds to a load): each rounded to a whole number within
/// 1..=[`MAX_IN_FLIGHT`]. Walks that could not be measured (`None`: no walk showed, or they
/// hid entirely) keep `base`'s walkers, or with no base are as many as the misses. The
/// interval between walks' starts, cycles, rounded within 0..=[`MAX_WALK_INTERVAL`], where
/// it was measured; else `base`'s, or none.
///
/// # Errors
/// A misses figure that is not a positive number.
pub fn overlap_spec(
    misses: f64,
    walks: Option<f64>,
    walk_interval: Option<f64>,
    base: Option<&OverlapSpec>,
) -> Result<OverlapSpec, String> {
    if !(misses.is_finite() && misses > 0.0) {
        return Err(format!("{misses} misses in flight is not a measurement"));
    }
    let whole = |x: f64| (x.round() as u32).clamp(1, MAX_IN_FLIGHT);
    let miss_buffers = whole(misses);
    // Measured walkers are what a walk adds to an independent load (additive); the base's
    // keep the base's reading.
    let (walkers, walk_clock) = match (walks.filter(|w| w.is_finite() && *w > 0.0), base) {
        (Some(w), _) => (whole(w), WalkClock::Additive),
        (None, Some(b)) => (b.walkers, b.walks),
        (None, None) => (miss_buffers, WalkClock::Pooled),
    };
    let walk_interval = match (walk_interval.filter(|i| i.is_finite() && *i >= 0.0), base) {
        (Some(i), _) => (i.round() as u32).min(MAX_WALK_INTERVAL),
        (None, Some(b)) => b.walk_interval,
        (None, None) => 0,
    };
    Ok(OverlapSpec {
        miss_buffers,
        walkers,
        walk_interval,
        walks: walk_clock,
    })
}

/// `bytes` in the largest unit that divides it exactly (`3840K`, `2M`, `1280`), as machine
/// files write sizes.
pub fn exact_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// What was measured besides the caches; `None` keeps the base's.
#[derive(Clone, Copy, Debug, Default)]
pub struct Found<'a> {
    /// `[frames]`: where a process's 4K frames lie.
    pub frames: Option<pagelab_cache::FramesSpec>,
    /// `[costs] walk`: a walk's own cycles beyond its reads.
    pub walk: Option<u32>,
    /// `[overlap]`.
    pub overlap: Option<&'a OverlapSpec>,
    /// `[nested] host_page`: the host's page as this guest's TLB caches it.
    pub host_page: Option<PageSize>,
    /// `[nested] block_miss` and `block_interval` (the blocks held in the TLB: no
    /// `block_entries`; [`crate::blocks`]).
    pub blocks: Option<crate::blocks::BlocksFit>,
}

/// The base machine's TOML with its caches replaced by the measured ones, at the clock its
/// L1 latency (`l1_cycles`) implies, and its `[frames] placement`, `[overlap]` and
/// `[nested] host_page` by what `found` gives; `notes` become comment lines at the top.
///
/// # Errors
/// When the base text does not parse, or the result is not a valid machine.
pub fn machine_toml(
    base_name: &str,
    base_text: &str,
    h: &Hierarchy,
    l1_cycles: u32,
    found: Found<'_>,
    notes: &[String],
) -> Result<String, String> {
    let Found {
        frames,
        walk,
        overlap,
        host_page,
        blocks,
    } = found;
    let mut t: toml::Table =
        toml::from_str(base_text).map_err(|e| format!("machine {base_name}: {e}"))?;
    let ghz = l1_cycles as f64 / h.levels[0].ns;
    let cycles = |ns: f64| ((ns * ghz).round() as i64).max(1);
    let mut caches = toml::Table::new();
    for (l, key) in h.levels.iter().zip(["l1d", "l2", "l3"]) {
        let mut c = toml::Table::new();
        c.insert("size".into(), toml::Value::String(exact_size(l.size)));
        c.insert("ways".into(), toml::Value::Integer(l.nominal.ways as i64));
        c.insert("line".into(), toml::Value::Integer(l.nominal.line as i64));
        let lat = if key == "l1d" {
            l1_cycles as i64
        } else {
            cycles(l.ns)
        };
        c.insert("latency".into(), toml::Value::Integer(lat));
        if l.size < l.nominal.size {
            // A share of a last level is a capacity, not a geometry: its whole sets of the
            // nominal ways leave a set count with any factors of two, which by address
            // would give lines a page apart from all its sets to a 64th of them.
            c.insert("index".into(), toml::Value::String("hashed".into()));
        }
        caches.insert(key.into(), toml::Value::Table(c));
    }
    caches.insert(
        "memory_latency".into(),
        toml::Value::Integer(cycles(h.memory_ns)),
    );
    t.insert("caches".into(), toml::Value::Table(caches));
    if let Some(spec) = frames {
        let mut f = toml::Table::new();
        let placement = match spec.placement {
            pagelab_cache::FramePlacement::FirstTouch => "first-touch",
            pagelab_cache::FramePlacement::Scattered => "scattered",
        };
        f.insert("placement".into(), toml::Value::String(placement.into()));
        if let Some(span) = spec.span {
            f.insert("span".into(), toml::Value::String(exact_size(span)));
        }
        if let Some(n) = spec.neighbours {
            let n = (n * 1000.0).round() / 1000.0;
            f.insert("neighbours".into(), toml::Value::Float(n));
        }
        t.insert("frames".into(), toml::Value::Table(f));
    }
    if let Some(w) = walk {
        let costs = t
            .entry("costs")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let toml::Value::Table(costs) = costs else {
            return Err(format!("machine {base_name}: `costs` is not a table"));
        };
        costs.insert("walk".into(), toml::Value::Integer(w.into()));
    }
    if let Some(o) = overlap {
        let mut f = toml::Table::new();
        f.insert(
            "miss_buffers".into(),
            toml::Value::Integer(o.miss_buffers.into()),
        );
        f.insert("walkers".into(), toml::Value::Integer(o.walkers.into()));
        if o.walk_interval > 0 {
            f.insert(
                "walk_interval".into(),
                toml::Value::Integer(o.walk_interval.into()),
            );
        }
        if o.walks == WalkClock::Additive {
            f.insert("walks".into(), toml::Value::String("additive".into()));
        }
        t.insert("overlap".into(), toml::Value::Table(f));
    }
    if host_page.is_some() || blocks.is_some() {
        let nested = t
            .entry("nested")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let toml::Value::Table(nested) = nested else {
            return Err(format!("machine {base_name}: `nested` is not a table"));
        };
        if let Some(page) = host_page {
            nested.insert("host_page".into(), toml::Value::String(page.to_string()));
        }
        if let Some(b) = blocks {
            nested.remove("block_entries");
            for (key, v) in [("block_miss", b.miss), ("block_interval", b.interval)] {
                nested.insert(key.into(), toml::Value::Integer(v.into()));
            }
        }
    }
    let name = format!("{base_name}-measured");
    let sizes: Vec<String> = h
        .levels
        .iter()
        .map(|l| {
            format!(
                "L{} {} ({:.1} ns)",
                l.nominal.level,
                pagelab_core::Bytes(l.size),
                l.ns
            )
        })
        .collect();
    t.insert("name".into(), toml::Value::String(name.clone()));
    t.insert(
        "description".into(),
        toml::Value::String(format!(
            "{base_name} with the caches a chase measured: {}, memory {:.0} ns; {:.2} GHz",
            sizes.join(", "),
            h.memory_ns,
            ghz
        )),
    );
    t.insert(
        "source".into(),
        toml::Value::String(format!(
            "pagelab machines --measure (a dependent chase on 2M pages{}) on the base preset {base_name}",
            if overlap.is_some() {
                "; misses and walks in flight from dependent against independent loads"
            } else {
                ""
            }
        )),
    );
    let body = toml::to_string(&t).map_err(|e| e.to_string())?;
    let mut text: String = notes.iter().map(|n| format!("# {n}\n")).collect();
    text.push_str(&body);
    crate::Machine::from_toml_str(&text, &name).map_err(|e| e.to_string())?;
    Ok(text)
}
