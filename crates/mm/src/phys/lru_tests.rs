use super::*;

const Z: ZoneId = ZoneId(0);

fn page(pfn: u64, order: u8) -> Page {
    Page {
        pfn: Pfn(pfn),
        order: Order(order),
    }
}

fn pfns(lru: &Lru, list: LruList) -> Vec<u64> {
    lru.iter(Z, list).map(|p| p.pfn.0).collect()
}

fn filled() -> Lru {
    let mut lru = Lru::new(2);
    for p in [0, 1, 2, 3] {
        lru.add(Z, page(p, 0), LruList::Inactive).unwrap();
    }
    lru.check().unwrap();
    lru
}

#[test]
fn two_touch_activation() {
    let mut lru = filled();
    assert_eq!(pfns(&lru, LruList::Inactive), [3, 2, 1, 0]);
    lru.mark_accessed(Pfn(1)).unwrap();
    assert_eq!(
        lru.list_of(Pfn(1)),
        Some(LruList::Inactive),
        "first touch only marks"
    );
    lru.mark_accessed(Pfn(1)).unwrap();
    assert_eq!(lru.list_of(Pfn(1)), Some(LruList::Active));
    lru.mark_accessed(Pfn(0)).unwrap();
    lru.mark_accessed(Pfn(0)).unwrap();
    assert_eq!(pfns(&lru, LruList::Active), [0, 1]);
    lru.mark_accessed(Pfn(1)).unwrap();
    assert_eq!(
        pfns(&lru, LruList::Active),
        [1, 0],
        "active pages move to the head"
    );
    lru.check().unwrap();
    assert_eq!(lru.zone_stats(Z).active_pages, 2);
}

#[test]
fn victims_are_inactive_least_recent_first_with_a_second_chance() {
    let mut lru = filled();
    lru.mark_accessed(Pfn(0)).unwrap(); // referenced, still inactive
    let v = lru.select_victims(Z, 2);
    assert_eq!(
        v,
        [page(1, 0), page(2, 0)],
        "0 is spared once and activated"
    );
    assert_eq!(lru.list_of(Pfn(0)), Some(LruList::Active));
    assert!(!lru.contains(Pfn(1)));
    lru.check().unwrap();
    // Inactive has only 3 left; then the active list is aged: 0 goes last.
    let v = lru.select_victims(Z, 5);
    assert_eq!(v, [page(3, 0), page(0, 0)]);
    assert_eq!(lru.select_victims(Z, 1), []);
    lru.check().unwrap();
}

#[test]
fn victims_count_frames_of_large_pages() {
    let mut lru = Lru::new(1);
    lru.add(Z, page(512, 9), LruList::Inactive).unwrap();
    lru.add(Z, page(7, 0), LruList::Inactive).unwrap();
    assert_eq!(lru.select_victims(Z, 1), [page(512, 9)]);
    assert_eq!(lru.zone_stats(Z).inactive_frames, 1);
}

#[test]
fn split_keeps_the_place_in_the_list() {
    let mut lru = Lru::new(1);
    lru.add(Z, page(100, 0), LruList::Inactive).unwrap();
    lru.add(Z, page(8, 2), LruList::Inactive).unwrap();
    lru.add(Z, page(200, 0), LruList::Inactive).unwrap();
    lru.split(Pfn(8)).unwrap();
    lru.check().unwrap();
    assert_eq!(pfns(&lru, LruList::Inactive), [200, 8, 9, 10, 11, 100]);
    assert_eq!(lru.zone_stats(Z).inactive_frames, 6);
    // At the ends of a list too.
    lru.split(Pfn(200)).unwrap();
    let mut l2 = Lru::new(1);
    l2.add(Z, page(0, 1), LruList::Active).unwrap();
    l2.split(Pfn(0)).unwrap();
    l2.check().unwrap();
    assert_eq!(l2.iter(Z, LruList::Active).count(), 2);
}

#[test]
fn bad_calls_are_errors() {
    let mut lru = filled();
    assert_eq!(
        lru.add(Z, page(1, 0), LruList::Active),
        Err(PhysError::AlreadyOnLru { pfn: Pfn(1) })
    );
    assert_eq!(
        lru.add(ZoneId(7), page(9, 0), LruList::Active),
        Err(PhysError::NoSuchZone { zone: 7 })
    );
    assert_eq!(lru.remove(Pfn(9)), Err(PhysError::NotOnLru { pfn: Pfn(9) }));
    assert_eq!(
        lru.mark_accessed(Pfn(9)),
        Err(PhysError::NotOnLru { pfn: Pfn(9) })
    );
    assert!(lru.split(Pfn(9)).is_err());
    assert_eq!(lru.select_victims(ZoneId(7), 3), []);
    assert_eq!(lru.remove(Pfn(2)), Ok(page(2, 0)));
    assert_eq!(pfns(&lru, LruList::Inactive), [3, 1, 0]);
    lru.check().unwrap();
}

#[test]
fn zones_are_separate() {
    let mut lru = filled();
    lru.add(ZoneId(1), page(50, 0), LruList::Inactive).unwrap();
    assert_eq!(lru.select_victims(ZoneId(1), 10), [page(50, 0)]);
    assert_eq!(lru.zone_stats(Z).inactive_pages, 4);
    lru.check().unwrap();
}
