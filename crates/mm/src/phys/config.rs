//! The physical-memory configuration: memory size, largest order, zones and
//! their fallback order, read with serde and validated into a zone layout.

use super::watermarks::{SuperpageReclaim, WatermarkConfig, Watermarks};
use super::MAX_ORDER_LIMIT;
use pagelab_core::{parse_bytes, Bytes, PageSize};
use serde::{Deserialize, Deserializer, Serialize};

/// Bytes per frame: frames are 4K.
pub(crate) const FRAME_BYTES: u64 = pagelab_core::Pfn::BYTES;

/// The largest `memory` a configuration may ask for (see [`PhysConfig::layout`]).
const MAX_MEMORY: u64 = 64 << 40;

/// A kind of zone, named as in configs and stats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZoneKind {
    /// Frames below the `dma` limit (16M on ia32), as Linux's ZONE_DMA; absent by default.
    Dma,
    /// Frames below the `dma32` limit (4G by default), as Linux's ZONE_DMA32.
    Dma32,
    /// Frames above `dma32` and below high memory (or the large zone).
    Normal,
    /// Frames from `highmem` up: the memory a 32-bit kernel does not map
    /// permanently (ZONE_HIGHMEM); absent unless `highmem` is set.
    Highmem,
    /// A zone reserved at boot for large pages (Winwood et al., OLS 2002, 4.4), at the top of memory.
    Large,
}

impl ZoneKind {
    /// The name used in configs and stats: `dma32`, `normal`, `large`.
    pub fn name(self) -> &'static str {
        match self {
            ZoneKind::Dma => "dma",
            ZoneKind::Dma32 => "dma32",
            ZoneKind::Normal => "normal",
            ZoneKind::Highmem => "highmem",
            ZoneKind::Large => "large",
        }
    }
}

/// Physical memory as configured (TOML or JSON; sizes written `64M`, `2G` or as bytes).
///
/// Layout, from physical address 0: `dma` up to the `dma` limit (none by
/// default), `dma32` up to the `dma32` limit, then `normal`, then `highmem`
/// from the `highmem` boundary (a 32-bit kernel's low memory ends there; none
/// by default), then the `large` zone (if any) as the top `large.size` bytes.
/// Empty zones are left out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhysConfig {
    /// Total physical memory; a multiple of 4K.
    #[serde(deserialize_with = "de_bytes")]
    pub memory: Bytes,
    /// The largest buddy order, 0..=18 (default 10, Linux's 4M blocks; 18 for 1G pages).
    #[serde(default = "default_max_order")]
    pub max_order: u8,
    /// Where `dma32` ends and `normal` begins (default 4G; `0` for no dma32 zone).
    #[serde(default = "default_dma32", deserialize_with = "de_bytes")]
    pub dma32: Bytes,
    /// Where `dma` ends (default 0: no dma zone; 16M on ia32).
    #[serde(
        default,
        deserialize_with = "de_bytes",
        skip_serializing_if = "is_zero"
    )]
    pub dma: Bytes,
    /// Where high memory begins: the end of a 32-bit kernel's low memory (896M
    /// on ia32 with the 3G/1G split). Absent: all memory is low memory.
    #[serde(
        default,
        deserialize_with = "de_opt_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub highmem: Option<Bytes>,
    /// An optional zone reserved at boot for large pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub large: Option<LargeZoneConfig>,
    /// Zones tried, in order, by `ZonePref::Any` (default: large, normal, dma32 — those that exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Vec<ZoneKind>>,
    /// The page size whose fragmentation is reported (default: the large page, else 2M or the largest order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_page: Option<PageSize>,
    /// Whether memory is reclaimed when it runs low (default true); when
    /// false, an allocation that finds no free block fails.
    #[serde(default = "yes")]
    pub reclaim: bool,
    /// Low and high watermarks, totals over all zones (default: Linux's rule,
    /// see [`super::watermarks`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermarks: Option<WatermarkConfig>,
    /// Whether reclaim takes a superpage whole or splits it first (`whole`, the default, or `split`).
    #[serde(default)]
    pub reclaim_superpages: SuperpageReclaim,
}

/// The large-page zone (Winwood et al., OLS 2002, section 4.4): fixed at boot, for large pages only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LargeZoneConfig {
    /// Size of the zone; a multiple of `page`.
    #[serde(deserialize_with = "de_bytes")]
    pub size: Bytes,
    /// The large page size; orders at or above it may use the zone.
    pub page: PageSize,
    /// When true (default), smaller orders never use the zone through `ZonePref::Any`.
    #[serde(default = "yes")]
    pub exclusive: bool,
}

/// A configuration value that cannot be used, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("physical memory config, field `{field}`: {message}")]
pub struct ConfigError {
    /// The field, as written in the config (`memory`, `large.size`, ...).
    pub field: &'static str,
    /// What is wrong and what is allowed.
    pub message: String,
}

/// A validated layout: zones in ascending physical order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Layout {
    /// (kind, first pfn, frames), non-empty zones only.
    pub zones: Vec<(ZoneKind, u64, u64)>,
    pub fallback: Vec<ZoneKind>,
    pub max_order: u8,
    /// Order of the large page, when there is a large zone.
    pub large_order: Option<u8>,
    pub large_exclusive: bool,
    pub report_order: u8,
    /// Per zone, in the order of `zones`.
    pub watermarks: Vec<Watermarks>,
}

fn default_max_order() -> u8 {
    10
}
fn default_dma32() -> Bytes {
    Bytes(4 << 30)
}
fn yes() -> bool {
    true
}
fn is_zero(b: &Bytes) -> bool {
    b.0 == 0
}

/// As [`de_bytes`], for an optional field.
fn de_opt_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
    de_bytes(d).map(Some)
}

/// Accepts a byte count as a number or as text (`64M`, `2G`).
pub(crate) fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Num(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Num(n) => Ok(Bytes(n)),
        Raw::Text(t) => parse_bytes(&t).map(Bytes).map_err(serde::de::Error::custom),
    }
}

fn err(field: &'static str, message: String) -> ConfigError {
    ConfigError { field, message }
}

impl PhysConfig {
    /// A config with `memory` bytes and every other field at its default.
    pub fn new(memory: Bytes) -> PhysConfig {
        PhysConfig {
            memory,
            max_order: default_max_order(),
            dma32: default_dma32(),
            dma: Bytes(0),
            highmem: None,
            large: None,
            fallback: None,
            report_page: None,
            reclaim: true,
            watermarks: None,
            reclaim_superpages: SuperpageReclaim::Whole,
        }
    }

    /// The zones this configuration lays out, in physical order, with their
    /// bytes (empty zones left out).
    pub fn zone_sizes(&self) -> Result<Vec<(ZoneKind, u64)>, ConfigError> {
        Ok(self
            .layout()?
            .zones
            .iter()
            .map(|z| (z.0, z.2 * FRAME_BYTES))
            .collect())
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.layout().map(|_| ())
    }

    /// The largest memory modelled. The allocator and reclaim keep a few
    /// bits for every 4K frame, reserved (untouched until used) when the
    /// machine is built: 64T is a 4 GiB reservation, which a host with less
    /// memory than that still grants; 512T was refused outright (an abort).
    pub(crate) fn layout(&self) -> Result<Layout, ConfigError> {
        let mem = self.memory.0;
        if mem == 0 || !mem.is_multiple_of(FRAME_BYTES) || mem > MAX_MEMORY {
            // The exact byte count: `4095` rounds to "4.0K" when printed as a size.
            return Err(err(
                "memory",
                format!("{} ({mem} bytes) is not allowed: write a non-zero multiple of 4K up to 64T, like 64M or 16G", self.memory),
            ));
        }
        if self.max_order > MAX_ORDER_LIMIT {
            return Err(err(
                "max_order",
                format!("{} is above {MAX_ORDER_LIMIT} (1G in 4K frames); allowed 0..={MAX_ORDER_LIMIT}", self.max_order),
            ));
        }
        if !self.dma32.0.is_multiple_of(FRAME_BYTES) {
            return Err(err(
                "dma32",
                format!("{} is not a multiple of 4K", self.dma32),
            ));
        }
        let (large_bytes, large_order) = match &self.large {
            None => (0, None),
            Some(l) => (l.size.0, Some(self.check_large(l)?)),
        };
        let large_start = mem - large_bytes;
        let high = self.check_low_zones(large_start)?;
        let dma_end = self.dma.0.min(large_start);
        let dma32_end = self.dma32.0.min(high).max(dma_end);
        let normal_end = high.max(dma32_end);
        let mut zones = Vec::new();
        for (kind, lo, hi) in [
            (ZoneKind::Dma, 0, dma_end),
            (ZoneKind::Dma32, dma_end, dma32_end),
            (ZoneKind::Normal, dma32_end, normal_end),
            (ZoneKind::Highmem, normal_end, large_start),
            (ZoneKind::Large, large_start, mem),
        ] {
            if hi > lo {
                zones.push((kind, lo / FRAME_BYTES, (hi - lo) / FRAME_BYTES));
            }
        }
        let fallback = self.check_fallback(&zones)?;
        let report_order = self.check_report(large_order)?;
        if let Some(w) = &self.watermarks {
            super::watermarks::validate(w, mem)?;
        }
        let frames: Vec<u64> = zones.iter().map(|z| z.2).collect();
        let watermarks = super::watermarks::per_zone(self.watermarks.as_ref(), mem, &frames);
        Ok(Layout {
            zones,
            fallback,
            max_order: self.max_order,
            large_order,
            large_exclusive: self.large.as_ref().is_none_or(|l| l.exclusive),
            report_order,
            watermarks,
        })
    }

    /// Checks `dma` and `highmem`; returns where high memory begins (the
    /// start of the large zone when there is no high memory).
    fn check_low_zones(&self, large_start: u64) -> Result<u64, ConfigError> {
        if !self.dma.0.is_multiple_of(FRAME_BYTES) || self.dma.0 > self.memory.0 {
            return Err(err(
                "dma",
                format!(
                    "{} is not allowed: write a multiple of 4K no larger than memory ({})",
                    self.dma, self.memory
                ),
            ));
        }
        let Some(high) = self.highmem else {
            return Ok(large_start);
        };
        if high.0 == 0 || !high.0.is_multiple_of(FRAME_BYTES) || high.0 < self.dma.0 {
            return Err(err(
                "highmem",
                format!("{high} is not allowed: high memory begins at a non-zero multiple of 4K at or above dma ({})", self.dma),
            ));
        }
        if high.0 > large_start {
            return Err(err(
                "highmem",
                format!("{high} is above the memory below the large zone ({}): low memory cannot be larger than memory", Bytes(large_start)),
            ));
        }
        Ok(high.0)
    }

    fn check_large(&self, l: &LargeZoneConfig) -> Result<u8, ConfigError> {
        let order = l.page.frame_order().0;
        if order > self.max_order {
            return Err(err(
                "large.page",
                format!("{} pages are order {order}, above max_order {}; raise max_order to at least {order}", l.page, self.max_order),
            ));
        }
        if l.size.0 == 0 || !l.size.0.is_multiple_of(l.page.bytes()) || l.size.0 > self.memory.0 {
            return Err(err(
                "large.size",
                format!("{} is not allowed: write a non-zero multiple of large.page ({}) no larger than memory ({})", l.size, l.page, self.memory),
            ));
        }
        if !(self.memory.0 - l.size.0).is_multiple_of(l.page.bytes()) {
            return Err(err(
                "large.size",
                format!("the large zone is the top {} of memory, so memory minus it ({}) must be a multiple of {}", l.size, Bytes(self.memory.0 - l.size.0), l.page),
            ));
        }
        Ok(order)
    }

    fn check_fallback(&self, zones: &[(ZoneKind, u64, u64)]) -> Result<Vec<ZoneKind>, ConfigError> {
        let present = |k: ZoneKind| zones.iter().any(|z| z.0 == k);
        let Some(list) = &self.fallback else {
            return Ok([
                ZoneKind::Large,
                ZoneKind::Highmem,
                ZoneKind::Normal,
                ZoneKind::Dma32,
                ZoneKind::Dma,
            ]
            .into_iter()
            .filter(|&k| present(k))
            .collect());
        };
        if list.is_empty() {
            return Err(err(
                "fallback",
                "is empty; list zones to try in order, like [\"normal\", \"dma32\"]".into(),
            ));
        }
        for (i, &k) in list.iter().enumerate() {
            if list[..i].contains(&k) {
                return Err(err("fallback", format!("`{}` is listed twice", k.name())));
            }
            if !present(k) {
                let have: Vec<&str> = zones.iter().map(|z| z.0.name()).collect();
                return Err(err(
                    "fallback",
                    format!(
                        "zone `{}` does not exist with this memory layout; zones are: {}",
                        k.name(),
                        have.join(", ")
                    ),
                ));
            }
        }
        Ok(list.clone())
    }

    fn check_report(&self, large_order: Option<u8>) -> Result<u8, ConfigError> {
        match self.report_page {
            Some(p) => {
                let order = p.frame_order().0;
                if order > self.max_order {
                    return Err(err(
                        "report_page",
                        format!("{p} is order {order}, above max_order {}", self.max_order),
                    ));
                }
                Ok(order)
            }
            None => Ok(large_order.unwrap_or(9.min(self.max_order))),
        }
    }
}
