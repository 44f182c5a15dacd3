use super::*;
use crate::elf::{ElfKind, Segment};
use crate::layout::{ExecRequest, LayoutParams};
use pagelab_core::{AccessKind, MemRef, Prot, ThreadId};

fn image() -> ElfImage {
    ElfImage {
        path: "prog".into(),
        kind: ElfKind::Dyn,
        entry: 0x1000,
        loads: vec![Segment {
            offset: 0,
            vaddr: 0,
            filesz: 0x1800,
            memsz: 0x3000,
            align: PAGE,
            prot: Prot(Prot::READ | Prot::WRITE),
        }],
        interp: None,
    }
}

fn reloc() -> (Relocator, ExecLayout) {
    let exe = image();
    let req = ExecRequest {
        program: &exe,
        interp: None,
        strings: 100,
    };
    let (layout, model) = LinuxLayout::exec(LayoutParams::default(), &req).unwrap();
    let captured = CapturedImage {
        program_bias: 0x40_0000_0000,
        interp_bias: None,
        stack: (0x40_0100_0000, 0x40_0180_0000),
    };
    let r = Relocator::new(layout, &model, None, &captured).unwrap();
    (r, model)
}

fn run(r: &mut Relocator, evs: Vec<Event>) -> Result<Vec<Event>, RelocateError> {
    let mut out = Vec::new();
    for e in evs {
        r.apply(e, &mut out)?;
    }
    Ok(out)
}

fn at(addr: u64) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size: 8,
        kind: AccessKind::Load,
    })
}

/// An mmap the capture placed at `start`, with no hint unless fixed.
fn anon(start: u64, len: u64, flags: u32) -> [Event; 2] {
    let req = MapRequest {
        hint: VirtAddr(if flags & MapRequest::FIXED != 0 {
            start
        } else {
            0
        }),
        len,
        prot: Prot(3),
        flags: MapRequest::PRIVATE | MapRequest::ANONYMOUS | flags,
        file: None,
        offset: 0,
    };
    [
        Event::MapRequest(Box::new(req)),
        Event::Map(Box::new(MapEvent {
            start: VirtAddr(start),
            len,
            prot: Prot(3),
            backing: Backing::Anon,
            sharing: Sharing::Private,
        })),
    ]
}

#[test]
fn program_stack_break_and_mmaps_move_to_the_model() {
    let (mut r, model) = reloc();
    let bias = model.load_bias;
    let mut evs = vec![Event::Switch(ThreadId { pid: 7, tid: 7 })];
    evs.push(at(0x40_0000_1008)); // program
    evs.push(at(0x40_017f_fff0)); // stack, 16 bytes below its top
    evs.push(Event::Brk {
        end: VirtAddr(0x40_0000_3000),
    });
    evs.push(Event::Brk {
        end: VirtAddr(0x40_0002_3000),
    });
    evs.push(at(0x40_0001_0000)); // heap
    let [q, m] = anon(0x40_0800_0000, 2 << 20, 0);
    evs.extend([q, m, at(0x40_0810_0000)]);
    let [q, m] = anon(0x40_0800_1000, PAGE, MapRequest::FIXED);
    evs.extend([q, m]);
    let out = run(&mut r, evs).unwrap();
    let refs: Vec<u64> = out
        .iter()
        .filter_map(|e| match e {
            Event::Ref(m) => Some(m.addr.0),
            _ => None,
        })
        .collect();
    // The program (a static PIE here) and the vDSO lie just below
    // mmap_base; a 4M search below them, then its 2M boundary.
    let thp = 0x7fff_f7c0_0000;
    assert_eq!(
        refs,
        [
            bias + 0x1008,
            STACK_TOP - 16,
            model.start_brk.0 + 0xd000,
            thp + 0x10_0000
        ]
    );
    let maps: Vec<u64> = out
        .iter()
        .filter_map(|e| match e {
            Event::Map(m) => Some(m.start.0),
            _ => None,
        })
        .collect();
    // The 2M one on a 2M boundary below the vDSO; the fixed one inside it.
    assert_eq!(maps, [thp, thp + 0x1000]);
    assert!(out.contains(&Event::Brk {
        end: VirtAddr(model.start_brk.0 + 0x2_0000)
    }));
}

#[test]
fn ranges_are_cut_at_mapping_boundaries_and_unknown_addresses_refused() {
    let (mut r, model) = reloc();
    let mut evs = vec![Event::Switch(ThreadId { pid: 7, tid: 7 })];
    evs.push(Event::Brk {
        end: VirtAddr(0x40_0000_3000),
    });
    evs.push(Event::Brk {
        end: VirtAddr(0x40_0000_5000),
    });
    // One captured range over the program and its break: two pieces.
    evs.push(Event::Protect {
        start: VirtAddr(0x40_0000_2000),
        len: 0x2000,
        prot: Prot(1),
    });
    let out = run(&mut r, evs).unwrap();
    let cut: Vec<(u64, u64)> = out
        .iter()
        .filter_map(|e| match e {
            Event::Protect { start, len, .. } => Some((start.0, *len)),
            _ => None,
        })
        .collect();
    assert_eq!(
        cut,
        [
            (model.load_bias + 0x2000, 0x1000),
            (model.start_brk.0, 0x1000)
        ]
    );
    let e = run(&mut r, vec![at(0x50_0000_0000)]).unwrap_err();
    assert_eq!(e.index, 4);
    assert!(e.what.contains("0x5000000000 lies in no mapping"), "{e}");
    let e = run(&mut r, vec![Event::Exec]).unwrap_err();
    assert!(e.what.contains("execs"), "{e}");
}

#[test]
fn mremap_grows_in_place_when_the_model_has_room_else_moves() {
    let (mut r, _) = reloc();
    let mut evs = vec![Event::Switch(ThreadId { pid: 7, tid: 7 })];
    evs.extend(anon(0x40_0900_0000, 0x4000, 0));
    // Grown in place by the capture: a Map right after the old end.
    let [_, grow] = anon(0x40_0900_4000, 0x2000, 0);
    evs.push(grow);
    let out = run(&mut r, evs).unwrap();
    let maps: Vec<(u64, u64)> = out
        .iter()
        .filter_map(|e| match e {
            Event::Map(m) => Some((m.start.0, m.len)),
            _ => None,
        })
        .collect();
    // The first is topmost below the vDSO, so nothing lies right after
    // it but the vDSO: the model has no room and moves the growth.
    assert_eq!(maps.len(), 2);
    assert_ne!(maps[1].0, maps[0].0 + maps[0].1);
    assert_eq!(maps[1], (maps[0].0 - 0x2000, 0x2000));
}
