//! Reclaim settings of physical memory: per-zone low and high watermarks
//! (Linux's `min_free_kbytes` and `watermark_scale_factor` rule by default)
//! and whether a superpage is reclaimed whole or split first.
//!
//! Linux's rule (mm/page_alloc.c, `__setup_per_zone_wmarks`): `min_free_kbytes`
//! is `sqrt(16 * memory in KB)`, clamped to 128K..256M, and shared out over
//! the zones by size; each zone's `low` is its `min` plus
//! `max(min / 4, zone size * 10 / 10000)` and its `high` is `min` plus twice
//! that. A configured `watermarks = { low = "2M", high = "3M" }` gives
//! totals, shared out over the zones by size the same way.

use super::config::{de_bytes, ConfigError};
use pagelab_core::{Bytes, Pfn};
use serde::{Deserialize, Serialize};

/// `watermarks` in a physical-memory config: totals over all zones.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatermarkConfig {
    /// Reclaim starts when an allocation takes a zone's free memory below its share of this.
    #[serde(deserialize_with = "de_bytes")]
    pub low: Bytes,
    /// Reclaim goes on until the zone's free memory is back at its share of this.
    #[serde(deserialize_with = "de_bytes")]
    pub high: Bytes,
}

/// How reclaim treats a superpage it chose as a victim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SuperpageReclaim {
    /// Reclaim it whole (swap out or drop every base page at once).
    #[default]
    Whole,
    /// Split it into base pages first, and reclaim only as many of them as needed.
    Split,
}

/// One zone's watermarks, in 4K frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Watermarks {
    /// Linux's `min` (reported; the model lets allocations go below it).
    pub min: u64,
    /// An allocation that leaves fewer free frames than this wakes reclaim.
    pub low: u64,
    /// Reclaim stops once this many frames are free.
    pub high: u64,
}

/// Linux's `min_free_kbytes` for `memory` bytes, in bytes.
pub fn linux_min_free(memory: u64) -> u64 {
    let kb = memory >> 10;
    let min_kb = ((kb * 16) as f64).sqrt() as u64;
    min_kb.clamp(128, 256 << 10) << 10
}

/// The watermarks of each zone (`zone_frames`, in 4K frames), from the
/// configured totals or Linux's rule.
pub(crate) fn per_zone(
    cfg: Option<&WatermarkConfig>,
    memory: u64,
    zone_frames: &[u64],
) -> Vec<Watermarks> {
    let total: u64 = zone_frames.iter().sum::<u64>().max(1);
    let share = |bytes: u64, frames: u64| {
        (Pfn::count_in(bytes) as u128 * frames as u128 / total as u128) as u64
    };
    zone_frames
        .iter()
        .map(|&frames| match cfg {
            Some(c) => Watermarks {
                min: share(c.low.0, frames),
                low: share(c.low.0, frames),
                high: share(c.high.0, frames),
            },
            None => {
                let min = share(linux_min_free(memory), frames);
                let delta = (min / 4).max(frames * 10 / 10_000);
                Watermarks {
                    min,
                    low: min + delta,
                    high: min + 2 * delta,
                }
            }
        })
        .collect()
}

/// Checks configured watermarks against the memory size.
pub(crate) fn validate(cfg: &WatermarkConfig, memory: u64) -> Result<(), ConfigError> {
    let field = |f: &'static str, message: String| ConfigError { field: f, message };
    if !cfg.low.0.is_multiple_of(Pfn::BYTES) || !cfg.high.0.is_multiple_of(Pfn::BYTES) {
        return Err(field(
            "watermarks",
            format!(
                "low ({}) and high ({}) must be multiples of 4K",
                cfg.low, cfg.high
            ),
        ));
    }
    if cfg.high.0 <= cfg.low.0 {
        return Err(field(
            "watermarks.high",
            format!(
                "{} is not above low ({}): reclaim runs from low up to high",
                cfg.high, cfg.low
            ),
        ));
    }
    if cfg.high.0 >= memory {
        return Err(field(
            "watermarks.high",
            format!(
                "{} is not below memory ({}); keep it a small part of memory, like 1%",
                cfg.high,
                Bytes(memory)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_defaults_for_64m_and_4g() {
        // 64M: min_free_kbytes = sqrt(65536 * 16) = 1024.
        assert_eq!(linux_min_free(64 << 20), 1 << 20);
        let w = per_zone(None, 64 << 20, &[16384]);
        assert_eq!(w[0].min, 256);
        assert_eq!((w[0].low, w[0].high), (256 + 64, 256 + 128));
        // 4G: sqrt(4194304 * 16) = 8192 K; split 3:1 over two zones.
        assert_eq!(linux_min_free(4 << 30), 8 << 20);
        let w = per_zone(None, 4 << 30, &[786432, 262144]);
        assert_eq!(w[0].min + w[1].min, 2048);
        assert_eq!(w[0].min, 1536);
        // Tiny memory: the 128K floor.
        assert_eq!(linux_min_free(1 << 20), 128 << 10);
    }

    #[test]
    fn configured_totals_are_shared_by_zone_size() {
        let c = WatermarkConfig {
            low: Bytes(4 << 20),
            high: Bytes(8 << 20),
        };
        let w = per_zone(Some(&c), 64 << 20, &[12288, 4096]);
        assert_eq!((w[0].low, w[0].high), (768, 1536));
        assert_eq!((w[1].low, w[1].high), (256, 512));
        assert!(validate(&c, 64 << 20).is_ok());
        let bad = WatermarkConfig {
            low: Bytes(8 << 20),
            high: Bytes(4 << 20),
        };
        let e = validate(&bad, 64 << 20).unwrap_err();
        assert_eq!(e.field, "watermarks.high");
        assert!(e.message.contains("not above low"), "{e}");
    }
}
