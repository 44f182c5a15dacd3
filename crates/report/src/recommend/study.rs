//! Recommendations from the model: a page-size study or a comparison of policies.

use super::sentence::{bytes, change, count, signed_percent};
use super::{pick, Point, Recommendation, Rule};
use crate::schema::{RunStats, SimResult};

/// One recommendation per result, in order.
pub fn all(results: &[SimResult], rule: &Rule) -> Vec<Recommendation> {
    results
        .iter()
        .zip(subjects(results))
        .map(|(r, s)| one(r, s, rule))
        .collect()
}

/// The recommendation for one result: page sizes for a study, a policy for `--policy` runs.
fn one(result: &SimResult, subject: String, rule: &Rule) -> Recommendation {
    if result.runs.is_empty() {
        return Recommendation {
            sentence: format!("{subject}: no runs, nothing to recommend."),
            subject,
            choice: None,
        };
    }
    if result.runs.iter().any(|r| r.mm.is_some()) {
        policies(subject, result, rule)
    } else {
        page_sizes(subject, result, rule)
    }
}

/// The subjects of results as sentences name them: the workload's or trace's name, with the
/// parameters that tell apart results of the same name (`gups:table=64M`).
pub fn subjects(results: &[SimResult]) -> Vec<String> {
    results
        .iter()
        .map(|r| {
            let s = &r.source;
            let differing: Vec<String> = s
                .params
                .iter()
                .filter(|(k, v)| {
                    results
                        .iter()
                        .any(|o| o.source.name == s.name && o.source.params.get(*k) != Some(*v))
                })
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if differing.is_empty() {
                s.name.clone()
            } else {
                format!("{}:{}", s.name, differing.join(","))
            }
        })
        .collect()
}

/// Which side of the TLB a rule looks at.
#[derive(Clone, Copy)]
enum Side {
    Both,
    Code,
    Data,
}

fn point(run: &RunStats, side: Side) -> Point {
    let (misses, memory) = match side {
        Side::Both => (run.itlb_misses + run.dtlb_misses, run.footprint_bytes),
        Side::Code => (run.itlb_misses, run.code_footprint_bytes),
        Side::Data => (run.dtlb_misses, run.data_footprint_bytes),
    };
    Point {
        label: run.page_size.to_string(),
        misses: misses as f64,
        memory: memory as f64,
    }
}

fn page_sizes(subject: String, result: &SimResult, rule: &Rule) -> Recommendation {
    let mut runs: Vec<&RunStats> = result.runs.iter().collect();
    runs.sort_by_key(|r| r.page_size);
    let points = |side| runs.iter().map(|r| point(r, side)).collect::<Vec<_>>();
    let both = points(Side::Both);
    let chosen = pick(&both, rule);
    let mut sentence = format!("{subject}: {}", one_size(&both, chosen, rule, "TLB misses"));
    let code = points(Side::Code);
    let data = points(Side::Data);
    if let Some(two) = two_sizes(&code, &data, rule) {
        sentence.push_str("; ");
        sentence.push_str(&two);
    }
    sentence.push('.');
    Recommendation {
        subject,
        choice: Some(both[chosen].label.clone()),
        sentence,
    }
}

/// "64K pages: TLB misses −96% (…), memory +3% (…); 2M pages add only −1% more, for memory +40%".
fn one_size(points: &[Point], chosen: usize, rule: &Rule, what: &str) -> String {
    let base = &points[0];
    let c = &points[chosen];
    if base.misses == 0.0 {
        return format!(
            "{} pages: no {what} to remove, larger pages would only cost memory",
            base.label
        );
    }
    let mut s = if chosen == 0 {
        format!(
            "stay with {} pages ({what} {}): no larger size within memory +{} removes {} of them",
            base.label,
            count(base.misses),
            pct(rule.max_memory_growth),
            pct(rule.min_miss_drop)
        )
    } else {
        format!(
            "{} pages: {what} {} ({}), memory {} ({})",
            c.label,
            signed_percent(base.misses, c.misses),
            change(base.misses, c.misses, count),
            signed_percent(base.memory, c.memory),
            change(base.memory, c.memory, bytes),
        )
    };
    // What the sizes past the choice would add: the one with the fewest misses.
    let best = (chosen + 1..points.len()).min_by(|&a, &b| {
        points[a]
            .misses
            .total_cmp(&points[b].misses)
            .then(a.cmp(&b))
    });
    if let Some(b) = best {
        let p = &points[b];
        if rule.significant_drop(base.misses, c.misses, p.misses) {
            s.push_str(&format!(
                "; {} pages would cut {what} {} but cost memory {}, past the budget",
                p.label,
                signed_percent(base.misses, p.misses),
                signed_percent(base.memory, p.memory)
            ));
        } else if chosen > 0 {
            s.push_str(&format!(
                "; {} pages add only {} more of the {} {what}, for memory {}",
                p.label,
                pct(((c.misses - p.misses) / base.misses).max(0.0)),
                base.label,
                signed_percent(base.memory, p.memory)
            ));
        }
    }
    s
}

/// The two-size scheme: the rule on code alone and on data alone, when data settles on a
/// larger size than code.
fn two_sizes(code: &[Point], data: &[Point], rule: &Rule) -> Option<String> {
    let c = pick(code, rule);
    let d = pick(data, rule);
    let (cb, db) = (&code[0], &data[0]);
    if cb.misses == 0.0 && db.misses == 0.0 {
        return None;
    }
    let code_text = if c == 0 {
        format!(
            "no larger size removes {} of its iTLB misses",
            pct(rule.min_miss_drop)
        )
    } else {
        format!(
            "iTLB misses {}, code memory {}",
            signed_percent(cb.misses, code[c].misses),
            signed_percent(cb.memory, code[c].memory)
        )
    };
    if d <= c {
        return Some(format!(
            "a second, larger size for large data adds nothing (code settles at {}, data at {})",
            code[c].label, data[d].label
        ));
    }
    Some(format!(
        "two sizes: {} for code and small data ({code_text}) and {} for large data (dTLB misses {}, data memory {})",
        code[c].label,
        data[d].label,
        signed_percent(db.misses, data[d].misses),
        signed_percent(db.memory, data[d].memory),
    ))
}

fn pct(fraction: f64) -> String {
    let p = fraction * 100.0;
    if p >= 1.0 || p == 0.0 {
        format!("{p:.0}%")
    } else if p >= 0.1 {
        format!("{p:.1}%")
    } else {
        "under 0.1%".to_string()
    }
}

fn policies(subject: String, result: &SimResult, rule: &Rule) -> Recommendation {
    let runs: Vec<(&RunStats, &str)> = result
        .runs
        .iter()
        .filter_map(|r| Some((r, r.mm.as_ref()?.policy.as_str())))
        .collect();
    let memory = |r: &RunStats| r.mm.as_ref().map_or(0, |m| m.peak_rss_bytes) as f64;
    let misses = |r: &RunStats| (r.itlb_misses + r.dtlb_misses) as f64;
    // The baseline: 4K base pages when they ran, else the policy that used the least memory.
    let base = runs
        .iter()
        .position(|(_, p)| *p == "base:4K")
        .unwrap_or_else(|| {
            (0..runs.len())
                .min_by(|&a, &b| memory(runs[a].0).total_cmp(&memory(runs[b].0)))
                .unwrap_or(0)
        });
    let (b, bname) = runs[base];
    let (bm, bmem) = (misses(b), memory(b));
    let within: Vec<usize> = (0..runs.len())
        .filter(|&i| rule.within_budget(bmem, memory(runs[i].0)))
        .collect();
    let fewest = within
        .iter()
        .map(|&i| misses(runs[i].0))
        .fold(f64::INFINITY, f64::min);
    // Among the policies within a significant drop of the fewest misses, the least memory.
    let chosen = within
        .iter()
        .copied()
        .filter(|&i| !rule.significant_drop(bm, misses(runs[i].0), fewest))
        .min_by(|&x, &y| {
            memory(runs[x].0)
                .total_cmp(&memory(runs[y].0))
                .then(misses(runs[x].0).total_cmp(&misses(runs[y].0)))
        })
        .unwrap_or(base);
    let (c, cname) = runs[chosen];
    let keep = chosen == base || !rule.significant_drop(bm, bm, misses(c));
    let mut sentence = if keep {
        format!(
            "{subject}: keep {bname} (TLB misses {}, peak memory {}): no policy within memory +{} removes {} of its misses",
            count(bm),
            bytes(bmem),
            pct(rule.max_memory_growth),
            pct(rule.min_miss_drop)
        )
    } else {
        let walks = |r: &RunStats| r.mm.as_ref().map_or(0, |m| m.walk_refs) as f64;
        format!(
            "{subject}: {cname}: TLB misses {} ({}), page-walk references {}, peak memory {} ({}) against {bname}",
            signed_percent(bm, misses(c)),
            change(bm, misses(c), count),
            signed_percent(walks(b), walks(c)),
            signed_percent(bmem, memory(c)),
            change(bmem, memory(c), bytes),
        )
    };
    let overall = (0..runs.len()).min_by(|&x, &y| misses(runs[x].0).total_cmp(&misses(runs[y].0)));
    if let Some(o) = overall {
        let (or, oname) = runs[o];
        if !within.contains(&o) && rule.significant_drop(bm, misses(c), misses(or)) {
            sentence.push_str(&format!(
                "; {oname} has fewer misses ({}) but needs peak memory {}, past the budget",
                count(misses(or)),
                signed_percent(bmem, memory(or))
            ));
        }
    }
    sentence.push('.');
    let choice = if keep { bname } else { cname };
    Recommendation {
        subject,
        choice: Some(choice.to_string()),
        sentence,
    }
}
