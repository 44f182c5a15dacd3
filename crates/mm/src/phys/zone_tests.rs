use super::*;
use crate::phys::{LargeZoneConfig, LruList, Page};
use pagelab_core::{Bytes, PageSize};
use serde::de::value::{Error as DeError, MapDeserializer, SeqDeserializer};
use serde::de::{Deserialize, Deserializer, IntoDeserializer, Visitor};

const G: u64 = 1 << 30;
const M: u64 = 1 << 20;

/// 16M: dma32 [0, 8M), normal [8M, 12M), large [12M, 16M) of 2M pages.
fn small(exclusive: bool) -> PhysMem {
    let mut cfg = PhysConfig::new(Bytes(16 * M));
    cfg.max_order = 9;
    cfg.dma32 = Bytes(8 * M);
    cfg.large = Some(LargeZoneConfig {
        size: Bytes(4 * M),
        page: PageSize::M2,
        exclusive,
    });
    PhysMem::new(&cfg).unwrap()
}

fn kinds(mem: &PhysMem) -> Vec<(ZoneKind, u64, u64)> {
    let z = mem.zones().iter();
    z.map(|z| (z.kind, z.buddy.start().0, z.buddy.total_frames()))
        .collect()
}

#[test]
fn layouts() {
    let mem = PhysMem::new(&PhysConfig::new(Bytes(64 * M))).unwrap();
    assert_eq!(kinds(&mem), [(ZoneKind::Dma32, 0, 16384)]);
    let mut cfg = PhysConfig::new(Bytes(8 * G));
    cfg.large = Some(LargeZoneConfig {
        size: Bytes(G),
        page: PageSize::M2,
        exclusive: true,
    });
    let mem = PhysMem::new(&cfg).unwrap();
    let f = G / 4096;
    assert_eq!(
        kinds(&mem),
        [
            (ZoneKind::Dma32, 0, 4 * f),
            (ZoneKind::Normal, 4 * f, 3 * f),
            (ZoneKind::Large, 7 * f, f)
        ]
    );
    assert_eq!(mem.total_frames(), 8 * f);
    assert_eq!(mem.report_order(), Order(9));
    mem.check().unwrap();
}

#[test]
fn fallback_order_and_large_zone_reservation() {
    let mut mem = small(true);
    let any = ZonePref::Any;
    // Large orders: the large zone first, then normal, then dma32.
    assert_eq!(mem.alloc(Order(9), any), Some(Pfn(3072)));
    assert_eq!(mem.alloc(Order(9), any), Some(Pfn(3584)));
    assert_eq!(mem.alloc(Order(9), any), Some(Pfn(2048)));
    assert_eq!(mem.stats().fallbacks, 1);
    // Small orders: normal, then dma32, never the large zone.
    for _ in 0..512 {
        assert!(mem.alloc(Order(0), any).unwrap().0 >= 2048);
    }
    assert_eq!(mem.alloc(Order(0), any), Some(Pfn(0)));
    for _ in 1..2048 {
        assert!(mem.alloc(Order(0), any).is_some());
    }
    mem.free(Pfn(3072), Order(9)).unwrap();
    assert_eq!(
        mem.alloc(Order(0), any),
        None,
        "the large zone is kept for large pages"
    );
    assert_eq!(mem.stats().failures_by_order[0], 1);
    assert_eq!(
        mem.alloc(Order(0), ZonePref::Only(ZoneKind::Large)),
        Some(Pfn(3072))
    );
    mem.check().unwrap();
}

#[test]
fn non_exclusive_large_zone_serves_small_orders() {
    let mut mem = small(false);
    assert_eq!(mem.alloc(Order(0), ZonePref::Any), Some(Pfn(3072)));
}

#[test]
fn only_a_missing_zone_fails() {
    let mut mem = PhysMem::new(&PhysConfig::new(Bytes(64 * M))).unwrap();
    assert_eq!(mem.alloc(Order(0), ZonePref::Only(ZoneKind::Normal)), None);
    assert_eq!(mem.alloc(Order(12), ZonePref::Any), None);
    assert_eq!(mem.stats().failures_by_order[12], 1);
}

#[test]
fn frees_route_to_zones_and_bad_ones_are_errors() {
    let mut mem = small(true);
    let p = mem
        .alloc(Order(3), ZonePref::Only(ZoneKind::Dma32))
        .unwrap();
    assert_eq!(mem.zone_of(p), mem.zone_id(ZoneKind::Dma32));
    assert!(matches!(
        mem.free(Pfn(4096), Order(0)),
        Err(PhysError::OutOfRange { .. })
    ));
    assert!(matches!(
        mem.free(p, Order(2)),
        Err(PhysError::WrongOrder { .. })
    ));
    mem.split(p, Order(3)).unwrap();
    for f in p.0..p.0 + 8 {
        mem.free(Pfn(f), Order(0)).unwrap();
    }
    assert_eq!(mem.free_frames(), mem.total_frames());
    mem.check().unwrap();
}

#[test]
fn stats_per_zone_and_fragmentation_figure() {
    let mut mem = small(true);
    let a = mem.alloc(Order(0), ZonePref::Any).unwrap();
    let zone = mem.zone_of(a).unwrap();
    let page = Page {
        pfn: a,
        order: Order(0),
    };
    mem.lru_mut().add(zone, page, LruList::Inactive).unwrap();
    let s = mem.stats();
    let names: Vec<&str> = s.zones.iter().map(|z| z.name.as_str()).collect();
    assert_eq!(names, ["dma32", "normal", "large"]);
    assert_eq!((s.total_frames, s.used_frames, s.allocs), (4096, 1, 1));
    // normal had two 2M blocks; one is now split to 1 + 2 + 4 + ... + 256 frames.
    assert_eq!(s.zones[1].buddy.free_blocks, [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
    assert_eq!(s.zones[1].lru.inactive_pages, 1);
    assert_eq!(s.fragmentation.order, 9);
    let idx = 511.0 / 4095.0;
    assert!((s.fragmentation.unusable_index - idx).abs() < 1e-12);
    assert_eq!(mem.unusable_index(Order(9)), s.fragmentation.unusable_index);
    assert_eq!(mem.free_count(Order(9)), 7);
    let victims = mem.lru_mut().select_victims(zone, 1);
    assert_eq!(victims, [page]);
    mem.free(a, Order(0)).unwrap();
    mem.check().unwrap();
}

fn invalid(edit: impl FnOnce(&mut PhysConfig)) -> ConfigError {
    let mut cfg = PhysConfig::new(Bytes(16 * M));
    cfg.large = Some(LargeZoneConfig {
        size: Bytes(4 * M),
        page: PageSize::M2,
        exclusive: true,
    });
    edit(&mut cfg);
    let e = PhysMem::new(&cfg).unwrap_err();
    assert!(e.to_string().contains(e.field), "{e}");
    e
}

#[test]
fn config_errors_name_the_field() {
    assert_eq!(invalid(|c| c.memory = Bytes(0)).field, "memory");
    assert_eq!(invalid(|c| c.memory = Bytes(5000)).field, "memory");
    assert_eq!(invalid(|c| c.max_order = 19).field, "max_order");
    assert_eq!(invalid(|c| c.max_order = 8).field, "large.page");
    assert_eq!(invalid(|c| c.dma32 = Bytes(5000)).field, "dma32");
    let size = |b: u64| move |c: &mut PhysConfig| c.large.as_mut().unwrap().size = Bytes(b);
    assert_eq!(invalid(size(3 * M)).field, "large.size");
    assert_eq!(invalid(size(32 * M)).field, "large.size");
    assert_eq!(invalid(|c| c.memory = Bytes(17 * M)).field, "large.size");
    let e = invalid(|c| {
        c.large = None;
        c.fallback = Some(vec![ZoneKind::Large]);
    });
    assert!(e.field == "fallback" && e.message.contains("large"), "{e}");
    assert_eq!(invalid(|c| c.fallback = Some(vec![])).field, "fallback");
    let twice = vec![ZoneKind::Dma32, ZoneKind::Dma32];
    assert_eq!(invalid(|c| c.fallback = Some(twice)).field, "fallback");
    let big = PageSize::from_shift(23).unwrap();
    assert_eq!(invalid(|c| c.report_page = Some(big)).field, "report_page");
}

/// A tiny self-describing value, to exercise serde without a format crate.
enum Val {
    Str(&'static str),
    Int(u64),
    Bool(bool),
    Map(Vec<(&'static str, Val)>),
    Seq(Vec<Val>),
}

impl<'de> Deserializer<'de> for Val {
    type Error = DeError;
    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        match self {
            Val::Str(s) => v.visit_str(s),
            Val::Int(n) => v.visit_u64(n),
            Val::Bool(b) => v.visit_bool(b),
            Val::Map(m) => v.visit_map(MapDeserializer::new(m.into_iter())),
            Val::Seq(s) => v.visit_seq(SeqDeserializer::new(s.into_iter())),
        }
    }
    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DeError> {
        v.visit_some(self)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DeError> {
        match self {
            Val::Str(s) => v.visit_enum(s.into_deserializer()),
            other => other.deserialize_any(v),
        }
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

impl IntoDeserializer<'_, DeError> for Val {
    type Deserializer = Val;
    fn into_deserializer(self) -> Val {
        self
    }
}

#[test]
fn config_reads_people_sizes_and_refuses_unknown_fields() {
    use Val::*;
    let cfg = PhysConfig::deserialize(Map(vec![
        ("memory", Str("2G")),
        ("max_order", Int(10)),
        ("dma32", Int(G)),
        (
            "large",
            Map(vec![
                ("size", Str("512M")),
                ("page", Str("2M")),
                ("exclusive", Bool(false)),
            ]),
        ),
        (
            "fallback",
            Seq(vec![Str("normal"), Str("large"), Str("dma32")]),
        ),
        ("report_page", Str("64K")),
    ]))
    .unwrap();
    assert_eq!(cfg.memory, Bytes(2 * G));
    assert_eq!(cfg.large.as_ref().unwrap().size, Bytes(512 * M));
    let mem = PhysMem::new(&cfg).unwrap();
    assert_eq!(mem.report_order(), Order(4));
    assert_eq!(mem.zones().len(), 3);
    let e = PhysConfig::deserialize(Map(vec![("memory", Str("2G")), ("memroy", Str("1G"))]));
    assert!(e.unwrap_err().to_string().contains("memroy"));
    let e = PhysConfig::deserialize(Map(vec![("memory", Str("2 gigs"))]));
    assert!(e.unwrap_err().to_string().contains("2 gigs"));
    let large = Map(vec![
        ("size", Str("2M")),
        ("page", Str("2M")),
        ("colour", Str("red")),
    ]);
    let e = PhysConfig::deserialize(Map(vec![("memory", Str("2G")), ("large", large)]));
    assert!(e.unwrap_err().to_string().contains("colour"));
}
