//! Numbers as the sentences write them.

/// The relative change from `old` to `new` as a signed percentage: `−96%`, `+3%`, `+0.4%`
/// (a true minus sign; one decimal below 1%, none above; enough decimals past −99% to show
/// what is left), or as a factor from ten times on (`×14.9`, `×2,545`). `n/a` when `old` is
/// 0 and `new` is not.
pub fn signed_percent(old: f64, new: f64) -> String {
    if old == 0.0 {
        return if new == 0.0 {
            "+0%".into()
        } else {
            "n/a".into()
        };
    }
    let ratio = new / old;
    if ratio >= 10.0 {
        // +254409% reads worse than what it is: 2,545 times as much.
        return if ratio >= 100.0 {
            format!("\u{d7}{}", count(ratio))
        } else {
            format!("\u{d7}{ratio:.1}")
        };
    }
    let p = (new - old) / old * 100.0;
    let sign = if p < 0.0 { "\u{2212}" } else { "+" };
    let a = p.abs();
    if p < -99.0 && new != 0.0 {
        // Never round a small remainder away: 386,051 → 131 is −99.97%, not −100%.
        let digits = (-(100.0 - a).log10()).ceil().clamp(1.0, 4.0) as usize;
        format!("{sign}{a:.digits$}%")
    } else if a == 0.0 || a >= 0.95 {
        format!("{sign}{a:.0}%")
    } else {
        format!("{sign}{a:.1}%")
    }
}

/// `old → new` with both numbers as `fmt` writes them.
pub fn change(old: f64, new: f64, fmt: impl Fn(f64) -> String) -> String {
    format!("{} \u{2192} {}", fmt(old), fmt(new))
}

/// A count with thousands separators.
pub(crate) fn count(v: f64) -> String {
    crate::cells::thousands(v.max(0.0).round() as u64)
}

/// Bytes as people write them (`16.0M`).
pub(crate) fn bytes(v: f64) -> String {
    pagelab_core::Bytes(v.max(0.0).round() as u64).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_read_as_written() {
        assert_eq!(signed_percent(100.0, 4.0), "\u{2212}96%");
        assert_eq!(signed_percent(100.0, 103.0), "+3%");
        assert_eq!(signed_percent(1000.0, 1004.0), "+0.4%");
        assert_eq!(signed_percent(100.0, 100.0), "+0%");
        assert_eq!(signed_percent(386_051.0, 131.0), "\u{2212}99.97%");
        assert_eq!(signed_percent(100.0, 0.0), "\u{2212}100%");
        assert_eq!(signed_percent(100.0, 1491.0), "\u{d7}14.9");
        assert_eq!(signed_percent(1.0, 2545.1), "\u{d7}2,545");
        assert_eq!(signed_percent(0.0, 5.0), "n/a");
        assert_eq!(change(1.0, 2.0, count), "1 \u{2192} 2");
    }
}
