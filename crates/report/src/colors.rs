//! One colour per page size, the same in every plot and every report.
//!
//! A reader who learns that 64K is orange in one figure finds it orange in the next, in the
//! HTML report and in the lab's SVG alike. The colour is a function of the size alone (its
//! log2), never of the order in which sizes appear, so two reports laid side by side agree.
//! Pairs of neighbouring sizes share a hue, the smaller one darker.
//!
//! Series that are not one page size (a policy such as `reservation`, a lab configuration of
//! several sizes such as `64K+2M`) take [`other_colour`], a palette kept apart from the sizes'.

use pagelab_core::PageSize;

/// Colours of 4K (index 0), 8K, 16K, ... 1G (index 18).
const SIZE_COLOURS: [&str; 19] = [
    "#1f77b4", // 4K blue
    "#6baed6", // 8K light blue
    "#2ca02c", // 16K green
    "#98df8a", // 32K light green
    "#ff7f0e", // 64K orange
    "#fdae6b", // 128K light orange
    "#9467bd", // 256K purple
    "#c5b0d5", // 512K light purple
    "#8c564b", // 1M brown
    "#d62728", // 2M red
    "#ff9896", // 4M light red
    "#e377c2", // 8M pink
    "#f7b6d2", // 16M light pink
    "#636363", // 32M grey
    "#bdbdbd", // 64M light grey
    "#bcbd22", // 128M olive
    "#dbdb8d", // 256M light olive
    "#17becf", // 512M cyan
    "#393b79", // 1G navy
];

/// Colours of series that are not a single page size, in order of appearance.
const OTHER_COLOURS: [&str; 8] = [
    "#00796b", "#5d4037", "#455a64", "#c2185b", "#7b1fa2", "#afb42b", "#0097a7", "#e64a19",
];

/// The colour of `size`, as `#rrggbb`.
pub fn size_colour(size: PageSize) -> &'static str {
    SIZE_COLOURS[(size.shift() - PageSize::K4.shift()) as usize]
}

/// The `i`-th colour for series that are not one page size.
pub fn other_colour(i: usize) -> &'static str {
    OTHER_COLOURS[i % OTHER_COLOURS.len()]
}

/// The page size a series label names, if it names exactly one: `64K`, `base:64K`,
/// `2M hugetlb`; `None` for `64K+2M`, `reservation` or `linux-thp:...`.
pub fn label_size(label: &str) -> Option<PageSize> {
    let label = label.trim();
    let label = label.strip_prefix("base:").unwrap_or(label);
    let label = label.strip_suffix(" hugetlb").unwrap_or(label);
    label.parse().ok()
}

/// The colour of a series label: its page size's when it names one ([`label_size`]), else
/// the `fallback`-th [`other_colour`].
pub fn label_colour(label: &str, fallback: usize) -> &'static str {
    label_size(label).map_or_else(|| other_colour(fallback), size_colour)
}

/// `#rrggbb` as its three components (for the SVG plots).
pub fn rgb(colour: &str) -> (u8, u8, u8) {
    let hex = colour.trim_start_matches('#');
    let part = |i: usize| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("00"), 16).unwrap_or(0);
    (part(0), part(2), part(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_has_its_own_colour() {
        let mut seen: Vec<&str> = (12..=30)
            .map(|s| size_colour(PageSize::from_shift(s).unwrap()))
            .collect();
        seen.extend(OTHER_COLOURS);
        let n = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), n, "a colour is used twice");
    }

    #[test]
    fn labels_that_name_one_size_take_its_colour() {
        assert_eq!(label_colour("64K", 3), size_colour("64K".parse().unwrap()));
        assert_eq!(label_colour("base:64K", 3), label_colour("64K", 0));
        assert_eq!(label_colour("2M hugetlb", 3), size_colour(PageSize::M2));
        assert_eq!(label_colour("64K+2M", 3), other_colour(3));
        assert_eq!(label_colour("reservation", 0), other_colour(0));
        assert_eq!(rgb("#ff7f0e"), (255, 127, 14));
    }
}
