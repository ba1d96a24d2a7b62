//! The component's allocator: a bump arena for what one call allocates, in
//! front of a general allocator for what outlives calls.
//!
//! Almost everything a policy call allocates is gone when the call is: the
//! arguments the host lowers into the guest (one `cabi_realloc` per string
//! and list), the decoded pod, the intermediate maps and the answer, which
//! the export's post-return frees. A general allocator pays a search and a
//! free-list update for each of those; here they take a pointer bump, and
//! the whole arena is reclaimed at once when the last of them is freed.
//!
//! What outlives a call (a prepared node, the running sum of a
//! `node-cgroups-sum`) must not be in the arena, or the arena could never be
//! reset: the shims that keep state run their bodies inside
//! [`CallArena::retaining`], where every allocation goes to the general
//! allocator. A block of the arena that something keeps anyway (an argument
//! moved into kept state) is still correct, only slower: the arena stays
//! in use, fills up, and allocations fall through to the general allocator
//! until that block is freed.
//!
//! Invariants, checked by the unit tests below:
//! - `next` is at or past the end of every live arena allocation, and at
//!   most `end`;
//! - `live` counts the live arena allocations; when it drops to 0, `next`
//!   returns to `start`;
//! - a pointer is the arena's exactly when it lies in `start..end`, so a
//!   free or a resize always goes back to the allocator that made the block.
//!
//! The component is single-threaded (wasm32 without threads), so the state
//! is in `Cell`s; the `Sync` the global allocator needs is claimed for the
//! wasm target only.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use core::ptr;

/// A bump arena of `bytes` bytes in front of `backing`: a block given at
/// construction ([`CallArena::in_block`]; the component's is a static, so
/// a fresh instance grows no memory for it), or one taken from `backing`
/// at the first allocation.
pub(crate) struct CallArena<A> {
    backing: A,
    /// The arena's block when it was given; null = take it from `backing`.
    given: *mut u8,
    bytes: usize,
    reserved: Cell<bool>,
    start: Cell<usize>,
    end: Cell<usize>,
    next: Cell<usize>,
    live: Cell<usize>,
    retaining: Cell<u32>,
}

// SAFETY: the component is single-threaded (wasm32 without the `atomics`
// feature has no threads), so the cells are never touched from two threads.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl<A: Sync> Sync for CallArena<A> {}

impl<A: GlobalAlloc> CallArena<A> {
    /// An arena of `bytes` bytes (reserved from `backing` when first used).
    #[cfg(test)]
    pub(crate) const fn new(backing: A, bytes: usize) -> Self {
        // SAFETY: a null block is never used: `reserve` asks `backing`.
        unsafe { Self::in_block(backing, ptr::null_mut(), bytes) }
    }

    /// An arena on the `bytes` bytes at `block`, which must be 16-aligned
    /// (or null: then as [`CallArena::new`]).
    ///
    /// # Safety
    ///
    /// `block` must be valid for reads and writes of `bytes` bytes for as
    /// long as the arena is used, and nothing else may use them.
    pub(crate) const unsafe fn in_block(backing: A, block: *mut u8, bytes: usize) -> Self {
        CallArena {
            backing,
            given: block,
            bytes,
            reserved: Cell::new(false),
            start: Cell::new(0),
            end: Cell::new(0),
            next: Cell::new(0),
            live: Cell::new(0),
            retaining: Cell::new(0),
        }
    }

    /// Run `body` with every allocation going to the general allocator:
    /// for the calls whose allocations outlive them.
    pub(crate) fn retaining<R>(&self, body: impl FnOnce() -> R) -> R {
        self.retaining.set(self.retaining.get() + 1);
        let result = body();
        self.retaining.set(self.retaining.get() - 1);
        result
    }

    fn contains(&self, ptr: *mut u8) -> bool {
        let at = ptr as usize;
        self.start.get() <= at && at < self.end.get()
    }

    /// Set the arena on its block, once: the given one, else one taken from
    /// `backing`; a failure leaves the arena empty (every allocation then
    /// goes to `backing`).
    fn reserve(&self) {
        self.reserved.set(true);
        let Ok(layout) = Layout::from_size_align(self.bytes, 16) else {
            return;
        };
        if layout.size() == 0 {
            return;
        }
        let block = if self.given.is_null() {
            // SAFETY: the layout's size is not zero.
            unsafe { self.backing.alloc(layout) }
        } else {
            self.given
        };
        if !block.is_null() {
            let start = block as usize;
            self.start.set(start);
            self.next.set(start);
            self.end.set(start + self.bytes);
        }
    }

    /// A block of the arena for `layout`, or `None` when it does not fit.
    fn bump(&self, layout: Layout) -> Option<*mut u8> {
        // A zero-size block could sit at `end`, outside `contains`; callers
        // never ask for one (`GlobalAlloc` forbids it), so decline it.
        if self.retaining.get() != 0 || layout.size() == 0 {
            return None;
        }
        if !self.reserved.get() {
            self.reserve();
        }
        let align = layout.align();
        let at = self.next.get().checked_add(align - 1)? & !(align - 1);
        let after = at.checked_add(layout.size())?;
        if after > self.end.get() {
            return None;
        }
        self.next.set(after);
        self.live.set(self.live.get() + 1);
        Some(at as *mut u8)
    }

    /// How many arena allocations are live, and how many bytes from the
    /// arena's start the next one would go (for tests).
    #[cfg(test)]
    fn usage(&self) -> (usize, usize) {
        (self.live.get(), self.next.get() - self.start.get())
    }
}

// SAFETY: every block handed out is either `backing`'s (and goes back to
// it) or a range of the arena's block that no live allocation overlaps:
// `next` only moves back to the start of a block being freed that ends at
// `next`, or to `start` when no arena allocation is live.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CallArena<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(block) => block,
            // SAFETY: the caller's contract, passed on.
            None => unsafe { self.backing.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(block) => {
                // SAFETY: the block is `layout.size()` bytes of the arena,
                // which earlier calls may have written.
                unsafe { ptr::write_bytes(block, 0, layout.size()) };
                block
            }
            // SAFETY: the caller's contract, passed on.
            None => unsafe { self.backing.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        if !self.contains(block) {
            // SAFETY: not the arena's, so `backing` made it.
            return unsafe { self.backing.dealloc(block, layout) };
        }
        debug_assert!(self.live.get() > 0, "an arena block freed twice");
        let live = self.live.get() - 1;
        self.live.set(live);
        if live == 0 {
            self.next.set(self.start.get());
        } else if block as usize + layout.size() == self.next.get() {
            self.next.set(block as usize);
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.contains(block) {
            // SAFETY: not the arena's, so `backing` made it.
            return unsafe { self.backing.realloc(block, layout, new_size) };
        }
        let at = block as usize;
        if at + layout.size() == self.next.get() {
            // The newest block: grow or shrink it where it is.
            if let Some(after) = at.checked_add(new_size)
                && after <= self.end.get()
            {
                self.next.set(after);
                return block;
            }
        } else if new_size <= layout.size() {
            return block;
        }
        // SAFETY: `realloc`'s contract makes `new_size` with the old
        // alignment a valid, non-zero layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as above.
        let moved = unsafe { self.alloc(new_layout) };
        if !moved.is_null() {
            // SAFETY: both blocks are live and distinct (the old one is not
            // freed until after the copy), each at least this long.
            unsafe {
                ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                self.dealloc(block, layout);
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;

    use std::cell::RefCell;
    use std::collections::HashMap;

    const ARENA: usize = 4096;

    /// A backing allocator that knows its own blocks (a free of one it did
    /// not make fails the test) and refuses blocks above `refuse_above`
    /// bytes, to stand for a memory cap.
    struct Recording {
        blocks: RefCell<HashMap<usize, Layout>>,
        refuse_above: usize,
    }

    impl Recording {
        fn new(refuse_above: usize) -> Self {
            Recording {
                blocks: RefCell::default(),
                refuse_above,
            }
        }
        fn made(&self, block: *mut u8) -> bool {
            self.blocks.borrow().contains_key(&(block as usize))
        }
    }

    unsafe impl GlobalAlloc for Recording {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if layout.size() > self.refuse_above {
                return ptr::null_mut();
            }
            let block = unsafe { System.alloc(layout) };
            self.blocks.borrow_mut().insert(block as usize, layout);
            block
        }
        unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
            let made = self.blocks.borrow_mut().remove(&(block as usize));
            assert_eq!(
                made,
                Some(layout),
                "freed a block the backing allocator did not make"
            );
            unsafe { System.dealloc(block, layout) }
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn freeing_every_block_resets_the_arena() {
        let arena = CallArena::new(System, ARENA);
        unsafe {
            let a = arena.alloc(layout(24, 8));
            let b = arena.alloc(layout(100, 4));
            assert!(arena.contains(a) && arena.contains(b));
            assert_eq!(arena.usage().0, 2);
            arena.dealloc(a, layout(24, 8));
            assert_eq!(
                arena.usage(),
                (1, 124),
                "a block before the newest is not reclaimed alone"
            );
            arena.dealloc(b, layout(100, 4));
            assert_eq!(arena.usage(), (0, 0));
            let c = arena.alloc(layout(8, 8));
            assert_eq!(c, a, "the next call starts at the arena's start again");
            arena.dealloc(c, layout(8, 8));
        }
    }

    #[test]
    fn the_newest_block_is_reclaimed_and_resized_in_place() {
        let arena = CallArena::new(System, ARENA);
        unsafe {
            let keep = arena.alloc(layout(16, 8));
            let grow = arena.alloc(layout(10, 1));
            ptr::copy_nonoverlapping(b"0123456789".as_ptr(), grow, 10);
            let grown = arena.realloc(grow, layout(10, 1), 300);
            assert_eq!(grown, grow, "the newest block grows where it is");
            assert_eq!(std::slice::from_raw_parts(grown, 10), b"0123456789");
            assert_eq!(arena.usage(), (2, 316));
            arena.dealloc(grown, layout(300, 1));
            assert_eq!(
                arena.usage(),
                (1, 16),
                "freeing the newest block gives its bytes back"
            );
            arena.dealloc(keep, layout(16, 8));
        }
    }

    #[test]
    fn an_older_block_moves_when_it_grows_and_keeps_its_bytes() {
        let arena = CallArena::new(System, ARENA);
        unsafe {
            let old = arena.alloc(layout(8, 8));
            ptr::copy_nonoverlapping(b"abcdefgh".as_ptr(), old, 8);
            let after = arena.alloc(layout(8, 8));
            let moved = arena.realloc(old, layout(8, 8), 64);
            assert_ne!(moved, old);
            assert!(arena.contains(moved));
            assert_eq!(std::slice::from_raw_parts(moved, 8), b"abcdefgh");
            assert_eq!(arena.usage().0, 2, "the old block was freed");
            let shrunk = arena.realloc(moved, layout(64, 8), 4);
            assert_eq!(shrunk, moved, "the newest block shrinks in place");
            arena.dealloc(after, layout(8, 8));
            arena.dealloc(shrunk, layout(4, 8));
            assert_eq!(arena.usage(), (0, 0));
        }
    }

    #[test]
    fn a_full_arena_falls_through_to_the_backing_allocator() {
        let arena = CallArena::new(System, ARENA);
        unsafe {
            let big = arena.alloc(layout(ARENA - 8, 8));
            assert!(arena.contains(big));
            let spill = arena.alloc(layout(64, 8));
            assert!(!spill.is_null() && !arena.contains(spill));
            // Growing the newest arena block past the end moves it out.
            let moved = arena.realloc(big, layout(ARENA - 8, 8), ARENA * 2);
            assert!(!moved.is_null() && !arena.contains(moved));
            assert_eq!(arena.usage(), (0, 0));
            arena.dealloc(spill, layout(64, 8));
            arena.dealloc(moved, layout(ARENA * 2, 8));
        }
    }

    #[test]
    fn retained_allocations_never_come_from_the_arena() {
        let arena = CallArena::new(System, ARENA);
        unsafe {
            let argument = arena.alloc(layout(32, 8));
            let kept = arena.retaining(|| arena.alloc(layout(32, 8)));
            assert!(arena.contains(argument) && !arena.contains(kept));
            arena.dealloc(argument, layout(32, 8));
            assert_eq!(
                arena.usage(),
                (0, 0),
                "what is kept does not hold the arena"
            );
            arena.dealloc(kept, layout(32, 8));
        }
    }

    #[test]
    fn the_arena_ends_where_its_block_ends() {
        let arena = CallArena::new(Recording::new(usize::MAX), ARENA);
        unsafe {
            let first = arena.alloc(layout(ARENA, 1));
            assert!(arena.contains(first));
            assert_eq!(arena.usage(), (1, ARENA));
            assert!(arena.contains(first.add(ARENA - 1)));
            assert!(
                !arena.contains(first.add(ARENA)),
                "one past the end is not the arena's"
            );
            // Exactly full: the next block is the backing allocator's.
            let next = arena.alloc(layout(1, 1));
            assert!(!arena.contains(next) && arena.backing.made(next));
            arena.dealloc(next, layout(1, 1));
            arena.dealloc(first, layout(ARENA, 1));
            assert_eq!(arena.usage(), (0, 0));
        }
    }

    #[test]
    fn a_given_block_is_the_arena_and_backing_makes_only_what_spills() {
        #[repr(C, align(16))]
        struct Block([u8; ARENA]);
        let mut block = Box::new(Block([0xa5; ARENA]));
        let start = block.0.as_mut_ptr();
        let arena = unsafe { CallArena::in_block(Recording::new(usize::MAX), start, ARENA) };
        unsafe {
            let a = arena.alloc(layout(64, 8));
            assert_eq!(a, start, "the first block is the given block's start");
            let b = arena.alloc(layout(ARENA - 64, 16));
            assert!(arena.contains(b) && !arena.backing.made(b));
            assert!(
                arena.backing.blocks.borrow().is_empty(),
                "nothing taken from backing"
            );
            let spilled = arena.alloc(layout(16, 8));
            assert!(arena.backing.made(spilled) && !arena.contains(spilled));
            arena.dealloc(spilled, layout(16, 8));
            arena.dealloc(b, layout(ARENA - 64, 16));
            arena.dealloc(a, layout(64, 8));
            assert_eq!(arena.usage(), (0, 0));
            assert_eq!(
                arena.alloc(layout(8, 8)),
                start,
                "reset to the block's start"
            );
        }
    }

    #[test]
    fn without_its_block_the_arena_passes_everything_on() {
        // The backing allocator refuses the arena's own block (a cap).
        let arena = CallArena::new(Recording::new(ARENA - 1), ARENA);
        unsafe {
            let a = arena.alloc(layout(64, 8));
            assert!(arena.backing.made(a) && !arena.contains(a));
            let b = arena.realloc(a, layout(64, 8), 128);
            assert!(arena.backing.made(b) && !arena.contains(b));
            arena.dealloc(b, layout(128, 8));
            assert_eq!(arena.usage(), (0, 0));
        }
    }

    #[test]
    fn a_kept_block_holds_the_arena_until_it_is_freed() {
        let arena = CallArena::new(Recording::new(usize::MAX), ARENA);
        unsafe {
            // A call whose argument is kept past its end.
            let kept = arena.alloc(layout(16, 8));
            let scratch = arena.alloc(layout(ARENA - 64, 8));
            arena.dealloc(scratch, layout(ARENA - 64, 8));
            assert_eq!(arena.usage(), (1, 16), "the newest block came back");
            // Later calls: the arena fills past the kept block, then spills.
            let mut blocks = Vec::new();
            for _ in 0..200 {
                blocks.push(arena.alloc(layout(32, 8)));
            }
            let spilled = blocks.iter().filter(|b| !arena.contains(**b)).count();
            assert!(spilled > 0 && spilled < 200, "{spilled} spilled");
            // Freed newest first (as a call's blocks mostly are), the
            // arena's give their bytes back down to the kept block.
            for b in blocks.into_iter().rev() {
                arena.dealloc(b, layout(32, 8));
            }
            assert_eq!(
                arena.usage(),
                (1, 16),
                "the kept block still holds its place"
            );
            arena.dealloc(kept, layout(16, 8));
            assert_eq!(arena.usage(), (0, 0), "freeing it resets the arena");
        }
    }

    #[test]
    fn retaining_ends_with_its_body_and_nests() {
        let arena = CallArena::new(Recording::new(usize::MAX), ARENA);
        unsafe {
            let argument = arena.alloc(layout(8, 8));
            let other = arena.alloc(layout(8, 8));
            let (outer, inner, grown) = arena.retaining(|| {
                let outer = arena.alloc(layout(8, 8));
                let inner = arena.retaining(|| arena.alloc(layout(8, 8)));
                // An older arena block grown while retaining moves to the backing.
                let grown = arena.realloc(argument, layout(8, 8), 64);
                (outer, inner, grown)
            });
            for b in [outer, inner, grown] {
                assert!(!arena.contains(b) && arena.backing.made(b));
            }
            let after = arena.alloc(layout(8, 8));
            assert!(
                arena.contains(after),
                "the arena serves again after retaining"
            );
            for (b, size) in [(outer, 8), (inner, 8), (grown, 64), (after, 8), (other, 8)] {
                arena.dealloc(b, layout(size, 8));
            }
            assert_eq!(arena.usage(), (0, 0));
        }
    }

    #[test]
    fn alignment_is_honoured_and_zeroed_blocks_are_zero() {
        let arena = CallArena::new(System, ARENA);
        unsafe {
            let a = arena.alloc(layout(3, 1));
            ptr::write_bytes(a, 0xff, 3);
            arena.dealloc(a, layout(3, 1));
            for align in [1, 2, 8, 64, 256] {
                let byte = arena.alloc(layout(1, 1));
                let block = arena.alloc_zeroed(layout(40, align));
                assert_eq!(block as usize % align, 0);
                assert!(
                    std::slice::from_raw_parts(block, 40)
                        .iter()
                        .all(|b| *b == 0)
                );
                ptr::write_bytes(block, 0xee, 40);
                arena.dealloc(block, layout(40, align));
                arena.dealloc(byte, layout(1, 1));
            }
        }
    }

    /// Many interleaved allocations, resizes and frees, each block filled
    /// with its own byte: no block is ever handed out over a live one.
    #[test]
    fn interleaved_blocks_never_overlap() {
        let arena = CallArena::new(Recording::new(usize::MAX), ARENA);
        let mut blocks: Vec<(*mut u8, Layout, u8)> = Vec::new();
        let (mut in_arena, mut spilled) = (0, 0);
        let mut seed: u32 = 12345;
        let mut next = || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (seed >> 16) as usize
        };
        for round in 0..20_000usize {
            let tag = (round % 251) as u8;
            match next() % 4 {
                0 | 1 => {
                    let l = layout(1 + next() % 200, 1 << (next() % 8));
                    let p = unsafe { arena.alloc(l) };
                    assert_eq!(
                        p as usize % l.align(),
                        0,
                        "round {round}: a block's alignment"
                    );
                    unsafe { ptr::write_bytes(p, tag, l.size()) };
                    blocks.push((p, l, tag));
                }
                2 if !blocks.is_empty() => {
                    let i = next() % blocks.len();
                    let (p, l, t) = blocks.swap_remove(i);
                    let new_size = 1 + next() % 300;
                    let q = unsafe { arena.realloc(p, l, new_size) };
                    assert_eq!(
                        q as usize % l.align(),
                        0,
                        "round {round}: a resized block's alignment"
                    );
                    let kept = l.size().min(new_size);
                    assert!(
                        unsafe { std::slice::from_raw_parts(q, kept) }
                            .iter()
                            .all(|b| *b == t)
                    );
                    unsafe { ptr::write_bytes(q, t, new_size) };
                    blocks.push((q, layout(new_size, l.align()), t));
                }
                _ if !blocks.is_empty() => {
                    let i = next() % blocks.len();
                    let (p, l, t) = blocks.swap_remove(i);
                    assert!(
                        unsafe { std::slice::from_raw_parts(p, l.size()) }
                            .iter()
                            .all(|b| *b == t)
                    );
                    unsafe { arena.dealloc(p, l) };
                }
                _ => {}
            }
            if let Some((p, _, _)) = blocks.last() {
                in_arena += usize::from(arena.contains(*p));
                spilled += usize::from(!arena.contains(*p));
            }
            if round % 300 == 299 {
                // The end of a call: everything it allocated is freed.
                for (p, l, _) in blocks.drain(..) {
                    unsafe { arena.dealloc(p, l) };
                }
                assert_eq!(arena.usage(), (0, 0), "round {round}");
            }
            for (p, l, t) in &blocks {
                let bytes = unsafe { std::slice::from_raw_parts(*p, l.size()) };
                let whole = round % 97 == 0;
                let intact = if whole {
                    bytes.iter().all(|b| b == t)
                } else {
                    bytes[0] == *t && bytes[l.size() - 1] == *t
                };
                assert!(intact, "round {round}: a live block was overwritten");
            }
        }
        // Both paths were taken, many times.
        assert!(
            in_arena > 1000 && spilled > 1000,
            "{in_arena} in the arena, {spilled} spilled"
        );
    }
}
