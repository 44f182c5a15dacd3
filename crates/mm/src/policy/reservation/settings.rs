//! The `reservation` policy's parameters: `max=SIZE`.

use crate::pagetable::Geometry;
use pagelab_core::PageSize;
use std::fmt;

use super::BASE;

/// The parameters of the `reservation` policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservationSettings {
    /// The largest extent reserved (and promoted to).
    pub max: PageSize,
}

impl Default for ReservationSettings {
    fn default() -> Self {
        ReservationSettings { max: PageSize::M2 }
    }
}

impl std::str::FromStr for ReservationSettings {
    type Err = String;
    /// `max=2M` (or nothing: the defaults).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut r = ReservationSettings::default();
        for kv in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("`{kv}` is not key=value (like max=2M)"))?;
            match k {
                "max" => {
                    let size: PageSize = v.parse().map_err(|e| format!("`max`: {e}"))?;
                    if size <= BASE || !superpage_sizes(size).contains(&size) {
                        let allowed: Vec<String> = superpage_sizes(PageSize::G1)
                            .iter()
                            .map(ToString::to_string)
                            .collect();
                        return Err(format!(
                            "`max`: {size} is not a superpage size of the x86-64 page table; use one of {}",
                            allowed.join(", ")
                        ));
                    }
                    r.max = size;
                }
                _ => return Err(format!("unknown parameter `{k}`: the only one is max=SIZE")),
            }
        }
        Ok(r)
    }
}

impl fmt::Display for ReservationSettings {
    /// What differs from the defaults (`max=1M`), empty otherwise.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.max != ReservationSettings::default().max {
            write!(f, "max={}", self.max)?;
        }
        Ok(())
    }
}

/// Every size above 4K the 4K page table maps, up to `max`, smallest first.
pub(super) fn superpage_sizes(max: PageSize) -> Vec<PageSize> {
    Geometry::for_base(BASE)
        .sizes()
        .into_iter()
        .filter(|&s| s > BASE && s <= max)
        .collect()
}
